//! Graph-building errors are programmer errors: they panic at once, naming the op and both shapes.

use tinygrad::Tensor;

#[test]
#[should_panic(expected = "add: shapes [2, 3] and [4] can't be broadcast")]
fn add_of_unbroadcastable_shapes() {
    let _ = Tensor::zeros([2, 3]) + Tensor::zeros([4]);
}

#[test]
#[should_panic(expected = "reshape: shape [2, 3] (6 elements) can't become [4, 2]")]
fn reshape_to_another_element_count() {
    let _ = Tensor::zeros([2, 3]).reshape([4, 2]);
}

#[test]
#[should_panic(expected = "matmul: shapes [2, 3] and [4, 5] don't match on the inner dim")]
fn matmul_of_mismatched_inner_dims() {
    let _ = Tensor::zeros([2, 3]).matmul(&Tensor::zeros([4, 5]));
}

#[test]
#[should_panic(expected = "expand: shape [2, 3] can't expand to [2, 4]")]
fn expand_of_a_non_unit_dim() {
    let _ = Tensor::zeros([2, 3]).expand([2, 4]);
}

#[test]
#[should_panic(expected = "cat: shapes [[2, 3], [2, 4]] don't match outside dim 0")]
fn cat_of_mismatched_shapes() {
    let _ = Tensor::zeros([2, 3]).cat(&[&Tensor::zeros([2, 4])], 0);
}
