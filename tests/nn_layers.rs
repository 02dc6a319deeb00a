//! Layer forwards against hand-derived values (tinygrad `nn/__init__.py` semantics).

use tinygrad::nn::{Embedding, GroupNorm, LSTMCell, LayerNorm, Linear, Module, RMSNorm};
use tinygrad::Tensor;

#[track_caller]
fn close(t: &Tensor, want: &[f64]) {
    let got = t.to_vec::<f32>().unwrap();
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        assert!((*g as f64 - w).abs() < 1e-5, "got {got:?}, want {want:?}");
    }
}

#[test]
fn linear_layernorm_rmsnorm_groupnorm() {
    let l = Linear::new(2, 1, true);
    l.weight.assign(Tensor::from([[2.0f32, -1.0]]));
    l.bias.as_ref().unwrap().assign(Tensor::from([0.5f32]));
    close(&l.forward(&Tensor::from([[1.0f32, 3.0]])), &[2.0 - 3.0 + 0.5]);

    let x = Tensor::from([[1.0f32, 2.0, 3.0]]);
    let s = (2.0f64 / 3.0 + 1e-5).sqrt();
    close(&LayerNorm::new(&[3], 1e-5, true).forward(&x), &[-1.0 / s, 0.0, 1.0 / s]);
    let r = (12.5f64 + 1e-6).sqrt();
    close(&RMSNorm::new(2, 1e-6, true).forward(&Tensor::from([[3.0f32, 4.0]])), &[3.0 / r, 4.0 / r]);
    // one group over 2 channels of 2: values 1..4, mean 2.5, variance 1.25
    let g = Tensor::from([[[1.0f32, 2.0], [3.0, 4.0]]]);
    let sd = (1.25f64 + 1e-5).sqrt();
    close(&GroupNorm::new(1, 2, 1e-5, true).forward(&g), &[-1.5 / sd, -0.5 / sd, 0.5 / sd, 1.5 / sd]);
    // instance norm: each channel on its own
    let sd = (0.25f64 + 1e-5).sqrt();
    close(&GroupNorm::instance_norm(2, 1e-5, true).forward(&g), &[-0.5 / sd, 0.5 / sd, -0.5 / sd, 0.5 / sd]);
}

#[test]
fn embedding_and_lstm_cell() {
    let e = Embedding::new(3, 2);
    e.weight.assign(Tensor::from([[1.0f32, 2.0], [3.0, 4.0], [5.0, 6.0]]));
    close(&e.forward(&Tensor::from([2i32, 0, 2])), &[5.0, 6.0, 1.0, 2.0, 5.0, 6.0]);
    assert_eq!(e.get_state_dict().into_keys().collect::<Vec<_>>(), ["weight"]);

    // zero weights: every gate is sigmoid(0) = 0.5 and g = tanh(0) = 0, so c = c0/2 and h = tanh(c)/2
    let cell = LSTMCell::new(3, 2, true);
    for w in [&cell.weight_ih, &cell.weight_hh] {
        w.assign(w.zeros_like());
    }
    let (h0, c0) = (Tensor::from([[0.3f32, -0.4]]), Tensor::from([[1.0f32, -2.0]]));
    let (h, c) = cell.forward(&Tensor::from([[1.0f32, 2.0, 3.0]]), Some((&h0, &c0)));
    close(&c, &[0.5, -1.0]);
    close(&h, &[0.5 * 0.5f64.tanh(), 0.5 * (-1.0f64).tanh()]);
    assert_eq!(cell.get_parameters().len(), 4);
}
