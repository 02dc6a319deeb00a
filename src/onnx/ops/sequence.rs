//! The sequence ops (onnx's `Sequence*`, `ConcatFromSequence`, `SplitToSequence`, `SequenceMap`): sequences of
//! tensors held by the runner as [`Value::Sequence`], positions read back to the host.

use super::{axis_of, values, Node};
use crate::onnx::Value;
use crate::tensor::Tensor;

/// Input `i` as a sequence.
pub(super) fn of(a: &[Option<Value>], i: usize) -> Result<Vec<Tensor>, String> {
    match a.get(i) {
        Some(Some(Value::Sequence(s))) => Ok(s.clone()),
        _ => Err(format!("input {i} must be a sequence")),
    }
}

/// Input `i` as a tensor, if given.
fn tensor(a: &[Option<Value>], i: usize) -> Option<&Tensor> {
    a.get(i).and_then(|v| v.as_ref()?.tensor())
}

/// A position in a sequence of `len` (negative from the end), checked to lie in `0..=len` (`end` allows `len`).
fn position(a: &[Option<Value>], i: usize, len: usize, default: i64, end: bool) -> Result<usize, String> {
    let p = tensor(a, i).map(values).transpose()?.map_or(default, |v| v[0]);
    let p = if p < 0 { p + len as i64 } else { p };
    let limit = if end { len as i64 } else { len as i64 - 1 };
    (0..=limit).contains(&p).then_some(p as usize).ok_or_else(|| format!("position {p} is outside a sequence of {len}"))
}

/// `SequenceAt(seq, position)`.
pub(super) fn at(_: &Node, a: &[Option<Value>]) -> Result<Vec<Value>, String> {
    let s = of(a, 0)?;
    Ok(vec![Value::Tensor(s[position(a, 1, s.len(), 0, false)?].clone())])
}

/// `SequenceInsert(seq, tensor, position)`: at the end without a position.
pub(super) fn insert(_: &Node, a: &[Option<Value>]) -> Result<Vec<Value>, String> {
    let mut s = of(a, 0)?;
    let t = tensor(a, 1).ok_or("SequenceInsert needs a tensor")?.clone();
    let p = position(a, 2, s.len(), s.len() as i64, true)?;
    s.insert(p, t);
    Ok(vec![Value::Sequence(s)])
}

/// `SequenceErase(seq, position)`: the last without a position.
pub(super) fn erase(_: &Node, a: &[Option<Value>]) -> Result<Vec<Value>, String> {
    let mut s = of(a, 0)?;
    let p = position(a, 1, s.len(), -1, false)?;
    s.remove(p);
    Ok(vec![Value::Sequence(s)])
}

/// `ConcatFromSequence(seq)`: joined along `axis`, or stacked on a new one under `new_axis`.
pub(super) fn concat(n: &Node, a: &[Option<Value>]) -> Result<Vec<Value>, String> {
    let s = of(a, 0)?;
    let (first, rest) = s.split_first().ok_or("ConcatFromSequence of an empty sequence")?;
    let rest: Vec<&Tensor> = rest.iter().collect();
    let t = if n.int("new_axis", 0) != 0 {
        first.stack(&rest, axis_of(n.int("axis", 0), first.ndim() + 1))
    } else {
        first.cat(&rest, n.int("axis", 0))
    };
    Ok(vec![Value::Tensor(t)])
}

/// `SplitToSequence(input, split)`: pieces along `axis` of the sizes in `split` (one size: equal pieces, the last
/// smaller), or pieces of 1 without it, squeezed unless `keepdims`.
pub(super) fn split(n: &Node, a: &[Option<Value>]) -> Result<Vec<Value>, String> {
    let x = tensor(a, 0).ok_or("SplitToSequence needs a tensor")?;
    let axis = axis_of(n.int("axis", 0), x.ndim());
    let dim = x.shape()[axis as usize];
    let split = tensor(a, 1);
    let sizes: Vec<usize> = match split {
        Some(t) if t.ndim() == 0 => {
            let each = values(t)?[0] as usize;
            (0..dim.div_ceil(each)).map(|i| each.min(dim - i * each)).collect()
        }
        Some(t) => values(t)?.iter().map(|&v| v as usize).collect(),
        None => vec![1; dim],
    };
    let pieces = x.split_sizes(&sizes, axis);
    let squeeze = split.is_none() && n.int("keepdims", 1) == 0;
    Ok(vec![Value::Sequence(pieces.into_iter().map(|p| if squeeze { p.squeeze(axis) } else { p }).collect())])
}

/// `SequenceMap(seq, more...)`: `body` on each position of the sequences (tensor inputs passed whole each time);
/// each output a sequence.
pub(super) fn map(n: &Node, a: &[Option<Value>]) -> Result<Vec<Value>, String> {
    let body = n.graph("body")?;
    let len = of(a, 0)?.len();
    let mut outs: Vec<Vec<Tensor>> = vec![Vec::new(); body.output.len()];
    for i in 0..len {
        let inputs: Vec<Value> = a
            .iter()
            .map(|v| match v {
                Some(Value::Sequence(s)) => Value::Tensor(s[i].clone()),
                Some(v) => v.clone(),
                None => Value::None,
            })
            .collect();
        for (o, v) in outs.iter_mut().zip((n.subgraph)(body, &inputs)?) {
            o.push(v.tensor().cloned().ok_or("a SequenceMap body makes tensors")?);
        }
    }
    Ok(outs.into_iter().map(Value::Sequence).collect())
}
