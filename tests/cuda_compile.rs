//! CUDA without a GPU (as CI proves the CUDA renderer): every kernel the conformance suite and a beautiful_mnist
//! training step make, rendered for CUDA with the hand-coded opts and with none, compiled by NVRTC to PTX for
//! sm_80 and sm_90 and assembled by ptxas. Skipped with a note where NVRTC or ptxas is missing, except under CI
//! (`.ci/run` installs them from PyPI).

#[path = "../examples/conformance/dispatch.rs"]
mod dispatch;
#[path = "../examples/conformance/dispatch_math.rs"]
mod dispatch_math;
#[path = "../examples/conformance/dispatch_movement.rs"]
mod dispatch_movement;
#[path = "../examples/conformance/dispatch_nn.rs"]
mod dispatch_nn;
#[path = "../examples/beautiful_mnist/model.rs"]
#[allow(dead_code)]
mod model;
#[path = "../examples/conformance/runner.rs"]
mod runner;

use tinygrad::codegen::{full_rewrite, Opt, OptOps};
use tinygrad::helpers::{Context, TRAINING};
use tinygrad::nn::{optim, Module};
use tinygrad::renderer::Renderer;
use tinygrad::runtime::cuda::{ptxas, NvrtcCompiler};
use tinygrad::runtime::Compiler;
use tinygrad::tensor::Reduction;
use tinygrad::{Tensor, UOp};

/// The ASTs of a beautiful_mnist training step (forward, backward, Adam).
fn mnist_step() -> Vec<UOp> {
    let model = model::Model::new();
    let opt = optim::adam_with(&model.get_parameters(), optim::AdamOpts::default());
    let _training = Context::new(&[(&TRAINING, 1)]);
    let x = Tensor::from_slice(&vec![0.5f32; 512 * 28 * 28], [512, 1, 28, 28]);
    let y = Tensor::from_slice(&(0..512).map(|i: i32| i % 10).collect::<Vec<_>>(), [512]);
    opt.zero_grad();
    let loss = model.forward(&x).sparse_categorical_crossentropy(&y, -1, 0.0, Reduction::Mean);
    loss.backward();
    let roots: Vec<UOp> = std::iter::once(loss).chain(opt.schedule_step()).map(|t| t.uop()).collect();
    tinygrad::schedule::create_schedule(&roots, &tinygrad::renderer::Renderer::python()).items.into_iter().map(|i| i.ast).collect()
}

/// Half and bf16 matmuls (one batched, one with a bias and relu), which the hand-coded opts put on tensor cores.
fn tc_matmuls() -> Vec<UOp> {
    let mut roots = Vec::new();
    for dt in [tinygrad::dtypes::FLOAT16, tinygrad::dtypes::BFLOAT16] {
        let t = |shape: &[usize]| Tensor::from_slice(&vec![1.0f32; shape.iter().product()], shape.to_vec()).cast(dt);
        roots.push(t(&[64, 128]).matmul(&t(&[128, 32])).uop());
        roots.push(t(&[2, 32, 64]).matmul(&t(&[2, 64, 16])).uop());
        roots.push((t(&[16, 256]).matmul(&t(&[256, 64])) + t(&[64])).relu().uop());
    }
    tinygrad::schedule::create_schedule(&roots, &tinygrad::renderer::Renderer::python())
        .items
        .into_iter()
        .map(|i| i.ast)
        .filter(|a| a.toposort().iter().any(|u| u.op == tinygrad::Ops::REDUCE))
        .collect()
}

/// Compiles `srcs` (kernels with distinct names) as one NVRTC program for `arch` and assembles it; on a failure,
/// finds the kernel that fails alone and panics with its source and the compiler's message.
fn check(cc: &NvrtcCompiler, arch: &str, srcs: &[String]) {
    let together = cc.compile("batch", &srcs.concat()).and_then(|c| ptxas(&c.object, arch));
    if together.is_ok() {
        return;
    }
    for src in srcs {
        if let Err(e) = cc.compile("kernel", src).and_then(|c| ptxas(&c.object, arch)) {
            panic!("{arch}: {e}\n{src}");
        }
    }
    panic!("{arch}: the kernels compile one by one but not together: {together:?}");
}

#[test]
fn every_kernel_compiles_for_sm80_and_sm90() {
    let compilers: Vec<(&str, tinygrad::Result<NvrtcCompiler>)> =
        ["sm_80", "sm_90"].into_iter().map(|a| (a, NvrtcCompiler::new(a))).collect();
    // (ptxas is found as NVRTC is, or not: try it on an empty module)
    let ptxas_found = match ptxas(b".version 7.0\n.target sm_80\n.address_size 64\n", "sm_80") {
        Err(tinygrad::Error::Device { msg, .. }) => Err(msg),
        _ => Ok(()),
    };
    let missing = compilers.iter().find_map(|c| c.1.as_ref().err().map(|e| e.to_string())).or(ptxas_found.err());
    if let Some(e) = missing {
        assert!(std::env::var_os("CI").is_none(), "CI must have NVRTC and ptxas (.ci/run installs them from PyPI): {e}");
        eprintln!("skipping: {e}");
        return;
    }
    let dir = std::env::var("TINYGRAD_CONFORMANCE_DIR")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/conformance/ops").into());
    let (passed, failed) = {
        let _dev = Context::new(&[]).dev("PYTHON");
        runner::run_dir(std::path::Path::new(&dir))
    };
    assert!(passed > 0 && failed.is_empty(), "conformance on PYTHON: {passed} passed, {} failed", failed.len());
    let mut asts = tinygrad::engine::compiled_asts("PYTHON").unwrap();
    asts.extend(mnist_step());
    asts.extend(tc_matmuls());
    // kernels reading a symbolic variable (its value a kernel parameter)
    let table = Tensor::from_slice(&[1.0f32; 64], [64]);
    let pos = Tensor::bind_var("start_pos", 0, 63, 5);
    let read = Tensor::arange(0.0, 64.0, 1.0).eq(&pos).where_(&table, 0.0f32).sum(..);
    let roots = [read.uop(), (Tensor::arange(0.0, 3.0, 1.0) + &pos).uop()];
    let var_asts: Vec<UOp> =
        tinygrad::schedule::create_schedule(&roots, &tinygrad::renderer::Renderer::python()).items.into_iter().map(|i| i.ast).collect();
    assert!(var_asts.iter().any(|a| a.toposort().iter().any(|u| u.op == tinygrad::Ops::DEFINE_VAR)));
    asts.extend(var_asts);
    asts.sort_by_key(|a| a.key());
    asts.dedup();
    let ren = Renderer::cuda();
    let mut srcs = Vec::new();
    for (i, ast) in asts.iter().enumerate() {
        for (j, opts) in [None, Some(&[] as &[Opt])].into_iter().enumerate() {
            let mut k = full_rewrite(ast, &ren, opts).expect("the hand-coded opts are legal");
            k.name = format!("k{i}_{j}");
            srcs.push(ren.render(&k));
        }
    }
    // tensor cores: the hand-coded opts chose them above; here alone and with unrolled tiles
    let tc = Opt::new(OptOps::Tc, 0, 0);
    for (i, ast) in tc_matmuls().iter().enumerate() {
        let k = tinygrad::codegen::kernel(ast, &ren);
        assert_eq!(tinygrad::codegen::opt::heuristic::hand_coded_optimizations(&k).first().map(|o| o.op), Some(OptOps::Tc));
        let tc = Opt { arg: ren.tensor_cores.iter().position(|t| ast.toposort().iter().any(|u| u.dtype == t.dtype_in)).unwrap(), ..tc };
        for (j, opts) in [vec![tc], vec![tc, Opt::new(OptOps::Unroll, 0, 2), Opt::new(OptOps::Upcast, 0, 2)]].iter().enumerate() {
            let mut k = full_rewrite(ast, &ren, Some(opts)).expect("TC fits these matmuls");
            k.name = format!("tc{i}_{j}");
            srcs.push(ren.render(&k));
        }
    }
    assert!(srcs.iter().any(|s| s.contains("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32")));
    println!("{} kernels ({} ASTs, with and without opts)", srcs.len(), asts.len());
    for (arch, cc) in &compilers {
        let cc = cc.as_ref().expect("checked above");
        srcs.chunks(64).for_each(|batch| check(cc, arch, batch));
    }
}
