//! Snapshots of the C the CPU renderer prints for a handful of kernels, with the default opts for a fixed AVX2-like
//! target (32-byte vectors, 16 registers, 2 threads) so they don't depend on the machine. A change in codegen
//! shows up here as a diff to read; `UPDATE_SNAPSHOTS=1 cargo test --test render_snapshot` rewrites them.

use tinygrad::codegen::full_rewrite;
use tinygrad::renderer::{cstyle, CpuFeatures, Renderer};
use tinygrad::schedule::create_schedule;
use tinygrad::Tensor;

fn input(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    Tensor::from_slice(&vec![1.0f32; n], shape).realize().unwrap().clone()
}

fn check(name: &str, t: &Tensor) {
    // an AVX2 machine with FMA and two cores, whatever this one is
    let cpu = CpuFeatures { fma: true, avx2: true, avx512: false, vnni: false, neon: false, stream_rows: 8, sequential_ahead: 0 };
    let ren =
        Renderer { threads: 2, vector_bytes: 32, vector_registers: 16, overread: 64, mulacc: true, cpu: Some(cpu), ..Renderer::cpu() };
    let sched = create_schedule(&[t.uop()], &ren);
    let src: String =
        sched.items.iter().map(|it| cstyle::render(&full_rewrite(&it.ast, &ren, None).unwrap())).collect::<Vec<_>>().join("\n");
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots").join(format!("{name}.c"));
    if std::env::var("UPDATE_SNAPSHOTS").is_ok() {
        std::fs::write(&path, &src).unwrap();
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e} (UPDATE_SNAPSHOTS=1 writes it)", path.display()));
    assert_eq!(src, want, "{name}: rendered C changed (UPDATE_SNAPSHOTS=1 rewrites {})", path.display());
}

#[test]
fn elementwise_relu_of_sum() {
    check("elementwise", &(&input(&[64, 96]) + &input(&[64, 96])).relu());
}

/// float16 in and out (a KV cache's rows): vector loads and stores of halves, converted as vectors (F16C), the
/// arithmetic in float32.
#[test]
fn half_vectors_convert_whole() {
    use tinygrad::dtypes::{FLOAT16, FLOAT32};
    let h = input(&[64, 96]).cast(FLOAT16).realize().unwrap().clone();
    check("half_rows", &(h.cast(FLOAT32) * 3.0f32).cast(FLOAT16));
}

#[test]
fn matmul_register_tile() {
    check("matmul", &input(&[48, 64]).matmul(&input(&[64, 32])));
}

#[test]
fn row_sum_vector_partials() {
    check("row_sum", &input(&[16, 256]).sum(1));
}

#[test]
fn padded_rows_and_columns() {
    check("matmul_prime", &input(&[13, 24]).matmul(&input(&[24, 19])));
}

/// A matrix-vector product over the rows of a weight (decode's projections): each THREAD iteration's tile of rows is
/// prefetched one iteration ahead in the reduction loop, a line per row and loop step.
#[test]
fn matvec_prefetches_the_next_row_tile() {
    check("matvec_rows", &input(&[1, 512]).matmul(&input(&[256, 512]).transpose(0, 1)));
}

/// A `QuantMatrix` product (decode's integer path) reads its repacked weight as one stream, tile after tile: on AMD's
/// Zen 3 and later no software prefetch (their hardware prefetchers follow it), on Intel's cores and AMD's Zen 1 and 2
/// (`sequential_ahead`) prefetches that many bytes ahead in the reduction loop itself: each of the lines one loop
/// step of the weight reads, that many bytes on.
#[test]
fn quant_matrix_product_prefetches_its_stream_only_where_that_pays() {
    use tinygrad::nn::gguf::{GgmlType, QuantMatrix, QuantRows};
    let (rows, cols) = (256, 512);
    let raw = Tensor::from_slice(&vec![0u8; GgmlType::Q8_0.nbytes(rows * cols).unwrap()], [GgmlType::Q8_0.nbytes(rows * cols).unwrap()]);
    let mut w = QuantMatrix::new(&raw, GgmlType::Q8_0, &[rows, cols], 8).expect("repacks");
    w.realize().unwrap();
    for sequential_ahead in [0, 2048, 6144] {
        let cpu = CpuFeatures { fma: true, avx2: true, avx512: false, vnni: false, neon: false, stream_rows: 8, sequential_ahead };
        let ren =
            Renderer { threads: 2, vector_bytes: 32, vector_registers: 16, overread: 64, mulacc: true, cpu: Some(cpu), ..Renderer::cpu() };
        let out = w.matmul_t(&QuantRows::new(&input(&[1, cols])));
        let sched = create_schedule(&[out.uop()], &ren);
        let src: Vec<String> = sched.items.iter().map(|it| cstyle::render(&full_rewrite(&it.ast, &ren, None).unwrap())).collect();
        let product = src.iter().find(|s| s.contains("dp4a")).expect("a DP4A kernel");
        let prefetches: Vec<&str> = product.lines().filter(|l| l.contains("__builtin_prefetch(&data1[")).collect();
        if sequential_ahead == 0 {
            assert!(prefetches.is_empty(), "the QuantMatrix product prefetches:\n{product}");
            continue;
        }
        // (the weight's words: 8 int32 lanes x 8 words a block, 4 blocks a loop step: 1 KB, 16 lines)
        assert_eq!(prefetches.len(), 16, "a prefetch per line of a loop step:\n{product}");
        let ahead = format!("+{}", sequential_ahead / 4 + 248);
        assert!(prefetches.iter().any(|l| l.contains(&ahead)), "the last line prefetched {ahead} words on:\n{product}");
    }
}

/// A causal mask over softmax rows (attention's): the comparisons are vectors of lane masks and the selects pick
/// bits, never a lane at a time.
#[test]
fn masked_softmax_selects_whole_vectors() {
    let (j, i) = (Tensor::arange(0.0, 64.0, 1.0).reshape([1, 64]), Tensor::arange(0.0, 16.0, 1.0).reshape([16, 1]));
    check("masked_softmax", &j.le(&i).where_(input(&[16, 64]), f32::NEG_INFINITY).softmax(-1));
}

/// A max pool's backward counts each window's maxima: pixels compared with their window's maximum (loaded once per
/// pair of lanes) and the comparison cast to float. Both are whole vectors (lane masks, selected to 1.0 or 0.0), never
/// a lane at a time; the counts are right.
#[test]
fn window_maxima_compare_and_cast_as_vectors() {
    let x: Vec<f32> = (0..4 * 16).map(|i| ((i * 7) % 5) as f32).collect();
    let x = Tensor::from_slice(&x, [4, 16]).realize().unwrap().clone();
    let m = x.reshape([4, 8, 2]).max(2).realize().unwrap().clone();
    let up = m.reshape([4, 8, 1]).expand([4, 8, 2]).reshape([4, 16]);
    let counts = x.eq(&up).cast(tinygrad::dtypes::FLOAT32).sum(1);
    let cpu = CpuFeatures { fma: true, avx2: true, avx512: false, vnni: false, neon: false, stream_rows: 8, sequential_ahead: 0 };
    let ren =
        Renderer { threads: 2, vector_bytes: 32, vector_registers: 16, overread: 64, mulacc: true, cpu: Some(cpu), ..Renderer::cpu() };
    let sched = create_schedule(&[counts.uop()], &ren);
    let src: String = sched.items.iter().map(|it| cstyle::render(&full_rewrite(&it.ast, &ren, None).unwrap())).collect();
    assert!(src.contains("==") && !src.contains("(float)("), "comparisons or casts lane by lane:\n{src}");
    // each row: values (7i mod 5), pairs' maxima counted once each, ties (equal pairs) twice; hand-derived per row
    let want: Vec<f32> = (0..4)
        .map(|r| (0..8).map(|p| if (7 * (16 * r + 2 * p)) % 5 == (7 * (16 * r + 2 * p + 1)) % 5 { 2.0 } else { 1.0 }).sum())
        .collect();
    assert_eq!(counts.to_vec::<f32>().unwrap(), want);
}

/// A 5x5 convolution onto 24-wide rows with 32 output channels, its weight stored output channel innermost (as
/// beautiful_mnist's input gradient is): on AVX-512 its vectors are whole registers of channels, each broadcast pixel
/// shared by them, not 8-wide vectors of a row beside a broadcast weight a multiply-add (its step 125 -> 72 ms on a
/// Zen 4). The values match a direct convolution.
#[test]
fn convolution_vectors_are_whole_registers_of_channels() {
    let (ci, co, hw, k) = (4usize, 32usize, 28usize, 5usize);
    let o = hw - k + 1;
    let xs: Vec<f32> = (0..ci * hw * hw).map(|i| ((i * 7) % 11) as f32 - 5.0).collect();
    let ws: Vec<f32> = (0..co * ci * k * k).map(|i| ((i * 5) % 7) as f32 - 3.0).collect();
    let x = Tensor::from_slice(&xs, [1, ci, hw, hw]).realize().unwrap().clone();
    // (stored [ci, ky, kx, co], viewed as [co, ci, ky, kx])
    let packed: Vec<f32> = (0..ci * k * k * co).map(|i| ws[(i % co) * ci * k * k + i / co]).collect();
    let w = Tensor::from_slice(&packed, [ci, k, k, co]).realize().unwrap().permute([3, 0, 1, 2]);
    let y = x.conv2d(&w, tinygrad::tensor::Conv2dOpts::default());
    let cpu = CpuFeatures { fma: true, avx2: true, avx512: true, vnni: false, neon: false, stream_rows: 8, sequential_ahead: 0 };
    let ren =
        Renderer { threads: 2, vector_bytes: 64, vector_registers: 32, overread: 64, mulacc: true, cpu: Some(cpu), ..Renderer::cpu() };
    let sched = create_schedule(&[y.uop()], &ren);
    let src: String = sched.items.iter().map(|it| cstyle::render(&full_rewrite(&it.ast, &ren, None).unwrap())).collect();
    assert!(src.contains("float16 val") && !src.contains("float8"), "vectors of channels wanted, not of a row:\n{src}");
    let mut want = vec![0f32; co * o * o];
    for (c, oy, ox) in (0..co).flat_map(|c| (0..o).flat_map(move |oy| (0..o).map(move |ox| (c, oy, ox)))) {
        let taps = (0..ci).flat_map(|i| (0..k).flat_map(move |ky| (0..k).map(move |kx| (i, ky, kx))));
        want[(c * o + oy) * o + ox] =
            taps.map(|(i, ky, kx)| xs[(i * hw + oy + ky) * hw + ox + kx] * ws[((c * ci + i) * k + ky) * k + kx]).sum();
    }
    assert_eq!(y.to_vec::<f32>().unwrap(), want);
}

/// A vector-matrix product over a 4096 x 512 row-major matrix: one kernel (no partial sums), whose cores split the
/// columns and read 8 rows at a time, its register tiles in an INNER loop accumulating in memory (on the AVX2-like
/// target: 2 chunks of 256 columns, 4 registers a tile). The values match a direct product in f64.
#[test]
fn vector_matrix_product_streams_rows_into_accumulators_in_memory() {
    let (k, n) = (4096usize, 512usize);
    let xs: Vec<f32> = (0..k).map(|i| ((i * 3) % 13) as f32 / 13.0 - 0.5).collect();
    let ws: Vec<f32> = (0..k * n).map(|i| ((i * 7) % 17) as f32 / 17.0 - 0.5).collect();
    let (x, w) = (Tensor::from_slice(&xs, [1, k]), Tensor::from_slice(&ws, [k, n]));
    let y = x.matmul(&w);
    let cpu = CpuFeatures { fma: true, avx2: true, avx512: false, vnni: false, neon: false, stream_rows: 8, sequential_ahead: 0 };
    let ren =
        Renderer { threads: 2, vector_bytes: 32, vector_registers: 16, overread: 64, mulacc: true, cpu: Some(cpu), ..Renderer::cpu() };
    let sched = create_schedule(&[y.uop()], &ren);
    let lin: Vec<_> = sched.items.iter().map(|it| full_rewrite(&it.ast, &ren, None).unwrap()).collect();
    assert_eq!(lin.len(), 1, "one kernel, no partial sums");
    assert_eq!(lin[0].name, "r_2_8_4_512_8_8", "{:?}", lin[0].opts);
    let src = cstyle::render(&lin[0]);
    assert!(src.contains("float8 temp0[8];") && src.contains("*((float8*)(&temp3[ridx"), "accumulators in memory:\n{src}");
    let want: Vec<f32> = (0..n).map(|j| (0..k).map(|i| f64::from(xs[i]) * f64::from(ws[i * n + j])).sum::<f64>() as f32).collect();
    let got = y.to_vec::<f32>().unwrap();
    for (j, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!((g - w).abs() <= 1e-3 * w.abs().max(1.0), "column {j}: {g}, want {w}");
    }
}

/// The same streamed product with an epilogue (`relu(x @ W + b)`, computed in the loop that stores the accumulators)
/// and with float16 operands, on this machine's renderer: the values match f64 products (f16 to its rounding).
#[test]
fn vector_matrix_products_streamed_with_an_epilogue_and_in_halves() {
    let (k, n) = (2048usize, 1024usize);
    let xs: Vec<f32> = (0..k).map(|i| ((i * 5) % 11) as f32 / 11.0 - 0.5).collect();
    let ws: Vec<f32> = (0..k * n).map(|i| ((i * 3) % 19) as f32 / 19.0 - 0.5).collect();
    let bs: Vec<f32> = (0..n).map(|j| (j % 7) as f32 - 3.0).collect();
    let dot = |j: usize| (0..k).map(|i| f64::from(xs[i]) * f64::from(ws[i * n + j])).sum::<f64>();
    let (x, w, b) = (Tensor::from_slice(&xs, [1, k]), Tensor::from_slice(&ws, [k, n]), Tensor::from_slice(&bs, [1, n]));
    let y = (&x.matmul(&w) + &b).relu();
    for (j, (g, b)) in y.to_vec::<f32>().unwrap().into_iter().zip(&bs).enumerate() {
        let want = (dot(j) + f64::from(*b)).max(0.0) as f32;
        assert!((g - want).abs() <= 1e-3 * want.abs().max(1.0), "column {j}: {g}, want {want}");
    }
    let h = tinygrad::dtypes::FLOAT16;
    let yh = x.cast(h).matmul(&w.cast(h).realize().unwrap().clone()).cast(tinygrad::dtypes::FLOAT32);
    for (j, g) in yh.to_vec::<f32>().unwrap().into_iter().enumerate() {
        let want = dot(j) as f32;
        assert!((g - want).abs() <= 0.05 * want.abs().max(1.0), "half column {j}: {g}, want {want}");
    }
}

/// Decode attention's scores over a float16 key cache of 1,024 rows of 3 key-value heads (SmolLM2's: 384-byte rows,
/// 3 query heads each): a THREAD iteration reads its own block of key rows one head after another, strides the
/// hardware prefetchers do not follow, so the block `BLOCK_AHEAD` bytes on is prefetched, its lines shared out among
/// the output loops' iterations. The scores match f64 dot products.
#[test]
fn attention_scores_prefetch_the_next_block_of_keys() {
    use tinygrad::dtypes::{FLOAT16, FLOAT32};
    let (t, kv, g, hd) = (1024usize, 3usize, 3usize, 64usize);
    let qs: Vec<f32> = (0..kv * g * hd).map(|i| ((i * 5) % 13) as f32 / 13.0 - 0.5).collect();
    let ks: Vec<f32> = (0..t * kv * hd).map(|i| ((i * 7) % 17) as f32 / 17.0 - 0.5).collect();
    let q = Tensor::from_slice(&qs, [kv, g, 1, hd]);
    let k = Tensor::from_slice(&ks, [t, kv, hd]).cast(FLOAT16).realize().unwrap().clone();
    let keys = k.permute([1, 0, 2]).reshape([kv, 1, t, hd]).cast(FLOAT32);
    let scores = (&q * &keys).sum(3);
    let cpu = CpuFeatures { fma: true, avx2: true, avx512: false, vnni: false, neon: false, stream_rows: 8, sequential_ahead: 0 };
    let ren =
        Renderer { threads: 2, vector_bytes: 32, vector_registers: 16, overread: 64, mulacc: true, cpu: Some(cpu), ..Renderer::cpu() };
    let sched = create_schedule(&[scores.uop()], &ren);
    let src: String = sched.items.iter().map(|it| cstyle::render(&full_rewrite(&it.ast, &ren, None).unwrap())).collect();
    // (2 rows of 384 bytes a THREAD iteration: 12 lines, 4 for each of the 3 heads' iterations, 3,072 bytes on)
    let prefetches: Vec<&str> = src.lines().filter(|l| l.contains("__builtin_prefetch(&data2[")).collect();
    assert_eq!(prefetches.len(), 4, "4 lines of the keys' block a head:\n{src}");
    for (j, l) in prefetches.iter().enumerate() {
        assert!(l.contains(&format!("+{})]);", 1536 + 32 * j)), "line {j} of the block 1,536 halves on:\n{src}");
    }
    let kh: Vec<f32> = k.cast(FLOAT32).to_vec::<f32>().unwrap();
    let got = scores.to_vec::<f32>().unwrap();
    for (i, s) in got.iter().enumerate() {
        let (h, r) = (i / (g * t), i % t);
        let want = (0..hd).map(|d| f64::from(qs[(i / t) * hd + d]) * f64::from(kh[(r * kv + h) * hd + d])).sum::<f64>() as f32;
        assert!((s - want).abs() <= 1e-4 * want.abs().max(1.0), "score {i}: {s}, want {want}");
    }
}

/// An odd matmul, (67, 131) @ (131, 129), on the AVX2-like target: its right operand is packed into 16-column panels,
/// the 129th column padded, and the product's padded columns dropped after. The panel copy reads each padded row's
/// last vector whole and selects the real lanes (int32 lane masks, never a branch a lane); the copy that drops the
/// padded columns stores whole vectors where every lane is real; the padded rows of the left operand load the last
/// real row's address, no branch. The values match f64 products.
#[test]
fn padded_rows_load_whole_vectors_and_store_them_where_whole() {
    let (m, k, n) = (67usize, 131usize, 129usize);
    let xs: Vec<f32> = (0..m * k).map(|i| ((i * 7) % 19) as f32 / 19.0 - 0.5).collect();
    let ws: Vec<f32> = (0..k * n).map(|i| ((i * 5) % 23) as f32 / 23.0 - 0.5).collect();
    let y = Tensor::from_slice(&xs, [m, k]).matmul(&Tensor::from_slice(&ws, [k, n]));
    let cpu = CpuFeatures { fma: true, avx2: true, avx512: false, vnni: false, neon: false, stream_rows: 8, sequential_ahead: 0 };
    let ren =
        Renderer { threads: 2, vector_bytes: 32, vector_registers: 16, overread: 128, mulacc: true, cpu: Some(cpu), ..Renderer::cpu() };
    let sched = create_schedule(&[y.uop()], &ren);
    let src: Vec<String> = sched.items.iter().map(|it| cstyle::render(&full_rewrite(&it.ast, &ren, None).unwrap())).collect();
    assert_eq!(src.len(), 3, "a panel copy, the product, the copy that drops the padded columns:\n{}", src.join("\n"));
    let (iota, vload) = ("(int8){0, 1, 2, 3, 4, 5, 6, 7}", "float8 val");
    assert!(src[0].contains(iota) && src[0].contains(vload) && !src[0].contains("?data1["), "lanes selected whole:\n{}", src[0]);
    assert!(!src[1].contains("?data1["), "the left operand's padded rows load without a branch:\n{}", src[1]);
    let whole = src[2].lines().filter(|l| l.contains("*((float8*)(&data0[")).count();
    assert!(whole == 1 && src[2].lines().filter(|l| l.contains("if (")).count() == 9, "whole vectors where whole:\n{}", src[2]);
    let got = y.to_vec::<f32>().unwrap();
    for (i, g) in got.iter().enumerate() {
        let want = (0..k).map(|j| f64::from(xs[i / n * k + j]) * f64::from(ws[j * n + i % n])).sum::<f64>() as f32;
        assert!((g - want).abs() <= 1e-4 * want.abs().max(1.0), "element {i}: {g}, want {want}");
    }
}

/// Attention's values (decode over a float16 cache: a key's row holds 3 heads x 64 values, 384 bytes, and a THREAD
/// iteration reads its part of each key after the last's): strides the hardware prefetchers do not follow, so the
/// reduction prefetches them `STRIDE_AHEAD` bytes on, whichever vector width; a matrix product's operands, each tile
/// shared by THREAD iterations or walked a line at a time, are not prefetched.
#[test]
fn strided_streams_prefetch_ahead() {
    use tinygrad::codegen::STRIDE_AHEAD;
    use tinygrad::dtypes::{FLOAT16, FLOAT32};
    let keys = 1024;
    let v = input(&[keys, 3, 64]).cast(FLOAT16).realize().unwrap().clone();
    let values = input(&[3, 3, keys]).matmul(&v.permute([1, 0, 2]).cast(FLOAT32));
    let matmul = input(&[256, 512]).matmul(&input(&[512, 256]));
    for (avx512, vector_bytes, vector_registers) in [(false, 32, 16), (true, 64, 32)] {
        let cpu = CpuFeatures { fma: true, avx2: true, avx512, vnni: false, neon: false, stream_rows: 8, sequential_ahead: 0 };
        let ren = Renderer { threads: 2, vector_bytes, vector_registers, overread: 64, mulacc: true, cpu: Some(cpu), ..Renderer::cpu() };
        let render = |t: &Tensor| -> Vec<String> {
            create_schedule(&[t.uop()], &ren).items.iter().map(|it| cstyle::render(&full_rewrite(&it.ast, &ren, None).unwrap())).collect()
        };
        let kernels = render(&values);
        let k = kernels.iter().find(|k| k.contains("half")).expect("a kernel reading the cache");
        // (8 KB on: 22 keys of 192 halves, 4,224 halves)
        let ahead = format!("+{}", (STRIDE_AHEAD / 384 + 1) * 192);
        assert!(
            k.lines().any(|l| l.contains("__builtin_prefetch(&data2[") && l.contains(&ahead)),
            "values prefetched {ahead} halves on:\n{k}"
        );
        for k in render(&matmul) {
            assert!(!k.contains("__builtin_prefetch"), "a matrix product's tiles prefetched:\n{k}");
        }
    }
}
