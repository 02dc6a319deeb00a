//! The ONNX op handlers (tinygrad `nn/onnx.py`'s `get_onnx_ops`), one table: op name -> handler, each written on
//! the Tensor API. In: a node (its attributes and its domain's opset version) and its inputs (`None` for an
//! omitted optional one). Out: its outputs, or why it can't run (the runner adds the node's name).

use super::proto::{attribute_proto::AttributeType, NodeProto};
use crate::tensor::Tensor;

/// A node as a handler sees it: its proto and its domain's opset version.
pub struct Node<'a> {
    /// The node.
    pub proto: &'a NodeProto,
    /// The opset version the model imports for the node's domain.
    pub opset: i64,
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
        "Transpose" => |n, a| {
            let x = arg(a, 0)?;
            one(x.permute(n.ints("perm").unwrap_or_else(|| (0..x.ndim() as i64).rev().collect())))
        },
        "Reshape" => reshape,
        "Flatten" => |n, a| {
            let x = arg(a, 0)?;
            let axis = n.int("axis", 1);
            let (s, axis) = (x.shape(), if axis < 0 { axis + x.ndim() as i64 } else { axis } as usize);
            one(x.reshape([s[..axis].iter().product::<usize>(), s[axis..].iter().product()]))
        },
        "Softmax" => |n, a| {
            let x = arg(a, 0)?;
            if n.opset >= 13 {
                return one(x.softmax(n.int("axis", -1)));
            }
            // (before opset 13: the input as 2-D at `axis`, softmax over the second dim)
            let axis = n.int("axis", 1);
            let (s, axis) = (x.shape(), if axis < 0 { axis + x.ndim() as i64 } else { axis } as usize);
            one(x.reshape([s[..axis].iter().product::<usize>(), s[axis..].iter().product()]).softmax(-1).reshape(s))
        },
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
