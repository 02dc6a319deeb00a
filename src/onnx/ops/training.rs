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
        "TreeEnsemble" => tree_ensemble,
        "ArrayFeatureExtractor" => |_, a| one(arg(a, 0)?.getitem(&[Index::Ellipsis, Index::Tensor(arg(a, 1)?.clone())])),
        _ => return None,
    })
}

/// A tensor attribute's values as float64 (TreeEnsemble's splits, weights, modes, memberships).
fn tensor_attr(n: &Node, name: &str) -> Result<Option<Vec<f64>>, String> {
    let Some(t) = n.attr(name).and_then(|a| a.t.as_ref()) else { return Ok(None) };
    let dir = n.path.parent().unwrap_or(std::path::Path::new("."));
    floats(&crate::onnx::tensor_from_proto(t, dir, n.path).map_err(|e| e.to_string())?).map(Some)
}

/// `TreeEnsemble` (`ai.onnx.ml` opset 5): each row of `X` walked down every tree from `tree_roots` (a node compares
/// its feature with its split by `nodes_modes`: <=, <, >=, >, ==, != or membership; NaN goes the
/// `nodes_missing_value_tracks_true` way), the leaves' weights summed, averaged, or min/maxed per target. On the host.
pub(super) fn tree_ensemble(n: &Node, a: &[Option<Tensor>]) -> super::Outputs {
    let x = arg(a, 0)?;
    let (rows, cols) = (x.shape()[0], x.shape().get(1).copied().unwrap_or(1));
    let xs = floats(x)?;
    let ints = |k: &str| n.ints(k).unwrap_or_default();
    let (feature, tnode, fnode, tleaf, fleaf) = (
        ints("nodes_featureids"),
        ints("nodes_truenodeids"),
        ints("nodes_falsenodeids"),
        ints("nodes_trueleafs"),
        ints("nodes_falseleafs"),
    );
    let (targets_of, roots, missing) = (ints("leaf_targetids"), ints("tree_roots"), ints("nodes_missing_value_tracks_true"));
    let splits = tensor_attr(n, "nodes_splits")?.unwrap_or_default();
    let modes = tensor_attr(n, "nodes_modes")?.ok_or("TreeEnsemble without nodes_modes")?;
    let weights = tensor_attr(n, "leaf_weights")?.ok_or("TreeEnsemble without leaf_weights")?;
    if n.int("post_transform", 0) != 0 {
        return Err("TreeEnsemble post_transform other than NONE is not supported".into());
    }
    // (membership sets, NaN-separated, belong to the MEMBER nodes in depth-first order, true branch first)
    let mut sets: std::collections::HashMap<usize, Vec<f64>> = std::collections::HashMap::new();
    if let Some(members) = tensor_attr(n, "membership_values")? {
        let mut groups = members.split(|v| v.is_nan()).map(<[f64]>::to_vec);
        let mut stack: Vec<(usize, bool)> = roots.iter().rev().map(|&r| (r as usize, false)).collect();
        while let Some((i, leaf)) = stack.pop() {
            if leaf {
                continue;
            }
            if modes[i] == 6.0 {
                sets.insert(i, groups.next().unwrap_or_default());
            }
            stack.push((fnode[i] as usize, fleaf[i] != 0));
            stack.push((tnode[i] as usize, tleaf[i] != 0));
        }
    }
    let targets = n.int("n_targets", 1) as usize;
    let agg = n.int("aggregate_function", 1);
    let init = match agg {
        2 => f64::MAX,
        3 => f64::MIN,
        _ => 0.0,
    };
    let mut out = vec![init; rows * targets];
    for r in 0..rows {
        let row = &xs[r * cols..(r + 1) * cols];
        for &root in &roots {
            let root = root as usize;
            let (mut i, mut leaf) = (root, tleaf[root] != 0 && fleaf[root] != 0 && tnode[root] == fnode[root]);
            while !leaf {
                let v = row[feature[i] as usize];
                let s = splits.get(i).copied().unwrap_or(0.0);
                let go = (v.is_nan() && missing.get(i).is_some_and(|&m| m != 0))
                    || match modes[i] as i64 {
                        0 => v <= s,
                        1 => v < s,
                        2 => v >= s,
                        3 => v > s,
                        4 => v == s,
                        5 => v != s,
                        _ => sets.get(&i).is_some_and(|set| set.contains(&v)),
                    };
                (i, leaf) = if go { (tnode[i] as usize, tleaf[i] != 0) } else { (fnode[i] as usize, fleaf[i] != 0) };
            }
            let (w, t) = (weights[i], targets_of[i] as usize);
            let slot = &mut out[r * targets + t];
            *slot = match agg {
                0 => *slot + w / roots.len() as f64,
                2 => slot.min(w),
                3 => slot.max(w),
                _ => *slot + w,
            };
        }
    }
    one(Tensor::from_slice(&out, [rows, targets]).cast(x.dtype()))
}
