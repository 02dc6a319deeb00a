//! Neural-network handlers (tinygrad `nn/onnx.py`'s processing, normalization, loss and attention ops):
//! convolution, pooling, normalization, losses, dropout, attention, rotary embeddings, resizing and window
//! functions; inputs in, outputs out, on the Tensor API.

use super::{arg, axis_of, dtype_attr, floats, one, opt, values, Node, Outputs};
use crate::dtype::dtypes;
use crate::tensor::{Conv2dOpts, Index, Pool2dOpts, Reduction, Tensor};

/// The spatial padding `(before, after)` per dim of a conv or pool over `spatial` with kernel `k`: from `auto_pad`
/// (`SAME_UPPER`/`SAME_LOWER`: the output is `ceil(in / stride)`, the odd pad after or before; `VALID`: none) or
/// the `pads` attribute (begins, then ends).
fn spatial_pads(n: &Node, spatial: &[usize], k: &[usize], s: &[usize], d: &[usize]) -> Vec<(i64, i64)> {
    let nd = k.len();
    match n.string("auto_pad", "NOTSET").as_str() {
        mode @ ("SAME_UPPER" | "SAME_LOWER") => (0..nd)
            .map(|i| {
                let (inp, s) = (spatial[i] as i64, s[i] as i64);
                let total = (((inp + s - 1) / s - 1) * s + ((k[i] - 1) * d[i]) as i64 + 1 - inp).max(0);
                if mode == "SAME_UPPER" {
                    (total / 2, total - total / 2)
                } else {
                    (total - total / 2, total / 2)
                }
            })
            .collect(),
        "VALID" => vec![(0, 0); nd],
        _ => {
            let p = n.ints("pads").unwrap_or_else(|| vec![0; 2 * nd]);
            (0..nd).map(|i| (p[i], p[i + nd])).collect()
        }
    }
}

/// Pads per dim as the Tensor API's option takes them (torch order: the last dim first).
fn torch_pads(p: &[(i64, i64)]) -> Vec<i64> {
    p.iter().rev().flat_map(|&(b, a)| [b, a]).collect()
}

/// A per-spatial-dim attribute (`strides`, `dilations`), 1 for each dim when absent.
fn per_dim(n: &Node, name: &str, nd: usize) -> Vec<usize> {
    n.ints(name).map_or(vec![1; nd], |v| v.iter().map(|&x| x as usize).collect())
}

/// `Conv(X, W, B)`: N-d, grouped, strided, dilated, padded by `pads` or `auto_pad`.
pub(super) fn conv(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let (x, w) = (arg(a, 0)?, arg(a, 1)?);
    // (a 2-D filter over outputs too narrow for a row of vectors, or strided through its input, is read as vectors
    // of output channels, as is a 1x1 one (which a strided one's sum may share a kernel with): its weight is copied
    // once, output channels innermost)
    let narrow = |w: &Tensor| {
        let (s, d) = (per_dim(n, "strides", 2), per_dim(n, "dilations", 2));
        let (Some(&sw), Some(&dw), Some(&kw)) = (s.get(1), d.get(1), w.shape().last()) else { return false };
        let (l, r) = spatial_pads(n, &x.shape()[2..], &w.shape()[2..], &s, &d).get(1).copied().unwrap_or_default();
        w.shape()[2..] == [1, 1] || sw > 1 || (x.shape()[3] as i64 + l + r - (dw * (kw - 1)) as i64 - 1) / (sw as i64) < 15
    };
    let packed = (w.ndim() == 4 && x.ndim() == 4 && n.int("group", 1) == 1 && narrow(w))
        .then(|| n.prepacked(1, w, |w| w.permute([1, 2, 3, 0])))
        .flatten()
        .map(|t| t.permute([3, 0, 1, 2]));
    conv_with(n, x, packed.as_ref().unwrap_or(w), opt(a, 2))
}

/// `Conv` of `x` with `w` (and bias `b`) under the node's attributes (also `ConvInteger`'s and `QLinearConv`'s).
pub(super) fn conv_with(n: &Node, x: &Tensor, w: &Tensor, b: Option<&Tensor>) -> Outputs {
    let k: Vec<usize> = n.ints("kernel_shape").map_or(w.shape()[2..].to_vec(), |v| v.iter().map(|&x| x as usize).collect());
    let (s, d) = (per_dim(n, "strides", k.len()), per_dim(n, "dilations", k.len()));
    let pads = spatial_pads(n, &x.shape()[2..], &k, &s, &d);
    let mut opts = Conv2dOpts::default().groups(n.int("group", 1) as usize).stride(s).dilation(d).padding(torch_pads(&pads));
    opts.bias = b.cloned();
    one(x.conv2d(w, opts))
}

/// `ConvInteger(x, w, x_zero_point, w_zero_point)`: the int32 convolution of the zero-point-shifted operands (the
/// weight's zero point per output channel), padded with 0 after the shift.
pub(super) fn conv_integer(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let x = arg(a, 0)?.cast(dtypes::INT32);
    let x = opt(a, 2).map_or(x.clone(), |z| x.sub(z.cast(dtypes::INT32)));
    let w = arg(a, 1)?.cast(dtypes::INT32);
    let w = match opt(a, 3).map(|z| z.cast(dtypes::INT32)) {
        Some(z) if z.numel() > 1 => w.sub(z.reshape([z.numel(), 1, 1, 1])),
        Some(z) => w.sub(z),
        None => w,
    };
    conv_with(n, &x, &w, None)
}

/// `QLinearConv`: the integer convolution of the zero-point-shifted operands, requantized to `y_scale`/`y_zero_point`.
pub(super) fn qlinear_conv(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let x = arg(a, 0)?.cast(dtypes::INT32).sub(arg(a, 2)?.cast(dtypes::INT32));
    let (w, wz) = (arg(a, 3)?.cast(dtypes::INT32), arg(a, 5)?.cast(dtypes::INT32));
    let w = if wz.numel() > 1 { w.sub(wz.reshape([wz.numel(), 1, 1, 1])) } else { w.sub(wz) };
    let b = opt(a, 8).map(|b| b.cast(dtypes::INT32));
    let y = conv_with(n, &x, &w, b.as_ref())?.remove(0).cast(dtypes::FLOAT32);
    let ws = arg(a, 4)?.cast(dtypes::FLOAT32);
    let ws = if ws.numel() > 1 { ws.reshape([1, ws.numel(), 1, 1]) } else { ws };
    super::math::requantize(&y.mul(arg(a, 1)?.cast(dtypes::FLOAT32)).mul(ws), arg(a, 6)?, arg(a, 7)?)
}

/// `ConvTranspose(X, W, B)`: padding from `pads`, or from `output_shape` / `auto_pad` (the total split as for
/// `Conv`), with `output_padding`.
pub(super) fn conv_transpose(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let (x, w) = (arg(a, 0)?, arg(a, 1)?);
    let k: Vec<usize> = n.ints("kernel_shape").map_or(w.shape()[2..].to_vec(), |v| v.iter().map(|&x| x as usize).collect());
    let nd = k.len();
    let (s, d) = (per_dim(n, "strides", nd), per_dim(n, "dilations", nd));
    let outpad = n.ints("output_padding").map_or(vec![0; nd], |v| v.iter().map(|&x| x as usize).collect());
    let inp = &x.shape()[2..];
    let auto = n.string("auto_pad", "NOTSET");
    let split = |total: Vec<i64>| -> Vec<(i64, i64)> {
        let half = |t: i64| t.div_euclid(2);
        total.iter().map(|&t| if auto == "SAME_UPPER" { (half(t), t - half(t)) } else { (t - half(t), half(t)) }).collect()
    };
    let full = |i: usize| (s[i] * (inp[i] - 1) + outpad[i] + (k[i] - 1) * d[i] + 1) as i64;
    let pads = match (n.ints("output_shape"), n.ints("pads")) {
        // (no auto_pad: the output is cut or extended at the end)
        (Some(out), _) if !auto.starts_with("SAME") => (0..nd).map(|i| (0, full(i) - out[out.len() - nd + i])).collect(),
        (Some(out), _) => split((0..nd).map(|i| full(i) - out[out.len() - nd + i]).collect()),
        (None, Some(p)) => (0..nd).map(|i| (p[i], p[i + nd])).collect(),
        (None, None) if auto.starts_with("SAME") => split((0..nd).map(|i| full(i) - (inp[i] * s[i]) as i64).collect()),
        (None, None) => vec![(0, 0); nd],
    };
    let mut opts =
        Conv2dOpts::default().groups(n.int("group", 1) as usize).stride(s).dilation(d).padding(torch_pads(&pads)).output_padding(outpad);
    opts.bias = opt(a, 2).cloned();
    one(x.conv_transpose2d(w, opts))
}

/// The pooling options of a node over input `x`: `kernel_shape`, `strides`, `dilations`, `pads`/`auto_pad`,
/// `ceil_mode`.
fn pool_opts(n: &Node, x: &Tensor) -> Pool2dOpts {
    let k: Vec<usize> = n.ints("kernel_shape").unwrap_or_default().iter().map(|&v| v as usize).collect();
    let (s, d) = (per_dim(n, "strides", k.len()), per_dim(n, "dilations", k.len()));
    let pads = spatial_pads(n, &x.shape()[x.ndim() - k.len()..], &k, &s, &d);
    Pool2dOpts::default().kernel_size(k).stride(s).dilation(d).padding(torch_pads(&pads)).ceil_mode(n.int("ceil_mode", 0) != 0)
}

/// `AveragePool`: padded zeros count in the mean only under `count_include_pad`.
pub(super) fn average_pool(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let x = arg(a, 0)?;
    let mut opts = pool_opts(n, x);
    opts.count_include_pad = n.int("count_include_pad", 0) != 0;
    one(x.avg_pool2d(opts))
}

/// `MaxPool`, and its int64 `Indices` output: each maximum's flat index in the whole input (row-major, or
/// column-major over the pooled dims under `storage_order`).
pub(super) fn max_pool(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let x = arg(a, 0)?;
    let opts = pool_opts(n, x);
    if n.outputs() < 2 {
        return one(x.max_pool2d(opts));
    }
    let nd = opts.kernel_size.len();
    let spatial = x.shape()[x.ndim() - nd..].to_vec();
    let (y, idx) = x.max_pool2d_with_indices(opts);
    let mut idx = idx.cast(dtypes::INT64);
    if n.int("storage_order", 0) != 0 && nd == 2 {
        let (h, w) = (spatial[0] as i64, spatial[1] as i64);
        idx = idx.mod_(w).mul(h).add(idx.div_floor(w));
    }
    let lead: usize = x.shape()[..x.ndim() - nd].iter().product();
    let plane: usize = spatial.iter().product();
    let base = Tensor::arange(0.0, lead as f64, 1.0).cast(dtypes::INT64).mul(plane as i64);
    let base = base.reshape([x.shape()[..x.ndim() - nd].to_vec(), vec![1; nd]].concat());
    Ok(vec![y, idx.add(base)])
}

/// `LpPool`: the p-norm of each window, `(Σ |x|^p)^(1/p)`.
pub(super) fn lp_pool(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let (x, p) = (arg(a, 0)?, n.int("p", 2) as f64);
    let opts = pool_opts(n, x);
    let size: usize = opts.kernel_size.iter().product();
    one(x.abs().pow(p).avg_pool2d(opts).mul(size as f64).pow(1.0 / p))
}

/// `MaxUnpool(X, I, output_shape)`: each value written at its index in a zero output.
pub(super) fn max_unpool(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let (x, i) = (arg(a, 0)?, arg(a, 1)?);
    let k: Vec<usize> = n.ints("kernel_shape").unwrap_or_default().iter().map(|&v| v as usize).collect();
    let s = per_dim(n, "strides", k.len());
    let p = n.ints("pads").unwrap_or_else(|| vec![0; 2 * k.len()]);
    let pads: Vec<(i64, i64)> = (0..k.len()).map(|j| (p[j], p[j + k.len()])).collect();
    // (values land in the shape the pooling implies, then pad with zeros at the end to `output_shape`)
    let spatial: Vec<usize> = (0..k.len()).map(|j| (x.shape()[2 + j] - 1) * s[j] + k[j] - (pads[j].0 + pads[j].1) as usize).collect();
    let plane: usize = spatial.iter().product();
    let opts = Pool2dOpts::default().kernel_size(k.clone()).stride(s).padding(torch_pads(&pads));
    let y = x.max_unpool2d(&i.mod_(plane as i64).cast(dtypes::INT32), opts, Some(&spatial));
    match opt(a, 2).map(values).transpose()? {
        Some(o) => {
            let extra: Vec<(i64, i64)> =
                (0..y.ndim()).map(|d| (0, if d < 2 { 0 } else { o[o.len() - k.len() + d - 2] - spatial[d - 2] as i64 })).collect();
            one(y.pad(&extra))
        }
        None => one(y),
    }
}

/// `x` with a per-channel tensor `t` (shape `(C,)`) laid along dim 1.
fn per_channel(x: &Tensor, t: &Tensor) -> Tensor {
    t.reshape((0..x.ndim()).map(|d| if d == 1 { t.numel() } else { 1 }).collect::<Vec<_>>())
}

/// `BatchNormalization`: with the running statistics, or (under `training_mode`) the batch's, returning the
/// updated running mean and variance too.
pub(super) fn batch_normalization(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let (x, scale, bias, mean, var) = (arg(a, 0)?, arg(a, 1)?, arg(a, 2)?, arg(a, 3)?, arg(a, 4)?);
    let eps = n.float("epsilon", 1e-5) as f64;
    let norm = |m: &Tensor, v: &Tensor| {
        x.sub(per_channel(x, m)).div(per_channel(x, &v.add(eps)).sqrt()).mul(per_channel(x, scale)).add(per_channel(x, bias))
    };
    if n.int("training_mode", 0) == 0 {
        return one(norm(mean, var));
    }
    let axes: Vec<i64> = (0..x.ndim() as i64).filter(|&d| d != 1).collect();
    let (bm, bv) = (x.mean(axes.clone()), x.var(axes, false, 0.0));
    let mo = n.float("momentum", 0.9) as f64;
    Ok(vec![norm(&bm, &bv), mean.mul(mo).add(bm.mul(1.0 - mo)), var.mul(mo).add(bv.mul(1.0 - mo))])
}

/// `GroupNormalization` (and `InstanceNormalization`, one group per channel): normalized over each group of
/// channels and the spatial dims, then scaled and shifted per channel (per group before opset 21).
pub(super) fn group_norm(x: &Tensor, scale: &Tensor, bias: &Tensor, groups: usize, eps: f32) -> Outputs {
    let (s, c) = (x.shape(), x.shape()[1]);
    let g = x.reshape([s[0] as i64, groups as i64, -1]);
    let g = g.sub(g.mean_keepdim(2)).div(g.var(2, true, 0.0).add(eps as f64).sqrt()).reshape(s);
    let widen = |t: &Tensor| if t.numel() == c { t.clone() } else { t.repeat_interleave(c / t.numel(), Some(0)) };
    one(g.mul(per_channel(x, &widen(scale))).add(per_channel(x, &widen(bias))))
}

/// `LayerNormalization`: Y, and the Mean and InvStdDev outputs, over the axes from `axis` on.
pub(super) fn layer_normalization(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let x = arg(a, 0)?;
    let axes: Vec<i64> = (axis_of(n.int("axis", -1), x.ndim())..x.ndim() as i64).collect();
    let mean = x.mean_keepdim(axes.clone());
    let inv = x.sub(&mean).square().mean_keepdim(axes).add(n.float("epsilon", 1e-5) as f64).sqrt().reciprocal();
    let y = x.sub(&mean).mul(&inv).mul(arg(a, 1)?);
    Ok(vec![opt(a, 2).map_or(y.clone(), |b| y.add(b)), mean, inv])
}

/// `RMSNormalization`: `x / sqrt(mean(x²) + epsilon) * scale` over the axes from `axis` on.
pub(super) fn rms_normalization(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let x = arg(a, 0)?;
    let axes: Vec<i64> = (axis_of(n.int("axis", -1), x.ndim())..x.ndim() as i64).collect();
    let x32 = x.cast(dtypes::FLOAT32);
    let y = x32.mul(x32.square().mean_keepdim(axes).add(n.float("epsilon", 1e-5) as f64).rsqrt());
    one(y.cast(x.dtype()).mul(arg(a, 1)?))
}

/// `LRN`: `x / (bias + alpha / size · Σ x²)^beta`, the sum over `size` neighbouring channels.
pub(super) fn lrn(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let x = arg(a, 0)?;
    let size = n.int("size", 1) as usize;
    let (alpha, beta, bias) = (n.float("alpha", 1e-4) as f64, n.float("beta", 0.75) as f64, n.float("bias", 1.0) as f64);
    let s = x.shape();
    let sq = x.square().reshape([s[0], 1, s[1], s[2..].iter().product()]);
    let sq = sq.pad(&[(0, 0), (0, 0), (((size - 1) / 2) as i64, (size / 2) as i64), (0, 0)]);
    let avg = sq.avg_pool2d(Pool2dOpts::default().kernel_size([size, 1]).stride(1)).reshape(s);
    one(x.div(avg.mul(alpha).add(bias).pow(beta)))
}

/// `Dropout` at inference (or a training ratio of 0): the input, and an all-true mask.
pub(super) fn dropout(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let x = arg(a, 0)?;
    let ratio = match opt(a, 1) {
        Some(r) => floats(r)?[0],
        None => n.float("ratio", 0.5) as f64,
    };
    let training = opt(a, 2).map(values).transpose()?.is_some_and(|v| v[0] != 0) || (n.opset < 7 && n.int("is_test", 0) == 0);
    if training && ratio > 0.0 && n.opset >= 7 {
        return Err("Dropout in training mode (numpy's random mask) is not supported".into());
    }
    Ok(vec![x.clone(), Tensor::full_dtype(x.shape(), true, dtypes::BOOL)])
}

/// The `reduction` attribute.
fn reduction(n: &Node) -> Result<Reduction, String> {
    let r = n.string("reduction", "mean");
    Reduction::from_name(&r).ok_or_else(|| format!("reduction {r:?} is not one of none, sum, mean"))
}

/// `NegativeLogLikelihoodLoss(input, target, weight)`: `-input[n, target[n]]`, weighted, with `ignore_index`.
pub(super) fn nll_loss(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let (x, y) = (arg(a, 0)?, arg(a, 1)?);
    let ignore = n.attr("ignore_index").map(|v| v.i());
    one(x.nll_loss(y, opt(a, 2), ignore, reduction(n)?).cast(x.dtype()))
}

/// `SoftmaxCrossEntropyLoss(scores, labels, weights)`: the NLL of `log_softmax` over dim 1, and the log-probabilities.
pub(super) fn softmax_cross_entropy_loss(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let (x, y) = (arg(a, 0)?, arg(a, 1)?);
    let logp = x.log_softmax(1);
    let ignore = n.attr("ignore_index").map(|v| v.i());
    Ok(vec![logp.nll_loss(y, opt(a, 2), ignore, reduction(n)?).cast(x.dtype()), logp])
}

/// `Attention` (opset 23 on, onnx's reference semantics): 3-D inputs split into `q_num_heads`/`kv_num_heads`; past
/// keys and values concatenated (and returned as present); grouped KV heads repeated; `scale` (default
/// `1/sqrt(head)`), `softcap`, a causal mask aligned to the bottom right, an additive or boolean `attn_mask` (padded
/// with masked columns), `nonpad_kv_seqlen` and a local window; a fully masked row gives zeros. The fourth output is
/// the scores at the stage `qk_matmul_output_mode` names.
pub(super) fn attention(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    // (16-bit floats compute in float32, rounded at the end, as onnx's reference does)
    let io = arg(a, 0)?.dtype();
    let wide = |t: &Tensor| if t.dtype() == dtypes::FLOAT16 || t.dtype() == dtypes::BFLOAT16 { t.cast(dtypes::FLOAT32) } else { t.clone() };
    let (mut q, mut k, mut v) = (wide(arg(a, 0)?), wide(arg(a, 1)?), wide(arg(a, 2)?));
    let three = q.ndim() == 3;
    if three {
        let heads = |t: &Tensor, h: i64| {
            let s = t.shape();
            t.reshape([s[0] as i64, s[1] as i64, h, -1]).permute([0, 2, 1, 3])
        };
        let (qh, kvh) = (n.int("q_num_heads", 1), n.int("kv_num_heads", 1));
        (q, k, v) = (heads(&q, qh), heads(&k, kvh), heads(&v, kvh));
    }
    let past = opt(a, 4).map(|p| p.shape()[2]).unwrap_or(0) as i64;
    if let Some(p) = opt(a, 4) {
        k = wide(p).cat(&[&k], 2);
    }
    if let Some(p) = opt(a, 5) {
        v = wide(p).cat(&[&v], 2);
    }
    let (present_k, present_v) = (k.clone(), v.clone());
    let (qn, kn) = (q.shape()[1], k.shape()[1]);
    if qn != kn && qn % kn == 0 {
        (k, v) = (k.repeat_interleave(qn / kn, Some(1)), v.repeat_interleave(qn / kn, Some(1)));
    }
    let (ls, lk, dt) = (q.shape()[2], k.shape()[2], q.dtype());
    let scale = match n.attr("scale") {
        Some(s) => s.f() as f64,
        None => 1.0 / (q.shape()[3] as f64).sqrt(),
    };
    let neg_inf = f64::NEG_INFINITY;
    // the additive bias: 0 where a key is attended, -inf where it is masked
    let mut bias = Tensor::full_dtype([ls, lk], 0.0, dt);
    if let Some(m) = opt(a, 3) {
        let short = lk as i64 - m.shape()[m.ndim() - 1] as i64;
        let m = if m.dtype().is_bool() { m.where_(0.0, neg_inf).cast(dt) } else { m.clone() };
        let pads: Vec<(i64, i64)> = (0..m.ndim()).map(|d| if d == m.ndim() - 1 { (0, short.max(0)) } else { (0, 0) }).collect();
        bias = bias.add(m.pad_value(&pads, neg_inf));
    }
    let rows = Tensor::arange(0.0, ls as f64, 1.0).cast(dtypes::INT64).reshape([ls, 1]);
    let cols = Tensor::arange(0.0, lk as f64, 1.0).cast(dtypes::INT64).reshape([1, lk]);
    let nonpad = opt(a, 6).map(|t| t.cast(dtypes::INT64).reshape([t.numel(), 1, 1, 1]));
    // a query's position among the keys: after the past ones, or before the end of the unpadded ones
    let offset = match (&nonpad, past) {
        (Some(np), 0) => np.sub(ls as i64),
        _ => Tensor::full_dtype([1usize; 0], past, dtypes::INT64),
    };
    let diff = rows.add(&offset).sub(&cols);
    if n.int("is_causal", 0) != 0 {
        bias = bias.add(diff.ge(0).where_(0.0, neg_inf).cast(dt));
    }
    let (left, right) = (n.int("left_window_size", -1), n.int("right_window_size", -1));
    if left >= 0 {
        bias = bias.add(diff.le(left).where_(0.0, neg_inf).cast(dt));
    }
    if right >= 0 {
        bias = bias.add(diff.neg().le(right).where_(0.0, neg_inf).cast(dt));
    }
    if let Some(np) = &nonpad {
        bias = bias.add(cols.lt(np).where_(0.0, neg_inf).cast(dt));
    }
    // (onnx's reference computes a 16-bit input step by step in its dtype: each step rounds to it here too)
    let half = io == dtypes::FLOAT16 || io == dtypes::BFLOAT16;
    let rd = |t: Tensor| if half { t.cast(io).cast(dt) } else { t };
    let root = rd(Tensor::from_slice(&[scale.sqrt() as f32], []).cast(dt));
    let mut qk = rd(rd(q.mul(&root)).matmul(&rd(k.mul(&root)).transpose(-1, -2)));
    let softcap = n.float("softcap", 0.0) as f64;
    if softcap > 0.0 {
        qk = rd(rd(rd(qk.div(softcap)).tanh()).mul(softcap));
    }
    let scores = rd(qk.add(&bias));
    let precision = n.int("softmax_precision", 0);
    let masked_row = bias.max_keepdim(-1).eq(neg_inf);
    let probs = if precision != 0 {
        scores.cast(dtype_attr(precision)?).softmax(-1)
    } else {
        let shifted = rd(scores.sub(scores.max_keepdim(-1).maximum(f64::MIN)));
        let e = rd(shifted.exp());
        rd(e.div(rd(e.sum_keepdim(-1))))
    };
    let probs = masked_row.where_(0.0, probs.cast(dt)).cast(io).cast(dt);
    let out = match n.int("qk_matmul_output_mode", 0) {
        2 => scores,
        3 => probs.clone(),
        _ => qk,
    };
    let mut y = rd(probs.matmul(&v));
    if three {
        let s = y.shape();
        y = y.permute([0, 2, 1, 3]).reshape([s[0] as i64, s[2] as i64, -1]);
    }
    Ok(vec![y.cast(io), present_k.cast(io), present_v.cast(io), out.cast(io)])
}

/// `RotaryEmbedding` (opset 23): the first `rotary_embedding_dim` features of each head rotated by the cached
/// cosines and sines (at `position_ids`, or already laid out per batch and position), halves or interleaved pairs.
pub(super) fn rotary_embedding(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let x0 = arg(a, 0)?;
    let x = match x0.ndim() {
        4 => x0.permute([0, 2, 1, 3]),
        _ => {
            let h = n.int("num_heads", 0);
            x0.unflatten(-1, [h, x0.shape()[2] as i64 / h])
        }
    };
    let head = x.shape()[3];
    let rot = match n.int("rotary_embedding_dim", 0) {
        0 => head,
        r => r as usize,
    };
    let (cos, sin) = match opt(a, 3) {
        Some(p) => (arg(a, 1)?.getitem(&[Index::Tensor(p.clone())]), arg(a, 2)?.getitem(&[Index::Tensor(p.clone())])),
        None => (arg(a, 1)?.clone(), arg(a, 2)?.clone()),
    };
    let half = |t: &Tensor| t.getitem(&[Index::Ellipsis, Index::Slice(None, Some(rot as i64 / 2), None)]).unsqueeze(2);
    let (cos, sin) = (half(&cos), half(&sin));
    let (xr, xp) = (
        x.getitem(&[Index::Ellipsis, Index::Slice(None, Some(rot as i64), None)]),
        x.getitem(&[Index::Ellipsis, Index::Slice(Some(rot as i64), None, None)]),
    );
    let interleaved = n.int("interleaved", 0) != 0;
    let (x1, x2) = if interleaved {
        (
            xr.getitem(&[Index::Ellipsis, Index::Slice(None, None, Some(2))]),
            xr.getitem(&[Index::Ellipsis, Index::Slice(Some(1), None, Some(2))]),
        )
    } else {
        let h = xr.chunk(2, -1);
        (h[0].clone(), h[1].clone())
    };
    let (re, im) = (x1.mul(&cos).sub(x2.mul(&sin)), x1.mul(&sin).add(x2.mul(&cos)));
    let rotated = if interleaved { re.stack(&[&im], -1).flatten_range(-2, -1) } else { re.cat(&[&im], -1) };
    let y = rotated.cat(&[&xp], -1);
    one(if x0.ndim() == 4 { y.permute([0, 2, 1, 3]) } else { y.flatten_range(2, 3) })
}

/// One output position of a resize along a dim: the source indices it reads and their weights, or `None` where
/// `tf_crop_and_resize` extrapolates.
type Taps = Option<Vec<(usize, f64)>>;

/// The taps of each of `out` positions resized from `inp` at `scale` (onnx's `Resize` reference: the coordinate
/// transformation, then nearest rounding, linear or cubic weights with edges clamped or excluded).
fn resize_taps(n: &Node, inp: usize, out: usize, scale: f64, roi: (f64, f64)) -> Result<Vec<Taps>, String> {
    let (mode, ctm) = (n.string("mode", "nearest"), n.string("coordinate_transformation_mode", "half_pixel"));
    let nearest = n.string("nearest_mode", "round_prefer_floor");
    let (fi, fo) = (inp as f64, out as f64);
    let cubic_a = n.float("cubic_coeff_a", -0.75) as f64;
    let exclude = n.int("exclude_outside", 0) != 0;
    let antialias = n.int("antialias", 0) != 0;
    (0..out)
        .map(|i| {
            let i = i as f64;
            let x = match ctm.as_str() {
                "align_corners" if out == 1 => 0.0,
                "align_corners" => i * (fi - 1.0) / (fi * scale - 1.0),
                "asymmetric" => i / scale,
                "pytorch_half_pixel" if out == 1 => 0.0,
                "half_pixel_symmetric" => fi / 2.0 * (1.0 - fo / (fi * scale)) + (i + 0.5) / scale - 0.5,
                "tf_crop_and_resize" if out == 1 => 0.5 * (roi.0 + roi.1) * (fi - 1.0),
                "tf_crop_and_resize" => roi.0 * (fi - 1.0) + i * (roi.1 - roi.0) * (fi - 1.0) / (fo - 1.0),
                "half_pixel" | "pytorch_half_pixel" => (i + 0.5) / scale - 0.5,
                m => return Err(format!("coordinate_transformation_mode {m:?} is not supported")),
            };
            if ctm == "tf_crop_and_resize" && (x < 0.0 || x > fi - 1.0) {
                return Ok(None);
            }
            let clamp = |j: i64| j.clamp(0, inp as i64 - 1) as usize;
            Ok(Some(match mode.as_str() {
                "nearest" => {
                    let j = match nearest.as_str() {
                        "round_prefer_ceil" => (x + 0.5).floor(),
                        "floor" => x.floor(),
                        "ceil" => x.ceil(),
                        _ => (x - 0.5).ceil(),
                    };
                    vec![(clamp(j as i64), 1.0)]
                }
                "linear" | "cubic" if antialias && scale < 1.0 => {
                    // (onnx's antialiasing: the filter stretched by 1/scale over the taps around x, edges replicated)
                    let base = x.ceil() - 1.0;
                    let r = x - base;
                    let (reach, a) = (if mode == "linear" { 1.0 } else { 2.0 }, cubic_a);
                    let start = (-reach / scale).floor() as i64 + 1;
                    let filter = |d: f64| {
                        let d = d.abs();
                        match mode.as_str() {
                            "linear" => (1.0 - d).clamp(0.0, 1.0),
                            _ if d <= 1.0 => ((a + 2.0) * d - (a + 3.0)) * d * d + 1.0,
                            _ if d < 2.0 => ((a * d - 5.0 * a) * d + 8.0 * a) * d - 4.0 * a,
                            _ => 0.0,
                        }
                    };
                    let taps: Vec<(i64, f64)> = (start..1 - start + 1).map(|o| (base as i64 + o, filter((o as f64 - r) * scale))).collect();
                    let taps: Vec<(i64, f64)> =
                        if exclude { taps.into_iter().filter(|&(j, _)| j >= 0 && j < inp as i64).collect() } else { taps };
                    let total: f64 = taps.iter().map(|t| t.1).sum();
                    taps.into_iter().map(|(j, w)| (clamp(j), w / total)).collect()
                }
                "linear" => {
                    let x = x.clamp(0.0, fi - 1.0);
                    let (lo, t) = (x.floor(), x - x.floor());
                    vec![(clamp(lo as i64), 1.0 - t), (clamp(lo as i64 + 1), t)]
                }
                "cubic" => {
                    let (p, t) = (x.floor() as i64, x - x.floor());
                    let a = cubic_a;
                    let near = |d: f64| ((a + 2.0) * d - (a + 3.0)) * d * d + 1.0;
                    let far = |d: f64| ((a * d - 5.0 * a) * d + 8.0 * a) * d - 4.0 * a;
                    let w = [far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t)];
                    let taps: Vec<(i64, f64)> = (0..4).map(|o| (p - 1 + o, w[o as usize])).collect();
                    if exclude {
                        let inside: Vec<(i64, f64)> = taps.into_iter().filter(|&(j, _)| j >= 0 && j < inp as i64).collect();
                        let total: f64 = inside.iter().map(|t| t.1).sum();
                        inside.into_iter().map(|(j, w)| (j as usize, w / total)).collect()
                    } else {
                        taps.into_iter().map(|(j, w)| (clamp(j), w)).collect()
                    }
                }
                m => return Err(format!("mode {m:?} is not supported")),
            }))
        })
        .collect()
}

/// `Resize` (and the old `Upsample`): each resized axis to its size (from `sizes`, or `floor(in · scale)`) by
/// nearest, linear or cubic interpolation under the coordinate transformation mode, one axis after another.
pub(super) fn resize(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let x = arg(a, 0)?;
    let nd = x.ndim();
    let (roi_i, scales_i, sizes_i) = if n.opset >= 11 && n.proto.op_type() == "Resize" { (1, 2, 3) } else { (9, 1, 9) };
    let axes: Vec<usize> = n.ints("axes").map_or((0..nd).collect(), |v| v.iter().map(|&d| axis_of(d, nd) as usize).collect());
    let scales = match opt(a, scales_i).filter(|t| t.numel() > 0) {
        Some(t) => Some(floats(t)?),
        None => n.floats("scales").map(|v| v.iter().map(|&s| s as f64).collect()),
    };
    let sizes = opt(a, sizes_i).filter(|t| t.numel() > 0).map(values).transpose()?;
    let roi = opt(a, roi_i).filter(|t| t.numel() > 0).map(floats).transpose()?;
    let (mut out, mut sc) = (x.shape(), vec![1.0; nd]);
    match (sizes, scales) {
        (Some(sz), _) => {
            let ratio = |j: usize| sz[j] as f64 / x.shape()[axes[j]] as f64;
            let policy = n.string("keep_aspect_ratio_policy", "stretch");
            let fit = match policy.as_str() {
                "not_larger" => (0..axes.len()).map(ratio).fold(f64::INFINITY, f64::min),
                "not_smaller" => (0..axes.len()).map(ratio).fold(0.0, f64::max),
                _ => 0.0,
            };
            for (j, &ax) in axes.iter().enumerate() {
                sc[ax] = if policy == "stretch" { ratio(j) } else { fit };
                out[ax] = if policy == "stretch" { sz[j] as usize } else { (fit * x.shape()[ax] as f64).round() as usize };
            }
        }
        (None, Some(s)) => {
            for (j, &ax) in axes.iter().enumerate() {
                let span = roi.as_ref().filter(|_| n.string("coordinate_transformation_mode", "") == "tf_crop_and_resize");
                let span = span.map_or(1.0, |r| r[j + axes.len()] - r[j]);
                sc[ax] = s[j];
                out[ax] = (x.shape()[ax] as f64 * span * s[j]).floor() as usize;
            }
        }
        (None, None) => return Err("Resize needs scales or sizes".into()),
    }
    let extrapolation = n.float("extrapolation_value", 0.0) as f64;
    let mut y = x.clone();
    for (j, &ax) in axes.iter().enumerate() {
        let inp = x.shape()[ax];
        if out[ax] == inp && sc[ax] == 1.0 {
            continue;
        }
        let r = roi.as_ref().map_or((0.0, 1.0), |r| (r[j], r[j + axes.len()]));
        let taps = resize_taps(n, inp, out[ax], sc[ax], r)?;
        let along = |v: Vec<f64>| {
            let shape: Vec<usize> = (0..nd).map(|d| if d == ax { out[ax] } else { 1 }).collect();
            Tensor::from_slice(&v, [v.len()]).reshape(shape)
        };
        let mut target = y.shape();
        target[ax] = out[ax];
        let width = taps.iter().flatten().map(Vec::len).max().unwrap_or(1);
        let mut acc: Option<Tensor> = None;
        for t in 0..width {
            let tap =
                |f: fn(&(usize, f64)) -> f64| taps.iter().map(|v| v.as_ref().and_then(|v| v.get(t)).map_or(0.0, f)).collect::<Vec<_>>();
            let idx = along(tap(|p| p.0 as f64)).cast(dtypes::INT64).expand(target.iter().map(|&d| d as i64).collect::<Vec<_>>());
            let picked = y.gather(ax as i64, &idx);
            let term = if n.string("mode", "nearest") == "nearest" {
                picked
            } else {
                picked.cast(dtypes::FLOAT32).mul(along(tap(|p| p.1)).cast(dtypes::FLOAT32))
            };
            acc = Some(acc.map_or(term.clone(), |s| s.add(&term)));
        }
        let mut r = acc.ok_or("Resize with no taps")?;
        if taps.iter().any(Option::is_none) {
            let outside = along(taps.iter().map(|t| if t.is_none() { 1.0 } else { 0.0 }).collect()).eq(1.0);
            r = outside.where_(extrapolation, r);
        }
        y = r.cast(x.dtype());
    }
    one(y)
}

/// `AffineGrid(theta, size)`: the sampling grid of affine matrices `theta` over normalized coordinates in [-1, 1]
/// (pixel centers unless `align_corners`).
pub(super) fn affine_grid(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let theta = arg(a, 0)?;
    let size = values(arg(a, 1)?)?;
    let (batch, spatial) = (size[0] as usize, size[2..].iter().map(|&d| d as usize).collect::<Vec<_>>());
    let corners = n.int("align_corners", 0) != 0;
    let steps = |d: usize| {
        let e = if corners { 0.0 } else { 1.0 / d as f64 };
        Tensor::linspace(-1.0 + e, 1.0 - e, d, theta.dtype())
    };
    let axes: Vec<Tensor> = spatial.iter().map(|&d| steps(d)).collect();
    let (first, rest) = axes.split_first().ok_or("AffineGrid without spatial dims")?;
    let grids = first.meshgrid(&rest.iter().collect::<Vec<_>>(), "ij");
    let mut cols: Vec<Tensor> = grids.iter().rev().cloned().collect();
    cols.push(grids[0].ones_like());
    let base = cols[0].stack(&cols[1..].iter().collect::<Vec<_>>(), -1);
    let cells: usize = spatial.iter().product();
    let base = base.reshape([1, cells, spatial.len() + 1]).expand([batch as i64, -1, -1]);
    one(base.matmul(&theta.transpose(1, 2)).reshape([vec![batch], spatial.clone(), vec![spatial.len()]].concat()))
}

/// The Hann, Hamming and Blackman windows: `c0 - c1 cos(2πn/N) + c2 cos(4πn/N)` over `size` points (`N` the size
/// when `periodic`, else one less), in `output_datatype`.
pub(super) fn window(n: &Node, a: &[Option<Tensor>], c: [f64; 3]) -> Outputs {
    let size = values(arg(a, 0)?)?[0];
    let big_n = if n.int("periodic", 1) != 0 { size } else { size - 1 } as f64;
    let k = Tensor::arange(0.0, size as f64, 1.0).cast(dtypes::FLOAT64);
    let tau = 2.0 * std::f64::consts::PI / big_n;
    let w = k.mul(tau).cos().mul(-c[1]).add(c[0]).add(k.mul(2.0 * tau).cos().mul(c[2]));
    one(w.cast(dtype_attr(n.int("output_datatype", 1))?))
}

/// `SwiGLU(A, B)`: `A · sigmoid(alpha · A) · B`.
pub(super) fn swiglu(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let (x, b) = (arg(a, 0)?, arg(a, 1)?);
    one(x.mul(x.mul(n.float("alpha", 1.0) as f64).sigmoid()).mul(b))
}

/// `CausalConvWithState(input, weight, bias, past_state)`: a depthwise causal 1-D convolution over `(B, C, L)`,
/// the `k - 1` steps before the input taken from `past_state` (zeros without it); `activation` `silu`/`swish`
/// applied in float32. Returns the output and the last `k - 1` steps as the present state.
pub(super) fn causal_conv_with_state(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let (x, w) = (arg(a, 0)?, arg(a, 1)?);
    let (b, c, l, k) = (x.shape()[0], x.shape()[1], x.shape()[2], w.shape()[2]);
    let past = opt(a, 3).cloned().unwrap_or_else(|| Tensor::full_dtype([b, c, k - 1], 0.0, x.dtype()));
    let padded = past.cat(&[x], 2);
    let mut opts = Conv2dOpts::default().groups(c);
    opts.bias = opt(a, 2).cloned();
    let y = padded.conv2d(w, opts).cast(x.dtype());
    let y = match n.string("activation", "none").as_str() {
        "silu" | "swish" => y.cast(dtypes::FLOAT32).silu().cast(x.dtype()),
        _ => y,
    };
    let state = padded.getitem(&[Index::Ellipsis, Index::Slice(Some(l as i64), None, None)]);
    Ok(vec![y, state])
}

/// `x` `(B, T, H·D)` as `(B, H, T, D)`.
fn heads(x: &Tensor, h: usize) -> Tensor {
    let s = x.shape();
    x.reshape([s[0] as i64, s[1] as i64, h as i64, -1]).permute([0, 2, 1, 3])
}

/// `LinearAttention` (opset 27, onnx's reference): a recurrent state `S` `(B, Hkv, dk, dv)` per step `t`: decayed
/// by `exp(decay)` (`gated` rules), the value corrected by `beta · (v - Sᵀk)` (`delta` rules), `S += k vᵀ`; the
/// output `scale · Sᵀq` with query heads grouped over kv heads. Computed in float32; returns the outputs and the
/// last state.
pub(super) fn linear_attention(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let f32 = |t: &Tensor| t.cast(dtypes::FLOAT32);
    let (hq, hkv) = (n.int("q_num_heads", 1) as usize, n.int("kv_num_heads", 1) as usize);
    let (q, k, v) = (heads(&f32(arg(a, 0)?), hq), heads(&f32(arg(a, 1)?), hkv), heads(&f32(arg(a, 2)?), hkv));
    let (bsz, steps, dk, dv) = (q.shape()[0], q.shape()[2], k.shape()[3], v.shape()[3]);
    let rule = n.string("update_rule", "gated_delta");
    let decay = opt(a, 4).map(|d| {
        let d = f32(d);
        if d.shape()[2] == hkv {
            d.reshape([bsz, steps, hkv, 1]).permute([0, 2, 1, 3])
        } else {
            heads(&d, hkv)
        }
    });
    let beta = opt(a, 5).map(|b| {
        let hb = b.shape()[2];
        f32(b).reshape([bsz, steps, hb, 1]).permute([0, 2, 1, 3])
    });
    let mut s = opt(a, 3).map_or_else(|| Tensor::full_dtype([bsz, hkv, dk, dv], 0.0, dtypes::FLOAT32), f32);
    let scale = match n.float("scale", 0.0) {
        0.0 => 1.0 / (dk as f64).sqrt(),
        s => s as f64,
    };
    let at = |t: &Tensor, i: usize| t.getitem(&[Index::Slice(None, None, None), Index::Slice(None, None, None), Index::Int(i as i64)]);
    let mut outs = Vec::with_capacity(steps);
    for t in 0..steps {
        let (qt, kt, mut vt) = (at(&q, t), at(&k, t), at(&v, t));
        if rule.starts_with("gated") {
            s = s.mul(at(decay.as_ref().ok_or("gated rules need decay")?, t).exp().unsqueeze(-1));
        }
        if rule.ends_with("delta") {
            let recalled = kt.unsqueeze(-2).matmul(&s).squeeze(-2);
            vt = at(beta.as_ref().ok_or("delta rules need beta")?, t).mul(vt.sub(recalled));
        }
        s = s.add(kt.unsqueeze(-1).mul(vt.unsqueeze(-2)));
        let sr = s.repeat_interleave(hq / hkv, Some(1));
        outs.push(qt.unsqueeze(-2).matmul(&sr).squeeze(-2).mul(scale));
    }
    let (first, rest) = outs.split_first().ok_or("LinearAttention over no steps")?;
    let out = first.stack(&rest.iter().collect::<Vec<_>>(), 2).permute([0, 2, 1, 3]).reshape([bsz as i64, steps as i64, -1]);
    let state_dt = opt(a, 3).map_or(arg(a, 0)?.dtype(), Tensor::dtype);
    Ok(vec![out.cast(arg(a, 0)?.dtype()), s.cast(state_dt)])
}

/// `FlexAttention` (`ai.onnx.preview`): `softmax(score_mod(scale · QKᵀ)) → prob_mod → · V` with grouped KV heads,
/// the scores in `softmax_precision` (float32 for 16-bit inputs); the modifiers are subgraph attributes.
pub(super) fn flex_attention(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let (q, mut k, mut v) = (arg(a, 0)?.clone(), arg(a, 1)?.clone(), arg(a, 2)?.clone());
    let dt = q.dtype();
    let cd = match n.int("softmax_precision", 0) {
        0 if dt == dtypes::FLOAT16 || dt == dtypes::BFLOAT16 => dtypes::FLOAT32,
        0 => dt,
        p => dtype_attr(p)?,
    };
    let (hq, hkv) = (q.shape()[1], k.shape()[1]);
    if hq != hkv {
        (k, v) = (k.repeat_interleave(hq / hkv, Some(1)), v.repeat_interleave(hq / hkv, Some(1)));
    }
    let scale = match n.attr("scale") {
        Some(s) => s.f() as f64,
        None => 1.0 / (q.shape()[3] as f64).sqrt(),
    };
    let root = (scale as f32).sqrt() as f64;
    let scores = q.mul(root).matmul(&k.mul(root).transpose(-1, -2)).cast(cd);
    let scores = super::control::modify(n, "score_mod", scores)?.cast(cd);
    let probs = super::control::modify(n, "prob_mod", scores.softmax(-1))?.cast(cd);
    one(probs.matmul(&v.cast(cd)).cast(v.dtype()))
}
