//! The ONNX op handlers (tinygrad `nn/onnx.py`'s `get_onnx_ops`), one table: op name -> handler, each written on
//! the Tensor API. In: a node (its attributes and its domain's opset version) and its inputs (`None` for an
//! omitted optional one). Out: its outputs, or why it can't run (the runner adds the node's name). The handlers
//! live by kind: [`math`] (elementwise, reductions, casts, quantization), [`movement`] (shapes, slicing, gather
//! and scatter) and [`nn`] (convolution, pooling, normalization, losses, attention, resizing).

mod control;
mod host;
mod math;
mod microsoft;
mod movement;
mod nn;
mod rnn;
mod sequence;
pub mod shapes;
mod signal;
mod strings;
mod training;
mod vision;

use super::proto::{attribute_proto::AttributeType, tensor_proto::DataType, GraphProto, NodeProto};
use super::{narrow, Value};
use crate::dtype::{dtypes, DType};
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
    /// Per input, its ONNX type where it is a narrow one held in a wider dtype (see [`super::narrow`]).
    pub narrow: &'a [Option<DataType>],
    /// Per input, its values where the host knows them (shape arithmetic: see [`shapes`]).
    pub host: &'a [Option<shapes::HostInts>],
    /// Runs a subgraph attribute of the node in the node's scope, its inputs bound in order.
    pub subgraph: &'a Subgraph<'a>,
    /// Lays out input `i` (given as the handler holds it) once, when it is a weight (see [`Node::prepacked`]).
    pub prepack: &'a Prepack<'a>,
}

/// How a handler has a weight laid out once: the input's index, the tensor given, the layout (a view of it).
pub type Prepack<'a> = dyn Fn(usize, &Tensor, &dyn Fn(&Tensor) -> Tensor) -> Option<Tensor> + 'a;

/// How a handler runs a subgraph: the graph and its inputs in order, to its outputs in order.
pub type Subgraph<'a> = dyn Fn(&GraphProto, &[Value]) -> Result<Vec<Value>, String> + 'a;

impl Node<'_> {
    /// Input `i` (`given`) copied once into the memory order of view `layout(given)` and realized, as the runtimes
    /// prepack weights (onnxruntime's MLAS packs convolution filters): later runs read the copy. `None` when the
    /// input is not a weight of the model (computed in the run, or a subgraph's), so the handler uses `given`.
    pub fn prepacked(&self, i: usize, given: &Tensor, layout: impl Fn(&Tensor) -> Tensor) -> Option<Tensor> {
        (self.prepack)(i, given, &layout)
    }
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
    /// String attribute `name`, or `default`.
    pub fn string(&self, name: &str, default: &str) -> String {
        self.attr(name).map_or(default.to_string(), |a| String::from_utf8_lossy(a.s()).into_owned())
    }
    /// Float list attribute `name` (`None` when absent).
    pub fn floats(&self, name: &str) -> Option<Vec<f32>> {
        self.attr(name).map(|a| a.floats.clone())
    }
    /// Integer list attribute `name` (`None` when absent).
    pub fn ints(&self, name: &str) -> Option<Vec<i64>> {
        self.attr(name).filter(|a| a.r#type() == AttributeType::Ints || !a.ints.is_empty()).map(|a| a.ints.clone())
    }
    /// Graph attribute `name` (a branch or a body).
    pub fn graph(&self, name: &str) -> Result<&GraphProto, String> {
        self.attr(name).and_then(|a| a.g.as_ref()).ok_or_else(|| format!("no graph attribute {name:?}"))
    }
    /// Input `i`'s values where the host knows them.
    pub fn host_input(&self, i: usize) -> Option<&shapes::HostInts> {
        self.host.get(i)?.as_ref()
    }
    /// Input `i`'s values where the host knows them and one is symbolic (a dim of a symbolic shape).
    pub fn sym_input(&self, i: usize) -> Option<&shapes::HostInts> {
        self.host_input(i).filter(|h| h.is_symbolic())
    }
    /// The number of outputs the node names.
    pub fn outputs(&self) -> usize {
        self.proto.output.len()
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

/// Input `i` if given.
fn opt(args: &[Option<Tensor>], i: usize) -> Option<&Tensor> {
    args.get(i).and_then(Option::as_ref)
}

/// An input's values as int64 (a shape, axes, a count): realized now.
fn values(t: &Tensor) -> Result<Vec<i64>, String> {
    t.cast(dtypes::INT64).to_vec::<i64>().map_err(|e| e.to_string())
}

/// An input's values as float64 (scales, a bound): realized now.
fn floats(t: &Tensor) -> Result<Vec<f64>, String> {
    t.cast(dtypes::FLOAT64).to_vec::<f64>().map_err(|e| e.to_string())
}

/// Input `i`'s values as int64 (the host's copy where it has one: see [`shapes`]), or the int list attribute
/// `name` (the opsets before it became an input).
fn ints_in(n: &Node, a: &[Option<Tensor>], i: usize, name: &str) -> Result<Option<Vec<i64>>, String> {
    match n.host_input(i).and_then(shapes::HostInts::consts) {
        Some(v) => Ok(Some(v)),
        None => opt(a, i).map(values).transpose().map(|v| v.or_else(|| n.ints(name))),
    }
}

/// Axes from input `i` (opsets that take them as an input) or the `axes` attribute; `None` when neither is given.
fn axes_in(n: &Node, a: &[Option<Tensor>], i: usize) -> Result<Option<Vec<i64>>, String> {
    ints_in(n, a, i, "axes")
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

/// The project's dtype for the ONNX data type number `to` (a `Cast`'s `to`, an `output_dtype`).
fn dtype_attr(to: i64) -> Result<DType, String> {
    DataType::try_from(to as i32).ok().and_then(super::dtype_of).ok_or_else(|| format!("data type {to} is not supported yet"))
}

/// A scalar tensor of `dt` holding `v`.
fn scalar(v: f64, dt: DType) -> Tensor {
    Tensor::from_slice(&[v], []).cast(dt)
}

/// `x` as the 2-D matrix ONNX coerces it to at `axis`: the dims before it times the dims from it on.
fn as_2d(x: &Tensor, axis: i64) -> Tensor {
    let (s, axis) = (x.shape(), axis_of(axis, x.ndim()) as usize);
    x.reshape([s[..axis].iter().product::<usize>(), s[axis..].iter().product()])
}

/// `Softmax`/`LogSoftmax`/`Hardmax` (`f`): over `axis` (default -1) from opset 13; before it, over the second dim
/// of the input as 2-D at `axis` (default 1).
fn softmax_like(n: &Node, a: &[Option<Tensor>], f: fn(&Tensor, i64) -> Tensor) -> Outputs {
    let x = arg(a, 0)?;
    if n.opset >= 13 {
        return one(f(x, n.int("axis", -1)));
    }
    one(f(&as_2d(x, n.int("axis", 1)), -1).reshape(x.shape()))
}

/// Runs `f` on input 0 (a unary op).
macro_rules! unary {
    ($f:expr) => {
        |_, a| one($f(arg(a, 0)?))
    };
}
/// Runs `f` on inputs 0 and 1 (a binary op).
macro_rules! binary {
    ($f:expr) => {
        |_, a| one($f(arg(a, 0)?, arg(a, 1)?))
    };
}

/// The narrow ONNX type of `node`'s outputs, from its inputs' (`narrow`): casts to one, quantizing to one, and
/// the movement ops that keep their input's.
pub fn narrow_output(node: &NodeProto, narrow: &[Option<DataType>]) -> Option<DataType> {
    let input = |i: usize| narrow.get(i).copied().flatten();
    let attr = |k: &str| node.attribute.iter().find(|a| a.name() == k).and_then(|a| narrow::is_narrow(a.i() as i32));
    match node.op_type() {
        "Cast" => attr("to"),
        "CastLike" => input(1),
        "QuantizeLinear" => input(2).or_else(|| attr("output_dtype")),
        "Identity" | "Reshape" | "Flatten" | "Squeeze" | "Unsqueeze" | "Transpose" | "Concat" | "Slice" | "Gather" | "Expand" | "Tile"
        | "Pad" => input(0),
        _ => None,
    }
}

/// A handler of values that may be sequences or optionals (control flow, the sequence ops): a node and its inputs
/// to its outputs.
pub type ValueHandler = fn(&Node, &[Option<Value>]) -> Result<Vec<Value>, String>;

/// The value handler of `op` in `domain`, if it is one of the ops that take or make sequences and optionals, or run
/// subgraphs on them (checked before [`handler`]).
pub fn value_handler(domain: &str, op: &str) -> Option<ValueHandler> {
    match (domain, op) {
        ("", _) => {}
        ("ai.onnx.ml", "LabelEncoder") => return Some(strings::label_encoder),
        _ => return None,
    }
    Some(match op {
        "StringNormalizer" => strings::normalizer,
        "RegexFullMatch" => strings::regex_full_match,
        "StringConcat" => strings::concat,
        "StringSplit" => strings::split,
        "Equal" => strings::equal,
        "If" => control::if_,
        "Loop" => control::loop_,
        "Scan" => control::scan,
        "Identity" => |_, a| Ok(vec![a.first().cloned().flatten().unwrap_or(Value::None)]),
        "Optional" => |_, a| Ok(vec![a.first().cloned().flatten().unwrap_or(Value::None)]),
        "OptionalHasElement" => |_, a| {
            let has = matches!(a.first(), Some(Some(Value::Tensor(_) | Value::Sequence(_))));
            Ok(vec![Value::Tensor(Tensor::from_slice(&[has], []))])
        },
        "OptionalGetElement" => |_, a| match a.first().cloned().flatten() {
            Some(Value::None) | None => Err("OptionalGetElement of an empty optional".into()),
            Some(v) => Ok(vec![v]),
        },
        "SequenceEmpty" => |_, _| Ok(vec![Value::Sequence(Vec::new())]),
        "SequenceConstruct" => |_, a| Ok(vec![Value::Sequence(a.iter().flatten().filter_map(|v| v.tensor().cloned()).collect())]),
        "SequenceLength" => |_, a| Ok(vec![Value::Tensor(Tensor::from_slice(&[sequence::of(a, 0)?.len() as i64], []))]),
        "SequenceAt" => sequence::at,
        "SequenceInsert" => sequence::insert,
        "SequenceErase" => sequence::erase,
        "ConcatFromSequence" => sequence::concat,
        "SplitToSequence" => sequence::split,
        "SequenceMap" => sequence::map,
        _ => return None,
    })
}

/// The handler of `op` in `domain` (`""` is `ai.onnx`), if there is one.
pub fn handler(domain: &str, op: &str) -> Option<Handler> {
    match domain {
        "" => {}
        "ai.onnx.preview.training" => return training::training(op),
        "ai.onnx.ml" => return training::ml(op),
        "com.microsoft" => return microsoft::handler(op),
        "ai.onnx.preview" if op == "FlexAttention" => return Some(nn::flex_attention),
        _ => return None,
    }
    Some(match op {
        "Identity" => |_, a| one(arg(a, 0)?.clone()),
        "Constant" => math::constant,
        // elementwise math
        "Add" => binary!(Tensor::add),
        "Sub" => binary!(Tensor::sub),
        "Mul" => binary!(Tensor::mul),
        "Div" => binary!(|x: &Tensor, y| if x.dtype().is_int() { x.div_trunc(y) } else { x.div(y) }),
        "Mod" => |n, a| one(math::modulo(arg(a, 0)?, arg(a, 1)?, n.int("fmod", 0) != 0)),
        "Pow" => binary!(|x: &Tensor, y| if x.dtype().is_int() { x.pow(y).round().cast(x.dtype()) } else { x.pow(y).cast(x.dtype()) }),
        "Neg" => unary!(Tensor::neg),
        "Abs" => unary!(Tensor::abs),
        "Sign" => unary!(Tensor::sign),
        "Reciprocal" => unary!(Tensor::reciprocal),
        "Sqrt" => unary!(Tensor::sqrt),
        "Exp" => unary!(Tensor::exp),
        "Log" => unary!(Tensor::log),
        "Floor" => unary!(Tensor::floor),
        "Ceil" => unary!(Tensor::ceil),
        "Round" => unary!(Tensor::round),
        "Sin" => unary!(Tensor::sin),
        "Cos" => unary!(Tensor::cos),
        "Tan" => unary!(Tensor::tan),
        "Asin" => unary!(Tensor::asin),
        "Acos" => unary!(Tensor::acos),
        "Atan" => unary!(Tensor::atan),
        "Sinh" => unary!(Tensor::sinh),
        "Cosh" => unary!(Tensor::cosh),
        "Tanh" => unary!(Tensor::tanh),
        "Asinh" => unary!(Tensor::asinh),
        "Acosh" => unary!(Tensor::acosh),
        "Atanh" => unary!(Tensor::atanh),
        "Erf" => unary!(Tensor::erf),
        "IsNaN" => unary!(Tensor::isnan),
        "IsInf" => |n, a| one(arg(a, 0)?.isinf_with(n.int("detect_positive", 1) != 0, n.int("detect_negative", 1) != 0)),
        "Max" => |_, a| one(math::fold(a, |x, y| x.maximum(y))?),
        "Min" => |_, a| one(math::fold(a, |x, y| x.minimum(y))?),
        "Sum" => |_, a| one(math::fold(a, |x, y| x.add(y))?),
        "Mean" => |_, a| one(math::fold(a, |x, y| x.add(y))?.div(a.iter().flatten().count() as f64)),
        "Clip" => math::clip,
        "MatMul" => binary!(Tensor::matmul),
        "Gemm" => math::gemm,
        "Einsum" => |n, a| one(Tensor::einsum(&n.string("equation", ""), &a.iter().flatten().collect::<Vec<_>>())),
        // activations
        "Relu" => unary!(Tensor::relu),
        "Sigmoid" => unary!(Tensor::sigmoid),
        "Softplus" => unary!(|x: &Tensor| x.softplus(1.0)),
        "Softsign" => unary!(Tensor::softsign),
        "HardSwish" => unary!(Tensor::hardswish),
        "Mish" => unary!(Tensor::mish),
        "Elu" => |n, a| one(arg(a, 0)?.elu(n.float("alpha", 1.0) as f64)),
        "Celu" => |n, a| one(math::in_f32(arg(a, 0)?, |x| x.celu(n.float("alpha", 1.0) as f64))),
        "Selu" => |n, a| one(arg(a, 0)?.selu_with(n.float("alpha", 1.673_263_2) as f64, n.float("gamma", 1.050_701) as f64)),
        "LeakyRelu" => |n, a| one(arg(a, 0)?.leaky_relu(n.float("alpha", 0.01) as f64)),
        "ThresholdedRelu" => |n, a| {
            let x = arg(a, 0)?;
            one(x.gt(n.float("alpha", 1.0) as f64).where_(x, 0))
        },
        "HardSigmoid" => |n, a| one(arg(a, 0)?.hardsigmoid_with(n.float("alpha", 0.2) as f64, n.float("beta", 0.5) as f64)),
        "Gelu" => |n, a| one(if n.string("approximate", "none") == "tanh" { arg(a, 0)?.gelu() } else { arg(a, 0)?.gelu_erf() }),
        "Swish" => |n, a| {
            let x = arg(a, 0)?;
            one(x.mul(x.mul(n.float("alpha", 1.0) as f64).sigmoid()))
        },
        "PRelu" => |_, a| {
            let (x, slope) = (arg(a, 0)?, arg(a, 1)?);
            one(x.gt(0).where_(x, x.mul(slope)))
        },
        "Shrink" => |n, a| {
            let (x, bias, l) = (arg(a, 0)?, n.float("bias", 0.0) as f64, n.float("lambd", 0.5) as f64);
            one(x.lt(-l).where_(x.add(bias), x.gt(l).where_(x.sub(bias), 0)).cast(x.dtype()))
        },
        "Softmax" => |n, a| softmax_like(n, a, Tensor::softmax),
        "LogSoftmax" => |n, a| softmax_like(n, a, Tensor::log_softmax),
        "Hardmax" => |n, a| softmax_like(n, a, math::hardmax),
        // comparisons, logic and bits
        "Less" => binary!(Tensor::lt),
        "Greater" => binary!(Tensor::gt),
        "LessOrEqual" => binary!(Tensor::le),
        "GreaterOrEqual" => binary!(Tensor::ge),
        "And" => binary!(Tensor::bitwise_and),
        "Or" => binary!(Tensor::bitwise_or),
        "Xor" => binary!(Tensor::bitwise_xor),
        "Not" => unary!(Tensor::logical_not),
        "BitwiseAnd" => binary!(Tensor::bitwise_and),
        "BitwiseOr" => binary!(Tensor::bitwise_or),
        "BitwiseXor" => binary!(Tensor::bitwise_xor),
        "BitwiseNot" => unary!(Tensor::bitwise_not),
        "BitShift" => math::bit_shift,
        "Where" => |_, a| one(arg(a, 0)?.where_(arg(a, 1)?, arg(a, 2)?)),
        "Binarizer" => |n, a| one(arg(a, 0)?.gt(n.float("threshold", 0.0) as f64).cast(arg(a, 0)?.dtype())),
        // casts and quantization
        "Cast" => |n, a| match narrow::is_narrow(n.int("to", 0) as i32) {
            Some(t) => one(narrow::cast_rounding(arg(a, 0)?, t, n.int("saturate", 1) != 0, &n.string("round_mode", "up"))?),
            None => one(arg(a, 0)?.cast(dtype_attr(n.int("to", 0))?)),
        },
        "CastLike" => |n, a| match n.narrow.get(1).copied().flatten() {
            Some(t) => one(narrow::cast(arg(a, 0)?, t, n.int("saturate", 1) != 0)?),
            None => one(arg(a, 0)?.cast(arg(a, 1)?.dtype())),
        },
        "QuantizeLinear" => math::quantize_linear,
        "DequantizeLinear" => math::dequantize_linear,
        "DynamicQuantizeLinear" => math::dynamic_quantize_linear,
        "MatMulInteger" => |_, a| one(math::integer(a, 0, 2)?.matmul(&math::integer(a, 1, 3)?)),
        "QLinearMatMul" => math::qlinear_matmul,
        // reductions
        "ReduceSum" => |n, a| math::reduce(n, a, |x| x.clone(), |x, ax, k| if k { x.sum_keepdim(ax) } else { x.sum(ax) }),
        "ReduceMean" => |n, a| math::reduce(n, a, |x| x.clone(), |x, ax, k| if k { x.mean_keepdim(ax) } else { x.mean(ax) }),
        "ReduceMax" => |n, a| math::reduce(n, a, |x| x.clone(), |x, ax, k| if k { x.max_keepdim(ax) } else { x.max(ax) }),
        "ReduceMin" => |n, a| math::reduce(n, a, |x| x.clone(), |x, ax, k| if k { x.min_keepdim(ax) } else { x.min(ax) }),
        "ReduceProd" => |n, a| math::reduce(n, a, |x| x.clone(), |x, ax, k| if k { x.prod_keepdim(ax) } else { x.prod(ax) }),
        "ReduceSumSquare" => |n, a| math::reduce(n, a, Tensor::square, math::sum),
        "ReduceL1" => |n, a| math::reduce(n, a, Tensor::abs, math::sum),
        "ReduceL2" => |n, a| math::reduce(n, a, Tensor::square, |x, ax, k| math::sum(x, ax, k).sqrt()),
        "ReduceLogSum" => |n, a| math::reduce(n, a, |x| x.clone(), |x, ax, k| math::sum(x, ax, k).log()),
        "ReduceLogSumExp" => |n, a| math::reduce(n, a, |x| x.clone(), |x, ax, k| x.logsumexp(ax, k)),
        "ArgMax" => |n, a| math::arg_reduce(n, arg(a, 0)?),
        "ArgMin" => |n, a| math::arg_reduce(n, &arg(a, 0)?.neg()),
        "CumSum" => |n, a| math::cumulative(n, a, false),
        "CumProd" => |n, a| math::cumulative(n, a, true),
        "Det" => math::det,
        "BitCast" => |n, a| one(arg(a, 0)?.bitcast(dtype_attr(n.int("to", 0))?)),
        "TopK" => math::topk,
        // shapes and movement
        "Shape" => movement::shape,
        "Size" => |_, a| one(Tensor::from_slice(&[arg(a, 0)?.numel() as i64], [])),
        "Reshape" => movement::reshape,
        "Flatten" => |n, a| one(as_2d(arg(a, 0)?, n.int("axis", 1))),
        "Transpose" => |n, a| {
            let x = arg(a, 0)?;
            one(x.permute(n.ints("perm").unwrap_or_else(|| (0..x.ndim() as i64).rev().collect())))
        },
        "Squeeze" => movement::squeeze,
        "Unsqueeze" => movement::unsqueeze,
        "Expand" => movement::expand,
        "Concat" => |n, a| {
            let xs: Vec<&Tensor> = a.iter().flatten().collect();
            let (first, rest) = xs.split_first().ok_or("Concat of nothing")?;
            one(first.cat(rest, n.int("axis", 0)))
        },
        "Split" => movement::split,
        "Slice" => movement::slice,
        "Tile" => |n, a| one(arg(a, 0)?.repeat(ints_in(n, a, 1, "")?.ok_or("Tile without repeats")?)),
        "Pad" => movement::pad,
        "CenterCropPad" => movement::center_crop_pad,
        "DepthToSpace" => movement::depth_to_space,
        "SpaceToDepth" => |n, a| {
            let b = n.int("blocksize", 1) as usize;
            let to = if n.string("mode", "DCR") == "CRD" { "b (c h1 w1) h w" } else { "b (h1 w1 c) h w" };
            one(arg(a, 0)?.rearrange(&format!("b c (h h1) (w w1) -> {to}"), &[("h1", b), ("w1", b)]))
        },
        "Trilu" => |n, a| {
            let k = ints_in(n, a, 1, "")?.map_or(0, |v| v[0]);
            let x = arg(a, 0)?;
            one(if n.int("upper", 1) != 0 { x.triu(k) } else { x.tril(k) })
        },
        "ConstantOfShape" => movement::constant_of_shape,
        "Range" => movement::range,
        "EyeLike" => movement::eye_like,
        "OneHot" => movement::one_hot,
        "Gather" => movement::gather,
        "GatherElements" => |n, a| {
            let (x, i) = (arg(a, 0)?, arg(a, 1)?);
            let axis = axis_of(n.int("axis", 0), x.ndim());
            one(x.gather(axis, &movement::positive(i, x.shape()[axis as usize])))
        },
        "GatherND" => movement::gather_nd,
        "ScatterElements" | "Scatter" => movement::scatter_elements,
        "ScatterND" => movement::scatter_nd,
        "Compress" => movement::compress,
        "NonZero" => movement::non_zero,
        // neural networks
        "Conv" => nn::conv,
        "ConvTranspose" => nn::conv_transpose,
        "ConvInteger" => nn::conv_integer,
        "QLinearConv" => nn::qlinear_conv,
        "AveragePool" => nn::average_pool,
        "MaxPool" => nn::max_pool,
        "LpPool" => nn::lp_pool,
        "MaxUnpool" => nn::max_unpool,
        "GlobalAveragePool" => |_, a| one(arg(a, 0)?.mean_keepdim((2..arg(a, 0)?.ndim() as i64).collect::<Vec<_>>())),
        "GlobalMaxPool" => |_, a| one(arg(a, 0)?.max_keepdim((2..arg(a, 0)?.ndim() as i64).collect::<Vec<_>>())),
        "GlobalLpPool" => |n, a| {
            let (x, p) = (arg(a, 0)?, n.int("p", 2) as f64);
            one(x.abs().pow(p).sum_keepdim((2..x.ndim() as i64).collect::<Vec<_>>()).pow(1.0 / p))
        },
        "BatchNormalization" => nn::batch_normalization,
        "InstanceNormalization" => {
            |n, a| nn::group_norm(arg(a, 0)?, arg(a, 1)?, arg(a, 2)?, arg(a, 0)?.shape()[1], n.float("epsilon", 1e-5))
        }
        "GroupNormalization" => {
            |n, a| nn::group_norm(arg(a, 0)?, arg(a, 1)?, arg(a, 2)?, n.int("num_groups", 1) as usize, n.float("epsilon", 1e-5))
        }
        "LayerNormalization" => nn::layer_normalization,
        "RMSNormalization" => nn::rms_normalization,
        "LpNormalization" => |n, a| {
            let (x, axis) = (arg(a, 0)?, n.int("axis", -1));
            let norm = if n.int("p", 2) == 1 { x.abs().sum_keepdim(axis) } else { x.square().sum_keepdim(axis).sqrt() };
            one(norm.eq(0).where_(0, x.div(&norm)).cast(x.dtype()))
        },
        "MeanVarianceNormalization" => |n, a| {
            let (x, axes) = (arg(a, 0)?, n.ints("axes").unwrap_or(vec![0, 2, 3]));
            one(x.sub(x.mean_keepdim(axes.clone())).div(x.std(axes, true, 0.0).add(1e-9)))
        },
        "LRN" => nn::lrn,
        "Dropout" => nn::dropout,
        "RNN" => rnn::rnn,
        "GRU" => rnn::gru,
        "LSTM" => rnn::lstm,
        "ReverseSequence" => rnn::reverse_sequence,
        "SwiGLU" => nn::swiglu,
        "CausalConvWithState" => nn::causal_conv_with_state,
        "LinearAttention" => nn::linear_attention,
        "TensorScatter" => movement::tensor_scatter,
        "GridSample" => vision::grid_sample,
        "RoiAlign" => vision::roi_align,
        "Col2Im" => vision::col2im,
        "DeformConv" => vision::deform_conv,
        "DFT" => signal::dft,
        "STFT" => signal::stft,
        "MelWeightMatrix" => signal::mel_weight_matrix,
        "NonMaxSuppression" => host::non_max_suppression,
        "Unique" => host::unique,
        "TfIdfVectorizer" => host::tfidf_vectorizer,
        "NegativeLogLikelihoodLoss" => nn::nll_loss,
        "SoftmaxCrossEntropyLoss" => nn::softmax_cross_entropy_loss,
        "Attention" => nn::attention,
        "RotaryEmbedding" => nn::rotary_embedding,
        "Resize" => nn::resize,
        "Upsample" => nn::resize,
        "AffineGrid" => nn::affine_grid,
        "HannWindow" => |n, a| nn::window(n, a, [0.5, 0.5, 0.0]),
        "HammingWindow" => |n, a| nn::window(n, a, [25.0 / 46.0, 21.0 / 46.0, 0.0]),
        "BlackmanWindow" => |n, a| nn::window(n, a, [0.42, 0.5, 0.08]),
        _ => return None,
    })
}
