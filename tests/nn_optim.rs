//! Each optimizer's first three steps on `loss = sum(w^2)` (gradient `2w`) against the update rules written
//! out here in f64 (tinygrad `nn/optim.py`).

use std::sync::Mutex;
use tinygrad::helpers::{Context, TRAINING};
use tinygrad::nn::optim::{self, Optimizer};
use tinygrad::Tensor;

static SERIAL: Mutex<()> = Mutex::new(());
const W0: [f64; 4] = [1.0, -2.0, 0.5, 3.0];

/// Three steps of `make`'s optimizer; the parameter after each.
fn run(make: impl Fn(&[Tensor]) -> Optimizer) -> Vec<Vec<f64>> {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let _t = Context::new(&[(&TRAINING, 1)]);
    let w = Tensor::from_slice(&W0.map(|x| x as f32), [2, 2]);
    let opt = make(std::slice::from_ref(&w));
    (0..3)
        .map(|_| {
            opt.zero_grad();
            (&w * &w).sum(..).backward();
            opt.step().unwrap();
            w.to_vec::<f32>().unwrap().into_iter().map(f64::from).collect()
        })
        .collect()
}

#[track_caller]
fn check(got: Vec<Vec<f64>>, want: Vec<Vec<f64>>) {
    for (s, (g, w)) in got.iter().zip(&want).enumerate() {
        for (a, b) in g.iter().zip(w) {
            assert!((a - b).abs() <= 1e-5 * (1.0 + b.abs()), "step {}: got {g:?}, want {w:?}", s + 1);
        }
    }
}

fn norm(v: &[f64]) -> f64 {
    v.iter().map(|x| x * x).sum::<f64>().sqrt()
}

/// tinygrad's LARS rule (SGD is LARS with tcoef 0, pre-weight-decay, not classic).
fn lars_ref(lr: f64, momentum: f64, wd: f64, nesterov: bool, classic: bool, tcoef: f64) -> Vec<Vec<f64>> {
    let (mut w, mut b) = (W0.to_vec(), vec![0.0; 4]);
    (0..3)
        .map(|_| {
            let mut g: Vec<f64> = w.iter().map(|x| 2.0 * x).collect();
            let r = if tcoef != 0.0 { tcoef * norm(&w) / (norm(&g) + wd * norm(&w)) } else { 1.0 };
            g = g.iter().zip(&w).map(|(g, w)| g + wd * w).collect();
            if classic {
                g = g.iter().map(|g| g * r * lr).collect();
            }
            if momentum != 0.0 {
                b = b.iter().zip(&g).map(|(b, g)| momentum * b + g).collect();
                g = if nesterov { g.iter().zip(&b).map(|(g, b)| g + momentum * b).collect() } else { b.clone() };
            }
            if !classic {
                g = g.iter().map(|g| g * r * lr).collect();
            }
            w = w.iter().zip(&g).map(|(w, g)| w - g).collect();
            w.clone()
        })
        .collect()
}

/// tinygrad's LAMB rule (Adam and AdamW skip the trust ratio).
fn lamb_ref(lr: f64, b1: f64, b2: f64, eps: f64, wd: f64, adam: bool) -> Vec<Vec<f64>> {
    let (mut w, mut m, mut v, mut b1t, mut b2t) = (W0.to_vec(), vec![0.0; 4], vec![0.0; 4], 1.0, 1.0);
    (0..3)
        .map(|_| {
            let g: Vec<f64> = w.iter().map(|x| 2.0 * x).collect();
            (b1t, b2t) = (b1t * b1, b2t * b2);
            m = m.iter().zip(&g).map(|(m, g)| b1 * m + (1.0 - b1) * g).collect();
            v = v.iter().zip(&g).map(|(v, g)| b2 * v + (1.0 - b2) * g * g).collect();
            let up: Vec<f64> = (0..4).map(|i| (m[i] / (1.0 - b1t)) / ((v[i] / (1.0 - b2t)).sqrt() + eps) + wd * w[i]).collect();
            let r = if adam { 1.0 } else { norm(&w) / norm(&up) };
            w = w.iter().zip(&up).map(|(w, u)| w - lr * r * u).collect();
            w.clone()
        })
        .collect()
}

#[test]
fn sgd_plain_momentum_nesterov_weight_decay() {
    check(run(|p| optim::sgd(p, 0.1, 0.0, 0.0, false, false)), lars_ref(0.1, 0.0, 0.0, false, false, 0.0));
    check(run(|p| optim::sgd(p, 0.05, 0.9, 0.01, false, false)), lars_ref(0.05, 0.9, 0.01, false, false, 0.0));
    check(run(|p| optim::sgd(p, 0.05, 0.9, 0.0, true, false)), lars_ref(0.05, 0.9, 0.0, true, false, 0.0));
    check(run(|p| optim::sgd(p, 0.05, 0.5, 0.1, true, true)), lars_ref(0.05, 0.5, 0.1, true, true, 0.0));
}

#[test]
fn lars_trust_ratio() {
    check(run(|p| optim::lars(p, 0.1, 0.9, 1e-4, false, true, 0.001)), lars_ref(0.1, 0.9, 1e-4, false, true, 0.001));
}

#[test]
fn adam_adamw_lamb() {
    check(run(|p| optim::adam(p, 0.01, 0.9, 0.999, 1e-8)), lamb_ref(0.01, 0.9, 0.999, 1e-8, 0.0, true));
    check(run(|p| optim::adamw(p, 0.01, 0.9, 0.999, 1e-8, 0.01)), lamb_ref(0.01, 0.9, 0.999, 1e-8, 0.01, true));
    check(run(|p| optim::lamb(p, 0.01, 0.9, 0.999, 1e-6, 0.0)), lamb_ref(0.01, 0.9, 0.999, 1e-6, 0.0, false));
}

#[test]
fn muon_orthogonalizes_the_momentum() {
    // one Newton-Schulz step with coefficients (1.5, -0.5) on the 2x2 momentum, written out
    let got = run(|p| optim::muon(p, 0.02, 0.9, 0.0, 1, &[1.5, -0.5], false));
    let (mut w, mut b) = (W0.to_vec(), vec![0.0; 4]);
    let want: Vec<Vec<f64>> = (0..3)
        .map(|_| {
            b = b.iter().zip(&w).map(|(b, w)| 0.9 * b + 2.0 * w).collect();
            let n = norm(&b) + 1e-7;
            let g: Vec<f64> = b.iter().map(|x| x / n).collect();
            // gg = G G^T; out = 1.5 G - 0.5 gg G
            let gg = [g[0] * g[0] + g[1] * g[1], g[0] * g[2] + g[1] * g[3], g[2] * g[0] + g[3] * g[1], g[2] * g[2] + g[3] * g[3]];
            let ggg = [gg[0] * g[0] + gg[1] * g[2], gg[0] * g[1] + gg[1] * g[3], gg[2] * g[0] + gg[3] * g[2], gg[2] * g[1] + gg[3] * g[3]];
            w = (0..4).map(|i| w[i] - 0.02 * (1.5 * g[i] - 0.5 * ggg[i])).collect();
            w.clone()
        })
        .collect();
    check(got, want);
}

#[test]
#[should_panic(expected = "TRAINING")]
fn step_needs_training_mode() {
    let w = Tensor::from([1.0f32, 2.0]);
    let opt = optim::sgd(std::slice::from_ref(&w), 0.1, 0.0, 0.0, false, false);
    (&w * &w).sum(..).backward();
    let _ = opt.step();
}
