//! Deep graphs (issue 17): a long chain of elementwise ops on one tensor realizes with the right values. No pass
//! may recurse on graph depth, and the renderer must split deep expressions (C compilers cap nesting).

use tinygrad::Tensor;

/// `x` through `n` alternating `+1` and `*0.5` ops, checked against the same recurrence on the host.
fn chain(n: usize) {
    let x0 = [1.0f32, -2.0, 3.5, 100.0];
    let mut t = Tensor::from_slice(&x0, [4]);
    for i in 0..n {
        t = if i % 2 == 0 { &t + 1.0f32 } else { &t * 0.5f32 };
    }
    let want: Vec<f32> = x0.iter().map(|&v| (0..n).fold(v, |a, i| if i % 2 == 0 { a + 1.0 } else { a * 0.5 })).collect();
    assert_eq!(t.to_vec::<f32>().unwrap(), want, "chain of {n} ops");
}

/// clang stops at 256 nested brackets: the renderer names deep subexpressions
#[test]
fn chain_of_500_ops_compiles() {
    chain(500);
}

/// no pass recurses on graph depth; the scheduler cuts the chain into alike kernels that compile once
#[test]
fn chain_of_100000_ops_realizes() {
    chain(100_000);
}

/// the backward pass through a chain of 20,000 ops: d/dx of 10,000 steps of `t * 1.0001 + 0.5` is 1.0001^10000
#[test]
fn gradient_through_a_20000_op_chain() {
    let x = Tensor::from_slice(&[1.0f32, 2.0], [2]);
    x.requires_grad_(true);
    let mut t = x.clone();
    for _ in 0..10_000 {
        t = &(&t * 1.0001f32) + 0.5f32;
    }
    t.sum(..).backward();
    let want = (0..10_000).fold(1.0f32, |g, _| g * 1.0001);
    let got = x.grad().unwrap().to_vec::<f32>().unwrap();
    assert!(got.iter().all(|g| (g - want).abs() < 1e-3 * want), "{got:?} vs {want}");
}
