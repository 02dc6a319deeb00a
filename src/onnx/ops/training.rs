//! The `ai.onnx.preview.training` optimizer steps (`Adagrad`, `Momentum`, `Adam`; tinygrad `nn/onnx.py`'s training
//! ops) and the `ai.onnx.ml` ops the node suite uses. The optimizers take a learning rate `R`, a step count `T`
//! and groups of equal-length tensor lists (parameters, gradients, then their states), and return the updated
//! parameters then the updated states, functionally.

use super::{arg, floats, one, values, Node, Outputs};
use crate::tensor::{Index, Tensor};

/// The `k` lists of `n` tensors each after `R` and `T`: `groups[j][i]` is list `j`'s `i`-th tensor.
fn groups(a: &[Option<Tensor>], k: usize) -> Result<(f64, i64, Vec<Vec<Tensor>>), String> {
    let (r, t) = (floats(arg(a, 0)?)?[0], values(arg(a, 1)?)?[0]);
    let rest: Vec<Tensor> = a[2..].iter().flatten().cloned().collect();
    let n = rest.len() / k;
    Ok((r, t, rest.chunks(n.max(1)).map(<[Tensor]>::to_vec).collect()))
}

/// `Adagrad`: `h += g²`, `x -= r · g / (sqrt(h) + epsilon)` with `r = R / (1 + T · decay_factor)` and `g` the
/// gradient plus `norm_coefficient · x`.
pub(super) fn adagrad(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let (r, t, g) = groups(a, 3)?;
    let (decay, eps, norm) = (n.float("decay_factor", 0.0) as f64, n.float("epsilon", 0.0) as f64, n.float("norm_coefficient", 0.0) as f64);
    let r = r / (1.0 + t as f64 * decay);
    let (xs, hs): (Vec<Tensor>, Vec<Tensor>) = (0..g[0].len())
        .map(|i| {
            let grad = g[0][i].mul(norm).add(&g[1][i]);
            let h = g[2][i].add(grad.square());
            (g[0][i].sub(grad.div(h.sqrt().add(eps)).mul(r)), h)
        })
        .unzip();
    Ok([xs, hs].concat())
}

/// `Momentum`: `v = alpha · v + beta' · g` (`beta' = 1` at `T = 0`), then `x -= R · v` (`standard`) or
/// `x -= R · (g + alpha · v)` (`nesterov`).
pub(super) fn momentum(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let (r, t, g) = groups(a, 3)?;
    let (alpha, beta, norm) = (n.float("alpha", 0.0) as f64, n.float("beta", 0.0) as f64, n.float("norm_coefficient", 0.0) as f64);
    let beta = if t > 0 { beta } else { 1.0 };
    let nesterov = n.string("mode", "standard") == "nesterov";
    let (xs, vs): (Vec<Tensor>, Vec<Tensor>) = (0..g[0].len())
        .map(|i| {
            let grad = g[0][i].mul(norm).add(&g[1][i]);
            let v = g[2][i].mul(alpha).add(grad.mul(beta));
            let step = if nesterov { grad.add(v.mul(alpha)) } else { v.clone() };
            (g[0][i].sub(step.mul(r)), v)
        })
        .unzip();
    Ok([xs, vs].concat())
}

/// `Adam`: first and second moments `v`, `h` of the regularized gradient, bias-corrected rate from `T > 0`,
/// `x -= r · v / (sqrt(h) + epsilon)`, then `x *= 1 - norm_coefficient_post`.
pub(super) fn adam(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let (r, t, g) = groups(a, 4)?;
    let (alpha, beta) = (n.float("alpha", 0.9) as f64, n.float("beta", 0.999) as f64);
    let (eps, norm, post) =
        (n.float("epsilon", 0.0) as f64, n.float("norm_coefficient", 0.0) as f64, n.float("norm_coefficient_post", 0.0) as f64);
    let r = if t > 0 { r * (1.0 - beta.powi(t as i32)).sqrt() / (1.0 - alpha.powi(t as i32)) } else { r };
    let steps: Vec<[Tensor; 3]> = (0..g[0].len())
        .map(|i| {
            let grad = g[0][i].mul(norm).add(&g[1][i]);
            let v = g[2][i].mul(alpha).add(grad.mul(1.0 - alpha));
            let h = g[3][i].mul(beta).add(grad.square().mul(1.0 - beta));
            [g[0][i].sub(v.div(h.sqrt().add(eps)).mul(r)).mul(1.0 - post), v, h]
        })
        .collect();
    Ok((0..3).flat_map(|k| steps.iter().map(move |s| s[k].clone())).collect())
}

/// The handler of `op` in `ai.onnx.preview.training`.
pub(super) fn training(op: &str) -> Option<super::Handler> {
    Some(match op {
        "Adagrad" => adagrad,
        "Momentum" => momentum,
        "Adam" => adam,
        _ => return None,
    })
}

/// The handler of `op` in `ai.onnx.ml`.
pub(super) fn ml(op: &str) -> Option<super::Handler> {
    Some(match op {
        "Binarizer" => |n, a| {
            let x = arg(a, 0)?;
            one(x.gt(n.float("threshold", 0.0) as f64).cast(x.dtype()))
        },
        "ArrayFeatureExtractor" => |_, a| one(arg(a, 0)?.getitem(&[Index::Ellipsis, Index::Tensor(arg(a, 1)?.clone())])),
        _ => return None,
    })
}
