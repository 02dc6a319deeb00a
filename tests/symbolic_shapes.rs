//! Symbolic shapes (tinygrad `sint`): a dim bound to a variable's value flows through the graph, so its kernels loop
//! to the variable. Each result is checked against the same graph built with concrete shapes.

use tinygrad::helpers::Context;
use tinygrad::schedule::schedule_count;
use tinygrad::{Sint, Tensor, TinyJit};

/// Deterministic values in `[-1, 1)`.
fn data(n: usize, seed: usize) -> Vec<f32> {
    (0..n).map(|i| (((i * 7919 + seed * 104729) % 1000) as f32) / 500.0 - 1.0).collect()
}

fn close(a: &[f32], b: &[f32], what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: lengths");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!((x - y).abs() <= 1e-4 * (1.0 + y.abs()), "{what}: element {i}: {x} vs {y}");
    }
}

/// `f` on `(3, i)` and `(i, 5)` inputs for i in 1..=8, concrete and with `i` a variable named `name`: equal
/// results, and (on the CPU) some kernel of the symbolic runs loops to the variable.
fn symbolic_equals_concrete(name: &str, f: impl Fn(&Tensor, &Tensor) -> Tensor) {
    symbolic_equals_concrete_on("CPU", name, f);
}

fn symbolic_equals_concrete_on(dev: &str, name: &str, f: impl Fn(&Tensor, &Tensor) -> Tensor) {
    let _dev = Context::new(&[]).dev(dev);
    for i in 1..=8usize {
        let (a, b) = (Tensor::from_slice(&data(3 * i, i), [3, i]), Tensor::from_slice(&data(5 * i, i + 1), [i, 5]));
        let want = f(&a, &b).to_vec::<f32>().unwrap();
        let vi = Sint::bound(name, 1, 10, i);
        let (sa, sb) = (a.reshape_sym(&[3.into(), vi.clone()]), b.reshape_sym(&[vi.clone(), 5.into()]));
        let got = f(&sa, &sb).to_vec::<f32>().unwrap();
        close(&got, &want, &format!("{name} at i={i}"));
    }
    // (devices with a launch grid, the interpreter's too, run symbolic graphs at their bound values)
    if dev != "CPU" {
        return;
    }
    let asts = tinygrad::engine::compiled_asts(dev).unwrap();
    assert!(asts.iter().any(|a| a.toposort().iter().any(|u| u.var_name() == name)), "no kernel loops to {name}");
}

#[test]
fn elementwise_over_a_symbolic_dim() {
    symbolic_equals_concrete("add", |a, _| (a * 2.0 + a).exp());
}

#[test]
fn reductions_along_and_across_a_symbolic_dim() {
    symbolic_equals_concrete("sum", |a, _| a.sum(1).reshape([3, 1]) + a.max(0).sum(..));
}

#[test]
fn matmul_contracting_a_symbolic_dim() {
    symbolic_equals_concrete("matmul", |a, b| a.matmul(b));
}

#[test]
fn matmul_and_softmax_on_the_interpreter() {
    symbolic_equals_concrete_on("PYTHON", "py", |a, b| a.matmul(b).softmax(-1) + a.sum(1).reshape([3, 1]));
}

#[test]
fn softmax_along_a_symbolic_dim() {
    symbolic_equals_concrete("softmax", |a, _| a.softmax(-1).sum(1));
}

/// A TinyJit over inputs with a symbolic dim (views of buffers sized for its max): the run at a second value
/// confirms the capture, and every later value replays it without scheduling, each result equal to the concrete
/// graph's.
#[test]
fn tinyjit_replays_one_capture_for_every_size() {
    let _dev = Context::new(&[]).dev("CPU");
    let f = |x: &[Tensor]| Ok(vec![(x[0].matmul(&x[1]).relu() + &x[0].sum(1).reshape([3, 1])).softmax(-1)]);
    let mut jit = TinyJit::new(f);
    let (big_a, big_b) = (Tensor::from_slice(&data(30, 1), [3, 10]), Tensor::from_slice(&data(50, 2), [10, 5]));
    Tensor::realize_all(&[&big_a, &big_b]).unwrap();
    for (call, i) in [3usize, 5, 7, 2, 9, 10, 1, 4].into_iter().enumerate() {
        let vi = Sint::bound("n", 1, 10, i);
        let a = big_a.shrink_sym(&[(0.into(), 3.into()), (0.into(), vi.clone())]);
        let b = big_b.shrink_sym(&[(0.into(), vi), (0.into(), 5.into())]);
        let before = schedule_count();
        let got = jit.call(&[a, b]).unwrap().remove(0);
        let scheduled = schedule_count() - before;
        let (ca, cb) = (big_a.shrink(&[(0, 3), (0, i)]), big_b.shrink(&[(0, i), (0, 5)]));
        let want = f(&[ca, cb]).unwrap().remove(0).to_vec::<f32>().unwrap();
        assert_eq!(got.shape(), [3, 5], "call {call}");
        close(&got.to_vec::<f32>().unwrap(), &want, &format!("jit at n={i}"));
        if call >= 3 {
            assert_eq!(scheduled, 1, "call {call} (n={i}) scheduled {scheduled} times: only the inputs' copies may, together");
        }
    }
}

/// A function that reads a symbolic dim's value as a number builds other kernels at other values: the run at a
/// second value finds that, and each later value runs the function (no replay with the first value's number).
#[test]
fn tinyjit_runs_a_function_that_bakes_in_a_size() {
    let _dev = Context::new(&[]).dev("CPU");
    let f = |x: &[Tensor]| Ok(vec![&x[0] * x[0].shape()[1] as f32]);
    let mut jit = TinyJit::new(f);
    let big = Tensor::from_slice(&data(30, 3), [3, 10]);
    big.realize().unwrap();
    for i in [3usize, 5, 7, 2, 9] {
        let a = big.shrink_sym(&[(0.into(), 3.into()), (0.into(), Sint::bound("m", 1, 10, i))]);
        let got = jit.call(&[a]).unwrap().remove(0).to_vec::<f32>().unwrap();
        let want = f(&[big.shrink(&[(0, 3), (0, i)])]).unwrap().remove(0).to_vec::<f32>().unwrap();
        close(&got, &want, &format!("m={i}"));
    }
}

/// A symbolic dim from a bound variable among the inputs (a decode step's span in blocks), captured while its value
/// is 1: reductions over it keep it (not dropped as a dim of 1), and a reshape that splits rows into (blocks, 4)
/// beside a stack's new dim groups by symbol, so every later value replays the capture with the concrete graph's
/// results and nothing scheduled.
#[test]
fn tinyjit_captured_at_a_symbolic_dim_of_1_replays_other_values() {
    jit_over_blocks("CPU");
}

/// As [`tinyjit_captured_at_a_symbolic_dim_of_1_replays_other_values`] on the interpreter, whose launch grid fixes
/// symbolic dims at their bound values: each value gets a capture of its own (replays at a value seen before).
#[test]
fn tinyjit_captures_each_value_a_launch_grid_bakes_in() {
    jit_over_blocks("PYTHON");
}

fn jit_over_blocks(dev: &str) {
    let _dev = Context::new(&[]).dev(dev);
    let rows = Tensor::from_slice(&data(16 * 6, 4), [16, 6]);
    rows.realize().unwrap();
    let at = |x: &Tensor, n: &Sint| {
        let s = x.stack(&[x], 0).shrink_sym(&[(0.into(), 2.into()), (0.into(), &Sint::Int(4) * n), (0.into(), 6.into())]);
        let s = s.reshape_sym(&[2.into(), n.clone(), 4.into(), 2.into(), 3.into()]).permute([0, 3, 4, 1, 2]);
        let e = (&s - s.max_keepdim(vec![3usize, 4])).exp().contiguous();
        e.sum_keepdim(vec![3usize, 4]).reshape([2, 2, 3]) + s.sum(vec![3usize, 4])
    };
    let r = rows.clone();
    let mut jit = TinyJit::new(move |x: &[Tensor]| Ok(vec![at(&r, &Sint::from_uop(&x[0].uop()))]));
    let mut seen = std::collections::HashMap::new();
    for n in [1usize, 1, 1, 2, 4, 3, 1, 2, 2, 2, 4] {
        let before = schedule_count();
        let got = jit.call(&[Tensor::bind_var("blocks", 1, 4, n as i64)]).unwrap().remove(0);
        // (a capture at the first value serves all on the CPU; on the interpreter each value's third call replays)
        let calls = *seen.entry(n).and_modify(|c| *c += 1).or_insert(1);
        if (dev == "CPU" && seen.values().sum::<usize>() > 2) || calls > 2 {
            assert_eq!(schedule_count(), before, "call at blocks={n} scheduled");
        }
        let want = at(&rows, &Sint::Int(n)).to_vec::<f32>().unwrap();
        close(&got.to_vec::<f32>().unwrap(), &want, &format!("blocks={n}"));
    }
}

/// A kernel looping over a symbolic dim counts its operations at the dim's largest value, as the CPU decides at load
/// whether its launches split over the cores (an LLM's attention over `span_blocks` blocks of keys, counted at one
/// block, ran on one core at every span).
#[test]
fn a_symbolic_loop_counts_its_operations_at_its_largest() {
    use tinygrad::codegen::full_rewrite;
    use tinygrad::renderer::Renderer;
    use tinygrad::schedule::create_schedule;
    let big = Tensor::from_slice(&data(64 * 4096, 5), [64, 4096]);
    big.realize().unwrap();
    let rows = Sint::bound("rows", 1, 4096, 1);
    let t = big.shrink_sym(&[(0.into(), 64.into()), (0.into(), rows)]).sum_keepdim(1);
    let s = create_schedule(&[t.uop()], &Renderer::cpu());
    let ops: Vec<u64> = s.items.iter().map(|i| full_rewrite(&i.ast, &Renderer::cpu(), None).unwrap().ops).collect();
    assert!(ops.iter().any(|&n| n >= 64 * 4096), "ops per kernel {ops:?}: the sum over up to 4096 rows counted as fewer");
}

/// An elementwise kernel over a symbolic dim counts its size at the dim's largest when deciding on vectors: a decode
/// step's softmax exponentials over 9 heads x `blocks` x 32 keys (288 elements at one block) get vector lanes.
#[test]
fn a_symbolic_elementwise_kernel_is_vectorized_at_its_largest() {
    use tinygrad::codegen::{kernel, opt::heuristic::hand_coded_optimizations, OptOps};
    use tinygrad::renderer::Renderer;
    use tinygrad::schedule::create_schedule;
    let big = Tensor::from_slice(&data(9 * 64 * 32, 6), [9, 64, 32]);
    big.realize().unwrap();
    let blocks = Sint::bound("blocks", 1, 64, 2);
    let t = big.shrink_sym(&[(0.into(), 9.into()), (0.into(), blocks), (0.into(), 32.into())]).exp();
    let ast = create_schedule(&[t.uop()], &Renderer::cpu()).items[0].ast.clone();
    let opts = hand_coded_optimizations(&kernel(&ast, &Renderer { vector_bytes: 64, ..Renderer::cpu() }));
    assert!(opts.iter().any(|o| o.op == OptOps::Upcast && o.arg >= 8), "opts {opts:?}: no vector lanes");
    let want: Vec<f32> = data(9 * 64 * 32, 6).chunks(64 * 32).flat_map(|h| h[..64].iter().map(|x| x.exp()).collect::<Vec<_>>()).collect();
    let got = t.to_vec::<f32>().unwrap();
    assert_eq!(got.len(), want.len());
    assert!(got.iter().zip(&want).all(|(g, w)| (g - w).abs() <= 1e-6 * w.abs().max(1.0)), "values");
}
