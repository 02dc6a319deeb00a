//! Control flow (tinygrad `nn/onnx.py`'s `If`; onnx's `Loop` and `Scan`): subgraph attributes run by the runner in
//! the node's scope. Conditions and trip counts are read back to the host; loops unroll into one lazy graph.

use super::{arg, opt, values, Node, Outputs};
use crate::dtype::dtypes;
use crate::tensor::{Index, Tensor};

/// `If(cond)`: the outputs of `then_branch` or `else_branch`.
pub(super) fn if_(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let cond = values(arg(a, 0)?)?.first().is_some_and(|&c| c != 0);
    (n.subgraph)(n.graph(if cond { "then_branch" } else { "else_branch" })?, &[])
}

/// Tensors stacked on a new dim 0 (a loop's scan outputs).
fn stacked(ts: &[Tensor], what: &str) -> Result<Tensor, String> {
    let (first, rest) = ts.split_first().ok_or_else(|| format!("{what} ran no iterations, so its scan outputs have no shape"))?;
    Ok(first.stack(&rest.iter().collect::<Vec<_>>(), 0))
}

/// `Loop(M, cond, v...)`: `body(i, cond, v...) -> (cond, v..., scans...)` while `i < M` and `cond`; the final
/// loop-carried values, then each scan output stacked over the iterations.
pub(super) fn loop_(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let body = n.graph("body")?;
    let max = opt(a, 0).map(values).transpose()?.map_or(i64::MAX, |v| v[0]);
    let mut cond = opt(a, 1).cloned();
    let mut carried: Vec<Tensor> = a.iter().skip(2).flatten().cloned().collect();
    let mut scans: Vec<Vec<Tensor>> = Vec::new();
    let mut i = 0;
    while i < max && cond.as_ref().map_or(Ok(true), |c| values(c).map(|v| v[0] != 0))? {
        let c = cond.clone().unwrap_or_else(|| Tensor::full_dtype([1usize; 0], true, dtypes::BOOL));
        let inputs = [vec![Tensor::from_slice(&[i], []), c], carried.clone()].concat();
        let outs = (n.subgraph)(body, &inputs)?;
        cond = Some(outs[0].clone());
        carried = outs[1..=carried.len()].to_vec();
        let extra = &outs[1 + carried.len()..];
        scans.resize(extra.len(), Vec::new());
        scans.iter_mut().zip(extra).for_each(|(s, t)| s.push(t.clone()));
        i += 1;
    }
    let scans = scans.iter().map(|s| stacked(s, "Loop")).collect::<Result<Vec<_>, _>>()?;
    Ok([carried, scans].concat())
}

/// `Scan(states..., inputs...)` (opset 9 on; opset 8's batched form runs it per batch entry): `body(states...,
/// slices...) -> (states..., outputs...)` over the slices of the scan inputs along their axes (reversed per
/// direction); the final states, then the outputs stacked along their axes.
pub(super) fn scan(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    if n.opset < 9 {
        // (inputs: sequence_lens, then states and scan inputs with a leading batch dim, scanned along dim 1)
        let xs: Vec<Tensor> = a.iter().skip(1).flatten().cloned().collect();
        let batch = xs.first().map_or(0, |x| x.shape()[0]);
        let per: Vec<Vec<Tensor>> = (0..batch)
            .map(|b| scan_with(n, &xs.iter().map(|x| x.getitem(&[Index::Int(b as i64)])).collect::<Vec<_>>()))
            .collect::<Result<_, _>>()?;
        return (0..per.first().map_or(0, Vec::len))
            .map(|k| stacked(&per.iter().map(|o| o[k].clone()).collect::<Vec<_>>(), "Scan"))
            .collect();
    }
    scan_with(n, &a.iter().flatten().cloned().collect::<Vec<_>>())
}

fn scan_with(n: &Node, xs: &[Tensor]) -> Outputs {
    let body = n.graph("body")?;
    let m = n.int("num_scan_inputs", 0) as usize;
    let states = xs.len() - m;
    let attr = |k: &str, len: usize| n.ints(k).unwrap_or_else(|| vec![0; len]);
    let (in_axes, in_dirs) = (attr("scan_input_axes", m), attr("scan_input_directions", m));
    let inputs = &xs[states..];
    let axis = |i: usize| super::axis_of(in_axes[i], inputs[i].ndim());
    let steps = inputs.first().map_or(0, |x| x.shape()[axis(0) as usize]);
    let mut carried = xs[..states].to_vec();
    let mut outs: Vec<Vec<Tensor>> = Vec::new();
    for t in 0..steps {
        let slices = inputs.iter().enumerate().map(|(i, x)| {
            let at = if in_dirs[i] != 0 { steps - 1 - t } else { t } as i64;
            let mut idx = vec![Index::Slice(None, None, None); x.ndim()];
            idx[axis(i) as usize] = Index::Int(at);
            x.getitem(&idx)
        });
        let r = (n.subgraph)(body, &[carried.clone(), slices.collect()].concat())?;
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
            let (first, rest) = o.split_first().ok_or("Scan ran no iterations, so its outputs have no shape")?;
            Ok(first.stack(&rest.iter().collect::<Vec<_>>(), super::axis_of(out_axes[k], first.ndim() + 1)))
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok([carried, scans].concat())
}

/// The graph attribute `name` of `n` run on `x` when present (FlexAttention's score and probability modifiers).
pub(super) fn modify(n: &Node, name: &str, x: Tensor) -> Result<Tensor, String> {
    match n.graph(name) {
        Ok(g) => Ok((n.subgraph)(g, &[x])?.remove(0)),
        Err(_) => Ok(x),
    }
}
