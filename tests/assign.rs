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

/// A realized float32 buffer holding `v`.
fn buf(v: &[f32]) -> Tensor {
    let t = Tensor::from(v.to_vec());
    t.realize().unwrap();
    t
}

#[test]
fn pending_assign_is_seen_by_other_views() {
    let a = buf(&[0.0; 4]);
    let b = a.reshape([2, 2]);
    let c = a.shrink(&[(1, 3)]);
    a.assign(Tensor::ones([4]));
    assert_eq!(b.to_vec::<f32>().unwrap(), [1.0; 4], "reshape view");
    assert_eq!(c.to_vec::<f32>().unwrap(), [1.0; 2], "shrink view");
    assert_eq!(a.to_vec::<f32>().unwrap(), [1.0; 4]);
}

#[test]
fn pending_assign_runs_once_whichever_view_realizes_it() {
    let a = buf(&[1.0, 2.0, 3.0, 4.0]);
    let view = a.reshape([2, 2]).permute([1, 0]);
    a.assign(&a * 2.0);
    assert_eq!(view.to_vec::<f32>().unwrap(), [2.0, 6.0, 4.0, 8.0]);
    // the assign ran when the view was realized: realizing `a` doesn't double it again
    assert_eq!(a.to_vec::<f32>().unwrap(), [2.0, 4.0, 6.0, 8.0]);
    assert_eq!((&a + 0.0).to_vec::<f32>().unwrap(), [2.0, 4.0, 6.0, 8.0]);
}

#[test]
fn assign_value_reads_a_view_of_a_pending_buffer() {
    let a = buf(&[0.0; 4]);
    let view = a.reshape([4]);
    let d = buf(&[0.0; 4]);
    a.assign(Tensor::full([4], 3.0f32));
    d.assign(&view * 2.0);
    assert_eq!(d.to_vec::<f32>().unwrap(), [6.0; 4]);
    assert_eq!(a.to_vec::<f32>().unwrap(), [3.0; 4]);
}

#[test]
fn two_tensors_assigning_one_buffer_apply_in_order() {
    let a = buf(&[1.0; 4]);
    let a2 = a.reshape([2, 2]);
    a.assign(Tensor::full([4], 5.0f32));
    // a2 reads the buffer through a's pending assign, then assigns on top of it
    a2.assign(&a2 + 1.0);
    assert_eq!(a.to_vec::<f32>().unwrap(), [6.0; 4]);
    assert_eq!(a2.to_vec::<f32>().unwrap(), [6.0; 4]);
    // a graph built before the assign: realized alone later it reads the new values, realized together with
    // the assign the old ones (its kernel runs first)
    let x = buf(&[1.0, 2.0]);
    let (alone, together) = (&x + 0.5, &x - 0.5);
    x.assign(&x * 10.0);
    Tensor::realize_all(&[&together, &x]).unwrap();
    assert_eq!(x.to_vec::<f32>().unwrap(), [10.0, 20.0]);
    assert_eq!(together.to_vec::<f32>().unwrap(), [0.5, 1.5]);
    assert_eq!(alone.to_vec::<f32>().unwrap(), [10.5, 20.5]);
    let y = buf(&[1.0, 2.0]);
    let before = &y + 0.5;
    y.assign(&y * 10.0);
    assert_eq!(before.to_vec::<f32>().unwrap(), [10.5, 20.5], "realized alone, before the assigned tensor");
    assert_eq!(y.to_vec::<f32>().unwrap(), [10.0, 20.0]);
}

#[test]
fn slice_assign_writes_through_to_the_buffer() {
    let cache = buf(&[0.0; 8]).reshape([2, 4]);
    let row = cache.shrink(&[(1, 2), (0, 4)]);
    row.assign(Tensor::from([[1.0f32, 2.0, 3.0, 4.0]]));
    assert_eq!(cache.sum(..).item::<f32>().unwrap(), 10.0);
    assert_eq!(row.to_vec::<f32>().unwrap(), [1.0, 2.0, 3.0, 4.0]);
    // a transposed column
    let col = cache.permute([1, 0]).shrink(&[(0, 4), (0, 1)]);
    col.assign(Tensor::full([4, 1], 7.0f32));
    assert_eq!(cache.to_vec::<f32>().unwrap(), [7.0, 7.0, 7.0, 7.0, 1.0, 2.0, 3.0, 4.0]);
}

#[test]
fn a_graph_holding_an_assign_that_ran_does_not_run_it_again() {
    let a = buf(&[1.0, 2.0]);
    a.assign(&a * 2.0);
    let c = &a + 1.0; // holds the ASSIGN node
    a.realize().unwrap();
    assert_eq!(c.to_vec::<f32>().unwrap(), [3.0, 5.0]);
    assert_eq!(a.to_vec::<f32>().unwrap(), [2.0, 4.0]);
    // the same assign written again (the same node) runs again
    a.assign(&a * 2.0);
    assert_eq!(a.to_vec::<f32>().unwrap(), [4.0, 8.0]);
}

#[test]
fn an_optimizer_step_updates_every_parameter_from_the_old_weights() {
    // loss = sum(w1 * w2): d/dw1 = w2, d/dw2 = w1; one SGD step with lr 1 from (2, 3) gives (2-3, 3-2), both
    // gradients taken at the old weights (w2's must not read w1's pending update: 3-(-1) = 4)
    let _training = tinygrad::helpers::Context::new(&[(&tinygrad::helpers::TRAINING, 1)]);
    let (w1, w2) = (buf(&[2.0]), buf(&[3.0]));
    let opt = tinygrad::nn::optim::sgd(&[w1.clone(), w2.clone()], 1.0, 0.0, 0.0, false, true);
    (&w1 * &w2).sum(..).backward();
    opt.step().unwrap();
    assert_eq!((w1.to_vec::<f32>().unwrap(), w2.to_vec::<f32>().unwrap()), (vec![-1.0], vec![1.0]));
    // and an assign's value built from a buffer another assign is pending on, realized together: the old value
    let (a, b) = (buf(&[1.0]), buf(&[10.0]));
    let old_a = &a + 0.0;
    a.assign(&b * 2.0);
    b.assign(&old_a + 1.0);
    Tensor::realize_all(&[&a, &b]).unwrap();
    assert_eq!((a.to_vec::<f32>().unwrap(), b.to_vec::<f32>().unwrap()), (vec![20.0], vec![2.0]));
}

/// A value that reads its own target at other elements (a flip, a transpose, a sum) sees the old values everywhere
/// (it is computed into a buffer of its own first), also through an elementwise op or beside a realized part.
#[test]
fn a_value_reading_its_target_elsewhere_sees_the_old_values() {
    let a = buf(&[1.0, 2.0, 3.0, 4.0]);
    a.assign(a.flip(0));
    assert_eq!(a.to_vec::<f32>().unwrap(), [4.0, 3.0, 2.0, 1.0], "flip");
    let m = buf(&[1.0, 2.0, 3.0, 4.0]).reshape([2, 2]).contiguous();
    m.realize().unwrap();
    m.assign(&m.transpose(0, 1) * 10.0 + &m);
    assert_eq!(m.to_vec::<f32>().unwrap(), [11.0, 32.0, 23.0, 44.0], "transpose under an elementwise op");
    let b = buf(&[1.0, 2.0, 3.0, 4.0]);
    let twice = (b.flip(0) * 2.0).contiguous();
    b.assign(&twice + &b.sum(..));
    assert_eq!(b.to_vec::<f32>().unwrap(), [18.0, 16.0, 14.0, 12.0], "a realized flip and a sum");
}
