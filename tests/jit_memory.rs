//! A capture's memory: the buffers a captured function makes for itself are twins without memory while it runs
//! (so the run frees them after their last use), and a TinyJit's replays share memory among those whose uses don't
//! overlap (tinygrad's JIT memory planner).

use rustc_hash::FxHashSet;
use tinygrad::{engine, schedule, Tensor, TinyJit};

/// `x` through four kernels (each `contiguous`): (((x + 1) * 2) + 3) * 0.5.
fn chain(x: &Tensor) -> Tensor {
    let a = (x + 1.0).contiguous();
    let b = (&a * 2.0).contiguous();
    let c = (&b + 3.0).contiguous();
    (&c * 0.5).contiguous()
}

#[test]
fn intermediates_share_memory_where_their_uses_dont_overlap() {
    let x = Tensor::from(vec![1.0f32; 1024]);
    x.realize().unwrap();
    let (d, mut kernels) = engine::capture(|| {
        let d = chain(&x);
        d.realize().unwrap();
        d
    });
    let distinct = |k: &engine::Kernels| k.buffers().cloned().collect::<FxHashSet<_>>().len();
    // x, a, b, c, d
    assert_eq!(distinct(&kernels), 5);
    let keep: Vec<_> = [&x, &d].iter().map(|t| schedule::contiguous_buffer(&t.uop()).unwrap().clone()).collect();
    kernels.adopt(&keep[1..]);
    kernels.plan_memory(&keep);
    // a's memory is free once b is computed: c takes it
    assert_eq!(distinct(&kernels), 4);
    assert!(kernels.buffers().any(|b| *b == keep[1]), "the output stays the function's own buffer");
}

#[test]
fn replays_of_a_planned_capture_compute_the_function() {
    let mut f = TinyJit::new(|x: &[Tensor]| Ok(vec![chain(&x[0])]));
    for i in 0..5 {
        let v: Vec<f32> = (0..1024).map(|j| (i * 1024 + j) as f32 * 0.01).collect();
        let got = f.call(&[Tensor::from(v.clone())]).unwrap().remove(0).to_vec::<f32>().unwrap();
        let want: Vec<f32> = v.iter().map(|x| ((x + 1.0) * 2.0 + 3.0) * 0.5).collect();
        assert_eq!(got, want, "call {i}");
    }
}
