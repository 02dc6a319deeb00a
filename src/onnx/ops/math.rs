//! Elementwise, reduction, cast and quantization handlers (tinygrad `nn/onnx.py`'s math, reduce and
//! quantization ops): inputs in, outputs out, on the Tensor API.

use super::{arg, axes_in, axis_of, dtype_attr, ints_in, one, opt, values, Node, Outputs};
use crate::dtype::{dtypes, DType};
use crate::tensor::Tensor;
use std::path::Path;

/// `Constant`: its `value` tensor, or one of `value_float(s)`, `value_int(s)`.
pub(super) fn constant(n: &Node, _: &[Option<Tensor>]) -> Outputs {
    if let Some(t) = n.attr("value").and_then(|a| a.t.as_ref()) {
        let dir = n.path.parent().unwrap_or(Path::new("."));
        return super::super::tensor_from_proto(t, dir, n.path).map(|t| vec![t]).map_err(|e| e.to_string());
    }
    if let Some(a) = n.attr("value_float") {
        return one(Tensor::from_slice(&[a.f()], []));
    }
    if let Some(a) = n.attr("value_int") {
        return one(Tensor::from_slice(&[a.i()], []));
    }
    if let Some(v) = n.floats("value_floats") {
        return one(Tensor::from_slice(&v, [v.len()]));
    }
    if let Some(v) = n.ints("value_ints") {
        return one(Tensor::from_slice(&v, [v.len()]));
    }
    Err("a Constant with no value this runner reads (sparse and string values are not read yet)".into())
}

/// `Mod`: the remainder with the divisor's sign (Python `%`), or the dividend's under `fmod` (C `fmod`). For
/// floats, numpy's values where the divisor is infinite: `fmod(a, ±inf) = a`, and `a % inf` is `a` or, when the
/// signs differ, the divisor.
pub(super) fn modulo(x: &Tensor, y: &Tensor, fmod: bool) -> Tensor {
    if !x.dtype().is_float() {
        return if fmod { x.fmod(y) } else { x.mod_(y) };
    }
    let r = y.isinf().bitwise_and(x.isfinite()).where_(x, x.fmod(y));
    if fmod {
        return r;
    }
    r.ne(0.0).bitwise_and(r.lt(0.0).ne(y.lt(0.0))).where_(r.add(y), &r)
}

/// Folds the inputs with `f` (variadic `Max`, `Min`, `Sum`, `Mean`'s sum).
pub(super) fn fold(a: &[Option<Tensor>], f: fn(&Tensor, &Tensor) -> Tensor) -> Result<Tensor, String> {
    let xs: Vec<&Tensor> = a.iter().flatten().collect();
    let (first, rest) = xs.split_first().ok_or("no inputs")?;
    Ok(rest.iter().fold((*first).clone(), |acc, x| f(&acc, x)))
}

/// `Clip`: bounds from inputs 1 and 2 (opset 11 on) or the `min`/`max` attributes; either may be absent.
pub(super) fn clip(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let x = arg(a, 0)?;
    let (lo, hi) = if n.opset >= 11 {
        (opt(a, 1).cloned(), opt(a, 2).cloned())
    } else {
        let attr = |k: &str| n.attr(k).map(|v| super::scalar(v.f() as f64, x.dtype()));
        (attr("min"), attr("max"))
    };
    let x = lo.map_or(x.clone(), |m| x.maximum(&m));
    one(hi.map_or(x.clone(), |m| x.minimum(&m)))
}

/// `alpha · A' · B' + beta · C` with `A' = Aᵀ` under `transA`, `B' = Bᵀ` under `transB` (ONNX `Gemm`).
pub(super) fn gemm(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let t = |x: &Tensor, on: bool| if on { x.transpose(0, 1) } else { x.clone() };
    let ab = t(arg(a, 0)?, n.int("transA", 0) != 0).matmul(&t(arg(a, 1)?, n.int("transB", 0) != 0)).mul(n.float("alpha", 1.0) as f64);
    match opt(a, 2) {
        Some(c) => one(ab.add(c.mul(n.float("beta", 1.0) as f64))),
        None => one(ab),
    }
}

/// `Hardmax`: 1 at the first maximum along `axis`, 0 elsewhere, in `x`'s dtype.
pub(super) fn hardmax(x: &Tensor, axis: i64) -> Tensor {
    let axis = axis_of(axis, x.ndim());
    let pos = x.argmax(Some(axis), true);
    let n = x.shape()[axis as usize];
    let shape: Vec<usize> = (0..x.ndim()).map(|i| if i as i64 == axis { n } else { 1 }).collect();
    Tensor::arange(0.0, n as f64, 1.0).cast(pos.dtype()).reshape(shape).eq(&pos).cast(x.dtype())
}

/// A reduction (`ReduceSum`, `ReduceL2`, ...): `f` over `pre(x)` along `axes` (input 1 from opset 13 for ReduceSum,
/// 18 for the others; the attribute before), all axes when none are given unless `noop_with_empty_axes`, keeping
/// them under `keepdims`.
pub(super) fn reduce(n: &Node, a: &[Option<Tensor>], pre: fn(&Tensor) -> Tensor, f: fn(&Tensor, Vec<i64>, bool) -> Tensor) -> Outputs {
    let x = pre(arg(a, 0)?);
    let axes = axes_in(n, a, 1)?.filter(|v| !v.is_empty());
    let keep = n.int("keepdims", 1) != 0;
    match axes {
        None if n.int("noop_with_empty_axes", 0) != 0 => one(x),
        None => one(f(&x, (0..x.ndim() as i64).collect(), keep)),
        Some(ax) => one(f(&x, ax, keep)),
    }
}

/// A sum in the input's dtype (the `ReduceL1`/`ReduceSumSquare` family keeps it).
pub(super) fn sum(x: &Tensor, axes: Vec<i64>, keep: bool) -> Tensor {
    if keep { x.sum_keepdim(axes) } else { x.sum(axes) }.cast(x.dtype())
}

/// `ArgMax` (`ArgMin` is it on `-x`) over `axis` under `keepdims`, as int64; the first index of a tie, or the last
/// under `select_last_index`.
pub(super) fn arg_reduce(n: &Node, x: &Tensor) -> Outputs {
    let (axis, keep) = (axis_of(n.int("axis", 0), x.ndim()), n.int("keepdims", 1) != 0);
    if n.int("select_last_index", 0) != 0 {
        let last = x.shape()[axis as usize] as i64 - 1;
        return one(x.flip(axis).argmax(Some(axis), keep).cast(dtypes::INT64).neg().add(last));
    }
    one(x.argmax(Some(axis), keep).cast(dtypes::INT64))
}

/// `CumSum` (or `CumProd`) along the axis in input 1; `exclusive` shifts by one, `reverse` runs from the end.
pub(super) fn cumulative(n: &Node, a: &[Option<Tensor>], prod: bool) -> Outputs {
    let x = arg(a, 0)?;
    let axis = axis_of(ints_in(n, a, 1, "")?.ok_or("CumSum without an axis")?[0], x.ndim());
    let mut x = if n.int("reverse", 0) != 0 { x.flip(axis) } else { x.clone() };
    if n.int("exclusive", 0) != 0 {
        let pads: Vec<(i64, i64)> = (0..x.ndim() as i64).map(|i| if i == axis { (1, -1) } else { (0, 0) }).collect();
        x = x.pad_value(&pads, if prod { 1.0 } else { 0.0 });
    }
    let y = if prod { x.cumprod(axis) } else { x.cumsum(axis) }.cast(x.dtype());
    one(if n.int("reverse", 0) != 0 { y.flip(axis) } else { y })
}

/// `Det`: the determinant of each square matrix in the last two dims, by elimination with partial pivoting on
/// the host (in float64), in the input's dtype.
pub(super) fn det(_: &Node, a: &[Option<Tensor>]) -> Outputs {
    let x = arg(a, 0)?;
    let s = x.shape();
    let m = s[s.len() - 1];
    let v = x.cast(dtypes::FLOAT64).to_vec::<f64>().map_err(|e| e.to_string())?;
    let dets: Vec<f64> = v
        .chunks(m * m)
        .map(|mat| {
            let mut a = mat.to_vec();
            let mut det = 1.0;
            for c in 0..m {
                let p = (c..m).max_by(|&i, &j| a[i * m + c].abs().total_cmp(&a[j * m + c].abs())).unwrap_or(c);
                if a[p * m + c] == 0.0 {
                    return 0.0;
                }
                if p != c {
                    (0..m).for_each(|k| a.swap(p * m + k, c * m + k));
                    det = -det;
                }
                det *= a[c * m + c];
                for r in c + 1..m {
                    let f = a[r * m + c] / a[c * m + c];
                    (c..m).for_each(|k| a[r * m + k] -= f * a[c * m + k]);
                }
            }
            det
        })
        .collect();
    one(Tensor::from_slice(&dets, s[..s.len() - 2].to_vec()).cast(x.dtype()))
}

/// `TopK`: the `K` (input 1) largest (or smallest) along `axis`, sorted, and their int64 indices.
pub(super) fn topk(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let k = match opt(a, 1) {
        Some(t) => values(t)?[0],
        None => n.int("k", 1),
    };
    let (v, i) = arg(a, 0)?.topk(k as usize, n.int("axis", -1), n.int("largest", 1) != 0);
    Ok(vec![v, i.cast(dtypes::INT64)])
}

/// `x` clamped to `dt`'s range and cast (quantized outputs saturate).
fn saturate(x: &Tensor, dt: DType) -> Tensor {
    x.clamp(dt.min().as_f64(), dt.max().as_f64()).cast(dt)
}

/// A quantization parameter laid along `axis` of `x` (per-axis), repeated over blocks of `block_size`, or as it is
/// (per-tensor: one value).
fn along(x: &Tensor, p: &Tensor, axis: i64, block_size: i64) -> Tensor {
    if p.numel() == 1 {
        return p.reshape([1usize; 0]);
    }
    let axis = axis_of(axis, x.ndim());
    if block_size > 0 {
        return p.repeat_interleave(block_size as usize, Some(axis)).shrink_to(x.shape());
    }
    p.reshape((0..x.ndim() as i64).map(|d| if d == axis { p.numel() } else { 1 }).collect::<Vec<_>>())
}

/// `QuantizeLinear`: `saturate(round(x / scale) + zero_point)` in the zero point's dtype (or `output_dtype`, or
/// uint8), rounding half to even.
pub(super) fn quantize_linear(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let (x, scale, zp) = (arg(a, 0)?, arg(a, 1)?, opt(a, 2));
    let dt = match (zp, n.int("output_dtype", 0)) {
        (Some(z), _) => z.dtype(),
        (None, 0) => dtypes::UINT8,
        (None, t) => super::narrow::is_narrow(t as i32).and_then(super::narrow::storage).map_or_else(|| dtype_attr(t), Ok)?,
    };
    let (axis, bs) = (n.int("axis", 1), n.int("block_size", 0));
    let narrow = n.narrow.get(2).copied().flatten().or_else(|| super::narrow::is_narrow(n.int("output_dtype", 0) as i32));
    let q = x.cast(dtypes::FLOAT32).div(along(x, &scale.cast(dtypes::FLOAT32), axis, bs));
    let q = if dt.is_float() || narrow.is_some_and(|t| super::narrow::storage(t) == Some(dtypes::FLOAT32)) { q } else { q.round() };
    let q = zp.map_or(q.clone(), |z| q.add(along(x, &z.cast(dtypes::FLOAT32), axis, bs)));
    match narrow {
        Some(t) => one(super::narrow::quantize(&q, t, n.int("saturate", 1) != 0)?),
        None if dt.is_float() => one(q.cast(dt)),
        None => one(saturate(&q, dt)),
    }
}

/// `DequantizeLinear`: `(x - zero_point) * scale`, in the scale's dtype.
pub(super) fn dequantize_linear(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let (x, scale) = (arg(a, 0)?, arg(a, 1)?);
    let (axis, bs) = (n.int("axis", 1), n.int("block_size", 0));
    // (float8 inputs, held as float32, shift in float; ints in int32)
    let wide = if x.dtype().is_float() { dtypes::FLOAT32 } else { dtypes::INT32 };
    let xi = x.cast(wide);
    let xi = opt(a, 2).map_or(xi.clone(), |z| xi.sub(along(x, &z.cast(wide), axis, bs)));
    one(xi.cast(dtypes::FLOAT32).mul(along(x, &scale.cast(dtypes::FLOAT32), axis, bs)).cast(scale.dtype()))
}

/// `DynamicQuantizeLinear`: uint8 `y`, its scale (the range including 0 over 255) and zero point.
pub(super) fn dynamic_quantize_linear(_: &Node, a: &[Option<Tensor>]) -> Outputs {
    let x = arg(a, 0)?;
    let scale = x.max(..).maximum(0).sub(x.min(..).minimum(0)).div(255.0);
    let zp = saturate(&x.min(..).div(&scale).neg().round(), dtypes::UINT8);
    let y = saturate(&x.div(&scale).round().add(zp.cast(dtypes::FLOAT32)), dtypes::UINT8);
    Ok(vec![y, scale, zp])
}

/// Input `i` as int32 less its zero point (input `zp`, absent is 0), for the integer ops.
pub(super) fn integer(a: &[Option<Tensor>], i: usize, zp: usize) -> Result<Tensor, String> {
    let x = arg(a, i)?.cast(dtypes::INT32);
    Ok(opt(a, zp).map_or(x.clone(), |z| {
        let z = z.cast(dtypes::INT32);
        // (a per-row zero point of A lies along A's rows; a per-column one of B along B's columns)
        if z.numel() > 1 && i == 0 && x.ndim() >= 2 {
            x.sub(z.reshape([z.numel(), 1]))
        } else {
            x.sub(z)
        }
    }))
}

/// `QLinearMatMul`: the integer product of the dequantized operands requantized to the output's scale and zero point.
pub(super) fn qlinear_matmul(_: &Node, a: &[Option<Tensor>]) -> Outputs {
    let (xa, xb) = (integer(a, 0, 2)?, integer(a, 3, 5)?);
    let prod = xa.matmul(&xb).cast(dtypes::FLOAT32).mul(arg(a, 1)?.cast(dtypes::FLOAT32)).mul(arg(a, 4)?.cast(dtypes::FLOAT32));
    requantize(&prod, arg(a, 6)?, arg(a, 7)?)
}

/// `saturate(round(y / scale) + zero_point)` in the zero point's dtype.
pub(super) fn requantize(y: &Tensor, scale: &Tensor, zp: &Tensor) -> Outputs {
    let q = y.div(scale.cast(dtypes::FLOAT32)).round().add(zp.cast(dtypes::FLOAT32));
    one(saturate(&q, zp.dtype()))
}

/// `BitShift`: `x << y` or `x >> y` (`direction`); where C leaves a shift undefined (a negative amount, or the
/// width or more) the result is 0, or -1 for a negative value shifted right.
pub(super) fn bit_shift(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let (x, y) = (arg(a, 0)?, arg(a, 1)?.cast(arg(a, 0)?.dtype()));
    let width = (x.dtype().itemsize() * 8) as i64;
    let inside = y.ge(0).bitwise_and(y.lt(width));
    let s = inside.where_(&y, 0);
    let left = n.string("direction", "") == "LEFT";
    let shifted = if left { x.lshift(&s) } else { x.rshift(&s) };
    let beyond = if left || x.dtype().is_unsigned() { x.zeros_like() } else { x.lt(0).where_(-1, 0).cast(x.dtype()) };
    one(inside.where_(shifted, beyond))
}

/// `f` computed in float32 for a 16-bit float `x` (rounded once, at the end, as onnx's reference does), else in
/// `x`'s dtype.
pub(super) fn in_f32(x: &Tensor, f: impl Fn(&Tensor) -> Tensor) -> Tensor {
    if x.dtype() == dtypes::FLOAT16 || x.dtype() == dtypes::BFLOAT16 {
        f(&x.cast(dtypes::FLOAT32)).cast(x.dtype())
    } else {
        f(x)
    }
}
