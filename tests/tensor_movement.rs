//! Value tests for the movement and indexing ops beyond the conformance vectors: setitem, masked_select,
//! meshgrid, rearrange, strided and advanced getitem, padding modes, scatter corner cases, shape errors.
//! Expected values come from tinygrad 0.14.

use tinygrad::dtype::dtypes;
use tinygrad::tensor::Index;
use tinygrad::Tensor;

#[track_caller]
fn check(t: &Tensor, shape: &[usize], want: &[f64]) {
    assert_eq!(t.shape(), shape, "shape");
    let got: Vec<f64> = match t.dtype() {
        dtypes::FLOAT32 => t.to_vec::<f32>().unwrap().into_iter().map(f64::from).collect(),
        dtypes::INT32 => t.to_vec::<i32>().unwrap().into_iter().map(f64::from).collect(),
        dtypes::BOOL => t.to_vec::<bool>().unwrap().into_iter().map(|b| b as u8 as f64).collect(),
        d => panic!("check: unexpected dtype {d}"),
    };
    assert_eq!(got, want);
}

fn ar(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    Tensor::arange(0.0, n as f64, 1.0).cast(dtypes::FLOAT32).reshape(shape.to_vec())
}

fn s(start: Option<i64>, stop: Option<i64>, step: Option<i64>) -> Index {
    Index::slice(start, stop, step)
}

fn it(v: &[i32]) -> Index {
    Tensor::from_slice(v, [v.len()]).into()
}

#[test]
fn getitem_negative_steps_on_several_dims() {
    let x = ar(&[2, 3, 4]);
    check(
        &x.getitem(&[s(None, None, Some(-1)), s(None, None, Some(-2)), s(Some(3), Some(0), Some(-2))]),
        &[2, 2, 2],
        &[23., 21., 15., 13., 11., 9., 3., 1.],
    );
    check(&x.getitem(&[1.into(), s(Some(5), Some(1), Some(-1))]), &[1, 4], &[20., 21., 22., 23.]);
}

#[test]
fn getitem_tensor_indices() {
    let x = ar(&[2, 3, 4]);
    let col = Tensor::from_slice(&[1i32, 0], [2, 1]);
    check(&x.getitem(&[col.into(), s(Some(1), None, None), it(&[-1, 3])]), &[2, 2, 2], &[19., 23., 19., 23., 7., 11., 7., 11.]);
    // non-adjacent tensor indices put the broadcast dims first
    check(&x.getitem(&[it(&[1, 0]), (..).into(), it(&[1, 3])]), &[2, 3], &[13., 17., 21., 3., 7., 11.]);
    check(&x.getitem(&[(..).into(), it(&[0, 2]), it(&[1, 3])]), &[2, 2], &[1., 11., 13., 23.]);
    check(
        &x.getitem(&[Index::NewAxis, Index::Ellipsis, it(&[0, -1]), Index::NewAxis]),
        &[1, 2, 3, 2, 1],
        &[0., 3., 4., 7., 8., 11., 12., 15., 16., 19., 20., 23.],
    );
    // out of range values select nothing
    check(&ar(&[4]).getitem(&[it(&[0, 5, -1])]), &[3], &[0., 0., 3.]);
}

#[test]
fn getitem_gradient() {
    let x = Tensor::from_slice(&[1f32, 2., 3., 4., 5., 6.], [2, 3]);
    let y = x.getitem(&[(..).into(), it(&[2, 0, 2])]) * Tensor::from_slice(&[1f32, 2., 3.], [3]);
    check(&y.sum(..).gradient(&[&x], None)[0], &[2, 3], &[2., 0., 4., 2., 0., 4.]);
}

#[test]
#[should_panic(expected = "out of bounds")]
fn getitem_int_out_of_range() {
    ar(&[2, 3]).getitem(&[2.into()]);
}

#[test]
fn setitem_basic() {
    let t = ar(&[3, 4]);
    t.setitem(&[s(None, None, Some(-2)), s(None, None, Some(3))], -1.0);
    check(&t, &[3, 4], &[-1., 1., 2., -1., 4., 5., 6., 7., -1., 9., 10., -1.]);
    let t = ar(&[3, 4]);
    t.setitem(&[1.into()], Tensor::from_slice(&[1f32, 2., 3., 4.], [4]));
    check(&t, &[3, 4], &[0., 1., 2., 3., 1., 2., 3., 4., 8., 9., 10., 11.]);
    // a strided slice that keeps one element
    let t = ar(&[4]);
    t.setitem(&[s(Some(0), Some(3), Some(3))], 5.0);
    check(&t, &[4], &[5., 1., 2., 3.]);
    let t = Tensor::arange(0.0, 6.0, 1.0).reshape([2, 3]);
    t.setitem(&[(..).into(), (1..).into()], 7);
    check(&t, &[2, 3], &[0., 7., 7., 3., 7., 7.]);
}

#[test]
fn setitem_advanced() {
    let t = ar(&[3, 4]);
    t.setitem(&[it(&[0, 2]), (1..).into()], Tensor::from_slice(&[7f32, 8., 9.], [3]));
    check(&t, &[3, 4], &[0., 7., 8., 9., 4., 5., 6., 7., 8., 7., 8., 9.]);
    let t = ar(&[2, 3, 4]);
    t.setitem(&[it(&[1, 0]), (..).into(), it(&[1, 3])], Tensor::from_slice(&[100f32, 200.], [2, 1]));
    let mut want: Vec<f64> = (0..24).map(f64::from).collect();
    [3, 7, 11].iter().for_each(|&i| want[i] = 200.);
    [13, 17, 21].iter().for_each(|&i| want[i] = 100.);
    check(&t, &[2, 3, 4], &want);
    // repeated indices: the last write wins
    let t = ar(&[5]);
    t.setitem(&[it(&[1, 1, 3])], Tensor::from_slice(&[10f32, 20., 30.], [3]));
    check(&t, &[5], &[0., 20., 2., 30., 4.]);
}

#[test]
#[should_panic(expected = "setitem: dtype mismatch")]
fn setitem_dtype_mismatch() {
    ar(&[3]).setitem(&[0.into()], Tensor::from_slice(&[1i32], ()));
}

#[test]
fn masked_select() {
    let x = Tensor::arange(0.0, 9.0, 1.0).reshape([3, 3]);
    let m = Tensor::from_slice(&[true, false, true, false, true, false, false, false, true], [3, 3]);
    check(&x.masked_select(&m).unwrap(), &[4], &[0., 2., 4., 8.]);
    check(&x.masked_select_size(&m, 6, -1.0).unwrap(), &[6], &[0., 2., 4., 8., -1., -1.]);
    check(&x.masked_select_size(&m, 2, -1.0).unwrap(), &[2], &[0., 2.]);
    check(&x.masked_select(&Tensor::from_slice(&[true, false, true], [3])).unwrap(), &[6], &[0., 2., 3., 5., 6., 8.]);
    let xf = Tensor::from_slice(&[1f32, 2., 3., 4., 5., 6.], [2, 3]);
    let y = xf.masked_select(&Tensor::from_slice(&[true, false, true], [3])).unwrap() * Tensor::from_slice(&[1f32, 2., 3., 4.], [4]);
    check(&y.sum(..).gradient(&[&xf], None)[0], &[2, 3], &[1., 0., 2., 3., 0., 4.]);
}

#[test]
fn meshgrid() {
    let (a, b, c) =
        (Tensor::from_slice(&[1i32, 2, 3], [3]), Tensor::from_slice(&[4i32, 5], [2]), Tensor::from_slice(&[6i32, 7, 8, 9], [4]));
    let g = a.meshgrid(&[&b], "ij");
    check(&g[0], &[3, 2], &[1., 1., 2., 2., 3., 3.]);
    check(&g[1], &[3, 2], &[4., 5., 4., 5., 4., 5.]);
    let g = a.meshgrid(&[&b, &c], "xy");
    check(&g[0], &[2, 3, 4], &[[1.; 4], [2.; 4], [3.; 4]].concat().repeat(2));
    check(&g[2], &[2, 3, 4], &[6., 7., 8., 9.].repeat(6));
}

#[test]
fn rearrange() {
    let y = Tensor::arange(0.0, 24.0, 1.0).reshape([2, 3, 4]);
    let r = y.rearrange("b c (h w) -> b (w h) c 1", &[("h", 2)]);
    check(
        &r,
        &[2, 4, 3, 1],
        &[0., 4., 8., 2., 6., 10., 1., 5., 9., 3., 7., 11., 12., 16., 20., 14., 18., 22., 13., 17., 21., 15., 19., 23.],
    );
    let r = y.rearrange("... c -> c ...", &[]);
    check(&r, &[4, 2, 3], &[0., 4., 8., 12., 16., 20., 1., 5., 9., 13., 17., 21., 2., 6., 10., 14., 18., 22., 3., 7., 11., 15., 19., 23.]);
    check(&y.rearrange("b ... -> (b ...)", &[]), &[24], &(0..24).map(f64::from).collect::<Vec<_>>());
    check(&Tensor::arange(0.0, 6.0, 1.0).reshape([2, 3, 1]).rearrange("a b 1 -> b a", &[]), &[3, 2], &[0., 3., 1., 4., 2., 5.]);
}

#[test]
#[should_panic(expected = "rearrange")]
fn rearrange_name_mismatch() {
    ar(&[2, 3]).rearrange("a b -> a c", &[]);
}

#[test]
fn pad_modes() {
    let z = ar(&[3, 4]);
    let want =
        [9., 8., 9., 10., 11., 10., 9., 8., 5., 4., 5., 6., 7., 6., 5., 4., 1., 0., 1., 2., 3., 2., 1., 0., 5., 4., 5., 6., 7., 6., 5., 4.];
    check(&z.pad_reflect(&[(2, -1), (1, 3)]), &[4, 8], &want);
    let want = [4., 4., 4., 5., 6., 7., 7., 8., 8., 8., 9., 10., 11., 11., 8., 8., 8., 9., 10., 11., 11., 8., 8., 8., 9., 10., 11., 11.];
    check(&z.pad_replicate(&[(-1, 2), (2, 1)]), &[4, 7], &want);
    let row = |a: f64| [a, a + 1., a + 2., a + 3., a, a + 1., a + 2., a + 3., a, a + 1.];
    check(&z.pad_circular(&[(-1, 2), (4, 2)]), &[4, 10], &[row(4.), row(8.), row(4.), row(8.)].concat());
    let x = Tensor::from_slice(&[1f32, 2., 3., 4., 5., 6.], [2, 3]);
    check(&x.pad_reflect(&[(1, 1), (2, 2)]).sum(..).gradient(&[&x], None)[0], &[2, 3], &[4., 6., 4., 4., 6., 4.]);
}

#[test]
#[should_panic(expected = "wraps around")]
fn pad_circular_too_far() {
    ar(&[3, 4]).pad_circular(&[(-1, 3), (0, 0)]);
}

#[test]
fn shape_ops() {
    check(&Tensor::from_slice(&[1i32, 2, 3], [3]).diag(), &[3, 3], &[1., 0., 0., 0., 2., 0., 0., 0., 3.]);
    check(&ar(&[2, 3, 4]).diagonal(-1, -1, 1), &[2, 3], &[1., 6., 11., 13., 18., 23.]);
    check(&ar(&[3, 4]).roll_flat(5), &[3, 4], &[7., 8., 9., 10., 11., 0., 1., 2., 3., 4., 5., 6.]);
    check(
        &Tensor::from_slice(&[1i32, 2, 3, 4], [2, 2]).repeat_interleave(3, None),
        &[12],
        &[1., 1., 1., 2., 2., 2., 3., 3., 3., 4., 4., 4.],
    );
    check(&ar(&[8]).unfold(0, 3, 2), &[3, 3], &[0., 1., 2., 2., 3., 4., 4., 5., 6.]);
    check(&ar(&[2, 4]).unfold(-1, 2, 3), &[2, 1, 2], &[0., 1., 4., 5.]);
    check(&ar(&[10]).split(4, 0)[2], &[2], &[8., 9.]);
    assert_eq!(ar(&[11]).chunk(6, 0).len(), 6);
    check(&Tensor::from_slice(&[1i32, 2], [1, 2]).repeat([2, 1, 2]), &[2, 1, 4], &[1., 2., 1., 2., 1., 2., 1., 2.]);
    assert_eq!(ar(&[2, 1, 3, 1]).squeeze_all().shape(), [2, 3]);
    assert_eq!(ar(&[2, 6]).unflatten(-1, [3, -1]).shape(), [2, 3, 2]);
    assert_eq!(ar(&[2, 3, 4]).flatten_range(0, 1).shape(), [6, 4]);
}

#[test]
fn triangles_and_creation() {
    let z = ar(&[3, 4]);
    check(&z.tril(-1), &[3, 4], &[0., 0., 0., 0., 4., 0., 0., 0., 8., 9., 0., 0.]);
    check(&z.triu(2), &[3, 4], &[0., 0., 2., 3., 0., 0., 0., 7., 0., 0., 0., 0.]);
    check(&Tensor::eye(2, 3, dtypes::INT32), &[2, 3], &[1., 0., 0., 0., 1., 0.]);
    check(&Tensor::linspace(0.0, 10.0, 5, dtypes::INT32), &[5], &[0., 2., 5., 7., 10.]);
    check(&Tensor::linspace(3.0, 10.0, 1, dtypes::FLOAT32), &[1], &[3.]);
    check(&Tensor::from_slice(&[0i32, 2], [2]).one_hot(3), &[2, 3], &[1., 0., 0., 0., 0., 1.]);
}

#[test]
fn scatter_variants() {
    let idx = Tensor::from_slice(&[0i32, 0, 2, 1], [2, 2]);
    check(
        &Tensor::zeros([5]).scatter(0, &Tensor::from_slice(&[1i32, 1, 3], [3]), Tensor::from_slice(&[10f32, 20., 30.], [3])),
        &[5],
        &[0., 20., 0., 30., 0.],
    );
    check(&Tensor::ones([2, 3]).scatter_with(1, &idx, 3.0, "multiply"), &[2, 3], &[9., 1., 1., 1., 3., 3.]);
    let src = Tensor::from_slice(&[2f32, 4., 6., 8.], [2, 2]);
    check(&Tensor::ones([2, 3]).scatter_reduce(1, &idx, &src, "mean", false), &[2, 3], &[3., 1., 1., 1., 8., 6.]);
    check(&Tensor::full([2, 3], 5f32).scatter_reduce(1, &idx, &src, "prod", false), &[2, 3], &[8., 5., 5., 5., 8., 6.]);
}

#[test]
fn cat_and_stack() {
    let (a, b) = (ar(&[1, 2]), ar(&[2, 2]));
    check(&a.cat(&[&b], 0), &[3, 2], &[0., 1., 0., 1., 2., 3.]);
    check(&a.stack(&[&a], -1), &[1, 2, 2], &[0., 0., 1., 1.]);
}

#[test]
#[should_panic(expected = "cat")]
fn cat_shape_mismatch() {
    ar(&[2, 3]).cat(&[&ar(&[2, 4])], 0);
}

#[test]
#[should_panic(expected = "cat")]
fn cat_rank_mismatch() {
    ar(&[2, 3]).cat(&[&ar(&[3])], 0);
}

#[test]
fn setitem_realized_in_place() {
    let x = Tensor::from_slice(&[0f32, 1., 2., 3., 4., 5.], [6]);
    let view = x.reshape([2, 3]);
    // the value reads the buffer being written
    x.setitem(&[(1..).into()], x.getitem(&[(..5).into()]));
    check(&x, &[6], &[0., 0., 1., 2., 3., 4.]);
    check(&view, &[2, 3], &[0., 0., 1., 2., 3., 4.]);
    x.setitem(&[s(None, None, Some(-1))], x.getitem(&[s(None, None, Some(1))]));
    check(&x, &[6], &[4., 3., 2., 1., 0., 0.]);
    x.setitem(&[it(&[0, 5])], 9.0);
    x.realize().unwrap();
    check(&view, &[2, 3], &[9., 3., 2., 1., 0., 9.]);
}
