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

/// A replay launches the capture as a graph made for the order of swaps it first sees (engine::graph); a replay
/// swapping the same buffers in another order launches item by item: both compute the function on the new buffers.
#[test]
fn replays_compute_the_function_whatever_the_order_of_swaps() {
    let t = |v: f32| {
        let t = Tensor::from(vec![v; 64]);
        t.realize().unwrap();
        t
    };
    let buf = |t: &Tensor| schedule::contiguous_buffer(&t.uop()).unwrap().clone();
    let (x, y) = (t(1.0), t(2.0));
    let (out, mut kernels) = engine::capture(|| {
        let o = (&chain(&x) + &y).contiguous();
        o.realize().unwrap();
        o
    });
    kernels.adopt(&[buf(&out)]);
    let read = |b: &tinygrad::UOp| Tensor::from_uop(b.clone()).to_vec::<f32>().unwrap();
    // ((x + 1) * 2 + 3) * 0.5 + y
    for (i, (xv, yv)) in [(3.0f32, 5.0f32), (-1.0, 0.5), (10.0, -4.0)].into_iter().enumerate() {
        let (x2, y2, o2) = (t(xv), t(yv), engine::new_buffer_like(&buf(&out)));
        let mut swap = vec![(buf(&x), buf(&x2)), (buf(&y), buf(&y2)), (buf(&out), o2.clone())];
        if i == 1 {
            swap.reverse();
        }
        kernels.replay(&swap, &[]).unwrap();
        assert_eq!(read(&o2), vec![((xv + 1.0) * 2.0 + 3.0) * 0.5 + yv; 64], "replay {i}");
    }
    assert_eq!(out.to_vec::<f32>().unwrap(), vec![5.5; 64], "the captured output stays as the capture left it");
}
