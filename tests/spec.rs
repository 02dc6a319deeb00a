//! SPEC=1: every graph the scheduler and codegen produce is checked against `uop::spec` after each pass. A
//! beautiful_mnist training step (convolutions, BatchNorm, pooling, cross-entropy, backward, Adam), random
//! numbers, a gather and a jitted step pass the spec with the default opts and with NOOPT=1; malformed graphs
//! are caught, naming the pass. (tests/conformance.rs runs tinygrad's op vectors under SPEC=1 too.)

#[path = "../examples/beautiful_mnist/model.rs"]
mod model;

use std::panic::{catch_unwind, AssertUnwindSafe};
use tinygrad::codegen::full_rewrite;
use tinygrad::dtype::{dtypes, AddrSpace};
use tinygrad::helpers::{Context, NOOPT, SPEC};
use tinygrad::nn::{optim, Module};
use tinygrad::renderer::Renderer;
use tinygrad::schedule::create_schedule;
use tinygrad::uop::{Arg, AxisType, BufferInfo};
use tinygrad::{Ops, Tensor, TinyJit, UOp};

/// The training-step losses of 3 steps on one batch of 16, under `SPEC=1` (and `noopt`).
fn train_losses(noopt: i64) -> Vec<f32> {
    let _spec = Context::new(&[(&SPEC, 1), (&NOOPT, noopt)]);
    Tensor::manual_seed(7);
    let m = model::Model::new();
    let opt = optim::adam_with(&m.get_parameters(), optim::AdamOpts::default());
    let x = Tensor::rand([16, 1, 28, 28]) * 255.0;
    let y = Tensor::randint([16], 0, 10);
    (0..3).map(|_| m.train_step(&opt, &x, &y).unwrap().item::<f32>().unwrap()).collect()
}

#[test]
fn a_training_step_passes_the_spec() {
    for noopt in [0, 1] {
        let l = train_losses(noopt);
        assert!(l.iter().all(|v| v.is_finite()), "NOOPT={noopt}: {l:?}");
        assert!(l[2] < l[0], "NOOPT={noopt}: Adam on one batch lowers the loss: {l:?}");
    }
}

#[test]
fn gathers_reductions_and_a_jitted_step_pass_the_spec() {
    let _spec = Context::new(&[(&SPEC, 1)]);
    let table = Tensor::from_slice(&(0..40).map(|i| i as f32).collect::<Vec<_>>(), [10, 4]);
    let rows = Tensor::from_slice(&[3i32, 0, 9], [3]);
    assert_eq!(table.getitem(&[(&rows).into()]).sum(1).to_vec::<f32>().unwrap(), [54.0, 6.0, 150.0]);
    let big = Tensor::from_slice(&vec![1.0f32; 1 << 16], [1 << 16]);
    assert_eq!(big.sum(..).item::<f32>().unwrap(), 65536.0);
    assert_eq!(Tensor::arange(0.0, 6.0, 1.0).reshape([2, 3]).max(1).to_vec::<i32>().unwrap(), [2, 5]);
    let mut step = TinyJit::new(|io: &[Tensor]| {
        let out = (&io[0] * 2.0 + 1.0).softmax(-1);
        out.realize()?;
        Ok(vec![out])
    });
    for k in 0..3 {
        let out = step.call(&[Tensor::from_slice(&[k as f32, 0.0], [2])]).unwrap()[0].to_vec::<f32>().unwrap();
        let e = (2.0 * k as f32).exp();
        assert!((out[0] - e / (e + 1.0)).abs() < 1e-6, "call {k}: {out:?}");
    }
}

fn global(slot: i64, n: i64) -> UOp {
    UOp::new(Ops::DEFINE_GLOBAL, dtypes::FLOAT32.ptr(n, AddrSpace::Global), [], Arg::Int(slot))
}

#[test]
fn a_malformed_kernel_is_caught_naming_the_codegen_pass() {
    // out[r] = (int32) in[r]: a store of an int32 value into a float32 buffer
    let r = UOp::range(UOp::const_(dtypes::WEAKINT, 8), 0, AxisType::Loop);
    let index = |g: UOp| UOp::new(Ops::INDEX, g.dtype, [g, r.clone()], Arg::None);
    let val = UOp::new(Ops::LOAD, dtypes::FLOAT32, [index(global(1, 8))], Arg::None).cast(dtypes::INT32);
    let ast = UOp::sink(vec![UOp::new(Ops::STORE, dtypes::VOID, [index(global(0, 8)), val], Arg::None)]);
    let err = catch_unwind(AssertUnwindSafe(|| Context::with(&[(&SPEC, 1)], || full_rewrite(&ast, &Renderer::cpu(), None).map(drop))))
        .expect_err("SPEC=1 rejects the store");
    let msg = err.downcast_ref::<String>().expect("a formatted panic message");
    assert!(msg.starts_with("SPEC: the graph after pass `simplify and reduce collapse` is malformed"), "{msg}");
    assert!(msg.contains("STORE dtypes.void [%") && msg.contains("CAST dtypes.int"), "names the node and its sources: {msg}");
    // with SPEC=0 nothing is checked
    assert!(Context::with(&[(&SPEC, 0)], || full_rewrite(&ast, &Renderer::cpu(), None)).is_ok());
}

#[test]
fn a_malformed_tensor_graph_is_caught_before_scheduling() {
    let buf = |n| UOp::new(Ops::BUFFER, dtypes::FLOAT32, [], Arg::Buffer(BufferInfo::new(n, "CPU")));
    // an elementwise op over shapes (4,) and (8,): broadcasting was skipped
    let add = UOp::new(Ops::ADD, dtypes::FLOAT32, [buf(4), buf(8)], Arg::None);
    let err = catch_unwind(AssertUnwindSafe(|| {
        Context::with(&[(&SPEC, 1)], || create_schedule(std::slice::from_ref(&add), &tinygrad::renderer::Renderer::cpu()).items.len())
    }))
    .expect_err("SPEC=1 rejects the add");
    let msg = err.downcast_ref::<String>().expect("a formatted panic message");
    assert!(msg.starts_with("SPEC: the graph after pass `schedule input` is malformed at node 2, ADD dtypes.float"), "{msg}");
}
