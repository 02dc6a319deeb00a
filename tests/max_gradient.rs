//! Equality-mask gradients (max, max_pool2d, the stable softmaxes) of values that the forward and the backward
//! kernels both compute: `x = a*b + c` is computed once in the kernel that takes its max and again in the
//! kernel that compares `x` with that max. If the two kernels round `x` differently (one fuses the multiply-add,
//! the other does not), no element equals the max, the mask's count is 0 and the gradient is 0/0 = NaN. Checked
//! against one-hot masks and softmaxes worked out here in float64, under the default compiler and again (child
//! processes) under `CC=gcc` and under `CC=clang`.

mod common;

use rand::{rngs::StdRng, Rng, SeedableRng};
use tinygrad::tensor::Pool2dOpts;
use tinygrad::Tensor;

/// `n` seeded pseudo-random values in `[-1, 1)`.
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n).map(|_| rng.random_range(-1.0..1.0)).collect()
}

/// `a`, `b`, `c` of `shape` (gradients on), and `a*b + c` in float64 from their f32 values.
fn inputs(shape: &[usize]) -> ([Tensor; 3], Vec<f64>) {
    let n = shape.iter().product();
    let (a, b, c) = (values(n, 1), values(n, 2), values(n, 3));
    let x = (0..n).map(|i| a[i] as f64 * b[i] as f64 + c[i] as f64).collect();
    let t = |v: &[f32]| Tensor::from_slice(v, shape).requires_grad_(true).clone();
    ([t(&a), t(&b), t(&c)], x)
}

/// The index of the largest of `xs`.
fn argmax(xs: impl Iterator<Item = f64>) -> usize {
    xs.enumerate().fold((0, f64::NEG_INFINITY), |best, (i, x)| if x > best.1 { (i, x) } else { best }).0
}

#[track_caller]
fn assert_close(got: &[f32], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(!g.is_nan(), "{what}: NaN at {i} (the mask matched no element)");
        assert!((*g as f64 - w).abs() <= 1e-5 + 1e-5 * w.abs(), "{what}: element {i} is {g}, want {w}");
    }
}

#[test]
fn a_multiply_add_recomputed_in_another_kernel_is_bitwise_the_same() {
    // kernel 1 stores a*b + c; kernel 2 computes it again beside another use of a*b (a multiply a compiler
    // contracting on its own would then leave unfused) and compares
    let n = 4096;
    let t = |seed| Tensor::from_slice(&values(n, seed), [n]);
    let (a, b, c) = (t(1), t(2), t(3));
    let x = (&a * &b + &c).contiguous();
    x.realize().unwrap();
    let p = &a * &b;
    let y = (&p + &c).eq(&x).where_(&p * 3.0, -1e9).to_vec::<f32>().unwrap();
    let pv = p.to_vec::<f32>().unwrap();
    let unequal: Vec<usize> = (0..n).filter(|&i| y[i] != pv[i] * 3.0).collect();
    assert!(
        unequal.is_empty(),
        "{} of {n} elements differ from the stored a*b + c, the first at {:?}",
        unequal.len(),
        &unequal[..unequal.len().min(5)]
    );
}

#[test]
fn max_over_rows_of_a_multiply_add_has_one_hot_gradients() {
    // (the cross-entropy's row max in beautiful_mnist: 10 logits a row)
    let (rows, cols) = (512, 10);
    let ([a, b, c], x) = inputs(&[rows, cols]);
    (&a * &b + &c).max(1).sum(..).backward();
    let mut onehot = vec![0.0; rows * cols];
    for r in 0..rows {
        onehot[r * cols + argmax(x[r * cols..(r + 1) * cols].iter().copied())] = 1.0;
    }
    let (av, bv) = (a.to_vec::<f32>().unwrap(), b.to_vec::<f32>().unwrap());
    assert_close(&c.grad().unwrap().to_vec::<f32>().unwrap(), &onehot, "dc");
    assert_close(
        &a.grad().unwrap().to_vec::<f32>().unwrap(),
        &onehot.iter().zip(&bv).map(|(m, b)| m * *b as f64).collect::<Vec<_>>(),
        "da",
    );
    assert_close(
        &b.grad().unwrap().to_vec::<f32>().unwrap(),
        &onehot.iter().zip(&av).map(|(m, a)| m * *a as f64).collect::<Vec<_>>(),
        "db",
    );
}

#[test]
fn max_of_all_of_a_multiply_add_has_a_one_hot_gradient() {
    let ([a, b, c], x) = inputs(&[64, 33]);
    (&a * &b + &c).max(..).backward();
    let mut onehot = vec![0.0; x.len()];
    onehot[argmax(x.iter().copied())] = 1.0;
    assert_close(&c.grad().unwrap().to_vec::<f32>().unwrap(), &onehot, "dc");
}

#[test]
fn max_pool2d_of_a_multiply_add_has_one_hot_window_gradients() {
    let (n, ch, h, w) = (8, 4, 16, 16);
    let ([a, b, c], x) = inputs(&[n, ch, h, w]);
    (&a * &b + &c).max_pool2d(Pool2dOpts::default()).sum(..).backward();
    let mut onehot = vec![0.0; x.len()];
    for plane in 0..n * ch {
        for (i, j) in (0..h / 2).flat_map(|i| (0..w / 2).map(move |j| (i, j))) {
            let at = |k: usize| plane * h * w + (2 * i + k / 2) * w + 2 * j + k % 2;
            onehot[at(argmax((0..4).map(|k| x[at(k)])))] = 1.0;
        }
    }
    assert_close(&c.grad().unwrap().to_vec::<f32>().unwrap(), &onehot, "dc");
}

#[test]
fn log_softmax_and_logsumexp_of_a_multiply_add_have_softmax_gradients() {
    let (rows, cols) = (256, 10);
    let ([a, b, c], x) = inputs(&[rows, cols]);
    let g = Tensor::from_slice(&values(rows * cols, 4), [rows, cols]);
    let softmax: Vec<f64> = x
        .chunks(cols)
        .flat_map(|row| {
            let m = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let s: f64 = row.iter().map(|v| (v - m).exp()).sum();
            row.iter().map(move |v| (v - m).exp() / s).collect::<Vec<_>>()
        })
        .collect();
    let gv: Vec<f64> = g.to_vec::<f32>().unwrap().into_iter().map(f64::from).collect();
    // d/dx sum(g * log_softmax(x)) = g - softmax(x) * rowsum(g)
    ((&a * &b + &c).log_softmax(1) * &g).sum(..).backward();
    let want: Vec<f64> =
        (0..rows * cols).map(|i| gv[i] - softmax[i] * gv[i / cols * cols..(i / cols + 1) * cols].iter().sum::<f64>()).collect();
    assert_close(&c.grad().unwrap().to_vec::<f32>().unwrap(), &want, "log_softmax dc");
    // d/dx sum(logsumexp(x)) = softmax(x); d/dx sum(g * softmax(x)) = softmax * (g - rowsum(softmax * g))
    let ([a, b, c], _) = inputs(&[rows, cols]);
    (&a * &b + &c).logsumexp(1, false).sum(..).backward();
    assert_close(&c.grad().unwrap().to_vec::<f32>().unwrap(), &softmax, "logsumexp dc");
    let ([a, b, c], _) = inputs(&[rows, cols]);
    ((&a * &b + &c).softmax(1) * &g).sum(..).backward();
    let dot: Vec<f64> = (0..rows).map(|r| (0..cols).map(|j| softmax[r * cols + j] * gv[r * cols + j]).sum()).collect();
    let want: Vec<f64> = (0..rows * cols).map(|i| softmax[i] * (gv[i] - dot[i / cols])).collect();
    assert_close(&c.grad().unwrap().to_vec::<f32>().unwrap(), &want, "softmax dc");
}

#[test]
fn every_test_here_passes_under_gcc_and_clang() {
    const TESTS: [&str; 5] = [
        "a_multiply_add_recomputed_in_another_kernel_is_bitwise_the_same",
        "max_over_rows_of_a_multiply_add_has_one_hot_gradients",
        "max_of_all_of_a_multiply_add_has_a_one_hot_gradient",
        "max_pool2d_of_a_multiply_add_has_one_hot_window_gradients",
        "log_softmax_and_logsumexp_of_a_multiply_add_have_softmax_gradients",
    ];
    for cc in ["gcc", "clang"] {
        if common::have(&[cc], "the max-gradient tests under that compiler") {
            TESTS.iter().for_each(|t| drop(common::rerun(t, &[("CC", cc)])));
        }
    }
}
