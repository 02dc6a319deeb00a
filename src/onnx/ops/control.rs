//! Control flow (tinygrad `nn/onnx.py`'s `If`; onnx's `Loop` and `Scan`): subgraph attributes run by the runner in
//! the node's scope. Conditions and trip counts are read back to the host; loops unroll into one lazy graph.

use super::{values, Node};
use crate::onnx::Value;
use crate::tensor::{Index, Tensor};

/// Input `i` as a tensor.
fn tensor(a: &[Option<Value>], i: usize) -> Result<&Tensor, String> {
    a.get(i).and_then(|v| v.as_ref()?.tensor()).ok_or_else(|| format!("input {i} must be a tensor"))
}

/// `If(cond)`: the outputs of `then_branch` or `else_branch`.
pub(super) fn if_(n: &Node, a: &[Option<Value>]) -> Result<Vec<Value>, String> {
    let cond = values(tensor(a, 0)?)?.first().is_some_and(|&c| c != 0);
    (n.subgraph)(n.graph(if cond { "then_branch" } else { "else_branch" })?, &[])
}

/// Tensors stacked on a new dim `axis` (a loop's scan outputs).
fn stacked(ts: &[Tensor], axis: i64, what: &str) -> Result<Tensor, String> {
    let (first, rest) = ts.split_first().ok_or_else(|| format!("{what} ran no iterations, so its scan outputs have no shape"))?;
    Ok(first.stack(&rest.iter().collect::<Vec<_>>(), axis))
}

/// `Loop(M, cond, v...)`: `body(i, cond, v...) -> (cond, v..., scans...)` while `i < M` and `cond`; the final
/// loop-carried values (tensors or sequences), then each scan output stacked over the iterations.
pub(super) fn loop_(n: &Node, a: &[Option<Value>]) -> Result<Vec<Value>, String> {
    let body = n.graph("body")?;
    let max = a.first().and_then(|v| v.as_ref()?.tensor()).map(values).transpose()?.map_or(i64::MAX, |v| v[0]);
    let mut cond = a.get(1).and_then(|v| v.as_ref()?.tensor().cloned());
    let mut carried: Vec<Value> = a.iter().skip(2).map(|v| v.clone().unwrap_or(Value::None)).collect();
    let mut scans: Vec<Vec<Tensor>> = Vec::new();
    let mut i = 0;
    while i < max && cond.as_ref().map_or(Ok(true), |c| values(c).map(|v| v[0] != 0))? {
        let c = cond.clone().unwrap_or_else(|| Tensor::from_slice(&[true], []));
        let inputs = [vec![Value::Tensor(Tensor::from_slice(&[i], [])), Value::Tensor(c)], carried.clone()].concat();
        let outs = (n.subgraph)(body, &inputs)?;
        cond = outs[0].tensor().cloned();
        carried = outs[1..=carried.len()].to_vec();
        let extra = &outs[1 + carried.len()..];
        scans.resize(extra.len(), Vec::new());
        for (s, v) in scans.iter_mut().zip(extra) {
            s.push(v.tensor().cloned().ok_or("a Loop scan output must be a tensor")?);
        }
        i += 1;
    }
    let scans = scans.iter().map(|s| stacked(s, 0, "Loop").map(Value::Tensor)).collect::<Result<Vec<_>, _>>()?;
    Ok([carried, scans].concat())
}

/// `Scan(states..., inputs...)` (opset 9 on; opset 8's batched form runs it per batch entry): `body(states...,
/// slices...) -> (states..., outputs...)` over the slices of the scan inputs along their axes (reversed per
/// direction); the final states, then the outputs stacked along their axes.
pub(super) fn scan(n: &Node, a: &[Option<Value>]) -> Result<Vec<Value>, String> {
    let xs: Vec<Tensor> = a.iter().flatten().filter_map(|v| v.tensor().cloned()).collect();
    if n.opset < 9 {
        // (inputs: sequence_lens (absent in practice), then states and scan inputs with a leading batch dim)
        let xs = if a.first().is_some_and(Option::is_some) { &xs[1..] } else { &xs[..] };
        let batch = xs.first().map_or(0, |x| x.shape()[0]);
        let per: Vec<Vec<Tensor>> = (0..batch)
            .map(|b| scan_with(n, &xs.iter().map(|x| x.getitem(&[Index::Int(b as i64)])).collect::<Vec<_>>()))
            .collect::<Result<_, _>>()?;
        return (0..per.first().map_or(0, Vec::len))
            .map(|k| stacked(&per.iter().map(|o| o[k].clone()).collect::<Vec<_>>(), 0, "Scan").map(Value::Tensor))
            .collect();
    }
    Ok(scan_with(n, &xs)?.into_iter().map(Value::Tensor).collect())
}

fn scan_with(n: &Node, xs: &[Tensor]) -> Result<Vec<Tensor>, String> {
    let body = n.graph("body")?;
    let m = n.int("num_scan_inputs", 0) as usize;
    let states = xs.len() - m;
    let attr = |k: &str, len: usize| n.ints(k).unwrap_or_else(|| vec![0; len]);
    let (in_axes, in_dirs) = (attr("scan_input_axes", m), attr("scan_input_directions", m));
    let inputs = &xs[states..];
    let axis = |i: usize| super::axis_of(in_axes[i], inputs[i].ndim());
    let steps = inputs.first().map_or(0, |x| x.shape()[axis(0) as usize]);
    let mut carried: Vec<Tensor> = xs[..states].to_vec();
    let mut outs: Vec<Vec<Tensor>> = Vec::new();
    for t in 0..steps {
        let slices = inputs.iter().enumerate().map(|(i, x)| {
            let at = if in_dirs[i] != 0 { steps - 1 - t } else { t } as i64;
            let mut idx = vec![Index::Slice(None, None, None); x.ndim()];
            idx[axis(i) as usize] = Index::Int(at);
            Value::Tensor(x.getitem(&idx))
        });
        let given: Vec<Value> = carried.iter().cloned().map(Value::Tensor).chain(slices).collect();
        let r: Vec<Tensor> =
            (n.subgraph)(body, &given)?.iter().map(|v| v.tensor().cloned().ok_or("a Scan body makes tensors")).collect::<Result<_, _>>()?;
        carried = r[..states].to_vec();
        outs.resize(r.len() - states, Vec::new());
        outs.iter_mut().zip(&r[states..]).for_each(|(o, t)| o.push(t.clone()));
    }
    let (out_axes, out_dirs) = (attr("scan_output_axes", outs.len()), attr("scan_output_directions", outs.len()));
    let scans = outs
        .into_iter()
        .enumerate()
        .map(|(k, mut o)| {
            if out_dirs[k] != 0 {
                o.reverse();
            }
            let rank = o.first().map_or(0, Tensor::ndim) + 1;
            stacked(&o, super::axis_of(out_axes[k], rank), "Scan")
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok([carried, scans].concat())
}

/// The graph attribute `name` of `n` run on `x` when present (FlexAttention's score and probability modifiers).
pub(super) fn modify(n: &Node, name: &str, x: Tensor) -> Result<Tensor, String> {
    match n.graph(name) {
        Ok(g) => {
            (n.subgraph)(g, &[Value::Tensor(x)])?.first().and_then(Value::tensor).cloned().ok_or_else(|| format!("{name} makes no tensor"))
        }
        Err(_) => Ok(x),
    }
}
