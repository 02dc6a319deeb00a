//! Conformance op table: the movement, indexing, gather/scatter and creation ops (see dispatch.rs).

use crate::runner::{Args, R};
use serde_json::Value;
use tinygrad::dtype::{dtypes, ConstValue, DType};
use tinygrad::tensor::Index;
use tinygrad::Tensor;

/// `Some(outputs)` when `op` is one of this table's ops.
pub fn dispatch(op: &str, a: &Args) -> Option<R<Vec<Tensor>>> {
    run(op, a).transpose()
}

/// Positional argument `i`, else keyword `name` (tinygrad parameters can be given either way).
fn get<'a>(a: &'a Args, i: usize, name: &str) -> Option<&'a Value> {
    a.arg(i).or_else(|| a.kw(name))
}

fn int(a: &Args, i: usize, name: &str, default: Option<i64>) -> R<i64> {
    get(a, i, name).and_then(Value::as_i64).or(default).ok_or_else(|| format!("missing int argument {name}"))
}

fn tensor(a: &Args, i: usize, name: &str) -> R<Tensor> {
    get(a, i, name).and_then(|v| a.tensor_of(v)).ok_or_else(|| format!("argument {name} is not a tensor"))
}

/// Dims from a list (or a single int); `None` entries become `-1` (keep).
fn dims(v: &Value) -> R<Vec<i64>> {
    match v {
        Value::Array(xs) => {
            xs.iter().map(|x| if x.is_null() { Ok(-1) } else { x.as_i64().ok_or_else(|| format!("not an int: {x}")) }).collect()
        }
        v => Args::ints_of(v),
    }
}

/// Dims given as one list at position `i` (or keyword `name`), or as the remaining positional ints.
fn var_dims(a: &Args, i: usize, name: &str) -> R<Vec<i64>> {
    match get(a, i, name) {
        Some(v @ Value::Array(_)) => dims(v),
        _ => a.args[i..].iter().map(|v| v.as_i64().ok_or_else(|| format!("not an int: {v}"))).collect(),
    }
}

fn dtype_kw(a: &Args) -> R<Option<DType>> {
    a.kw("dtype").and_then(Value::as_str).map(|n| DType::from_name(n).ok_or_else(|| format!("unknown dtype {n}"))).transpose()
}

fn const_of(v: &Value) -> R<ConstValue> {
    match v {
        Value::Bool(b) => Ok(ConstValue::Bool(*b)),
        Value::Number(n) if n.is_i64() => Ok(ConstValue::Int(n.as_i64().unwrap() as i128)),
        Value::Number(n) => Ok(ConstValue::Float(n.as_f64().unwrap())),
        v => Err(format!("not a constant: {v}")),
    }
}

/// Every tensor among the positional arguments (a list of tensors counts too).
fn all_tensors(a: &Args) -> R<Vec<Tensor>> {
    let mut out = Vec::new();
    for v in a.args {
        match v {
            Value::Array(xs) => out.extend(xs.iter().filter_map(|x| a.tensor_of(x))),
            v => out.extend(a.tensor_of(v)),
        }
    }
    if out.is_empty() {
        return Err("no tensor arguments".into());
    }
    Ok(out)
}

/// A nested list of ints as an int32 tensor (a Python list index).
fn list_tensor(v: &Value) -> R<Tensor> {
    fn walk(v: &Value, depth: usize, shape: &mut Vec<usize>, flat: &mut Vec<i32>) -> R<()> {
        match v {
            Value::Array(xs) => {
                if shape.len() == depth {
                    shape.push(xs.len());
                }
                xs.iter().try_for_each(|x| walk(x, depth + 1, shape, flat))
            }
            v => {
                flat.push(v.as_i64().ok_or_else(|| format!("index list holds a non-int {v}"))? as i32);
                Ok(())
            }
        }
    }
    let (mut shape, mut flat) = (Vec::new(), Vec::new());
    walk(v, 0, &mut shape, &mut flat)?;
    Ok(Tensor::from_slice(&flat, shape))
}

fn index_of(a: &Args, v: &Value) -> R<Index> {
    if let Some(t) = a.tensor_of(v) {
        return Ok(Index::Tensor(t));
    }
    let opt = |x: &Value| if x.is_null() { Ok(None) } else { x.as_i64().map(Some).ok_or_else(|| format!("bad slice bound {x}")) };
    Ok(match v {
        Value::Null => Index::NewAxis,
        Value::String(s) if s == "..." => Index::Ellipsis,
        Value::Number(n) => Index::Int(n.as_i64().ok_or("float index")?),
        Value::Array(_) => Index::Tensor(list_tensor(v)?),
        Value::Object(o) if o.contains_key("slice") => {
            let s = o["slice"].as_array().ok_or("bad slice")?;
            Index::Slice(opt(&s[0])?, opt(&s[1])?, opt(&s[2])?)
        }
        v => return Err(format!("unsupported index {v}")),
    })
}

/// A subscript: a list is a tuple of indices, anything else a single index.
fn indices(a: &Args, v: &Value) -> R<Vec<Index>> {
    match v {
        Value::Array(xs) => xs.iter().map(|x| index_of(a, x)).collect(),
        v => Ok(vec![index_of(a, v)?]),
    }
}

fn pads(a: &Args, x: &Tensor) -> R<Vec<(i64, i64)>> {
    crate::dispatch::pads(get(a, 1, "padding").ok_or("pad: no padding")?, x.ndim())
}

fn run(op: &str, a: &Args) -> R<Option<Vec<Tensor>>> {
    let x = || a.t(0);
    let one = |t: Tensor| Ok::<_, String>(vec![t]);
    let dim = |i: usize, default: i64| int(a, i, "dim", Some(default));
    Ok(Some(match op {
        "flip" => one(x()?.flip(var_dims(a, 1, "axis")?))?,
        "cat" | "stack" => {
            let ts = all_tensors(a)?;
            let rest: Vec<&Tensor> = ts[1..].iter().collect();
            let d = a.kw_i64("dim", 0);
            one(if op == "cat" { ts[0].cat(&rest, d) } else { ts[0].stack(&rest, d) })?
        }
        "split" => match get(a, 1, "sizes").ok_or("split: no sizes")? {
            Value::Array(s) => x()?.split_sizes(&s.iter().map(|v| v.as_u64().unwrap_or(0) as usize).collect::<Vec<_>>(), dim(2, 0)?),
            v => x()?.split(v.as_u64().ok_or("split: bad size")? as usize, dim(2, 0)?),
        },
        "chunk" => x()?.chunk(int(a, 1, "chunks", None)? as usize, dim(2, 0)?),
        "repeat" => one(x()?.repeat(var_dims(a, 1, "repeats")?))?,
        "repeat_interleave" => one(x()?.repeat_interleave(int(a, 1, "repeats", None)? as usize, get(a, 2, "dim").and_then(Value::as_i64)))?,
        "roll" => {
            let shifts = dims(get(a, 1, "shifts").ok_or("roll: no shifts")?)?;
            one(match get(a, 2, "dims") {
                Some(d) => x()?.roll(shifts, dims(d)?),
                None => x()?.roll_flat(shifts[0]),
            })?
        }
        "unfold" => one(x()?.unfold(dim(1, 0)?, int(a, 2, "size", None)? as usize, int(a, 3, "step", None)? as usize))?,
        "squeeze" => one(match get(a, 1, "dim").and_then(Value::as_i64) {
            Some(d) => x()?.squeeze(d),
            None => x()?.squeeze_all(),
        })?,
        "unsqueeze" => one(x()?.unsqueeze(dim(1, 0)?))?,
        "unflatten" => one(x()?.unflatten(dim(1, 0)?, dims(get(a, 2, "sizes").ok_or("unflatten: no sizes")?)?))?,
        "view" => one(x()?.reshape(var_dims(a, 1, "shape")?))?,
        "diagonal" => one(x()?.diagonal(int(a, 1, "offset", Some(0))?, int(a, 2, "dim1", Some(0))?, int(a, 3, "dim2", Some(1))?))?,
        "diag" => one(x()?.diag())?,
        "meshgrid" => {
            let ts = all_tensors(a)?;
            ts[0].meshgrid(&ts[1..].iter().collect::<Vec<_>>(), a.kw_str("indexing", "ij"))
        }
        "rearrange" => {
            let formula = get(a, 1, "formula").and_then(Value::as_str).ok_or("rearrange: no formula")?;
            let sizes: Vec<(&str, usize)> = a
                .kwargs
                .iter()
                .filter(|(k, _)| *k != "formula")
                .filter_map(|(k, v)| v.as_u64().map(|n| (k.as_str(), n as usize)))
                .collect();
            one(x()?.rearrange(formula, &sizes))?
        }
        "pad" => {
            let x = x()?;
            let p = pads(a, &x)?;
            one(match a.kw_str("mode", "constant") {
                "constant" => x.pad_value(&p, a.kw_f64("value", 0.0)),
                "reflect" => x.pad_reflect(&p),
                "replicate" => x.pad_replicate(&p),
                "circular" => x.pad_circular(&p),
                m => return Err(format!("pad: unsupported mode {m}")),
            })?
        }
        "pad_to" => one(x()?.pad_to_value(var_dims(a, 1, "shape")?, a.kw_f64("value", 0.0)))?,
        "shrink_to" => one(x()?.shrink_to(var_dims(a, 1, "shape")?))?,
        "getitem" => one(x()?.getitem(&indices(a, get(a, 1, "indices").ok_or("getitem: no indices")?)?))?,
        "setitem" => {
            let x = x()?;
            let v = a.operand(2)?;
            x.setitem(&indices(a, get(a, 1, "indices").ok_or("setitem: no indices")?)?, v);
            vec![x]
        }
        "gather" => one(x()?.gather(dim(1, 0)?, &tensor(a, 2, "index")?))?,
        "scatter" => {
            let (d, idx) = (dim(1, 0)?, tensor(a, 2, "index")?);
            let src = a.operand_of(get(a, 3, "src").ok_or("scatter: no src")?)?;
            one(match a.kw("reduce").and_then(Value::as_str) {
                Some(r) => x()?.scatter_with(d, &idx, src, r),
                None => x()?.scatter(d, &idx, src),
            })?
        }
        "scatter_reduce" => {
            let reduce = get(a, 4, "reduce").and_then(Value::as_str).ok_or("scatter_reduce: no reduce")?;
            one(x()?.scatter_reduce(dim(1, 0)?, &tensor(a, 2, "index")?, &tensor(a, 3, "src")?, reduce, a.kw_bool("include_self", true)))?
        }
        "masked_select" => {
            let (x, mask) = (x()?, tensor(a, 1, "mask")?);
            one(match get(a, 2, "size").and_then(Value::as_u64) {
                Some(n) => x.masked_select_size(&mask, n as usize, get(a, 3, "fill_value").and_then(Value::as_f64).unwrap_or(0.0)),
                None => x.masked_select(&mask),
            }
            .map_err(|e| e.to_string())?)?
        }
        "one_hot" => one(x()?.one_hot(int(a, 1, "num_classes", None)? as usize))?,
        "tril" => one(x()?.tril(int(a, 1, "diagonal", Some(0))?))?,
        "triu" => one(x()?.triu(int(a, 1, "diagonal", Some(0))?))?,
        "eye" => {
            let n = int(a, 0, "n", None)?;
            let m = int(a, 1, "m", Some(n))?;
            one(Tensor::eye(n as usize, m as usize, dtype_kw(a)?.unwrap_or(dtypes::FLOAT32)))?
        }
        "linspace" => {
            let f = |i, name| get(a, i, name).and_then(Value::as_f64).ok_or_else(|| format!("linspace: no {name}"));
            let dt = dtype_kw(a)?.unwrap_or(dtypes::FLOAT32);
            one(Tensor::linspace(f(0, "start")?, f(1, "stop")?, int(a, 2, "steps", None)? as usize, dt))?
        }
        "full_like" | "zeros_like" | "ones_like" => {
            let x = x()?;
            let v = match op {
                "full_like" => const_of(get(a, 1, "fill_value").ok_or("full_like: no fill_value")?)?,
                "zeros_like" => ConstValue::Int(0),
                _ => ConstValue::Int(1),
            };
            one(x.full_like_dtype(v, dtype_kw(a)?.unwrap_or(x.dtype())))?
        }
        _ => return Ok(None),
    }))
}
