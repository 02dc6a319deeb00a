//! Reliability gaps found with beautiful_mnist: a pending `assign` is seen by every view of its buffer, and
//! gradients through `sort` schedule in time polynomial in the graph.

use tinygrad::Tensor;

/// sum(sort(x) * w) has gradient w permuted back: d/dx[perm[k]] = w[k], with perm the argsort.
#[test]
fn sort_gradient_is_w_permuted_back() {
    let n = 64usize;
    // distinct values in a scrambled order: (37 k mod 64) - 20
    let xs: Vec<f32> = (0..n).map(|k| ((37 * k) % n) as f32 - 20.0).collect();
    let ws: Vec<f32> = (0..n).map(|k| (k as f32 * 0.5) - 3.0).collect();
    let x = Tensor::from(xs.clone());
    x.requires_grad_(true);
    let w = Tensor::from(ws.clone());
    let (sorted, idx) = x.sort(0, false);
    (&sorted * &w).sum(..).backward();
    let g = x.grad().expect("x has a gradient");
    let mut perm: Vec<usize> = (0..n).collect();
    perm.sort_by(|&a, &b| xs[a].total_cmp(&xs[b]));
    let mut want = vec![0.0f32; n];
    perm.iter().enumerate().for_each(|(k, &p)| want[p] = ws[k]);
    assert_eq!(g.to_vec::<f32>().unwrap(), want);
    assert_eq!(idx.to_vec::<i32>().unwrap(), perm.iter().map(|&p| p as i32).collect::<Vec<_>>());
}
