//! The recurrent handlers `RNN`, `GRU` and `LSTM` (onnx's operator definitions; tinygrad has none): the sequence
//! unrolled step by step on the Tensor API, forward, reverse or both ways, with `sequence_lens` masking, clipping,
//! the activation list, `layout` and the LSTM's peepholes.

use super::{arg, one, opt, values, Node, Outputs};
use crate::dtype::dtypes;
use crate::tensor::{Index, Tensor};

/// An activation by its ONNX name, with its alpha and beta (defaults per activation when absent).
fn activation(name: &str, x: &Tensor, alpha: Option<f32>, beta: Option<f32>) -> Result<Tensor, String> {
    let (a, b) = (|d: f32| alpha.unwrap_or(d) as f64, |d: f32| beta.unwrap_or(d) as f64);
    Ok(match name.to_ascii_lowercase().as_str() {
        "sigmoid" => x.sigmoid(),
        "tanh" => x.tanh(),
        "relu" => x.relu(),
        "affine" => x.mul(a(1.0)).add(b(0.0)),
        "leakyrelu" => x.leaky_relu(a(0.01)),
        "thresholdedrelu" => x.gt(a(1.0)).where_(x, 0.0),
        "scaledtanh" => x.mul(b(1.0)).tanh().mul(a(1.0)),
        "hardsigmoid" => x.mul(a(0.2)).add(b(0.5)).clamp(0.0, 1.0),
        "elu" => x.elu(a(1.0)),
        "softsign" => x.softsign(),
        "softplus" => x.softplus(1.0),
        n => return Err(format!("activation {n:?} is not supported")),
    })
}

/// One step of a direction's recurrence: `(x_t, h, c)` to the next `(h, c)`.
type Step<'a> = &'a dyn Fn(&Tensor, &Tensor, &Tensor) -> Result<(Tensor, Tensor), String>;

/// The recurrence of one direction: `cell(x_t, h, c) -> (h, c)` over the steps of `x` `(seq, batch, input)` in
/// order or reversed, where steps at or past a batch entry's length keep its state and output zeros. Returns
/// the outputs `(seq, batch, hidden)`, the last `h` and the last `c`.
fn unroll(
    x: &Tensor,
    lens: Option<&[i64]>,
    reverse: bool,
    (mut h, mut c): (Tensor, Tensor),
    cell: Step,
) -> Result<(Tensor, Tensor, Tensor), String> {
    let seq = x.shape()[0];
    let mut ys: Vec<Tensor> = Vec::with_capacity(seq);
    let steps: Vec<usize> = if reverse { (0..seq).rev().collect() } else { (0..seq).collect() };
    for t in steps {
        let (nh, nc) = cell(&x.getitem(&[Index::Int(t as i64)]), &h, &c)?;
        match lens {
            Some(l) => {
                let live: Vec<bool> = l.iter().map(|&n| (t as i64) < n).collect();
                let live = Tensor::from_slice(&live, [live.len(), 1]);
                (h, c) = (live.where_(&nh, &h), live.where_(&nc, &c));
                ys.push(live.where_(&nh, 0.0).cast(nh.dtype()));
            }
            None => {
                (h, c) = (nh.clone(), nc);
                ys.push(nh);
            }
        }
    }
    if reverse {
        ys.reverse();
    }
    let (first, rest) = ys.split_first().ok_or("a recurrence over no steps")?;
    Ok((first.stack(&rest.iter().collect::<Vec<_>>(), 0), h, c))
}

/// The common shape of `RNN`, `GRU` and `LSTM`: `gates` blocks of `W` `(dirs, gates·hidden, input)`, `R`, `B`
/// `(dirs, 2·gates·hidden)`, `sequence_lens`, `initial_h` (and `initial_c` at input 6), `layout` 1 for batch-first
/// tensors; `cell(dir, x_t·Wᵀ + Wb, h, c, R, Rb)` makes the next state. Outputs `Y` `(seq, dirs, batch, hidden)`,
/// `Y_h` and (LSTM) `Y_c` `(dirs, batch, hidden)`.
fn recurrent(n: &Node, a: &[Option<Tensor>], gates: usize, cell: CellFn) -> Outputs {
    let batch_first = n.int("layout", 0) != 0;
    let x = if batch_first { arg(a, 0)?.transpose(0, 1) } else { arg(a, 0)?.clone() };
    let (w, r) = (arg(a, 1)?, arg(a, 2)?);
    let hidden = n.int("hidden_size", (r.shape()[2]) as i64) as usize;
    let dirs = w.shape()[0];
    let batch = x.shape()[1];
    let lens = opt(a, 4).map(values).transpose()?;
    let state = |i: usize, d: usize| match opt(a, i) {
        Some(s) => {
            let s = if batch_first { s.transpose(0, 1) } else { s.clone() };
            s.getitem(&[Index::Int(d as i64)])
        }
        None => Tensor::full_dtype([batch, hidden], 0.0, x.dtype()),
    };
    let direction = n.string("direction", "forward");
    let (mut ys, mut hs, mut cs) = (Vec::new(), Vec::new(), Vec::new());
    for d in 0..dirs {
        let (wd, rd) = (w.getitem(&[Index::Int(d as i64)]), r.getitem(&[Index::Int(d as i64)]));
        let (wb, rb) = match opt(a, 3) {
            Some(b) => {
                let b = b.getitem(&[Index::Int(d as i64)]);
                (
                    b.getitem(&[Index::Slice(None, Some((gates * hidden) as i64), None)]),
                    b.getitem(&[Index::Slice(Some((gates * hidden) as i64), None, None)]),
                )
            }
            None => (Tensor::full_dtype([gates * hidden], 0.0, x.dtype()), Tensor::full_dtype([gates * hidden], 0.0, x.dtype())),
        };
        let xw = x.matmul(&wd.transpose(0, 1)).add(&wb);
        let reverse = direction == "reverse" || (direction == "bidirectional" && d == 1);
        let step = |xt: &Tensor, h: &Tensor, c: &Tensor| cell(n, a, d, hidden, xt, h, c, &rd, &rb);
        let (y, h, c) = unroll(&xw, lens.as_deref(), reverse, (state(5, d), state(6, d)), &step)?;
        ys.push(y);
        hs.push(h);
        cs.push(c);
    }
    let cat = |v: &[Tensor], dim: i64| v[0].stack(&v[1..].iter().collect::<Vec<_>>(), dim);
    let (y, yh, yc) = (cat(&ys, 1), cat(&hs, 0), cat(&cs, 0));
    if batch_first {
        return Ok(vec![y.permute([2, 0, 1, 3]), yh.transpose(0, 1), yc.transpose(0, 1)]);
    }
    Ok(vec![y, yh, yc])
}

/// One step of a cell: the node, its inputs, the direction, the hidden size, `x_t·Wᵀ + Wb`, `h`, `c`, `R` and `Rb`
/// of the direction, to the next `(h, c)`.
type CellFn = fn(&Node, &[Option<Tensor>], usize, usize, &Tensor, &Tensor, &Tensor, &Tensor, &Tensor) -> Result<(Tensor, Tensor), String>;

/// The direction's `k`-th activation from the `activations` list (`defaults` per direction when absent), with
/// its alpha and beta.
fn act(n: &Node, d: usize, k: usize, defaults: &[&str], x: &Tensor) -> Result<Tensor, String> {
    let i = d * defaults.len() + k;
    let names: Vec<String> =
        n.attr("activations").map(|a| a.strings.iter().map(|s| String::from_utf8_lossy(s).into_owned()).collect()).unwrap_or_default();
    let name = names.get(i).cloned().unwrap_or_else(|| defaults[k].to_string());
    let (alphas, betas) = (n.floats("activation_alpha").unwrap_or_default(), n.floats("activation_beta").unwrap_or_default());
    activation(&name, x, alphas.get(i).copied(), betas.get(i).copied())
}

/// Gate `g` of `gates · hidden` columns (the last dim).
fn gate(t: &Tensor, g: usize, hidden: usize) -> Tensor {
    t.getitem(&[Index::Ellipsis, Index::Slice(Some((g * hidden) as i64), Some(((g + 1) * hidden) as i64), None)])
}

/// Pre-activations clipped to `[-clip, clip]` when `clip` is set.
fn clipped(n: &Node, t: Tensor) -> Tensor {
    match n.attr("clip") {
        Some(c) => t.clamp(-(c.f() as f64), c.f() as f64),
        None => t,
    }
}

/// `RNN`: `h = f(x·Wᵀ + h·Rᵀ + Wb + Rb)`.
pub(super) fn rnn(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let out = recurrent(n, a, 1, |n, _, d, _, xw, h, c, r, rb| {
        Ok((act(n, d, 0, &["Tanh"], &clipped(n, xw.add(h.matmul(&r.transpose(0, 1)).add(rb))))?, c.clone()))
    })?;
    Ok(out[..2].to_vec())
}

/// `GRU` (gates z, r, h): `h' = (1 - z)·h~ + z·h`, the reset gate applied before or (`linear_before_reset`)
/// after the recurrent product.
pub(super) fn gru(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let out = recurrent(n, a, 3, |n, _, d, hs, xw, h, c, r, rb| {
        let rt = r.transpose(0, 1);
        let hr = h.matmul(&rt).add(rb);
        let z = act(n, d, 0, &["Sigmoid", "Tanh"], &clipped(n, gate(xw, 0, hs).add(gate(&hr, 0, hs))))?;
        let reset = act(n, d, 0, &["Sigmoid", "Tanh"], &clipped(n, gate(xw, 1, hs).add(gate(&hr, 1, hs))))?;
        let cand = if n.int("linear_before_reset", 0) != 0 {
            gate(xw, 2, hs).add(reset.mul(gate(&hr, 2, hs)))
        } else {
            let rh = gate(&rt, 2, hs);
            gate(xw, 2, hs).add(reset.mul(h).matmul(&rh)).add(gate(rb, 2, hs))
        };
        let cand = act(n, d, 1, &["Sigmoid", "Tanh"], &clipped(n, cand))?;
        Ok((z.neg().add(1.0).mul(&cand).add(z.mul(h)), c.clone()))
    })?;
    Ok(out[..2].to_vec())
}

/// `LSTM` (gates i, o, f, c, peepholes `P` `(dirs, 3·hidden)` as i, o, f): `c' = f·c + i·g(c~)`,
/// `h' = o·h(c')`.
pub(super) fn lstm(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    recurrent(n, a, 4, |n, a, d, hs, xw, h, c, r, rb| {
        let defaults = ["Sigmoid", "Tanh", "Tanh"];
        let pre = xw.add(h.matmul(&r.transpose(0, 1)).add(rb));
        let peep = |k: usize| opt(a, 7).map(|p| gate(&p.getitem(&[Index::Int(d as i64)]), k, hs));
        let with = |g: Tensor, k: usize, cell: &Tensor| peep(k).map_or(g.clone(), |p| g.add(p.mul(cell)));
        let i = act(n, d, 0, &defaults, &clipped(n, with(gate(&pre, 0, hs), 0, c)))?;
        let f = act(n, d, 0, &defaults, &clipped(n, with(gate(&pre, 2, hs), 2, c)))?;
        let f = if n.int("input_forget", 0) != 0 { i.neg().add(1.0) } else { f };
        let g = act(n, d, 1, &defaults, &clipped(n, gate(&pre, 3, hs)))?;
        let c2 = f.mul(c).add(i.mul(g));
        let o = act(n, d, 0, &defaults, &clipped(n, with(gate(&pre, 1, hs), 1, &c2)))?;
        Ok((o.mul(act(n, d, 2, &defaults, &c2)?), c2))
    })
}

/// `ReverseSequence`: along `time_axis`, the first `sequence_lens[b]` steps of each batch entry (along
/// `batch_axis`) reversed, the rest kept.
pub(super) fn reverse_sequence(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let (x, lens) = (arg(a, 0)?, values(arg(a, 1)?)?);
    let (ta, ba) = (n.int("time_axis", 0) as usize, n.int("batch_axis", 1) as usize);
    let (steps, batch) = (x.shape()[ta], x.shape()[ba]);
    let mut idx = vec![0i64; steps * batch];
    for t in 0..steps {
        for (b, &l) in lens.iter().enumerate() {
            let t = t as i64;
            idx[t as usize * batch + b] = if t < l { l - 1 - t } else { t };
        }
    }
    let shape: Vec<usize> = (0..x.ndim())
        .map(|d| {
            if d == ta {
                steps
            } else if d == ba {
                batch
            } else {
                1
            }
        })
        .collect();
    let idx = Tensor::from_slice(&idx, [steps, batch]);
    let idx = if ta < ba { idx } else { idx.transpose(0, 1) };
    let idx = idx.reshape(shape).expand(x.shape().iter().map(|&d| d as i64).collect::<Vec<_>>()).cast(dtypes::INT64);
    one(x.gather(ta as i64, &idx))
}
