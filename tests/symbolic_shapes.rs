//! Symbolic shapes (tinygrad `sint`): a dim bound to a variable's value flows through the graph, so its kernels loop
//! to the variable. Each result is checked against the same graph built with concrete shapes.

use tinygrad::helpers::Context;
use tinygrad::{Sint, Tensor};

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
/// results, and some kernel of the symbolic runs loops to the variable.
fn symbolic_equals_concrete(name: &str, f: impl Fn(&Tensor, &Tensor) -> Tensor) {
    let _dev = Context::new(&[]).dev("CPU");
    for i in 1..=8usize {
        let (a, b) = (Tensor::from_slice(&data(3 * i, i), [3, i]), Tensor::from_slice(&data(5 * i, i + 1), [i, 5]));
        let want = f(&a, &b).to_vec::<f32>().unwrap();
        let vi = Sint::bound(name, 1, 10, i);
        let (sa, sb) = (a.reshape_sym(&[3.into(), vi.clone()]), b.reshape_sym(&[vi.clone(), 5.into()]));
        let got = f(&sa, &sb).to_vec::<f32>().unwrap();
        close(&got, &want, &format!("{name} at i={i}"));
    }
    let asts = tinygrad::engine::compiled_asts("CPU").unwrap();
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
fn softmax_along_a_symbolic_dim() {
    symbolic_equals_concrete("softmax", |a, _| a.softmax(-1).sum(1));
}
