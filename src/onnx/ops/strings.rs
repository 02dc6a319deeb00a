//! String tensors (onnx's string ops and `ai.onnx.ml`'s `LabelEncoder`): held on the host as [`Strings`] (a shape
//! and row-major values), computed there. `StringNormalizer`, `RegexFullMatch`, `StringConcat`, `StringSplit`,
//! `Equal` on strings and `LabelEncoder` between strings, ints and floats.

use super::Node;
use crate::dtype::dtypes;
use crate::onnx::{Strings, Value};
use crate::tensor::Tensor;
use unicode_normalization::UnicodeNormalization;

type Result<T> = std::result::Result<T, String>;

/// Input `i` as strings.
fn strings(a: &[Option<Value>], i: usize) -> Result<&Strings> {
    match a.get(i) {
        Some(Some(Value::Strings(s))) => Ok(s),
        _ => Err(format!("input {i} must be a string tensor")),
    }
}

/// A broadcast: the output shape, and for each output position the flat index into each operand.
type Broadcast = (Vec<usize>, Vec<(usize, usize)>);

/// The numpy broadcast of shapes `x` and `y`.
fn broadcast(x: &[usize], y: &[usize]) -> Result<Broadcast> {
    let nd = x.len().max(y.len());
    let pad = |s: &[usize]| [vec![1; nd - s.len()], s.to_vec()].concat();
    let (xs, ys) = (pad(x), pad(y));
    let out: Vec<usize> = xs
        .iter()
        .zip(&ys)
        .map(|(&a, &b)| {
            if a == 1 {
                Ok(b)
            } else if b == 1 || a == b {
                Ok(a)
            } else {
                Err(format!("shapes {x:?} and {y:?} don't broadcast"))
            }
        })
        .collect::<Result<_>>()?;
    let total: usize = out.iter().product();
    let flat = |s: &[usize], coord: &[usize]| s.iter().zip(coord).fold(0, |acc, (&d, &c)| acc * d + if d == 1 { 0 } else { c });
    let idx = (0..total)
        .map(|mut k| {
            let mut coord = vec![0; nd];
            for d in (0..nd).rev() {
                coord[d] = k % out[d];
                k /= out[d];
            }
            (flat(&xs, &coord), flat(&ys, &coord))
        })
        .collect();
    Ok((out, idx))
}

/// `StringNormalizer(X)` on `[C]` or `[1, C]`: accents stripped (NFKD, marks dropped), stopwords removed (case-sensitive
/// or not), case changed (`LOWER`/`UPPER`); empty results dropped (all of them: one empty string).
pub(super) fn normalizer(n: &Node, a: &[Option<Value>]) -> Result<Vec<Value>> {
    let x = strings(a, 0)?;
    let action = n.string("case_change_action", "NONE");
    let sensitive = n.int("is_case_sensitive", 0) != 0;
    let stops: Vec<String> =
        n.attr("stopwords").map(|s| s.strings.iter().map(|w| String::from_utf8_lossy(w).into_owned()).collect()).unwrap_or_default();
    let case = |s: &str| match action.as_str() {
        "LOWER" => s.to_lowercase(),
        "UPPER" => s.to_uppercase(),
        _ => s.to_string(),
    };
    let drop_stops = |s: &str, stops: &[String]| s.split(' ').filter(|w| !stops.iter().any(|t| t == w)).collect::<Vec<_>>().join(" ");
    let cased_stops: Vec<String> = stops.iter().map(|w| case(w)).collect();
    let out: Vec<String> = x
        .data
        .iter()
        .map(|s| {
            let s: String = s.nfkd().filter(|c| !unicode_normalization::char::is_combining_mark(*c)).collect();
            if sensitive {
                case(&drop_stops(&s, &stops))
            } else {
                drop_stops(&case(&s), &cased_stops)
            }
        })
        .filter(|s| !s.is_empty())
        .collect();
    let out = if out.is_empty() { vec![String::new()] } else { out };
    let shape = if x.shape.len() == 2 { vec![1, out.len()] } else { vec![out.len()] };
    Ok(vec![Value::Strings(Strings { shape, data: out })])
}

/// `RegexFullMatch(X)`: whether each string matches `pattern` whole (bool).
pub(super) fn regex_full_match(n: &Node, a: &[Option<Value>]) -> Result<Vec<Value>> {
    let x = strings(a, 0)?;
    let re = fancy_regex::Regex::new(&format!("^(?:{})$", n.string("pattern", ""))).map_err(|e| format!("pattern: {e}"))?;
    let hits: Vec<bool> = x.data.iter().map(|s| re.is_match(s).unwrap_or(false)).collect();
    Ok(vec![Value::Tensor(Tensor::from_slice(&hits, x.shape.clone()))])
}

/// `StringConcat(X, Y)`: each pair joined, broadcast.
pub(super) fn concat(_: &Node, a: &[Option<Value>]) -> Result<Vec<Value>> {
    let (x, y) = (strings(a, 0)?, strings(a, 1)?);
    let (shape, idx) = broadcast(&x.shape, &y.shape)?;
    Ok(vec![Value::Strings(Strings { shape, data: idx.iter().map(|&(i, j)| format!("{}{}", x.data[i], y.data[j])).collect() })])
}

/// `StringSplit(X)`: each string split at `delimiter` (runs of whitespace without one) at most `maxsplit` times,
/// padded with empty strings to the longest; and the int64 counts.
pub(super) fn split(n: &Node, a: &[Option<Value>]) -> Result<Vec<Value>> {
    let x = strings(a, 0)?;
    let delim = n.string("delimiter", "");
    let max = n.attr("maxsplit").map(|v| v.i() as usize);
    let parts: Vec<Vec<String>> = x
        .data
        .iter()
        .map(|s| match (delim.is_empty(), max) {
            (true, None) => s.split_whitespace().map(str::to_string).collect(),
            (true, Some(m)) => {
                let mut out: Vec<String> = Vec::new();
                let mut rest = s.trim_start();
                while !rest.is_empty() {
                    if out.len() == m {
                        out.push(rest.to_string());
                        break;
                    }
                    let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
                    out.push(rest[..end].to_string());
                    rest = rest[end..].trim_start();
                }
                out
            }
            (false, None) => s.split(delim.as_str()).map(str::to_string).collect(),
            (false, Some(m)) => s.splitn(m + 1, delim.as_str()).map(str::to_string).collect(),
        })
        .collect();
    let width = parts.iter().map(Vec::len).max().unwrap_or(0);
    let counts: Vec<i64> = parts.iter().map(|p| p.len() as i64).collect();
    let data = parts.into_iter().flat_map(|p| p.into_iter().chain(std::iter::repeat(String::new())).take(width)).collect();
    Ok(vec![
        Value::Strings(Strings { shape: [x.shape.clone(), vec![width]].concat(), data }),
        Value::Tensor(Tensor::from_slice(&counts, x.shape.clone())),
    ])
}

/// `Equal` where an input is strings (elementwise, broadcast, bool); else the tensor `Equal`.
pub(super) fn equal(_: &Node, a: &[Option<Value>]) -> Result<Vec<Value>> {
    if let (Ok(x), Ok(y)) = (strings(a, 0), strings(a, 1)) {
        let (shape, idx) = broadcast(&x.shape, &y.shape)?;
        let eq: Vec<bool> = idx.iter().map(|&(i, j)| x.data[i] == y.data[j]).collect();
        return Ok(vec![Value::Tensor(Tensor::from_slice(&eq, shape))]);
    }
    let t = |i: usize| a.get(i).and_then(|v| v.as_ref()?.tensor()).ok_or_else(|| format!("input {i} must be a tensor"));
    Ok(vec![Value::Tensor(t(0)?.eq(t(1)?))])
}

/// One LabelEncoder key or value.
#[derive(Clone, PartialEq)]
enum Label {
    S(String),
    I(i64),
    F(f32),
}

/// `LabelEncoder(X)` (`ai.onnx.ml`): each element looked up in the `keys_*` -> `values_*` map (strings, int64s,
/// floats, or the `keys_tensor`/`values_tensor` pair), the `default_*` when absent.
pub(super) fn label_encoder(n: &Node, a: &[Option<Value>]) -> Result<Vec<Value>> {
    let list = |kind: &str| -> Option<Vec<Label>> {
        let at = n.attr(&format!("{kind}_strings")).filter(|v| !v.strings.is_empty());
        if let Some(v) = at {
            return Some(v.strings.iter().map(|s| Label::S(String::from_utf8_lossy(s).into_owned())).collect());
        }
        if let Some(v) = n.ints(&format!("{kind}_int64s")) {
            return Some(v.into_iter().map(Label::I).collect());
        }
        if let Some(v) = n.floats(&format!("{kind}_floats")) {
            return Some(v.into_iter().map(Label::F).collect());
        }
        let t = n.attr(&format!("{kind}_tensor")).and_then(|v| v.t.as_ref())?;
        labels(n, t).ok()
    };
    let (keys, vals) = (list("keys").ok_or("LabelEncoder without keys")?, list("values").ok_or("LabelEncoder without values")?);
    let default = match vals.first() {
        Some(Label::S(_)) => Label::S(n.attr("default_string").map_or(String::new(), |v| String::from_utf8_lossy(v.s()).into_owned())),
        Some(Label::I(_)) => Label::I(n.int("default_int64", -1)),
        _ => Label::F(n.float("default_float", 0.0)),
    };
    let default = match n.attr("default_tensor").and_then(|v| v.t.as_ref()) {
        Some(t) => labels(n, t)?.into_iter().next().unwrap_or(default),
        None => default,
    };
    // (values from a tensor keep its dtype)
    let out_dtype = n.attr("values_tensor").and_then(|v| v.t.as_ref()).and_then(|t| super::super::dtype_of(t.data_type().try_into().ok()?));
    let (inputs, shape): (Vec<Label>, Vec<usize>) = match a.first() {
        Some(Some(Value::Strings(s))) => (s.data.iter().cloned().map(Label::S).collect(), s.shape.clone()),
        Some(Some(Value::Tensor(t))) if t.dtype().is_int() => (super::values(t)?.into_iter().map(Label::I).collect(), t.shape()),
        Some(Some(Value::Tensor(t))) => (super::floats(t)?.into_iter().map(|v| Label::F(v as f32)).collect(), t.shape()),
        _ => return Err("LabelEncoder needs an input".into()),
    };
    let out: Vec<Label> = inputs.iter().map(|x| keys.iter().position(|k| k == x).map_or(default.clone(), |i| vals[i].clone())).collect();
    Ok(vec![match &default {
        Label::S(_) => {
            Value::Strings(Strings { shape, data: out.into_iter().map(|l| if let Label::S(s) = l { s } else { String::new() }).collect() })
        }
        Label::I(_) => {
            let t = Tensor::from_slice(&out.iter().map(|l| if let Label::I(v) = l { *v } else { 0 }).collect::<Vec<i64>>(), shape);
            Value::Tensor(t.cast(out_dtype.unwrap_or(dtypes::INT64)))
        }
        Label::F(_) => {
            let t = Tensor::from_slice(&out.iter().map(|l| if let Label::F(v) = l { *v } else { 0.0 }).collect::<Vec<f32>>(), shape);
            Value::Tensor(t.cast(out_dtype.unwrap_or(dtypes::FLOAT32)))
        }
    }])
}

/// A tensor attribute's values as labels (strings, ints of any width, floats).
fn labels(n: &Node, t: &crate::onnx::proto::TensorProto) -> Result<Vec<Label>> {
    if t.data_type() == 8 {
        return Ok(t.string_data.iter().map(|s| Label::S(String::from_utf8_lossy(s).into_owned())).collect());
    }
    let dir = n.path.parent().unwrap_or(std::path::Path::new("."));
    let v = crate::onnx::tensor_from_proto(t, dir, n.path).map_err(|e| e.to_string())?;
    if v.dtype().is_float() {
        Ok(super::floats(&v)?.into_iter().map(|x| Label::F(x as f32)).collect())
    } else {
        Ok(super::values(&v)?.into_iter().map(Label::I).collect())
    }
}
