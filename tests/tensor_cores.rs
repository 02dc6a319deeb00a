//! Tensor cores (the TC opt) on the interpreter emulating CUDA (`EMULATE=CUDA`, as tinygrad's): half and bf16
//! matmuls computed by WMMA UOps that the interpreter executes warp by warp with PTX `mma.m16n8k16`'s fragment
//! layout. Inputs are small integers, so every product and sum is exact in float32 and in the 16-bit output: the
//! results must equal the integer reference exactly. (tests/cuda_compile.rs compiles the same kernels for CUDA.)

use half::f16;
use tinygrad::codegen::{kernel, opt::heuristic::hand_coded_optimizations, Opt, OptOps};
use tinygrad::dtype::{dtypes, DType};
use tinygrad::helpers::Context;
use tinygrad::renderer::{Renderer, CUDA_TENSOR_CORES};
use tinygrad::Tensor;

/// The interpreter emulates CUDA in this test binary (its renderer reads `EMULATE` once, on first use).
fn emulate_cuda() {
    std::env::set_var("EMULATE", "CUDA");
    assert!(!Renderer::python().tensor_cores.is_empty(), "EMULATE=CUDA was read too late");
}

/// `[batch, rows, cols]` of small integers in -4..=4, a different pattern per `seed`.
fn ints(batch: usize, rows: usize, cols: usize, seed: usize) -> Vec<f32> {
    (0..batch * rows * cols).map(|i| ((i * (7 + 2 * seed) + seed) % 9) as f32 - 4.0).collect()
}

/// `a @ b` (each `[batch, .., ..]`) in f64, plus `bias` per column, through relu when `relu`.
fn reference(a: &[f32], b: &[f32], (batch, m, k, n): (usize, usize, usize, usize), bias: Option<&[f32]>, relu: bool) -> Vec<f32> {
    let mut out = vec![0.0; batch * m * n];
    for (z, i, j) in (0..batch).flat_map(|z| (0..m).flat_map(move |i| (0..n).map(move |j| (z, i, j)))) {
        let mut s: f64 = (0..k).map(|kk| f64::from(a[(z * m + i) * k + kk]) * f64::from(b[(z * k + kk) * n + j])).sum();
        s += bias.map_or(0.0, |bs| f64::from(bs[j]));
        out[(z * m + i) * n + j] = if relu { s.max(0.0) } else { s } as f32;
    }
    out
}

/// A matmul of `dims = (batch, m, k, n)` in `dt` on the interpreter (with a bias and relu when `epilogue`): its
/// kernel's AST and buffers, the expected output, and the tensor.
fn matmul(dt: DType, dims: (usize, usize, usize, usize), epilogue: bool) -> (Tensor, Vec<f32>) {
    matmul_on("PYTHON", dt, dims, epilogue)
}

/// [`matmul`] on device `dev`.
fn matmul_on(dev: &str, dt: DType, dims: (usize, usize, usize, usize), epilogue: bool) -> (Tensor, Vec<f32>) {
    let (batch, m, k, n) = dims;
    let (a, b, bias) = (ints(batch, m, k, 0), ints(batch, k, n, 1), ints(1, 1, n, 2));
    let t = |v: &[f32], shape: [usize; 3]| {
        let x = Tensor::from_slice(v, shape).cast(dt).to(dev);
        x.realize().unwrap();
        x
    };
    let mut out = t(&a, [batch, m, k]).matmul(&t(&b, [batch, k, n]));
    if epilogue {
        out = (out + t(&bias, [1, 1, n])).relu();
    }
    (out, reference(&a, &b, dims, epilogue.then_some(&bias), epilogue))
}

/// The output of `t` as f32.
fn values(t: &Tensor) -> Vec<f32> {
    t.cast(dtypes::FLOAT32).to_vec::<f32>().unwrap()
}

#[test]
fn fragments_cover_each_matrix_once() {
    for tc in CUDA_TENSOR_CORES {
        let (m, n, k) = tc.dims;
        for (f, (rows, cols)) in tc.fragments.iter().zip([(m, k), (k, n), (m, n)]) {
            let mut seen = vec![0; rows * cols];
            for (l, e) in (0..tc.threads).flat_map(|l| (0..f.elements()).map(move |e| (l, e))) {
                let (i, j) = f.at(l, e);
                assert!(i < rows && j < cols, "{}: lane {l} element {e} at ({i}, {j})", tc.name);
                seen[i * cols + j] += 1;
            }
            assert!(seen.iter().all(|&c| c == 1), "{}: {seen:?}", tc.name);
        }
    }
}

#[test]
fn half_matmuls_run_on_tensor_cores() {
    emulate_cuda();
    // (rows fit M and columns N; only the swapped roles fit; a batch; a reduction of several K steps and tiles)
    for dims in [(1, 16, 16, 8), (1, 8, 32, 16), (2, 16, 32, 8), (1, 32, 64, 48)] {
        for epilogue in [false, true] {
            let (out, want) = matmul(dtypes::FLOAT16, dims, epilogue);
            let ast = tinygrad::schedule::create_schedule(&[out.uop()], &tinygrad::renderer::Renderer::python())
                .items
                .last()
                .unwrap()
                .ast
                .clone();
            let opts = hand_coded_optimizations(&kernel(&ast, &Renderer::python()));
            assert_eq!(opts.first().map(|o| o.op), Some(OptOps::Tc), "{dims:?}: {opts:?}");
            assert_eq!(values(&out), want, "{dims:?} epilogue {epilogue} opts {opts:?}");
        }
    }
}

/// On a real GPU (skipped without one): half and bf16 matmuls take the TC opt for the device's renderer and equal
/// the integer reference exactly.
#[test]
fn half_and_bf16_matmuls_run_on_a_gpus_tensor_cores() {
    use tinygrad::runtime::Device;
    let Ok(gpu) = tinygrad::runtime::cuda::device() else { return eprintln!("skipping: no CUDA device") };
    let renderer = gpu.renderer();
    for (dt, dims) in [(dtypes::FLOAT16, (1, 16, 16, 8)), (dtypes::FLOAT16, (2, 64, 128, 96)), (dtypes::BFLOAT16, (1, 16, 32, 16))] {
        for epilogue in [false, true] {
            let (out, want) = matmul_on("CUDA", dt, dims, epilogue);
            let ast = tinygrad::schedule::create_schedule(&[out.uop()], &renderer).items.last().unwrap().ast.clone();
            let opts = hand_coded_optimizations(&kernel(&ast, &renderer));
            assert_eq!(opts.first().map(|o| o.op), Some(OptOps::Tc), "{dt:?} {dims:?}: {opts:?}");
            assert_eq!(values(&out), want, "{dt:?} {dims:?} epilogue {epilogue} opts {opts:?}");
        }
    }
}

#[test]
fn bf16_matmul_runs_on_tensor_cores() {
    emulate_cuda();
    let (out, want) = matmul(dtypes::BFLOAT16, (1, 16, 32, 16), false);
    assert_eq!(values(&out), want);
}

/// TC alone and followed by unrolled lanes (the warp's fragments computed twice per thread), against the reference.
#[test]
fn tensor_cores_compose_with_upcast_and_unroll() {
    emulate_cuda();
    let (out, want) = matmul(dtypes::FLOAT16, (1, 32, 64, 16), true);
    let item = tinygrad::schedule::create_schedule(&[out.uop()], &tinygrad::renderer::Renderer::python()).items.pop().unwrap();
    let tc = Opt::new(OptOps::Tc, 0, 0);
    for opts in [
        vec![tc],
        vec![tc, Opt::new(OptOps::Upcast, 0, 2)],
        vec![tc, Opt::new(OptOps::Unroll, 0, 2)],
        vec![tc, Opt::new(OptOps::Upcast, 1, 2), Opt::new(OptOps::Unroll, 0, 4)],
    ] {
        tinygrad::engine::run_with_opts(&item.ast, &item.bufs, &opts).unwrap();
        let bytes = tinygrad::engine::copyout(&item.bufs[0]).unwrap();
        let got: Vec<f32> = bytes.chunks_exact(2).map(|c| f16::from_le_bytes([c[0], c[1]]).to_f32()).collect();
        assert_eq!(got, want, "{opts:?}");
    }
}

#[test]
fn tc_is_refused_where_it_does_not_fit() {
    emulate_cuda();
    let ren = Renderer::python();
    let tc = Opt::new(OptOps::Tc, 0, 0);
    // float32 inputs, a K that is not a multiple of 16, and a TC after another opt
    for (dt, dims, first) in [
        (dtypes::FLOAT32, (1, 16, 16, 8), None),
        (dtypes::FLOAT16, (1, 16, 24, 8), None),
        (dtypes::FLOAT16, (1, 16, 16, 8), Some(Opt::new(OptOps::Local, 0, 2))),
    ] {
        let (out, _) = matmul(dt, dims, false);
        let ast = tinygrad::schedule::create_schedule(&[out.uop()], &tinygrad::renderer::Renderer::python()).items.pop().unwrap().ast;
        let mut k = kernel(&ast, &ren);
        if let Some(o) = first {
            k.apply_opt(o).unwrap();
        }
        assert!(k.apply_opt(tc).is_err(), "{dt:?} {dims:?} {first:?}");
    }
    // TC=0 keeps the hand-coded opts off the tensor cores
    let (out, want) = matmul(dtypes::FLOAT16, (1, 16, 16, 8), false);
    let ast = tinygrad::schedule::create_schedule(&[out.uop()], &tinygrad::renderer::Renderer::python()).items.pop().unwrap().ast;
    let opts = Context::with(&[(&tinygrad::helpers::TC, 0)], || hand_coded_optimizations(&kernel(&ast, &ren)));
    assert!(opts.iter().all(|o| o.op != OptOps::Tc), "{opts:?}");
    assert_eq!(values(&out), want);
}
