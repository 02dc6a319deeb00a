//! DP4A (`Tensor::dp4a`: four byte products a word, the first operand's bytes unsigned, the second's signed) and
//! DP4AS (`Tensor::dp4a_signed`: both signed, the second at least -127) against references written here, on every
//! path that renders them: the host's vector instructions (VNNI where it has them), AVX2's `pmaddwd` form, its
//! `pmaddubsw` one for bytes under 128 and its `psignb` one for DP4AS (`CPU_TARGET=x86-64-v3`), the lane-by-lane C of
//! 16-byte targets (`x86-64-v2`), gcc and clang, and the PYTHON interpreter. The target and compiler runs are child processes (both are chosen once).

mod common;

use tinygrad::Tensor;

/// `c + Σ_k u8(a_k) · i8(b_k)` over the little-endian bytes, wrapping: the definition, not the kernels' arithmetic.
fn reference(a: i32, b: i32, c: i32) -> i32 {
    let (a, b) = (a.to_le_bytes(), b.to_le_bytes());
    (0..4).fold(c, |s, k| s.wrapping_add(a[k] as i32 * b[k] as i8 as i32))
}

/// `c + Σ_k i8(a_k) · max(i8(b_k), -127)`, wrapping: DP4AS's definition.
fn reference_signed(a: i32, b: i32, c: i32) -> i32 {
    let (a, b) = (a.to_le_bytes(), b.to_le_bytes());
    (0..4).fold(c, |s, k| s.wrapping_add(a[k] as i8 as i32 * (b[k] as i8).max(-127) as i32))
}

/// `n` pseudo-random words (every byte value, both signs) from `seed`.
fn words(n: usize, seed: u64) -> Vec<i32> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 16) as i32
        })
        .collect()
}

/// Elementwise DP4A of `[3, 64]` words with a broadcast row and an accumulator near the int32 limits, then its sums
/// over 256 words a row (a reduction the codegen unrolls into vectors), on `device`, against [`reference`].
fn check(device: &str) {
    let (a, b, c) = (words(3 * 64, 1), words(64, 2), words(3 * 64, 3));
    let c: Vec<i32> = c.iter().enumerate().map(|(i, &x)| if i % 7 == 0 { i32::MAX - (x & 0xffff) } else { x }).collect();
    let t = |v: &[i32], s: &[usize]| Tensor::from_slice(v, s.to_vec()).to(device);
    let got = t(&a, &[3, 64]).dp4a(&t(&b, &[64]), t(&c, &[3, 64])).to_vec::<i32>().expect("realize the DP4A");
    let want: Vec<i32> = (0..3 * 64).map(|i| reference(a[i], b[i % 64], c[i])).collect();
    assert_eq!(got, want, "elementwise DP4A on {device}");
    let (a, b) = (words(8 * 256, 4), words(256, 5));
    let got = t(&a, &[8, 256]).dp4a(&t(&b, &[256]), 0).sum(-1).to_vec::<i32>().expect("realize the DP4A sums");
    let want: Vec<i32> = (0..8).map(|r| (0..256).fold(0i32, |s, k| s.wrapping_add(reference(a[r * 256 + k], b[k], 0)))).collect();
    assert_eq!(got, want, "DP4A sums on {device}");
    // first operands whose bytes are at most 127 (an AND with a constant, as 4-bit quants are unpacked: AVX2's
    // pmaddubsw form), at their extremes too: 127 · -128 twice a pair
    for mask in [0x7f7f_7f7f, 0x0f0f_0f0f] {
        let a: Vec<i32> = words(8 * 256, 6).iter().enumerate().map(|(i, &x)| if i % 5 == 0 { -1 } else { x }).collect();
        let b: Vec<i32> = words(256, 7).iter().enumerate().map(|(i, &x)| if i % 3 == 0 { 0x8080_8080u32 as i32 } else { x }).collect();
        let got = t(&a, &[8, 256]).bitwise_and(mask as i64).dp4a(&t(&b, &[256]), 0).sum(-1).to_vec::<i32>().expect("realize");
        let want: Vec<i32> =
            (0..8).map(|r| (0..256).fold(0i32, |s, k| s.wrapping_add(reference(a[r * 256 + k] & mask, b[k], 0)))).collect();
        assert_eq!(got, want, "DP4A sums of bytes under {mask:#x} on {device}");
        // both forms in one kernel (their helpers were once one name, and the first defined served both)
        let both = t(&a, &[8, 256]).bitwise_and(mask as i64).dp4a(&t(&b, &[256]), t(&a, &[8, 256]).dp4a(&t(&b, &[256]), 0));
        let got = both.sum(-1).to_vec::<i32>().expect("realize");
        let want: Vec<i32> = (0..8)
            .map(|r| (0..256).fold(0i32, |s, k| s.wrapping_add(reference(a[r * 256 + k] & mask, b[k], reference(a[r * 256 + k], b[k], 0)))))
            .collect();
        assert_eq!(got, want, "DP4A sums of bytes under {mask:#x} and of any bytes, in one kernel, on {device}");
    }
    // DP4AS, elementwise and summed, with -128 bytes on both sides (-128 · -127 four times a word is its largest), and
    // beside DP4A in one kernel
    let (a, b) = (words(8 * 256, 8), words(256, 9));
    let a: Vec<i32> = a.iter().enumerate().map(|(i, &x)| if i % 5 == 0 { 0x8080_8080u32 as i32 } else { x }).collect();
    let b: Vec<i32> = b.iter().enumerate().map(|(i, &x)| if i % 3 == 0 { 0x8181_8180u32 as i32 } else { x }).collect();
    let got = t(&a, &[8, 256]).dp4a_signed(&t(&b, &[256]), t(&a, &[8, 256])).to_vec::<i32>().expect("realize the DP4AS");
    let want: Vec<i32> = (0..8 * 256).map(|i| reference_signed(a[i], b[i % 256], a[i])).collect();
    assert_eq!(got, want, "elementwise DP4AS on {device}");
    let both = t(&a, &[8, 256]).dp4a_signed(&t(&b, &[256]), t(&a, &[8, 256]).dp4a(&t(&b, &[256]), 0));
    let got = both.sum(-1).to_vec::<i32>().expect("realize the DP4AS sums");
    let want: Vec<i32> = (0..8)
        .map(|r| (0..256).fold(0i32, |s, k| s.wrapping_add(reference_signed(a[r * 256 + k], b[k], reference(a[r * 256 + k], b[k], 0)))))
        .collect();
    assert_eq!(got, want, "DP4AS sums beside DP4A's in one kernel on {device}");
}

#[test]
fn dp4a_matches_its_definition_on_the_cpu() {
    check("CPU");
}

#[test]
fn dp4a_matches_its_definition_in_the_interpreter() {
    check("PYTHON");
}

#[test]
#[ignore = "run by dp4a_matches_under_each_target_and_compiler, with CC and CPU_TARGET set"]
fn dp4a_under_the_environment() {
    check("CPU");
}

#[test]
fn dp4a_matches_under_each_target_and_compiler() {
    let ccs: Vec<&str> = ["clang", "gcc"].into_iter().filter(|cc| common::have(&[cc], "DP4A under this compiler")).collect();
    let x86 = cfg!(target_arch = "x86_64");
    for cc in ccs {
        common::rerun("dp4a_under_the_environment", &[("CC", cc)]);
        if x86 {
            for target in ["x86-64-v3", "x86-64-v2"] {
                common::rerun("dp4a_under_the_environment", &[("CC", cc), ("CPU_TARGET", target)]);
            }
        }
    }
}

/// `QuantMatrix::matmul_t` of every repacked type against the same product computed here in f64: each block's weights
/// split by the GGUF formulas into `d` times unsigned quants plus an offset `m` (Q6_K's: the weights whole, `m` 0,
/// its sub-blocks' scales and offset of 32 applied here), the first part
/// dotted with the row quantized to int8 per 32 values as the docs say (round half to even, `dx = max|x| / 127`),
/// the second with the quantized row's block sums (so the weights meet the same quantized row). Only float rounding
/// separates them.
#[test]
fn quant_matrix_products_equal_the_dequantized_ones() {
    use tinygrad::nn::gguf::{GgmlType, QuantMatrix, QuantRows};
    let (rows, k, n) = (32, 256, 2);
    let f16 = |v: f32| half::f16::from_f32(v);
    let x: Vec<f32> = words(n * k, 9).iter().map(|&w| (w % 1000) as f32 / 250.0).collect();
    // the row's quants and scales, per block of 32
    let xq: Vec<(f64, Vec<f64>)> = x
        .chunks(32)
        .map(|b| {
            let amax = b.iter().fold(0f32, |m, v| m.max(v.abs()));
            let inv = if amax > 0.0 { 127.0 / amax } else { 0.0 };
            ((amax * (1.0 / 127.0)) as f64, b.iter().map(|v| (v * inv).round_ties_even() as f64).collect())
        })
        .collect();
    for ty in
        [GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K]
    {
        let nb = k / 32;
        let bytes: Vec<u8> = words(ty.nbytes(rows * k).unwrap(), ty as u64).iter().map(|&w| w as u8).collect();
        let mut raw = bytes.clone();
        // scales of a sane size: d in [2^-8, 2^-7) (Q6_K's at byte 208), m in (-2^-4, 0]
        for blk in raw.chunks_mut(ty.type_size()) {
            let (d, m) = (f16(0.004 + blk[0] as f32 / 65536.0), f16(-(blk[1] as f32) / 4096.0));
            let at = if ty == GgmlType::Q6_K { 208 } else { 0 };
            blk[at..at + 2].copy_from_slice(&d.to_le_bytes());
            if matches!(ty, GgmlType::Q4_1 | GgmlType::Q5_1 | GgmlType::Q4_K | GgmlType::Q5_K) {
                blk[2..4].copy_from_slice(&m.to_le_bytes());
            }
        }
        // each block's offset m and its 32 weights less m: d times the unsigned quants (Q6_K: m 0, the weights whole)
        let weights: Vec<(f64, Vec<f64>)> = if matches!(ty, GgmlType::Q4_K | GgmlType::Q5_K) {
            k_blocks(&raw, ty == GgmlType::Q5_K)
        } else if ty == GgmlType::Q6_K {
            q6_k_blocks(&raw)
        } else {
            raw.chunks(ty.type_size())
                .map(|b| {
                    let d = half::f16::from_le_bytes([b[0], b[1]]).to_f64();
                    let nibble = |off: usize, j: usize| (b[off + j % 16] >> (4 * (j / 16)) & 15) as f64;
                    // a 5-bit quant: the nibble at `qs`, bit j of the word at `qh` as its fifth bit
                    let q5 = |qh: usize, qs: usize, j: usize| {
                        nibble(qs, j) + 16.0 * (u32::from_le_bytes(b[qh..qh + 4].try_into().unwrap()) >> j & 1) as f64
                    };
                    let m = half::f16::from_le_bytes([b[2], b[3]]).to_f64();
                    match ty {
                        GgmlType::Q4_0 => (-8.0 * d, (0..32).map(|j| d * nibble(2, j)).collect()),
                        GgmlType::Q4_1 => (m, (0..32).map(|j| d * nibble(4, j)).collect()),
                        GgmlType::Q5_0 => (-16.0 * d, (0..32).map(|j| d * q5(2, 6, j)).collect()),
                        GgmlType::Q5_1 => (m, (0..32).map(|j| d * q5(4, 8, j)).collect()),
                        _ => (-128.0 * d, (0..32).map(|j| d * (b[2 + j] as i8 as f64 + 128.0)).collect()),
                    }
                })
                .collect()
        };
        let t = Tensor::from_slice(&raw, [raw.len()]);
        let w = QuantMatrix::new(&t, ty, &[rows, k], 8).expect("repacks");
        let got = w.matmul_t(&QuantRows::new(&Tensor::from_slice(&x, [n, k]))).to_vec::<f32>().expect("realize the product");
        for (i, g) in got.iter().enumerate() {
            let (t, r) = (i / rows, i % rows);
            let want: f64 = (0..nb)
                .map(|b| {
                    let ((dx, q), (m, w)) = (&xq[t * nb + b], &weights[r * nb + b]);
                    (0..32).map(|j| (w[j] + m) * dx * q[j]).sum::<f64>()
                })
                .sum();
            assert!((*g as f64 - want).abs() <= 1e-4 * (1.0 + want.abs()), "{} row {r} of x {t}: {g} vs {want}", ty.name());
        }
    }
}

/// Q4_K (or, with `five`, Q5_K) super-blocks (`raw`, 144 or 176 bytes each) as 32-value blocks `(m, d·q)`: sub-block
/// `j`'s scale `d·sc_j` and offset `-dmin·mn_j` (6-bit `sc`, `mn` unpacked from the 12 scale bytes as ggml's
/// `get_scale_min_k4`), each rounded to float16 as `QuantMatrix` keeps them; its quants the low nibbles of 32 bytes,
/// then the high ones (Q5_K: bit `j` of the 32 bytes at 16 their fifth bit).
fn k_blocks(raw: &[u8], five: bool) -> Vec<(f64, Vec<f64>)> {
    let f16 = |v: f64| half::f16::from_f64(v).to_f64();
    let (size, qs) = if five { (176, 48) } else { (144, 16) };
    raw.chunks(size)
        .flat_map(|b| {
            let (d, dmin) = (half::f16::from_le_bytes([b[0], b[1]]).to_f64(), half::f16::from_le_bytes([b[2], b[3]]).to_f64());
            let s = &b[4..16];
            (0..8).map(move |j| {
                let (sc, mn) = if j < 4 {
                    (s[j] & 63, s[j + 4] & 63)
                } else {
                    ((s[j + 4] & 15) | (s[j - 4] >> 6) << 4, (s[j + 4] >> 4) | (s[j] >> 6) << 4)
                };
                let (scale, off) = (f16(d * sc as f64), f16(-dmin * mn as f64));
                let q = |i: usize| (b[qs + 32 * (j / 2) + i] >> (4 * (j % 2)) & 15) + if five { (b[16 + i] >> j & 1) << 4 } else { 0 };
                (off, (0..32).map(|i| scale * q(i) as f64).collect())
            })
        })
        .collect()
}

/// Q6_K super-blocks (210 bytes each) as 32-value blocks `(0, w)`, `w` the weights whole, by ggml's
/// `dequantize_row_q6_K`: in each half of 128 values, value `l` (0..32) of quarter `k` takes the low (k even) or high
/// nibble of `ql[64h + l + 32 (k odd)]` and bits `2k, 2k+1` of `qh[32h + l]` as its high two, less 32, times `d` and
/// the int8 scale of its 16 values.
fn q6_k_blocks(raw: &[u8]) -> Vec<(f64, Vec<f64>)> {
    raw.chunks(210)
        .flat_map(|b| {
            let d = half::f16::from_le_bytes([b[208], b[209]]).to_f64();
            let value = move |v: usize| {
                let (h, k, l) = (v / 128, v % 128 / 32, v % 32);
                let lo = b[64 * h + l + 32 * (k % 2)] >> (4 * (k / 2)) & 15;
                let q = (lo | (b[128 + 32 * h + l] >> (2 * k) & 3) << 4) as f64 - 32.0;
                d * (b[192 + v / 16] as i8) as f64 * q
            };
            (0..8).map(move |j| (0.0, (32 * j..32 * j + 32).map(value).collect()))
        })
        .collect()
}

/// A row's product by `QuantMatrix::matmul_t` has the same bits alone as among others (a server's stream decodes
/// the same tokens alone and batched), for the model shapes of SmolLM2 (576 -> 1536, 1536 -> 576) and Gemma 3's
/// Q6_K `ffn_down` (2048 -> 640), and 1 to 8 rows.
#[test]
fn quant_matrix_rows_do_not_depend_on_their_batch() {
    use tinygrad::nn::gguf::{GgmlType, QuantMatrix, QuantRows};
    let lanes = tinygrad::renderer::CpuFeatures::host().vector_bytes() / 4;
    for (ty, rows, k) in [(GgmlType::Q4_1, 1536, 576), (GgmlType::Q8_0, 576, 1536), (GgmlType::Q4_0, 64, 1536), (GgmlType::Q6_K, 640, 2048)]
    {
        let mut raw: Vec<u8> = words(ty.nbytes(rows * k).unwrap(), 7).iter().map(|&w| w as u8).collect();
        for blk in raw.chunks_mut(ty.type_size()) {
            let (d, m) = (half::f16::from_f32(0.004 + blk[0] as f32 / 65536.0), half::f16::from_f32(-(blk[1] as f32) / 4096.0));
            let at = if ty == GgmlType::Q6_K { 208 } else { 0 };
            blk[at..at + 2].copy_from_slice(&d.to_le_bytes());
            if ty == GgmlType::Q4_1 {
                blk[2..4].copy_from_slice(&m.to_le_bytes());
            }
        }
        let mut w = QuantMatrix::new(&Tensor::from_slice(&raw, [raw.len()]), ty, &[rows, k], lanes).expect("repacks");
        w.realize().expect("realize the repacking");
        let x: Vec<f32> = words(8 * k, 11).iter().map(|&w| (w % 1000) as f32 / 250.0).collect();
        let product = |n: usize| w.matmul_t(&QuantRows::new(&Tensor::from_slice(&x[..n * k], [n, k]))).to_vec::<f32>().unwrap();
        let alone = product(1);
        for n in 2..=8 {
            let p = product(n);
            let bad: Vec<(usize, f32, f32)> = (0..rows).filter(|&i| p[i] != alone[i]).map(|i| (i, p[i], alone[i])).take(5).collect();
            assert!(bad.is_empty(), "{} [{rows}, {k}]: row 0 differs between 1 and {n} rows: {bad:?}", ty.name());
        }
    }
}

/// `QuantMatrix::cat` stacks rows: the product of q, k and v's stacked matrix (SmolLM2's 576 + 192 + 192 rows of 576)
/// has each part's product in its columns, bit for bit; parts of different types do not stack.
#[test]
fn stacked_quant_matrices_give_their_parts_products() {
    use tinygrad::nn::gguf::{GgmlType, QuantMatrix, QuantRows};
    let (ty, k, lanes) = (GgmlType::Q4_1, 576, tinygrad::renderer::CpuFeatures::host().vector_bytes() / 4);
    let matrix = |rows: usize, seed: u64, ty: GgmlType| {
        let mut raw: Vec<u8> = words(ty.nbytes(rows * k).unwrap(), seed).iter().map(|&w| w as u8).collect();
        for blk in raw.chunks_mut(ty.type_size()) {
            // scales of a sane size (random bytes make NaN halves): d in [2^-8, 2^-7), Q4_1's m in (-2^-4, 0]
            let (d, m) = (half::f16::from_f32(0.004 + blk[0] as f32 / 65536.0), half::f16::from_f32(-(blk[1] as f32) / 4096.0));
            blk[..2].copy_from_slice(&d.to_le_bytes());
            if ty == GgmlType::Q4_1 {
                blk[2..4].copy_from_slice(&m.to_le_bytes());
            }
        }
        QuantMatrix::new(&Tensor::from_slice(&raw, [raw.len()]), ty, &[rows, k], lanes).expect("repacks")
    };
    let parts = [matrix(576, 1, ty), matrix(192, 2, ty), matrix(192, 3, ty)];
    let mut all = QuantMatrix::cat(&parts.iter().collect::<Vec<_>>()).expect("same type and columns");
    all.realize().unwrap();
    assert_eq!(all.rows(), 960);
    let x: Vec<f32> = words(3 * k, 5).iter().map(|&w| (w % 1000) as f32 / 250.0 - 2.0).collect();
    let xq = QuantRows::new(&Tensor::from_slice(&x, [3, k]));
    let got = all.matmul_t(&xq).to_vec::<f32>().unwrap();
    let mut at = 0;
    for p in &parts {
        let want = p.matmul_t(&xq).to_vec::<f32>().unwrap();
        for r in 0..3 {
            assert_eq!(got[r * 960 + at..r * 960 + at + p.rows()], want[r * p.rows()..(r + 1) * p.rows()], "row {r}, columns from {at}");
        }
        at += p.rows();
    }
    assert!(QuantMatrix::cat(&[&parts[0], &matrix(64, 4, GgmlType::Q8_0)]).is_none(), "Q4_1 and Q8_0 rows stacked");
}
