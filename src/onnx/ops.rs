//! The ONNX op handlers (tinygrad `nn/onnx.py`'s `get_onnx_ops`), one table: op name -> handler, each written on
//! the Tensor API. In: a node (its attributes and its domain's opset version) and its inputs (`None` for an
//! omitted optional one). Out: its outputs, or why it can't run (the runner adds the node's name).

use super::proto::{attribute_proto::AttributeType, tensor_proto::DataType, NodeProto};
use crate::tensor::Tensor;
use std::path::Path;

/// A node as a handler sees it: its proto and its domain's opset version.
pub struct Node<'a> {
    /// The node.
    pub proto: &'a NodeProto,
    /// The opset version the model imports for the node's domain.
    pub opset: i64,
    /// The model file (external data of a tensor attribute is beside it).
    pub path: &'a Path,
}

impl Node<'_> {
    fn attr(&self, name: &str) -> Option<&super::proto::AttributeProto> {
        self.proto.attribute.iter().find(|a| a.name() == name)
    }
    /// Integer attribute `name`, or `default`.
    pub fn int(&self, name: &str, default: i64) -> i64 {
        self.attr(name).map_or(default, |a| a.i())
    }
    /// Float attribute `name`, or `default`.
    pub fn float(&self, name: &str, default: f32) -> f32 {
        self.attr(name).map_or(default, |a| a.f())
    }
    /// Float list attribute `name` (`None` when absent).
    pub fn floats(&self, name: &str) -> Option<Vec<f32>> {
        self.attr(name).map(|a| a.floats.clone())
    }
    /// Integer list attribute `name` (`None` when absent).
    pub fn ints(&self, name: &str) -> Option<Vec<i64>> {
        self.attr(name).filter(|a| a.r#type() == AttributeType::Ints || !a.ints.is_empty()).map(|a| a.ints.clone())
    }
}

/// What a handler returns: its outputs, or why it can't run.
pub type Outputs = Result<Vec<Tensor>, String>;
/// A handler: a node and its inputs to its outputs.
pub type Handler = fn(&Node, &[Option<Tensor>]) -> Outputs;

/// Input `i`, which the op requires.
fn arg(args: &[Option<Tensor>], i: usize) -> Result<&Tensor, String> {
    args.get(i).and_then(Option::as_ref).ok_or_else(|| format!("input {i} is required"))
}

/// An int64 input's values (a shape, axes): realized now.
fn values(t: &Tensor) -> Result<Vec<i64>, String> {
    t.cast(crate::dtype::dtypes::INT64).to_vec::<i64>().map_err(|e| e.to_string())
}

fn one(t: Tensor) -> Outputs {
    Ok(vec![t])
}

/// `axis` of `ndim` dims counted from 0 (a negative one counts from the end).
fn axis_of(axis: i64, ndim: usize) -> i64 {
    if axis < 0 {
        axis + ndim as i64
    } else {
        axis
    }
}

/// `x` as the 2-D matrix ONNX coerces it to at `axis`: the dims before it times the dims from it on.
fn as_2d(x: &Tensor, axis: i64) -> Tensor {
    let (s, axis) = (x.shape(), axis_of(axis, x.ndim()) as usize);
    x.reshape([s[..axis].iter().product::<usize>(), s[axis..].iter().product()])
}

/// `Softmax`/`LogSoftmax` (`f`): over `axis` (default -1) from opset 13; before it, over the second dim of the input
/// as 2-D at `axis` (default 1).
fn softmax_like(n: &Node, a: &[Option<Tensor>], f: fn(&Tensor, i64) -> Tensor) -> Outputs {
    let x = arg(a, 0)?;
    if n.opset >= 13 {
        return one(f(x, n.int("axis", -1)));
    }
    one(f(&as_2d(x, n.int("axis", 1)), -1).reshape(x.shape()))
}

/// Axes from input `i` (opsets that take them as an input) or the `axes` attribute; `None` when neither is given.
fn axes(n: &Node, a: &[Option<Tensor>], i: usize) -> Result<Option<Vec<i64>>, String> {
    match a.get(i).and_then(Option::as_ref) {
        Some(t) => values(t).map(Some),
        None => Ok(n.ints("axes")),
    }
}

/// A reduction (`ReduceSum`, `ReduceMax`, ...): over `axes` (input 1 from opset 13 for ReduceSum, 18 for the others;
/// the attribute before), all axes when none are given unless `noop_with_empty_axes`, keeping them under `keepdims`.
fn reduce(n: &Node, a: &[Option<Tensor>], f: fn(&Tensor, Vec<i64>, bool) -> Tensor) -> Outputs {
    let x = arg(a, 0)?;
    let axes = axes(n, a, 1)?.filter(|v| !v.is_empty());
    let keep = n.int("keepdims", 1) != 0;
    match axes {
        None if n.int("noop_with_empty_axes", 0) != 0 => one(x.clone()),
        None => one(f(x, (0..x.ndim() as i64).collect(), keep)),
        Some(ax) => one(f(x, ax, keep)),
    }
}

/// `ArgMax`/`ArgMin` over `axis` (under `keepdims`), as int64; the first index of a tie (`select_last_index` is
/// not read yet).
fn arg_reduce(n: &Node, a: &[Option<Tensor>], f: fn(&Tensor, i64, bool) -> Tensor) -> Outputs {
    if n.int("select_last_index", 0) != 0 {
        return Err("select_last_index is not supported yet".into());
    }
    one(f(arg(a, 0)?, n.int("axis", 0), n.int("keepdims", 1) != 0).cast(crate::dtype::dtypes::INT64))
}

/// Folds the inputs with `f` (variadic `Max`, `Min`, `Sum`, `Mean`'s sum).
fn fold(a: &[Option<Tensor>], f: fn(&Tensor, &Tensor) -> Tensor) -> Result<Tensor, String> {
    let xs: Vec<&Tensor> = a.iter().flatten().collect();
    let (first, rest) = xs.split_first().ok_or("no inputs")?;
    Ok(rest.iter().fold((*first).clone(), |acc, x| f(&acc, x)))
}

/// `Constant`: its `value` tensor, or one of `value_float(s)`, `value_int(s)`.
fn constant(n: &Node, _: &[Option<Tensor>]) -> Outputs {
    if let Some(t) = n.attr("value").and_then(|a| a.t.as_ref()) {
        let dir = n.path.parent().unwrap_or(Path::new("."));
        return super::tensor_from_proto(t, dir, n.path).map(|t| vec![t]).map_err(|e| e.to_string());
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

/// The handler of `op` in the default domain, if there is one.
pub fn handler(op: &str) -> Option<Handler> {
    Some(match op {
        "Identity" => |_, a| one(arg(a, 0)?.clone()),
        "Add" => |_, a| one(arg(a, 0)?.add(arg(a, 1)?)),
        "Sub" => |_, a| one(arg(a, 0)?.sub(arg(a, 1)?)),
        "Mul" => |_, a| one(arg(a, 0)?.mul(arg(a, 1)?)),
        "Div" => |_, a| {
            let (x, y) = (arg(a, 0)?, arg(a, 1)?);
            one(if x.dtype().is_int() { x.div_trunc(y) } else { x.div(y) })
        },
        "Pow" => |_, a| one(arg(a, 0)?.pow(arg(a, 1)?)),
        "Neg" => |_, a| one(arg(a, 0)?.neg()),
        "Abs" => |_, a| one(arg(a, 0)?.abs()),
        "Sqrt" => |_, a| one(arg(a, 0)?.sqrt()),
        "Exp" => |_, a| one(arg(a, 0)?.exp()),
        "Log" => |_, a| one(arg(a, 0)?.log()),
        "Tanh" => |_, a| one(arg(a, 0)?.tanh()),
        "Erf" => |_, a| one(arg(a, 0)?.erf()),
        "Relu" => |_, a| one(arg(a, 0)?.relu()),
        "Sigmoid" => |_, a| one(arg(a, 0)?.sigmoid()),
        "MatMul" => |_, a| one(arg(a, 0)?.matmul(arg(a, 1)?)),
        "Gemm" => gemm,
        "Constant" => constant,
        "Shape" => |n, a| {
            let s: Vec<i64> = arg(a, 0)?.shape().iter().map(|&d| d as i64).collect();
            let clamp = |v: i64| axis_of(v, s.len()).clamp(0, s.len() as i64) as usize;
            let (start, end) = (clamp(n.int("start", 0)), clamp(n.int("end", s.len() as i64)));
            let s = &s[start..end.max(start)];
            one(Tensor::from_slice(s, [s.len()]))
        },
        "Cast" => |n, a| {
            let to = DataType::try_from(n.int("to", 0) as i32).ok().and_then(super::dtype_of);
            one(arg(a, 0)?.cast(to.ok_or_else(|| format!("Cast to data type {} is not supported yet", n.int("to", 0)))?))
        },
        "CastLike" => |_, a| one(arg(a, 0)?.cast(arg(a, 1)?.dtype())),
        "Size" => |_, a| one(Tensor::from_slice(&[arg(a, 0)?.numel() as i64], [])),
        "ConstantOfShape" => |n, a| {
            let shape: Vec<usize> = values(arg(a, 0)?)?.into_iter().map(|d| d.max(0) as usize).collect();
            let fill = match n.attr("value") {
                Some(_) => constant(n, &[])?.remove(0),
                None => Tensor::from_slice(&[0.0f32], [1]),
            };
            one(fill.reshape([1usize; 0]).expand(shape.iter().map(|&d| d as i64).collect::<Vec<_>>()))
        },
        "LogSoftmax" => |n, a| softmax_like(n, a, Tensor::log_softmax),
        "Expand" => |_, a| {
            // (both ways: the result is the broadcast of the input's shape and `shape`)
            let (x, shape) = (arg(a, 0)?, values(arg(a, 1)?)?);
            let nd = x.ndim().max(shape.len());
            let pad = |v: Vec<i64>| [vec![1; nd - v.len()], v].concat();
            let (xs, ss) = (pad(x.shape().iter().map(|&d| d as i64).collect()), pad(shape));
            let out: Vec<i64> = xs.iter().zip(&ss).map(|(&a, &b)| if a == 1 { b } else { a }).collect();
            one(x.reshape(xs).expand(out))
        },
        "Range" => |_, a| {
            let v = |i| arg(a, i).and_then(|t| t.cast(crate::dtype::dtypes::FLOAT64).to_vec::<f64>().map_err(|e| e.to_string()));
            let (start, limit, delta) = (v(0)?[0], v(1)?[0], v(2)?[0]);
            if delta == 0.0 {
                return Err("Range with delta 0".into());
            }
            one(Tensor::arange(start, limit, delta).cast(arg(a, 0)?.dtype()))
        },
        "Clip" => |n, a| {
            let x = arg(a, 0)?;
            let (lo, hi) = if n.opset >= 11 {
                (a.get(1).and_then(Option::as_ref).cloned(), a.get(2).and_then(Option::as_ref).cloned())
            } else {
                let attr = |k: &str| n.attr(k).map(|v| Tensor::from_slice(&[v.f()], []).cast(x.dtype()));
                (attr("min"), attr("max"))
            };
            let x = lo.map_or(x.clone(), |m| x.clamp_min(&m));
            one(hi.map_or(x.clone(), |m| x.clamp_max(&m)))
        },
        "ArgMax" => |n, a| arg_reduce(n, a, |x, ax, k| x.argmax(Some(ax), k)),
        "ArgMin" => |n, a| arg_reduce(n, a, |x, ax, k| x.argmin(Some(ax), k)),
        "Trilu" => |n, a| {
            let k = a.get(1).and_then(Option::as_ref).map(values).transpose()?.map_or(0, |v| v[0]);
            let x = arg(a, 0)?;
            one(if n.int("upper", 1) != 0 { x.triu(k) } else { x.tril(k) })
        },
        "LayerNormalization" => |n, a| {
            // (Y, and the Mean and InvStdDev outputs, over the axes from `axis` on)
            let x = arg(a, 0)?;
            let axes: Vec<i64> = (axis_of(n.int("axis", -1), x.ndim())..x.ndim() as i64).collect();
            let mean = x.mean_keepdim(axes.clone());
            let inv = x.sub(&mean).square().mean_keepdim(axes).add(n.float("epsilon", 1e-5) as f64).sqrt().reciprocal();
            let y = x.sub(&mean).mul(&inv).mul(arg(a, 1)?);
            Ok(vec![a.get(2).and_then(Option::as_ref).map_or(y.clone(), |b| y.add(b)), mean, inv])
        },
        "Less" => |_, a| one(arg(a, 0)?.lt(arg(a, 1)?)),
        "Greater" => |_, a| one(arg(a, 0)?.gt(arg(a, 1)?)),
        "Equal" => |_, a| one(arg(a, 0)?.eq(arg(a, 1)?)),
        "LessOrEqual" => |_, a| one(arg(a, 0)?.le(arg(a, 1)?)),
        "GreaterOrEqual" => |_, a| one(arg(a, 0)?.ge(arg(a, 1)?)),
        "And" => |_, a| one(arg(a, 0)?.bitwise_and(arg(a, 1)?)),
        "Or" => |_, a| one(arg(a, 0)?.bitwise_or(arg(a, 1)?)),
        "Xor" => |_, a| one(arg(a, 0)?.bitwise_xor(arg(a, 1)?)),
        "Not" => |_, a| one(arg(a, 0)?.logical_not()),
        "Where" => |_, a| one(arg(a, 0)?.where_(arg(a, 1)?, arg(a, 2)?)),
        "Max" => |_, a| one(fold(a, |x, y| x.maximum(y))?),
        "Min" => |_, a| one(fold(a, |x, y| x.minimum(y))?),
        "Sum" => |_, a| one(fold(a, |x, y| x.add(y))?),
        "Unsqueeze" => |n, a| {
            let x = arg(a, 0)?;
            let mut ax = axes(n, a, 1)?.ok_or("Unsqueeze without axes")?;
            let nd = x.ndim() + ax.len();
            ax.iter_mut().for_each(|v| *v = axis_of(*v, nd));
            ax.sort();
            one(ax.iter().fold(x.clone(), |t, &v| t.unsqueeze(v)))
        },
        "Squeeze" => |n, a| {
            let x = arg(a, 0)?;
            let mut ax: Vec<i64> = match axes(n, a, 1)? {
                Some(v) => v.iter().map(|&v| axis_of(v, x.ndim())).collect(),
                None => (0..x.ndim() as i64).filter(|&i| x.shape()[i as usize] == 1).collect(),
            };
            ax.sort();
            one(ax.iter().rev().fold(x.clone(), |t, &v| t.squeeze(v)))
        },
        "ReduceSum" => |n, a| reduce(n, a, |x, ax, k| if k { x.sum_keepdim(ax) } else { x.sum(ax) }),
        "ReduceMean" => |n, a| reduce(n, a, |x, ax, k| if k { x.mean_keepdim(ax) } else { x.mean(ax) }),
        "ReduceMax" => |n, a| reduce(n, a, |x, ax, k| if k { x.max_keepdim(ax) } else { x.max(ax) }),
        "ReduceMin" => |n, a| reduce(n, a, |x, ax, k| if k { x.min_keepdim(ax) } else { x.min(ax) }),
        "ReduceProd" => |n, a| reduce(n, a, |x, ax, k| if k { x.prod_keepdim(ax) } else { x.prod(ax) }),
        "Transpose" => |n, a| {
            let x = arg(a, 0)?;
            one(x.permute(n.ints("perm").unwrap_or_else(|| (0..x.ndim() as i64).rev().collect())))
        },
        "Reshape" => reshape,
        "Flatten" => |n, a| one(as_2d(arg(a, 0)?, n.int("axis", 1))),
        "Softmax" => |n, a| softmax_like(n, a, Tensor::softmax),
        "Concat" => |n, a| {
            let xs: Vec<&Tensor> = a.iter().flatten().collect();
            let (first, rest) = xs.split_first().ok_or("Concat of nothing")?;
            one(first.cat(rest, n.int("axis", 0)))
        },
        _ => return None,
    })
}

/// `alpha · A' · B' + beta · C` with `A' = Aᵀ` under `transA`, `B' = Bᵀ` under `transB` (ONNX `Gemm`).
fn gemm(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let t = |x: &Tensor, on: bool| if on { x.transpose(0, 1) } else { x.clone() };
    let ab = t(arg(a, 0)?, n.int("transA", 0) != 0).matmul(&t(arg(a, 1)?, n.int("transB", 0) != 0)).mul(n.float("alpha", 1.0) as f64);
    match a.get(2).and_then(Option::as_ref) {
        Some(c) => one(ab.add(c.mul(n.float("beta", 1.0) as f64))),
        None => one(ab),
    }
}

/// `Reshape(data, shape)`: a 0 in `shape` keeps the input's dim there (unless `allowzero`), a -1 is inferred.
fn reshape(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let (x, shape) = (arg(a, 0)?, values(arg(a, 1)?)?);
    let keep = n.int("allowzero", 0) == 0;
    let dims: Vec<i64> = shape.iter().enumerate().map(|(i, &d)| if d == 0 && keep { x.shape()[i] as i64 } else { d }).collect();
    one(x.reshape(dims))
}
