//! DP4A (`Tensor::dp4a`: four byte products a word, the first operand's bytes unsigned, the second's signed) against
//! a reference written here, on every path that renders it: the host's vector instructions (VNNI where it has them),
//! AVX2's `pmaddwd` form (`CPU_TARGET=x86-64-v3`), the lane-by-lane C of 16-byte targets (`x86-64-v2`), gcc and
//! clang, and the PYTHON interpreter. The target and compiler runs are child processes (both are chosen once).

mod common;

use tinygrad::Tensor;

/// `c + Σ_k u8(a_k) · i8(b_k)` over the little-endian bytes, wrapping: the definition, not the kernels' arithmetic.
fn reference(a: i32, b: i32, c: i32) -> i32 {
    let (a, b) = (a.to_le_bytes(), b.to_le_bytes());
    (0..4).fold(c, |s, k| s.wrapping_add(a[k] as i32 * b[k] as i8 as i32))
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
