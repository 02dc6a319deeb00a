//! Devices: the interpreter (DEV=PYTHON) beside the CPU, copies between them with `Tensor::to`, gradients across a
//! copy, and the errors for mixing devices or naming an unknown one. Values are hand-derived.

use tinygrad::helpers::Context;
use tinygrad::runtime::canonicalize_device;
use tinygrad::Tensor;

#[test]
fn device_names_are_canonical() {
    assert_eq!(canonicalize_device("cpu"), "CPU");
    assert_eq!(canonicalize_device("python:0"), "PYTHON");
    assert_eq!(canonicalize_device("cl:1"), "CL:1");
    assert_eq!(canonicalize_device("Clang:0"), "CPU");
    assert_eq!(canonicalize_device("cuda:1"), "CUDA:1");
    assert_eq!(canonicalize_device("tpu:2"), "TPU:2");
}

#[test]
fn device_names_parse_in_the_registry() {
    let (d, i) = tinygrad::runtime::parse_device("cuda:1").expect("CUDA is in the registry");
    assert_eq!((d.name, i), ("CUDA", 1));
    assert!(tinygrad::runtime::parse_device("tpu").is_none() && tinygrad::runtime::parse_device("cl:x").is_none());
    // instances of the CPU, PYTHON and CL are devices of their own; CUDA opens one GPU
    assert!(tinygrad::runtime::open_device("python:1").is_ok());
    let Err(err) = tinygrad::runtime::open_device("cuda:1").map(drop) else { panic!("one GPU") };
    let err = err.to_string();
    assert!(err.contains("CUDA index 1") && err.contains("use CUDA"), "{err}");
    let Err(err) = tinygrad::runtime::open_device("tpu").map(drop) else { panic!("no such device") };
    let err = err.to_string();
    assert!(err.contains("unknown device") && err.contains("CPU, PYTHON, CL, CUDA"), "{err}");
}

#[test]
fn dev_picks_the_default_device() {
    let _dev = Context::new(&[]).dev("python");
    let t = Tensor::from_slice(&[1.0f32, 2.0, 3.0], [3]);
    assert_eq!(t.device(), "PYTHON");
    assert_eq!((&t * &t).sum(..).to_vec::<f32>().unwrap(), [14.0]);
}

#[test]
fn clang_is_the_cpu() {
    let _dev = Context::new(&[]).dev("clang");
    let t = Tensor::from_slice(&[1.0f32, 2.0], [2]);
    assert_eq!(t.device(), "CPU");
    assert_eq!((&t + 1.0f32).to_vec::<f32>().unwrap(), [2.0, 3.0]);
}

#[test]
fn tensors_on_two_devices_realize_together() {
    let a = Tensor::from_slice(&[1.0f32, 2.0], [2]) * 2.0f32;
    let b = Tensor::from_slice(&[3.0f32, 4.0], [2]).to("PYTHON") + 1.0f32;
    Tensor::realize_all(&[&a, &b]).unwrap();
    assert_eq!((a.device(), b.device()), ("CPU".to_string(), "PYTHON".to_string()));
    assert_eq!((a.to_vec::<f32>().unwrap(), b.to_vec::<f32>().unwrap()), (vec![2.0, 4.0], vec![4.0, 5.0]));
}

#[test]
fn to_copies_between_devices() {
    let x = Tensor::from_slice(&[1i32, -2, 3, 4, 5, 6], [2, 3]);
    assert_eq!(x.device(), "CPU");
    let p = x.to("PYTHON");
    assert_eq!((p.device(), p.shape()), ("PYTHON".to_string(), vec![2, 3]));
    // a permuted view is made contiguous on its way
    let y = (p.permute([1, 0]) + 10).to("cpu");
    assert_eq!(y.device(), "CPU");
    assert_eq!(y.to_vec::<i32>().unwrap(), [11, 14, 8, 15, 13, 16]);
    assert_eq!(x.to("CPU:0").device(), "CPU", "a tensor already there is itself");
}

#[test]
fn gradients_flow_back_across_a_copy() {
    let x = Tensor::from_slice(&[1.0f32, 2.0, 3.0], [3]).requires_grad_(true).clone();
    let loss = (x.to("PYTHON") * &Tensor::from_slice(&[4.0f32, 5.0, 6.0], [3]).to("PYTHON")).sum(..);
    loss.backward();
    let g = x.grad().expect("x has a gradient");
    assert_eq!(g.device(), "CPU");
    assert_eq!(g.to_vec::<f32>().unwrap(), [4.0, 5.0, 6.0]);
}

#[test]
#[should_panic(expected = "one kernel uses tensors on CPU and on PYTHON")]
fn mixing_devices_panics_naming_both() {
    let a = Tensor::from_slice(&[1.0f32, 2.0], [2]);
    let b = Tensor::from_slice(&[1.0f32, 2.0], [2]).to("PYTHON").realize().unwrap().clone();
    let _ = (&a + &b).realize();
}

#[test]
#[should_panic(expected = "to: unknown device \"FOO\"")]
fn an_unknown_device_panics() {
    let _ = Tensor::from_slice(&[1.0f32], [1]).to("FOO");
}

/// A long sum into one value and a max into two: the hand-coded opts split them over a workgroup (GROUPTOP) on
/// targets with shared memory; the results are exact (small integers). Under SPEC=1: the lowered groups (partials
/// stored into workgroup memory, a BARRIER, a second loop) pass the kernel spec.
fn grouped_reductions(dev: &str) {
    let _dev = Context::new(&[(&tinygrad::helpers::SPEC, 1)]).dev(dev);
    let n = 4096;
    let x = Tensor::from_slice(&(0..n).map(|i| (i % 7) as f32).collect::<Vec<_>>(), [n]);
    let y = Tensor::from_slice(&(0..2 * n).map(|i| ((i * 31) % 1000) as f32).collect::<Vec<_>>(), [2, n]);
    let sum: f32 = (0..n).map(|i| (i % 7) as f32).sum();
    assert_eq!(x.sum(..).to_vec::<f32>().unwrap(), [sum], "{dev}");
    assert_eq!(y.max(1).to_vec::<f32>().unwrap(), [999.0, 999.0], "{dev}");
    let ren = if dev == "PYTHON" { tinygrad::renderer::Renderer::python() } else { tinygrad::renderer::Renderer::opencl(false) };
    let ast = tinygrad::schedule::create_schedule(&[x.sum(..).uop()], &ren).items[0].ast.clone();
    let opts = tinygrad::codegen::opt::heuristic::hand_coded_optimizations(&tinygrad::codegen::kernel(&ast, &ren));
    assert_eq!(opts.first().map(|o| o.op), Some(tinygrad::codegen::OptOps::GroupTop), "{dev}: {opts:?}");
    // 64 sums of 8 x 20 x 10 (no axis of 64 or more, as a split BatchNorm statistic has): 8 threads share each
    let z = Tensor::from_slice(&(0..64 * 1600).map(|i| ((i * 13) % 9) as f32).collect::<Vec<_>>(), [64, 8, 20, 10]);
    let want: Vec<f32> = (0..64).map(|o| (0..1600).map(|i| (((o * 1600 + i) * 13) % 9) as f32).sum()).collect();
    assert_eq!(z.sum([1, 2, 3]).to_vec::<f32>().unwrap(), want, "{dev}");
    let ast = tinygrad::schedule::create_schedule(&[z.sum([1, 2, 3]).uop()], &ren).items[0].ast.clone();
    let opts = tinygrad::codegen::opt::heuristic::hand_coded_optimizations(&tinygrad::codegen::kernel(&ast, &ren));
    assert!(opts.iter().any(|o| o.op == tinygrad::codegen::OptOps::GroupTop && o.arg == 8), "{dev}: {opts:?}");
}

#[test]
fn grouped_reductions_on_the_interpreter() {
    grouped_reductions("PYTHON");
}

#[test]
fn grouped_reductions_on_opencl() {
    match tinygrad::runtime::cl::device() {
        Ok(_) => grouped_reductions("CL"),
        Err(e) => {
            assert!(std::env::var_os("CI").is_none(), "CI must have an OpenCL device (.ci/run installs PoCL): {e}");
            eprintln!("skipping: {e}");
        }
    }
}

#[test]
fn cuda_without_a_gpu_is_an_error_that_says_so() {
    if tinygrad::runtime::cuda::device().is_ok() {
        return eprintln!("this machine has a CUDA device");
    }
    let err = Tensor::from_slice(&[1.0f32, 2.0], [2]).to("CUDA").realize().map(drop).unwrap_err().to_string();
    assert!(err.contains("no CUDA device or driver found"), "{err}");
}

/// A grid whose second dimension would pass 65535 workgroups (CUDA's limit) is folded into the first.
#[test]
fn a_tall_grid_folds_into_one_dimension() {
    let _dev = Context::new(&[]).dev("PYTHON");
    let (rows, cols) = (65537usize, 3usize);
    let t = Tensor::from_slice(&(0..rows * cols).map(|i| i as i32).collect::<Vec<_>>(), [rows, cols]) + 1;
    let ast = tinygrad::schedule::create_schedule(&[t.uop()], &tinygrad::renderer::Renderer::python()).items[0].ast.clone();
    for ren in [tinygrad::renderer::Renderer::python(), tinygrad::renderer::Renderer::cuda()] {
        let k = tinygrad::codegen::full_rewrite(&ast, &ren, None).unwrap();
        assert!(k.global_size[1] <= 65535 && k.global_size[2] <= 65535, "{}: {:?}", ren.device, k.global_size);
        assert_eq!(k.global_size.iter().product::<usize>() * k.local_size.iter().product::<usize>(), rows * cols, "{}", ren.device);
    }
    let v = t.to_vec::<i32>().unwrap();
    assert!(v.iter().enumerate().all(|(i, &x)| x == i as i32 + 1));
}

/// A tensor of no elements launches nothing, however large its other axes (the fuzzed GGUF reader met one).
#[test]
fn an_empty_tensor_with_a_huge_axis_computes_nothing() {
    let t = Tensor::zeros([0usize, 1 << 40]) + 1.0f32;
    assert_eq!(t.to_vec::<f32>().unwrap(), Vec::<f32>::new());
}

/// An empty tensor on a GPU-shaped device: its kernel's grid has an axis of size 0, which it compiles (not
/// launches) without dividing by that size (onnx's `test_tril_zero` panicked in the grid's folding on CUDA).
#[test]
fn an_empty_tensor_on_a_grid_computes_nothing() {
    let _dev = Context::new(&[]).dev("PYTHON");
    let t = Tensor::ones([3usize, 0, 5]).contiguous().triu(1) * 2.0f32;
    assert_eq!((t.shape(), t.to_vec::<f32>().unwrap()), (vec![3, 0, 5], Vec::<f32>::new()));
}

/// float16 vectors: rows of halves read, converted, scaled and written back as halves, and summed in float32 (exact:
/// small integers and their triples are halves).
#[test]
fn half_vectors_load_convert_and_store() {
    use tinygrad::dtypes::{FLOAT16, FLOAT32};
    let v: Vec<f32> = (0..4096).map(|i| ((i * 37) % 251) as f32 - 125.0).collect();
    let h = Tensor::from_slice(&v, [16, 256]).cast(FLOAT16).realize().unwrap().clone();
    let tripled = (h.cast(FLOAT32) * 3.0f32).cast(FLOAT16).cast(FLOAT32);
    assert_eq!(tripled.to_vec::<f32>().unwrap(), v.iter().map(|x| x * 3.0).collect::<Vec<_>>());
    let sums: Vec<f32> = v.chunks(256).map(|c| c.iter().sum()).collect();
    assert_eq!(h.cast(FLOAT32).sum(1).to_vec::<f32>().unwrap(), sums);
}

/// Byte vectors: a max over uint8 lanes (the comparison mask is as wide as the bytes) and a widening cast.
#[test]
fn byte_vectors_reduce_and_widen() {
    let v: Vec<u8> = (0..4096u32).map(|i| ((i * 37) % 251) as u8).collect();
    let t = Tensor::from_slice(&v, [16, 256]);
    let want: Vec<u8> = v.chunks(256).map(|c| *c.iter().max().unwrap()).collect();
    assert_eq!(t.max(1).to_vec::<u8>().unwrap(), want);
    let sums: Vec<f32> = v.chunks(256).map(|c| c.iter().map(|&x| f32::from(x)).sum()).collect();
    assert_eq!(t.cast(tinygrad::dtypes::FLOAT32).sum(1).to_vec::<f32>().unwrap(), sums);
}
