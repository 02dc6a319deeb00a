//! Conformance op table: tinygrad's op names and keyword arguments mapped onto the Rust API. This file holds
//! the core ops; `dispatch_math`, `dispatch_movement` and `dispatch_nn` hold the rest, tried in turn.

use crate::runner::{reduce_with, Args, R};
use tinygrad::dtype::DType;
use tinygrad::Tensor;

/// The outputs of `op` on `a`, or why it can't be run.
pub fn dispatch(op: &str, a: &Args) -> R<Vec<Tensor>> {
    if let Some(r) = core(op, a).or_else(|| crate::dispatch_math::dispatch(op, a)) {
        return r;
    }
    if let Some(r) = crate::dispatch_movement::dispatch(op, a).or_else(|| crate::dispatch_nn::dispatch(op, a)) {
        return r;
    }
    Err(format!("unsupported op {op}"))
}

fn dtype(a: &Args, i: usize) -> R<DType> {
    let name = a.arg(i).and_then(|v| v.as_str()).or_else(|| a.kw("dtype").and_then(|v| v.as_str())).ok_or("no dtype")?;
    DType::from_name(name).ok_or_else(|| format!("unknown dtype {name}"))
}

/// (before, after) per dim from tinygrad's pad forms: per-dim pairs (None for no padding) or a flat list in
/// torch order (last dim first).
pub fn pads(v: &serde_json::Value, ndim: usize) -> R<Vec<(i64, i64)>> {
    let arr = v.as_array().ok_or("padding is not a list")?;
    if arr.iter().all(|x| x.is_number()) {
        let flat = Args::ints_of(v)?;
        let mut p = vec![(0, 0); ndim];
        for (k, c) in flat.chunks(2).enumerate() {
            p[ndim - 1 - k] = (c[0], c[1]);
        }
        return Ok(p);
    }
    arr.iter().map(|x| if x.is_null() { Ok((0, 0)) } else { Args::ints_of(x).map(|c| (c[0], c[1])) }).collect()
}

/// A shape argument whose `None` entries keep the input's dim (tinygrad's reshape and expand allow them).
fn dims_or_keep(a: &Args, i: usize, x: &Tensor) -> R<Vec<i64>> {
    let v = a.arg(i).ok_or("missing shape")?;
    match v.as_array() {
        Some(arr) => arr
            .iter()
            .enumerate()
            .map(|(k, d)| if d.is_null() { Ok(x.shape()[k] as i64) } else { d.as_i64().ok_or(format!("bad dim {d}")) })
            .collect(),
        None => Args::ints_of(v),
    }
}

fn core(op: &str, a: &Args) -> Option<R<Vec<Tensor>>> {
    run(op, a).map(|t| t.map(|t| vec![t])).transpose()
}

fn run(op: &str, a: &Args) -> R<Option<Tensor>> {
    let x = || a.t(0);
    let rev = a.kw_bool("reverse", false);
    let binop = |f: fn(&Tensor, crate::runner::Operand) -> Tensor| -> R<Tensor> {
        let (x, y) = (a.operand(0)?, a.operand(1)?);
        Ok(if rev { f(&y.into_t(), x) } else { f(&x.into_t(), y) })
    };
    Ok(Some(match op {
        "add" => binop(|x, y| x.add(y))?,
        "sub" => binop(|x, y| x.sub(y))?,
        "mul" => binop(|x, y| x.mul(y))?,
        "div" => match a.kw_str("rounding_mode", "") {
            "trunc" => binop(|x, y| x.div_trunc(y))?,
            "floor" => binop(|x, y| x.div_floor(y))?,
            _ => binop(|x, y| x.div(y))?,
        },
        "maximum" => binop(|x, y| x.maximum(y))?,
        "minimum" => binop(|x, y| x.minimum(y))?,
        "lt" => binop(|x, y| x.lt(y))?,
        "gt" => binop(|x, y| x.gt(y))?,
        "le" => binop(|x, y| x.le(y))?,
        "ge" => binop(|x, y| x.ge(y))?,
        "eq" => binop(|x, y| x.eq(y))?,
        "ne" => binop(|x, y| x.ne(y))?,
        "where" => a.operand(0)?.into_t().where_(a.operand(1)?, a.operand(2)?),
        "neg" => x()?.neg(),
        "relu" => x()?.relu(),
        "exp" => x()?.exp(),
        "exp2" => x()?.exp2(),
        "log" => x()?.log(),
        "log2" => x()?.log2(),
        "sqrt" => x()?.sqrt(),
        "rsqrt" => x()?.rsqrt(),
        "reciprocal" => x()?.reciprocal(),
        "sigmoid" => x()?.sigmoid(),
        "square" => x()?.square(),
        "abs" => x()?.abs(),
        "logical_not" => x()?.logical_not(),
        "cast" => x()?.cast(dtype(a, 1)?),
        "reshape" => x()?.reshape(dims_or_keep(a, 1, &x()?)?),
        "permute" => x()?.permute(a.ints(1)?),
        "expand" => x()?.expand(dims_or_keep(a, 1, &x()?)?),
        "transpose" => x()?.transpose(a.i64(1).unwrap_or(1), a.i64(2).unwrap_or(0)),
        "flatten" => x()?.flatten_range(a.kw_i64("start_dim", a.i64(1).unwrap_or(0)), a.kw_i64("end_dim", a.i64(2).unwrap_or(-1))),
        "shrink" => {
            let x = x()?;
            let arg = a.arg(1).and_then(|v| v.as_array()).ok_or("shrink: bad arg")?;
            let b: Vec<(usize, usize)> = arg
                .iter()
                .zip(x.shape())
                .map(|(v, s)| if v.is_null() { Ok((0, s)) } else { Args::ints_of(v).map(|c| (c[0] as usize, c[1] as usize)) })
                .collect::<R<_>>()?;
            x.shrink(&b)
        }
        "pad" if a.kw_str("mode", "constant") == "constant" => {
            let x = x()?;
            let p = pads(a.arg(1).ok_or("pad: no padding")?, x.ndim())?;
            x.pad_value(&p, a.kw_f64("value", 0.0))
        }
        "sum" => reduce_with(a, &x()?, |x, ax, k| if k { x.sum_keepdim(ax) } else { x.sum(ax) })?,
        "max" => reduce_with(a, &x()?, |x, ax, k| if k { x.max_keepdim(ax) } else { x.max(ax) })?,
        "min" => reduce_with(a, &x()?, |x, ax, k| if k { x.min_keepdim(ax) } else { x.min(ax) })?,
        "mean" => reduce_with(a, &x()?, |x, ax, k| if k { x.mean_keepdim(ax) } else { x.mean(ax) })?,
        "prod" => reduce_with(a, &x()?, |x, ax, k| if k { x.prod_keepdim(ax) } else { x.prod(ax) })?,
        "log_softmax" => x()?.log_softmax(a.kw_i64("axis", -1)),
        "logsumexp" => reduce_with(a, &x()?, |x, ax, k| x.logsumexp(ax, k))?,
        "arange" => {
            let v: Vec<f64> = a.args.iter().map(|v| v.as_f64().unwrap_or(0.0)).collect();
            let ints = a.args.iter().all(|v| v.is_i64());
            let (start, stop, step) = match v.len() {
                1 => (0.0, v[0], 1.0),
                2 => (v[0], v[1], 1.0),
                _ => (v[0], v[1], v[2]),
            };
            let t = Tensor::arange(start, stop, step);
            if ints {
                t
            } else {
                t.cast(tinygrad::dtypes::FLOAT32)
            }
        }
        "full" => {
            let shape: Vec<usize> = a.ints(0)?.iter().map(|&d| d as usize).collect();
            let dt = dtype(a, 2).unwrap_or(match a.operand(1)? {
                crate::runner::Operand::I(_) => tinygrad::dtypes::INT32,
                crate::runner::Operand::B(_) => tinygrad::dtypes::BOOL,
                _ => tinygrad::dtypes::FLOAT32,
            });
            Tensor::full_dtype(shape, a.f64(1).unwrap_or(0.0), dt)
        }
        "zeros" | "ones" => {
            let shape: Vec<usize> = a.args.iter().map(|v| v.as_u64().unwrap_or(0) as usize).collect();
            let dt = dtype(a, usize::MAX).unwrap_or(tinygrad::dtypes::FLOAT32);
            Tensor::full_dtype(shape, if op == "ones" { 1.0 } else { 0.0 }, dt)
        }
        "composite_mlp" => x()?.matmul(&a.t(1)?).relu().matmul(&a.t(2)?).log_softmax(-1),
        "composite_reduce_reuse" => {
            let x = x()?;
            (&x - x.mean_keepdim(1)) * (x.max_keepdim(1) + x.sum_keepdim(1)).reciprocal()
        }
        "composite_double_reduce" => {
            let x = x()?;
            (&x - x.mean_keepdim(-1)).square().sum([1, 2]).sqrt()
        }
        _ => return Ok(None),
    }))
}
