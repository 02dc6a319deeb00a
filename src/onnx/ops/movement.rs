//! Shape, slicing, padding, gather and scatter handlers (tinygrad `nn/onnx.py`'s movement and indexing ops):
//! inputs in, outputs out, on the Tensor API. Shapes, axes and counts that ONNX passes as tensors are read back
//! to the host, as tinygrad's `_to_python_const` does.

use super::shapes::{self, HostInts};
use super::{arg, axes_in, axis_of, dtype_attr, ints_in, one, opt, values, Node, Outputs};
use crate::dtype::dtypes;
use crate::tensor::{Index, Tensor};
use crate::uop::Sint;

/// `Shape`: the input's dims from `start` to `end` (negative counting from the end, clamped), as int64.
pub(super) fn shape(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let s: Vec<i64> = arg(a, 0)?.shape().iter().map(|&d| d as i64).collect();
    let clamp = |v: i64| axis_of(v, s.len()).clamp(0, s.len() as i64) as usize;
    let (start, end) = (clamp(n.int("start", 0)), clamp(n.int("end", s.len() as i64)));
    let s = &s[start..end.max(start)];
    one(Tensor::from_slice(s, [s.len()]))
}

/// `Reshape(data, shape)`: a 0 in `shape` keeps the input's dim there (unless `allowzero`), a -1 is inferred.
pub(super) fn reshape(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let x = arg(a, 0)?;
    let keep = n.int("allowzero", 0) == 0;
    if let Some(t) = n.host_input(1).filter(|h| h.is_symbolic() || x.uop().is_symbolic()).and_then(|h| reshape_sym(x, h, keep)) {
        return one(t);
    }
    let shape = ints_in(n, a, 1, "shape")?.ok_or("Reshape without a shape")?;
    let dims: Vec<i64> = shape.iter().enumerate().map(|(i, &d)| if d == 0 && keep { x.shape()[i] as i64 } else { d }).collect();
    one(x.reshape(dims))
}

/// `Reshape` to dims the host knows, some symbolic (or of a symbolic input): 0 keeps the input's dim, -1 is
/// inferred by cancelling the other dims' factors; `None` where that fails (the caller reshapes at the values).
fn reshape_sym(x: &Tensor, shape: &HostInts, keep: bool) -> Option<Tensor> {
    let from = x.sym_shape();
    let dims: Vec<Option<Sint>> = shape
        .vals
        .iter()
        .enumerate()
        .map(|(i, v)| match v.const_int() {
            Some(0) if keep => from.get(i).cloned().map(Some),
            Some(-1) => Some(None),
            Some(c) if c >= 0 => Some(Some(Sint::Int(c as usize))),
            Some(_) => None,
            None => Some(Some(Sint::from_uop(v))),
        })
        .collect::<Option<Vec<_>>>()?;
    let known: Vec<Sint> = dims.iter().flatten().cloned().collect();
    let dims: Vec<Sint> = match dims.iter().filter(|d| d.is_none()).count() {
        0 => known,
        1 => {
            let inferred = shapes::infer_dim(&from, &known)?;
            dims.into_iter().map(|d| d.unwrap_or_else(|| inferred.clone())).collect()
        }
        _ => return None,
    };
    (dims.iter().map(Sint::value).product::<usize>() == x.numel()).then(|| x.reshape_sym(&dims))
}

/// `Squeeze`: the listed axes (input 1 from opset 13, else the attribute), or every dim of size 1.
pub(super) fn squeeze(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let x = arg(a, 0)?;
    let mut ax: Vec<i64> = match axes_in(n, a, 1)? {
        Some(v) => v.iter().map(|&v| axis_of(v, x.ndim())).collect(),
        None => (0..x.ndim() as i64).filter(|&i| x.shape()[i as usize] == 1).collect(),
    };
    ax.sort();
    one(ax.iter().rev().fold(x.clone(), |t, &v| t.squeeze(v)))
}

/// `Unsqueeze`: new dims of size 1 at the listed axes of the output.
pub(super) fn unsqueeze(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let x = arg(a, 0)?;
    let mut ax = axes_in(n, a, 1)?.ok_or("Unsqueeze without axes")?;
    let nd = x.ndim() + ax.len();
    ax.iter_mut().for_each(|v| *v = axis_of(*v, nd));
    ax.sort();
    one(ax.iter().fold(x.clone(), |t, &v| t.unsqueeze(v)))
}

/// `Expand`: the broadcast of the input's shape and `shape` (both ways, as numpy broadcasts).
pub(super) fn expand(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let x = arg(a, 0)?;
    if let Some(to) = n.host_input(1).filter(|h| h.is_symbolic() || x.uop().is_symbolic()).and_then(HostInts::sints) {
        let nd = x.ndim().max(to.len());
        let pad = |v: Vec<Sint>| [vec![Sint::Int(1); nd - v.len()], v].concat();
        let (xs, ts) = (pad(x.sym_shape()), pad(to));
        let out: Vec<Sint> = xs.iter().zip(&ts).map(|(a, b)| if *a == Sint::Int(1) { b.clone() } else { a.clone() }).collect();
        return one(x.reshape_sym(&xs).expand_sym(&out));
    }
    let shape = ints_in(n, a, 1, "shape")?.ok_or("Expand without a shape")?;
    let nd = x.ndim().max(shape.len());
    let pad = |v: Vec<i64>| [vec![1; nd - v.len()], v].concat();
    let (xs, ss) = (pad(x.shape().iter().map(|&d| d as i64).collect()), pad(shape));
    let out: Vec<i64> = xs.iter().zip(&ss).map(|(&a, &b)| if a == 1 { b } else { a }).collect();
    one(x.reshape(xs).expand(out))
}

/// `Split`: pieces of the sizes in `split` (input 1 from opset 13, else the attribute), or as many equal pieces
/// as the node has outputs (`num_outputs` from opset 18; the last piece smaller when it doesn't divide).
pub(super) fn split(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let x = arg(a, 0)?;
    let axis = axis_of(n.int("axis", 0), x.ndim());
    let dim = x.shape()[axis as usize];
    let sizes: Vec<usize> = match ints_in(n, a, 1, "split")? {
        Some(s) if !s.is_empty() => s.iter().map(|&v| v as usize).collect(),
        _ => {
            let parts = n.int("num_outputs", n.outputs() as i64) as usize;
            let each = dim.div_ceil(parts);
            (0..parts).map(|i| each.min(dim.saturating_sub(i * each))).collect()
        }
    };
    Ok(x.split_sizes(&sizes, axis))
}

/// `Slice`: per listed axis, `starts..ends` by `steps` (inputs from opset 10, attributes before), with ONNX's
/// clamping (ends past the dim, `INT64_MIN` for a reversed slice to the front).
pub(super) fn slice(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let x = arg(a, 0)?;
    if let Some(t) = slice_sym(n, x) {
        return one(t);
    }
    let starts = ints_in(n, a, 1, "starts")?.ok_or("Slice without starts")?;
    let ends = ints_in(n, a, 2, "ends")?.ok_or("Slice without ends")?;
    let axes = ints_in(n, a, 3, "axes")?.unwrap_or_else(|| (0..starts.len() as i64).collect());
    let steps = ints_in(n, a, 4, "")?.unwrap_or_else(|| vec![1; starts.len()]);
    let mut idx = vec![Index::Slice(None, None, None); x.ndim()];
    for (i, &ax) in axes.iter().enumerate() {
        let (ax, step) = (axis_of(ax, x.ndim()) as usize, steps[i]);
        let dim = x.shape()[ax] as i64;
        let norm = |v: i64| if v < 0 { v.saturating_add(dim) } else { v };
        let (s, e) = (norm(starts[i]), norm(ends[i]));
        idx[ax] = if step > 0 {
            Index::Slice(Some(s.clamp(0, dim)), Some(e.clamp(0, dim)), Some(step))
        } else {
            let e = e.clamp(-1, dim - 1);
            Index::Slice(Some(s.clamp(0, dim - 1)), (e >= 0).then_some(e), Some(step))
        };
    }
    one(x.getitem(&idx))
}

/// `Slice` by 1 with bounds the host knows, some symbolic (a slice to a sequence's length): bounds within their
/// dims at every value of their variables, else `None` (the caller slices at the bound values).
fn slice_sym(n: &Node, x: &Tensor) -> Option<Tensor> {
    let host = |i: usize| n.host_input(i);
    let (starts, ends) = (host(1)?, host(2)?);
    if !(starts.is_symbolic() || ends.is_symbolic()) || starts.vals.len() != ends.vals.len() {
        return None;
    }
    let listed = |i: usize| n.proto.input.get(i).is_some_and(|s| !s.is_empty());
    let axes = if listed(3) { host(3)?.consts()? } else { (0..starts.vals.len() as i64).collect() };
    if listed(4) && host(4)?.consts()?.iter().any(|&s| s != 1) {
        return None;
    }
    let dims = x.sym_shape();
    let mut bounds: Vec<(Sint, Sint)> = dims.iter().map(|d| (Sint::Int(0), d.clone())).collect();
    for (k, &ax) in axes.iter().enumerate() {
        let dim = dims.get(usize::try_from(axis_of(ax, dims.len())).ok()?)?;
        // (a constant past the end is the end; a symbolic bound must stay inside the dim at its variables' max)
        let bound = |v: &crate::uop::UOp| match v.const_int() {
            Some(c) if c >= 0 => Some(if c as usize >= dim.max() { dim.clone() } else { Sint::Int(c as usize) }),
            Some(_) => None,
            None => Some(Sint::from_uop(v)).filter(|b| b == dim || dim.int().is_some_and(|d| b.max() <= d)),
        };
        bounds[axis_of(ax, dims.len()) as usize] = (bound(&starts.vals[k])?, bound(&ends.vals[k])?);
    }
    bounds.iter().all(|(b, e)| b.value() <= e.value()).then(|| x.shrink_sym(&bounds))
}

/// `Pad`: `pads` (begins then ends, per listed axis; input 1 from opset 11, else the attribute) in `mode`
/// `constant` (input 2 or the `value` attribute), `reflect`, `edge` or `wrap`; negative pads crop.
pub(super) fn pad(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let x = arg(a, 0)?;
    let p = ints_in(n, a, 1, "pads")?.ok_or("Pad without pads")?;
    let axes: Vec<usize> = match opt(a, 3) {
        Some(t) => values(t)?.iter().map(|&v| axis_of(v, x.ndim()) as usize).collect(),
        None => (0..x.ndim()).collect(),
    };
    let mut pads = vec![(0i64, 0i64); x.ndim()];
    for (i, &ax) in axes.iter().enumerate() {
        pads[ax] = (p[i], p[i + axes.len()]);
    }
    let value = match opt(a, 2) {
        Some(v) => super::floats(v)?.first().copied().unwrap_or(0.0),
        None => n.float("value", 0.0) as f64,
    };
    one(match n.string("mode", "constant").as_str() {
        "reflect" => x.pad_reflect(&pads),
        "edge" => x.pad_replicate(&pads),
        "wrap" => x.pad_circular(&pads),
        _ => x.pad_value(&pads, value),
    })
}

/// `CenterCropPad`: each listed axis cropped or zero-padded about its center to the size in `shape`.
pub(super) fn center_crop_pad(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let x = arg(a, 0)?;
    let shape = ints_in(n, a, 1, "")?.ok_or("CenterCropPad without a shape")?;
    let axes = n.ints("axes").unwrap_or_else(|| (0..x.ndim() as i64).collect());
    let mut pads = vec![(0i64, 0i64); x.ndim()];
    for (&s, &ax) in shape.iter().zip(&axes) {
        let ax = axis_of(ax, x.ndim()) as usize;
        let d = x.shape()[ax] as i64;
        pads[ax] = if s < d { (-(d / 2 - (s + 1) / 2), -(d - d / 2 - s / 2)) } else { ((s - d) / 2, (s - d + 1) / 2) };
    }
    one(x.pad(&pads))
}

/// `DepthToSpace`: blocks of channels moved into `blocksize x blocksize` spatial tiles (`DCR` or `CRD` order).
pub(super) fn depth_to_space(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let b = n.int("blocksize", 1) as usize;
    let from = if n.string("mode", "DCR") == "CRD" { "b (c h1 w1) h w" } else { "b (h1 w1 c) h w" };
    one(arg(a, 0)?.rearrange(&format!("{from} -> b c (h h1) (w w1)"), &[("h1", b), ("w1", b)]))
}

/// `ConstantOfShape`: the `value` attribute's one element (default float32 0) in the shape of input 0.
pub(super) fn constant_of_shape(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let fill = match n.attr("value") {
        Some(_) => super::math::constant(n, &[])?.remove(0),
        None => Tensor::from_slice(&[0.0f32], [1]),
    };
    if let Some(dims) = n.sym_input(0).and_then(HostInts::sints) {
        return one(fill.reshape(vec![1usize; dims.len()]).expand_sym(&dims));
    }
    let shape: Vec<usize> =
        ints_in(n, a, 0, "")?.ok_or("ConstantOfShape without a shape")?.into_iter().map(|d| d.max(0) as usize).collect();
    one(fill.reshape([1usize; 0]).expand(shape.iter().map(|&d| d as i64).collect::<Vec<_>>()))
}

/// `Range(start, limit, delta)` in the inputs' dtype.
pub(super) fn range(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    // (to a symbolic limit, from a constant start by 1: the range to the limit's max, shrunk to the limit; other
    // symbolic ranges are computed at the bound values)
    let at = |i: usize| n.host_input(i).and_then(HostInts::consts);
    if let (Some(limit), Some([start]), Some([1])) = (n.sym_input(1), at(0).as_deref(), at(2).as_deref()) {
        let len = Sint::from_uop(&limit.vals[0].alu(crate::uop::Ops::ADD, &[&crate::uop::UOp::const_(dtypes::WEAKINT, -start)]));
        let whole = Tensor::arange(*start as f64, (*start + len.max() as i64) as f64, 1.0).cast(arg(a, 0)?.dtype());
        return one(whole.shrink_sym(&[(0.into(), len)]));
    }
    let v = |i| arg(a, i).and_then(super::floats);
    let (start, limit, delta) = (v(0)?[0], v(1)?[0], v(2)?[0]);
    if delta == 0.0 {
        return Err("Range with delta 0".into());
    }
    if (limit - start) / delta <= 0.0 {
        return one(Tensor::from_slice::<f32>(&[], [0]).cast(arg(a, 0)?.dtype()));
    }
    one(Tensor::arange(start, limit, delta).cast(arg(a, 0)?.dtype()))
}

/// `EyeLike`: ones on diagonal `k` of a 2-D input's shape, in `dtype` (default the input's).
pub(super) fn eye_like(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let x = arg(a, 0)?;
    let dt = match n.attr("dtype") {
        Some(_) => dtype_attr(n.int("dtype", 1))?,
        None => x.dtype(),
    };
    let (r, c) = (x.shape()[0], x.shape()[1]);
    let rows = Tensor::arange(0.0, r as f64, 1.0).cast(dtypes::INT64).reshape([r, 1]);
    let cols = Tensor::arange(0.0, c as f64, 1.0).cast(dtypes::INT64).reshape([1, c]);
    one(cols.sub(rows).eq(n.int("k", 0)).cast(dt))
}

/// `OneHot(indices, depth, values)`: `values[1]` where an index (negative counting from `depth`) meets the
/// position along the new `axis`, `values[0]` elsewhere.
pub(super) fn one_hot(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let (idx, v) = (arg(a, 0)?.cast(dtypes::INT64), arg(a, 2)?);
    let depth = super::floats(arg(a, 1)?)?[0] as i64;
    let idx = idx.lt(0).where_(idx.add(depth), &idx);
    let axis = axis_of(n.int("axis", -1), idx.ndim() + 1);
    let shape: Vec<usize> = (0..=idx.ndim() as i64).map(|d| if d == axis { depth as usize } else { 1 }).collect();
    let hot = Tensor::arange(0.0, depth as f64, 1.0).cast(dtypes::INT64).reshape(shape).eq(idx.unsqueeze(axis));
    let (off, on) = (v.getitem(&[Index::Int(0)]), v.getitem(&[Index::Int(1)]));
    one(hot.where_(on, off))
}

/// `indices` with negative values counted from `dim`.
pub(super) fn positive(indices: &Tensor, dim: usize) -> Tensor {
    crate::tensor::from_end(indices, &Sint::Int(dim))
}

/// `Gather`: the input indexed along `axis` by an int tensor (negative values from the end); its shape replaces
/// the axis.
pub(super) fn gather(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let (x, i) = (arg(a, 0)?, arg(a, 1)?);
    let axis = axis_of(n.int("axis", 0), x.ndim()) as usize;
    let mut idx = vec![Index::Slice(None, None, None); x.ndim()];
    idx[axis] = Index::Tensor(positive(i, x.shape()[axis]));
    one(x.getitem(&idx))
}

/// `GatherND`: slices of the input at the index tuples in the last dim of `indices`, the first `batch_dims` dims
/// shared.
pub(super) fn gather_nd(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let (x, i) = (arg(a, 0)?, arg(a, 1)?);
    let b = n.int("batch_dims", 0) as usize;
    let (xs, is) = (x.sym_shape(), i.sym_shape());
    let batch = Sint::product(&xs[..b]);
    let xf = x.reshape_sym(&[vec![batch.clone()], xs[b..].to_vec()].concat());
    let inner = is[b..is.len() - 1].to_vec();
    let idx = i.reshape_sym(&[vec![batch.clone()], is[b..].to_vec()].concat());
    let k = is[is.len() - 1].int().ok_or("GatherND: the last dim of the indices is symbolic")?;
    let rows = Tensor::arange(0.0, batch.max() as f64, 1.0).shrink_sym(&[(0.into(), batch.clone())]).cast(dtypes::INT64);
    let mut index = vec![Index::Tensor(rows.reshape_sym(&[vec![batch], vec![Sint::Int(1); inner.len()]].concat()))];
    for j in 0..k {
        let col = idx.getitem(&[Index::Ellipsis, Index::Int(j as i64)]);
        index.push(Index::Tensor(crate::tensor::from_end(&col, &xs[b + j])));
    }
    let out = xf.getitem(&index);
    one(out.reshape_sym(&[xs[..b].to_vec(), inner, xs[b + k..].to_vec()].concat()))
}

/// The Tensor API's name for an ONNX scatter `reduction`.
fn reduce_name(r: &str) -> Result<&'static str, String> {
    Ok(match r {
        "add" => "sum",
        "mul" => "prod",
        "max" => "amax",
        "min" => "amin",
        r => return Err(format!("reduction {r:?} is not one of none, add, mul, max, min")),
    })
}

/// `ScatterElements` (and the old `Scatter`): `updates` written along `axis` at `indices`, or combined by
/// `reduction`.
pub(super) fn scatter_elements(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let (x, i, u) = (arg(a, 0)?, arg(a, 1)?, arg(a, 2)?);
    let axis = axis_of(n.int("axis", 0), x.ndim());
    let i = positive(i, x.shape()[axis as usize]);
    match n.string("reduction", "none").as_str() {
        "none" => one(x.scatter(axis, &i, u)),
        r => one(x.scatter_reduce(axis, &i, u, reduce_name(r)?, true)),
    }
}

/// `ScatterND`: `updates` written (or combined by `reduction`) at the index tuples in the last dim of `indices`,
/// as a scatter of rows of the input seen as 2-D.
pub(super) fn scatter_nd(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let (x, i, u) = (arg(a, 0)?, arg(a, 1)?, arg(a, 2)?);
    let (xs, is) = (x.shape(), i.shape());
    let k = is[is.len() - 1];
    let (rows, cols): (usize, usize) = (xs[..k].iter().product(), xs[k..].iter().product());
    let m: usize = is[..is.len() - 1].iter().product();
    let i = i.cast(dtypes::INT64).reshape([m, k]);
    let mut linear = Tensor::full_dtype([m], 0, dtypes::INT64);
    for j in 0..k {
        let stride: usize = xs[j + 1..k].iter().product();
        linear = linear.add(positive(&i.getitem(&[Index::Slice(None, None, None), Index::Int(j as i64)]), xs[j]).mul(stride as i64));
    }
    let index = linear.reshape([m, 1]).expand([m as i64, cols as i64]);
    let (x2, u2) = (x.reshape([rows, cols]), u.reshape([m, cols]));
    let out = match n.string("reduction", "none").as_str() {
        "none" => x2.scatter(0, &index, &u2),
        r => x2.scatter_reduce(0, &index, &u2, reduce_name(r)?, true),
    };
    one(out.reshape(xs))
}

/// `Compress`: the slices along `axis` (the flattened input without one) where `condition` is true.
pub(super) fn compress(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let x = arg(a, 0)?;
    let cond = values(arg(a, 1)?)?;
    let (x, axis) = match n.attr("axis") {
        Some(_) => (x.clone(), axis_of(n.int("axis", 0), x.ndim()) as usize),
        None => (x.flatten(0), 0),
    };
    let keep: Vec<i64> = cond.iter().enumerate().filter(|(_, &c)| c != 0).map(|(i, _)| i as i64).collect();
    let mut idx = vec![Index::Slice(None, None, None); x.ndim()];
    idx[axis] = Index::Tensor(Tensor::from_slice(&keep, [keep.len()]));
    one(x.getitem(&idx))
}

/// `NonZero`: the int64 coordinates `(ndim, count)` of the input's nonzero elements, in row-major order.
pub(super) fn non_zero(_: &Node, a: &[Option<Tensor>]) -> Outputs {
    let x = arg(a, 0)?;
    let flat = x.ne(0).cast(dtypes::INT64).to_vec::<i64>().map_err(|e| e.to_string())?;
    let shape = x.shape();
    let hits: Vec<usize> = flat.iter().enumerate().filter(|(_, &v)| v != 0).map(|(i, _)| i).collect();
    let mut coords = vec![0i64; shape.len() * hits.len()];
    for (j, &h) in hits.iter().enumerate() {
        let mut rest = h;
        for d in (0..shape.len()).rev() {
            coords[d * hits.len() + j] = (rest % shape[d]) as i64;
            rest /= shape[d];
        }
    }
    one(Tensor::from_slice(&coords, [shape.len(), hits.len()]))
}

/// `TensorScatter(past_cache, update, write_indices)`: per batch entry, `update` written into the cache along
/// `axis` from that entry's write index (wrapping under `mode` `circular`).
pub(super) fn tensor_scatter(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let (cache, update) = (arg(a, 0)?, arg(a, 1)?);
    let axis = axis_of(n.int("axis", -2), cache.ndim()) as usize;
    let (batch, max, steps) = (cache.shape()[0], cache.shape()[axis], update.shape()[axis]);
    let starts = opt(a, 2).map(values).transpose()?.unwrap_or_else(|| vec![0; batch]);
    let circular = n.string("mode", "linear") == "circular";
    // for each batch entry and cache position, the update step written there (or -1: keep the cache)
    let mut src = vec![-1i64; batch * max];
    for (b, &w) in starts.iter().enumerate() {
        for s in 0..steps as i64 {
            let d = if circular { (w + s).rem_euclid(max as i64) } else { w + s };
            if (0..max as i64).contains(&d) {
                src[b * max + d as usize] = s;
            }
        }
    }
    let shape: Vec<usize> = (0..cache.ndim())
        .map(|d| {
            if d == 0 {
                batch
            } else if d == axis {
                max
            } else {
                1
            }
        })
        .collect();
    let src = Tensor::from_slice(&src, [batch, max]).reshape(shape);
    let full: Vec<i64> = cache.shape().iter().map(|&d| d as i64).collect();
    let picked = update.gather(axis as i64, &src.maximum(0).expand(full.clone()));
    one(src.ge(0).expand(full).where_(picked, cache))
}
