//! ONNX models (tinygrad `nn/onnx.py`'s `OnnxRunner`), the stage above `nn`. In: a `.onnx` file (a protobuf
//! `ModelProto`, decoded by `prost` from the memory-mapped file; initializers in it or in external files beside it)
//! and input values by name. Out: the graph's outputs by name, computed lazily by the [`ops`] handlers on the Tensor
//! API, so a run is one realize of fused kernels.
//!
//! The loader reads every storage dtype the project has and ONNX's narrow ones ([`narrow`]: float8, float4, int4,
//! int2, decoded wider; strings are load errors naming the tensor), raw, typed and external data (offset and length
//! checked against the file). Values are tensors, sequences of tensors or empty optionals ([`Value`]). Bad files are
//! one-line [`Error::Format`]s naming the file.

pub mod data_proto;
pub mod narrow;
pub mod ops;
pub mod proto;

use crate::dtype::{dtypes, DType};
use crate::error::{Error, Result};
use crate::tensor::Tensor;
use bytes::Bytes;
use prost::Message;
use proto::tensor_proto::{DataLocation, DataType};
use proto::{ModelProto, NodeProto, TensorProto};
use rustc_hash::FxHashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// A loaded ONNX model, ready to run (tinygrad `OnnxRunner`).
pub struct OnnxRunner {
    path: PathBuf,
    model: ModelProto,
    /// The initializers, as tensors.
    weights: FxHashMap<String, Tensor>,
    /// The opset version of each domain the model imports (`""` is `ai.onnx`).
    opsets: FxHashMap<String, i64>,
    /// The main graph's nodes computed at load (they read only initializers and constants): skipped by `run`.
    folded: Vec<bool>,
    /// The small int initializers (and constants computed at load), on the host: shape arithmetic reads them.
    host: FxHashMap<String, ops::shapes::HostInts>,
    /// Weights copied once into the layout a handler's kernels read best (see [`ops::Node::prepacked`]), by name.
    prepacked: Mutex<FxHashMap<String, Tensor>>,
    /// A TinyJit per set of input names, shapes, dtypes and devices; `None` where the graph cannot be replayed (it
    /// reads tensor data or draws random numbers while running, or takes or makes values other than tensors).
    jits: Mutex<FxHashMap<Vec<InputSpec>, Option<crate::tensor::JitState>>>,
}

/// Input signatures an [`OnnxRunner`] keeps a TinyJit for (a model run at many batch sizes).
const MAX_JITS: usize = 8;

/// What a run's TinyJit is chosen by, per input: name, shape, dtype, device.
type InputSpec = (String, Vec<SigDim>, DType, String);

/// A dim of a run's signature: a size, or a named dim bound to a variable up to this bucket (one TinyJit serves each
/// size up to it).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum SigDim {
    Size(usize),
    Upto(usize),
}

/// Whether a signature's dim `d` lies in the bucket dim `b`: the same size, or a size up to it.
fn sig_dim_in(d: SigDim, b: SigDim) -> bool {
    match (d, b) {
        (SigDim::Size(n), SigDim::Upto(m)) => bucket(n) == m,
        _ => d == b,
    }
}

/// The variables' maximum for a named dim of size `n`: a power of two, at least 16 (buffers are sized for it).
fn bucket(n: usize) -> usize {
    n.next_power_of_two().max(16)
}

/// `name` as a variable name (an identifier).
fn var_name(name: &str) -> String {
    let id: String = name.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
    format!("d_{id}")
}

/// `t` in a buffer of `full` dims (zeros past its elements), read back through a symbolic shrink to `dims`: the
/// input a symbolic signature's TinyJit replays for each size. Copied on the host.
fn padded(t: &Tensor, full: &[usize], dims: &[crate::uop::Sint]) -> Result<Tensor> {
    let (shape, item) = (t.shape(), t.dtype().itemsize());
    let bytes = t.to_bytes()?;
    let mut out = vec![0u8; full.iter().product::<usize>() * item];
    let row = shape.last().copied().unwrap_or(1) * item;
    let outer: usize = shape.iter().rev().skip(1).product();
    if row > 0 {
        let mut at = vec![0usize; shape.len().saturating_sub(1)];
        for r in 0..outer {
            let dst = at.iter().zip(full).fold(0, |acc, (&i, &f)| acc * f + i) * full.last().copied().unwrap_or(1) * item;
            out[dst..dst + row].copy_from_slice(&bytes[r * row..(r + 1) * row]);
            for k in (0..at.len()).rev() {
                at[k] += 1;
                if at[k] < shape[k] {
                    break;
                }
                at[k] = 0;
            }
        }
    }
    let big = Tensor::from_bytes(&out, t.dtype(), full.to_vec()).to(&t.device());
    Ok(big.shrink_sym(&dims.iter().map(|d| (0.into(), d.clone())).collect::<Vec<_>>()))
}

/// A value in a graph: a tensor, a sequence of tensors (`SequenceConstruct`, `SplitToSequence`), or an optional
/// holding nothing (an optional holding a value is that value).
#[derive(Clone, Debug)]
pub enum Value {
    /// A tensor.
    Tensor(Tensor),
    /// A sequence of tensors.
    Sequence(Vec<Tensor>),
    /// A string tensor (held on the host).
    Strings(Strings),
    /// An empty optional.
    None,
}

/// A string tensor: its shape and its values in row-major order.
#[derive(Clone, Debug, PartialEq)]
pub struct Strings {
    /// The shape.
    pub shape: Vec<usize>,
    /// The values, `shape`'s product of them.
    pub data: Vec<String>,
}

impl Value {
    /// The tensor, if this is one.
    pub fn tensor(&self) -> Option<&Tensor> {
        match self {
            Value::Tensor(t) => Some(t),
            _ => None,
        }
    }
}

/// What a graph input or output declares it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueKind {
    /// A tensor.
    Tensor,
    /// A sequence of tensors.
    Sequence,
    /// An optional (of a tensor or a sequence).
    Optional,
}

/// A graph input's declared size along one dim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Dim {
    /// A fixed size.
    Fixed(usize),
    /// A named size (`batch`, `sequence`) the inputs bind, or unnamed (`""`): any size.
    Symbolic(String),
}

/// A graph input or output as the model declares it (tinygrad `OnnxRunner`'s `graph_inputs`).
#[derive(Clone, Debug)]
pub struct ValueSpec {
    /// Its name.
    pub name: String,
    /// Whether it is a tensor, a sequence or an optional.
    pub kind: ValueKind,
    /// Its dtype (a narrow type's storage dtype); `None` where it is not a tensor or the type is unsupported.
    pub dtype: Option<DType>,
    /// Its dims; `None` where the rank is not declared.
    pub dims: Option<Vec<Dim>>,
}

impl std::fmt::Display for ValueSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        let dt = self.dtype.map_or("?".to_string(), |d| d.name().to_string());
        let dims = self.dims.as_ref().map_or("[?]".to_string(), |d| {
            let each: Vec<String> = d
                .iter()
                .map(|d| match d {
                    Dim::Fixed(n) => n.to_string(),
                    Dim::Symbolic(s) if s.is_empty() => "?".into(),
                    Dim::Symbolic(s) => s.clone(),
                })
                .collect();
            format!("[{}]", each.join(", "))
        });
        write!(f, "{dt} {dims}")
    }
}

/// Ops whose outputs differ run to run (never computed at load).
const RANDOM_OPS: [&str; 6] = ["RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Bernoulli", "Multinomial"];

/// The file at `path`, memory-mapped, as `Bytes` that slices share without copying.
fn map_file(path: &Path) -> Result<Bytes> {
    let io = |source| Error::Io { path: path.into(), source };
    let file = std::fs::File::open(path).map_err(io)?;
    // SAFETY: the map is read-only and owned by the Bytes (and every slice of it); reads are bounds-checked by
    // Bytes. Another process truncating the file while it is mapped could fault, as with any mmap of a file.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(io)?;
    Ok(Bytes::from_owner(map))
}

impl OnnxRunner {
    /// Loads the model at `path`: decodes it, reads its initializers (external ones from files beside it).
    ///
    /// # Errors
    /// [`Error::Io`] when a file does not open; [`Error::Format`] naming the file when it is not an ONNX model
    /// (truncated, not protobuf, no graph), an initializer's dtype is not supported, or its data does not fit its
    /// shape or lies past the end of its external file.
    pub fn load(path: impl AsRef<Path>) -> Result<OnnxRunner> {
        let path = path.as_ref();
        OnnxRunner::from_bytes(map_file(path)?, path)
    }

    /// Loads a model from its bytes, as [`OnnxRunner::load`] does the file's; `path` names it in errors and
    /// locates its external data.
    ///
    /// # Errors
    /// As [`OnnxRunner::load`].
    pub fn from_bytes(bytes: Bytes, path: &Path) -> Result<OnnxRunner> {
        let path = path.to_path_buf();
        let bad = |msg: String| Error::Format { path: path.clone(), msg };
        let model = ModelProto::decode(bytes.clone()).map_err(|e| bad(format!("not an ONNX model ({e}); is the file truncated?")))?;
        let graph = model.graph.as_ref().ok_or_else(|| bad("the model has no graph".into()))?;
        let dir = path.parent().unwrap_or(Path::new("."));
        let weights = graph
            .initializer
            .iter()
            .map(|t| Ok((t.name().to_string(), tensor_in_file(t, dir, &path, Some(&bytes))?)))
            .collect::<Result<_>>()?;
        let opsets = model.opset_import.iter().map(|o| (o.domain().to_string(), o.version())).collect();
        let mut runner = OnnxRunner {
            path,
            model,
            weights,
            opsets,
            host: FxHashMap::default(),
            folded: Vec::new(),
            prepacked: Mutex::default(),
            jits: Mutex::default(),
        };
        runner.fold_constants()?;
        Ok(runner)
    }

    /// Computes, once, the main graph's nodes that read only initializers and earlier such nodes (a model's
    /// `Constant`s, and weights made by `ConstantOfShape` and friends), realizing their outputs as buffers the way
    /// initializers are; `run` skips them. A node that fails here is left for `run` to report.
    fn fold_constants(&mut self) -> Result<()> {
        let graph = self.graph();
        let mut scope =
            Scope { values: self.weights.iter().map(|(k, v)| (k.clone(), Value::Tensor(v.clone()))).collect(), ..Default::default() };
        let inits = graph.initializer.iter().map(|t| (t.name().to_string(), t.data_type()));
        scope.types = inits.filter_map(|(n, t)| Some((n, narrow::is_narrow(t)?))).collect();
        let mut folded = vec![false; graph.node.len()];
        let mut made = Vec::new();
        for (i, node) in graph.node.iter().enumerate() {
            let known = node.input.iter().all(|n| n.is_empty() || scope.values.contains_key(n));
            let plain = !RANDOM_OPS.contains(&node.op_type()) && node.attribute.iter().all(|a| a.g.is_none() && a.graphs.is_empty());
            if !(known && plain) {
                continue;
            }
            let args: Vec<Option<Value>> = node.input.iter().map(|n| scope.values.get(n).cloned()).collect();
            let narrow: Vec<Option<DataType>> = node.input.iter().map(|n| scope.types.get(n).copied()).collect();
            // (a node that fails, or panics on shapes that don't fit, is left for `run` to report)
            let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.run_node(node, &args, &narrow, &scope)));
            let Ok(Ok((outs, _))) = ran else { continue };
            // (only tensors become weights: a node making a sequence runs each time)
            let Some(outs) = outs.into_iter().map(|v| v.tensor().cloned()).collect::<Option<Vec<Tensor>>>() else { continue };
            if let Some(t) = ops::narrow_output(node, &narrow) {
                scope.types.extend(node.output.iter().map(|o| (o.clone(), t)));
            }
            folded[i] = true;
            let named: Vec<(String, Tensor)> = node.output.iter().cloned().zip(outs).collect();
            scope.values.extend(named.iter().map(|(n, t)| (n.clone(), Value::Tensor(t.clone()))));
            made.extend(named);
        }
        Tensor::realize_all(&made.iter().map(|(_, t)| t).collect::<Vec<_>>())?;
        self.weights.extend(made);
        self.folded = folded;
        self.host = self.weights.iter().filter_map(|(k, t)| Some((k.clone(), ops::shapes::HostInts::of(t)?))).collect();
        Ok(())
    }

    /// The initializer (or weight computed at load from initializers alone) named `name`. On the CPU an
    /// initializer's data stays in the mapped file, not copied, where it is aligned ([`Tensor::is_borrowed`]).
    pub fn weight(&self, name: &str) -> Option<&Tensor> {
        self.weights.get(name)
    }

    /// The graph's inputs that are not initializers, as declared (kind, dtype and dims).
    pub fn inputs(&self) -> Vec<ValueSpec> {
        self.graph().input.iter().filter(|v| !self.weights.contains_key(v.name())).map(spec).collect()
    }

    /// The graph's outputs, as declared.
    pub fn outputs(&self) -> Vec<ValueSpec> {
        self.graph().output.iter().map(spec).collect()
    }

    /// Checks `t` against the declared `spec`, binding its named dims in `bound` (the same name, the same size).
    fn check_input(spec: &ValueSpec, t: &Tensor, bound: &mut FxHashMap<String, usize>) -> std::result::Result<(), String> {
        let given = format!("{} {:?}", t.dtype().name(), t.shape());
        let wrong = || format!("input {:?}: expected {spec}, given {given}", spec.name);
        if spec.dtype.is_some_and(|d| d != t.dtype()) {
            return Err(wrong());
        }
        let Some(dims) = &spec.dims else { return Ok(()) };
        if dims.len() != t.ndim() {
            return Err(wrong());
        }
        for (d, &n) in dims.iter().zip(&t.shape()) {
            match d {
                Dim::Fixed(f) if *f != n => return Err(wrong()),
                Dim::Symbolic(s) if !s.is_empty() && *bound.entry(s.clone()).or_insert(n) != n => {
                    return Err(format!("{}: {s} is {} in an earlier input", wrong(), bound[s]))
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// The initializers, and the constants computed at load, by name.
    pub fn initializers(&self) -> impl Iterator<Item = (&str, &Tensor)> {
        self.weights.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// Runs so far that replayed a TinyJit capture (each input signature's, added up).
    pub fn replays(&self) -> usize {
        self.jits.lock().unwrap_or_else(|e| e.into_inner()).values().flatten().map(crate::tensor::JitState::replays).sum()
    }

    /// The graph's input names that are not initializers, in order.
    pub fn input_names(&self) -> Vec<&str> {
        self.graph().input.iter().map(|v| v.name()).filter(|n| !self.weights.contains_key(*n)).collect()
    }

    /// The graph's output names, in order.
    pub fn output_names(&self) -> Vec<&str> {
        self.graph().output.iter().map(|v| v.name()).collect()
    }

    fn graph(&self) -> &proto::GraphProto {
        self.model.graph.as_ref().expect("load checked the graph")
    }

    /// Runs the graph on `inputs` (name, tensor) and returns its outputs by name, lazy (realize them, or read them).
    ///
    /// # Errors
    /// [`Error::Format`] naming the model when an input is missing, a node's op is not supported (naming op, domain,
    /// opset and node) or a node reads a value nothing made.
    pub fn run(&self, inputs: &[(&str, Tensor)]) -> Result<Vec<(String, Tensor)>> {
        let given: Vec<(&str, Value)> = inputs.iter().map(|(n, t)| (*n, Value::Tensor(t.clone()))).collect();
        let outs = self.run_values(&given)?;
        outs.into_iter()
            .map(|(n, v)| match v {
                Value::Tensor(t) => Ok((n, t)),
                _ => Err(Error::Format { path: self.path.clone(), msg: format!("output {n:?} is a sequence or optional: use run_values") }),
            })
            .collect()
    }

    /// [`OnnxRunner::run`] for any values: tensors, sequences and optionals in and out.
    ///
    /// # Errors
    /// As [`OnnxRunner::run`], and when a value's kind is not the declared one.
    pub fn run_values(&self, inputs: &[(&str, Value)]) -> Result<Vec<(String, Value)>> {
        match self.run_jit(inputs)? {
            Some(outs) => Ok(outs),
            None => self.run_graph(inputs),
        }
    }

    /// The run through this input signature's TinyJit (the second run captures the kernels, later ones replay them,
    /// skipping graph building, scheduling and codegen), or `None` where the graph is not replayable (then marked so
    /// for its signature), under `JIT=0`, or where the graph draws random numbers. Concurrent runs wait for each other.
    fn run_jit(&self, inputs: &[(&str, Value)]) -> Result<Option<Vec<(String, Value)>>> {
        let Some(given) = inputs.iter().map(|(n, v)| Some((*n, v.tensor()?.clone()))).collect::<Option<Vec<_>>>() else { return Ok(None) };
        // (a graph drawing random numbers would draw them twice: in its failed capture and in the run after it)
        if crate::helpers::JIT.value() == 0 || self.graph().node.iter().any(|n| RANDOM_OPS.contains(&n.op_type())) {
            return Ok(None);
        }
        // named dims bind variables (one TinyJit for every size up to a bucket), unless that signature's capture
        // turned out to hold sizes (then each size gets its own, as without)
        let specs = self.inputs();
        let named = |n: &str, k: usize| match specs.iter().find(|s| s.name == n).and_then(|s| s.dims.as_ref()?.get(k).cloned()) {
            Some(Dim::Symbolic(d)) if !d.is_empty() => Some(d),
            _ => None,
        };
        let sig_of = |sym: bool| -> Vec<InputSpec> {
            let dims = |n: &str, t: &Tensor| -> Vec<SigDim> {
                t.shape()
                    .iter()
                    .enumerate()
                    .map(|(k, &d)| if sym && named(n, k).is_some() { SigDim::Upto(bucket(d)) } else { SigDim::Size(d) })
                    .collect()
            };
            given.iter().map(|(n, t)| (n.to_string(), dims(n, t), t.dtype(), t.device())).collect()
        };
        let mut jits = self.jits.lock().unwrap_or_else(|e| e.into_inner());
        let (sym_sig, sizes_sig) = (sig_of(true), sig_of(false));
        // (a size captured before keeps its capture; from the SYMBOLIC_DIMS-th size of a bucket on, one serves all)
        let in_bucket = |k: &Vec<InputSpec>| {
            k.len() == sym_sig.len()
                && k.iter().zip(&sym_sig).all(|(a, b)| {
                    (&a.0, a.2, &a.3, a.1.len()) == (&b.0, b.2, &b.3, b.1.len()) && a.1.iter().zip(&b.1).all(|(&x, &y)| sig_dim_in(x, y))
                })
        };
        let after = crate::helpers::SYMBOLIC_DIMS.value();
        let symbolic = after > 0
            && sym_sig != sizes_sig
            && !jits.contains_key(&sizes_sig)
            && (jits.contains_key(&sym_sig) || jits.keys().filter(|k| **k != sym_sig && in_bucket(k)).count() + 1 >= after as usize)
            && !matches!(jits.get(&sym_sig), Some(Some(j)) if j.general() == Some(false));
        let sig = if symbolic { sym_sig } else { sizes_sig };
        let given: Vec<(&str, Tensor)> = match symbolic {
            false => given,
            true => given
                .into_iter()
                .map(|(n, t)| {
                    let shape = t.shape();
                    if (0..shape.len()).all(|k| named(n, k).is_none()) {
                        return Ok((n, t));
                    }
                    let dims: Vec<crate::uop::Sint> = (0..shape.len())
                        .map(|k| match named(n, k) {
                            Some(d) => crate::uop::Sint::bound(&var_name(&d), 1, bucket(shape[k]), shape[k]),
                            None => shape[k].into(),
                        })
                        .collect();
                    let full: Vec<usize> = dims.iter().zip(&shape).map(|(d, &s)| if d.int().is_some() { s } else { bucket(s) }).collect();
                    Ok((n, padded(&t, &full, &dims)?))
                })
                .collect::<Result<_>>()?,
        };
        // (each capture holds its kernels' buffers: past MAX_JITS input signatures, the old ones are dropped)
        if jits.len() >= MAX_JITS && !jits.contains_key(&sig) {
            jits.clear();
        }
        let Some(jit) = jits.entry(sig.clone()).or_insert_with(|| Some(Default::default())) else { return Ok(None) };
        let names: Vec<&str> = given.iter().map(|(n, _)| *n).collect();
        let tensors: Vec<Tensor> = given.iter().map(|(_, t)| t.clone()).collect();
        let outputs = self.output_names();
        // (a graph whose outputs are not all tensors is not replayable: its first run's values come back as they are)
        let mut plain = None;
        let mut run = |xs: &[Tensor]| -> Result<Vec<Tensor>> {
            let values: Vec<(&str, Value)> = names.iter().zip(xs).map(|(n, t)| (*n, Value::Tensor(t.clone()))).collect();
            let outs = self.run_graph(&values)?;
            match outs.iter().map(|(_, v)| v.tensor().cloned()).collect::<Option<Vec<_>>>() {
                Some(ts) => Ok(ts),
                None => Err(Error::Jit(format!(
                    "outputs {:?} are not all tensors",
                    plain.insert(outs).iter().map(|o| &o.0).collect::<Vec<_>>()
                ))),
            }
        };
        let first = jit.calls() == 0;
        let called = jit.call(&tensors, &mut run);
        if let Some(outs) = plain {
            jits.insert(sig, None);
            return Ok(Some(outs));
        }
        match called {
            Ok(outs) => Ok(Some(outputs.iter().map(|n| n.to_string()).zip(outs.into_iter().map(Value::Tensor)).collect())),
            // (the first call runs the graph as built: its errors are the graph's)
            Err(e) if first => Err(e),
            // (a graph that reads data fails its capture, however its handler words the error: it runs as it is
            // from now on; a real error comes back from that run)
            Err(_) => {
                jits.insert(sig, None);
                Ok(None)
            }
        }
    }

    /// Builds and realizes the graph on `inputs` (what a TinyJit's first and capturing calls run).
    fn run_graph(&self, inputs: &[(&str, Value)]) -> Result<Vec<(String, Value)>> {
        let bad = |msg: String| Error::Format { path: self.path.clone(), msg };
        let graph = self.graph();
        let mut scope = Scope {
            values: self.weights.iter().map(|(k, v)| (k.clone(), Value::Tensor(v.clone()))).collect(),
            host: self.host.clone(),
            ..Default::default()
        };
        // (the ONNX type of each value held in a wider dtype: see `narrow`)
        let declared = graph.input.iter().map(|v| (v.name(), elem_type(v)));
        let inits = graph.initializer.iter().map(|t| (t.name(), Some(t.data_type())));
        scope.types = declared.chain(inits).filter_map(|(n, t)| Some((n.to_string(), narrow::is_narrow(t?)?))).collect();
        let mut bound = FxHashMap::default();
        for spec in self.inputs() {
            let name = &spec.name;
            let v = inputs.iter().find(|(n, _)| n == name).ok_or_else(|| bad(format!("input {name:?} is not given")))?;
            match (&v.1, spec.kind) {
                (Value::Tensor(t), ValueKind::Tensor) => Self::check_input(&spec, t, &mut bound).map_err(&bad)?,
                (Value::Tensor(_) | Value::Strings(_), ValueKind::Optional)
                | (Value::Strings(_), ValueKind::Tensor)
                | (Value::Sequence(_), ValueKind::Sequence | ValueKind::Optional)
                | (Value::None, ValueKind::Optional) => {}
                (_, kind) => return Err(bad(format!("input {name:?}: expected a {kind:?} value"))),
            }
            scope.values.insert(name.to_string(), v.1.clone());
        }
        self.run_nodes(graph, &mut scope, &self.folded).map_err(&bad)?;
        self.output_names()
            .into_iter()
            .map(|n| Ok((n.to_string(), scope.values.get(n).cloned().ok_or_else(|| bad(format!("output {n:?} was not made")))?)))
            .collect()
    }

    /// Runs `graph`'s nodes in order, reading and adding values in `scope`.
    fn run_nodes(&self, graph: &proto::GraphProto, scope: &mut Scope, skip: &[bool]) -> std::result::Result<(), String> {
        for (i, node) in graph.node.iter().enumerate() {
            if skip.get(i).copied().unwrap_or(false) {
                continue;
            }
            let args = node
                .input
                .iter()
                .map(|i| match i.as_str() {
                    "" => Ok(None),
                    i => scope
                        .values
                        .get(i)
                        .cloned()
                        .map(Some)
                        .ok_or_else(|| format!("node {:?} reads {i:?}, which nothing made", node.name())),
                })
                .collect::<std::result::Result<Vec<_>, String>>()?;
            let narrow: Vec<Option<DataType>> = node.input.iter().map(|i| scope.types.get(i.as_str()).copied()).collect();
            let (outs, host) = self.run_node(node, &args, &narrow, scope)?;
            if let Some(t) = ops::narrow_output(node, &narrow) {
                scope.types.extend(node.output.iter().map(|o| (o.clone(), t)));
            }
            scope.host.extend(node.output.iter().cloned().zip(host.into_iter().flatten()));
            scope.values.extend(node.output.iter().cloned().zip(outs));
        }
        Ok(())
    }

    /// Runs subgraph `graph` (an `If` branch, a `Loop`, `Scan` or `SequenceMap` body) inside `outer` with `inputs`
    /// bound to its declared inputs in order; its outputs in order.
    fn run_subgraph(&self, graph: &proto::GraphProto, outer: &Scope, inputs: &[Value]) -> std::result::Result<Vec<Value>, String> {
        let mut scope = outer.clone();
        let dir = self.path.parent().unwrap_or(Path::new("."));
        for t in &graph.initializer {
            scope.values.insert(t.name().to_string(), Value::Tensor(tensor_from_proto(t, dir, &self.path).map_err(|e| e.to_string())?));
        }
        for (v, t) in graph.input.iter().zip(inputs) {
            scope.values.insert(v.name().to_string(), t.clone());
        }
        self.run_nodes(graph, &mut scope, &[])?;
        graph
            .output
            .iter()
            .map(|o| scope.values.get(o.name()).cloned().ok_or_else(|| format!("subgraph output {:?} was not made", o.name())))
            .collect()
    }

    fn run_node(
        &self,
        node: &NodeProto,
        args: &[Option<Value>],
        narrow: &[Option<DataType>],
        scope: &Scope,
    ) -> std::result::Result<(Vec<Value>, Option<Vec<ops::shapes::HostInts>>), String> {
        let domain = match node.domain() {
            "" | "ai.onnx" => "",
            d => d,
        };
        let opset = self.opsets.get(domain).copied().unwrap_or(0);
        let subgraph = |g: &proto::GraphProto, inputs: &[Value]| self.run_subgraph(g, scope, inputs);
        let prepack = |i: usize, given: &Tensor, layout: &dyn Fn(&Tensor) -> Tensor| self.prepack(node, i, given, layout);
        let host: Vec<_> = node.input.iter().map(|i| scope.host.get(i).cloned()).collect();
        let n = ops::Node { proto: node, opset, path: &self.path, narrow, host: &host, subgraph: &subgraph, prepack: &prepack };
        let context = |e: String| format!("node {:?} ({}): {e}", node.name(), node.op_type());
        if let Some(handler) = ops::value_handler(domain, node.op_type()) {
            return Ok((handler(&n, args).map_err(context)?, None));
        }
        let Some(handler) = ops::handler(domain, node.op_type()) else {
            if let Some(f) = self.model.functions.iter().find(|f| f.name() == node.op_type() && f.domain() == node.domain()) {
                return Ok((self.run_function(f, node, args).map_err(context)?, None));
            }
            return Err(format!(
                "op {} (domain {:?}, opset {opset}) of node {:?} is not supported",
                node.op_type(),
                node.domain(),
                node.name()
            ));
        };
        let tensors = args
            .iter()
            .enumerate()
            .map(|(i, a)| match a {
                None | Some(Value::None) => Ok(None),
                Some(Value::Tensor(t)) => Ok(Some(t.clone())),
                Some(Value::Sequence(_)) => Err(format!("input {i} is a sequence; {} takes tensors", node.op_type())),
                Some(Value::Strings(_)) => Err(format!("input {i} is a string tensor; {} takes numbers", node.op_type())),
            })
            .collect::<std::result::Result<Vec<_>, String>>()
            .map_err(context)?;
        if let Some(h) = (domain.is_empty()).then(|| ops::shapes::eval(&n, &tensors, &host)).flatten() {
            return Ok((h.iter().map(|h| Value::Tensor(h.tensor())).collect(), Some(h)));
        }
        Ok((handler(&n, &tensors).map_err(context)?.into_iter().map(Value::Tensor).collect(), None))
    }
}

impl OnnxRunner {
    /// Input `i` of `node` (`given`, as the handler holds it) laid out by `layout` and realized, once per weight:
    /// `None` unless `given` is the weight the input names (not a value computed in the run, nor a subgraph's own).
    fn prepack(&self, node: &NodeProto, i: usize, given: &Tensor, layout: &dyn Fn(&Tensor) -> Tensor) -> Option<Tensor> {
        let name = node.input.get(i)?;
        let w = self.weights.get(name).filter(|w| w.uop() == given.uop())?;
        let mut cache = self.prepacked.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(t) = cache.get(name) {
            return Some(t.clone());
        }
        let t = layout(w).contiguous();
        t.realize().ok()?;
        cache.insert(name.clone(), t.clone());
        Some(t)
    }

    /// Runs a call of model-local function `f` (a `FunctionProto`, as exporters write repeated blocks): its body in
    /// a scope of its own holding the call's inputs, each body attribute that refers to one of the call's
    /// (`ref_attr_name`) replaced by it (or the function's default); the call's outputs.
    fn run_function(&self, f: &proto::FunctionProto, call: &NodeProto, args: &[Option<Value>]) -> std::result::Result<Vec<Value>, String> {
        let mut scope = Scope::default();
        for (name, v) in f.input.iter().zip(args) {
            if let Some(v) = v {
                scope.values.insert(name.clone(), v.clone());
            }
        }
        let resolve = |a: &proto::AttributeProto| -> Option<proto::AttributeProto> {
            let Some(r) = a.ref_attr_name.as_deref().filter(|r| !r.is_empty()) else { return Some(a.clone()) };
            let given = call.attribute.iter().chain(&f.attribute_proto).find(|c| c.name() == r)?;
            Some(proto::AttributeProto { name: a.name.clone(), ref_attr_name: None, ..given.clone() })
        };
        let body = proto::GraphProto {
            node: f.node.iter().map(|n| NodeProto { attribute: n.attribute.iter().filter_map(resolve).collect(), ..n.clone() }).collect(),
            ..Default::default()
        };
        self.run_nodes(&body, &mut scope, &[])?;
        f.output.iter().map(|o| scope.values.get(o).cloned().ok_or_else(|| format!("function {} made no {o:?}", f.name()))).collect()
    }
}

/// The values a graph's nodes see (its own and its enclosing graphs'), and the narrow ONNX type of those held in
/// a wider dtype.
#[derive(Clone, Default)]
struct Scope {
    values: FxHashMap<String, Value>,
    types: FxHashMap<String, DataType>,
    /// The int values the host knows (see [`ops::shapes`]).
    host: FxHashMap<String, ops::shapes::HostInts>,
}

/// The project's dtype for ONNX data type `t`, if it has one.
pub fn dtype_of(t: DataType) -> Option<DType> {
    Some(match t {
        DataType::Float => dtypes::FLOAT32,
        DataType::Double => dtypes::FLOAT64,
        DataType::Float16 => dtypes::FLOAT16,
        DataType::Bfloat16 => dtypes::BFLOAT16,
        DataType::Int8 => dtypes::INT8,
        DataType::Int16 => dtypes::INT16,
        DataType::Int32 => dtypes::INT32,
        DataType::Int64 => dtypes::INT64,
        DataType::Uint8 => dtypes::UINT8,
        DataType::Uint16 => dtypes::UINT16,
        DataType::Uint32 => dtypes::UINT32,
        DataType::Uint64 => dtypes::UINT64,
        DataType::Bool => dtypes::BOOL,
        _ => return None,
    })
}

/// The tensor an initializer (or a Constant's value) holds: its raw bytes (little-endian), its typed fields, or its
/// external file's bytes (relative to `dir`). `model` names the file in errors.
///
/// # Errors
/// [`Error::Format`] for an unsupported dtype, data that does not fit the shape, or external data past the end of
/// its file (or a missing one, as [`Error::Io`]).
pub fn tensor_from_proto(t: &TensorProto, dir: &Path, model: &Path) -> Result<Tensor> {
    tensor_in_file(t, dir, model, None)
}

/// `part` and what of `whole` follows it, up to [`crate::runtime::OVERREAD`] bytes, which a kernel reading `part`
/// in place may overread ([`Tensor::from_blob`]); `part` alone where it is not a slice of `whole`.
fn with_overread(part: Bytes, whole: Option<&Bytes>) -> Bytes {
    let Some(w) = whole else { return part };
    match (part.as_ptr() as usize).checked_sub(w.as_ptr() as usize) {
        Some(at) if at + part.len() <= w.len() => w.slice(at..(at + part.len() + crate::runtime::OVERREAD).min(w.len())),
        _ => part,
    }
}

/// [`tensor_from_proto`] for a tensor of the model whose bytes are `file`: its raw data, slices of `file`, and its
/// external data become the tensor's memory without a copy where the device allows ([`Tensor::from_blob`]).
fn tensor_in_file(t: &TensorProto, dir: &Path, model: &Path, file: Option<&Bytes>) -> Result<Tensor> {
    let bad = |msg: String| Error::Format { path: model.into(), msg: format!("tensor {:?}: {msg}", t.name()) };
    let kind = DataType::try_from(t.data_type()).map_err(|_| bad(format!("unknown data type {}", t.data_type())))?;
    let packed = narrow::storage(kind).map(|_| kind);
    let dt =
        dtype_of(kind).or(narrow::storage(kind)).ok_or_else(|| bad(format!("data type {} is not supported yet", kind.as_str_name())))?;
    let shape: Vec<usize> =
        t.dims.iter().map(|&d| usize::try_from(d).map_err(|_| bad(format!("negative dim {d}")))).collect::<Result<_>>()?;
    let n = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).ok_or_else(|| bad(format!("shape {shape:?} has too many elements")))?;
    n.checked_mul(8).ok_or_else(|| bad(format!("shape {shape:?} has too many bytes")))?;
    // (narrow types are stored packed: `bits` per element, rounded up to whole bytes)
    let stored = packed.map_or(n * dt.itemsize(), |k| (n * narrow::bits(k)).div_ceil(8));
    // (raw and external data stay slices of the mapped file: the tensor's buffer on the CPU, else copied once)
    let (bytes, whole): (Bytes, Option<Bytes>) = if t.data_location() == DataLocation::External {
        let entry = |k: &str| t.external_data.iter().find(|e| e.key() == k).map(|e| e.value().to_string());
        let location = PathBuf::from(entry("location").ok_or_else(|| bad("external data without a location".into()))?);
        // (as onnx's checker: the data lies beside the model, never outside its directory)
        if !location.components().all(|c| matches!(c, std::path::Component::Normal(_))) {
            return Err(bad(format!("external data location {} is not a path inside the model's directory", location.display())));
        }
        let file = dir.join(location);
        let num =
            |k: &str| entry(k).map(|v| v.parse::<usize>().map_err(|_| bad(format!("external {k} {v:?} is not a number")))).transpose();
        let data = map_file(&file)?;
        let offset = num("offset")?.unwrap_or(0);
        let length = num("length")?.unwrap_or(stored);
        let end = offset.checked_add(length).filter(|&e| e <= data.len());
        let end = end.ok_or_else(|| {
            bad(format!("external data {offset}..{offset}+{length} passes the end of {} ({} bytes)", file.display(), data.len()))
        })?;
        (data.slice(offset..end), Some(data))
    } else if let Some(raw) = &t.raw_data {
        (raw.clone(), file.cloned())
    } else if packed.is_some() {
        // (one code per int32 value, or the packed bytes one per value)
        (t.int32_data.iter().map(|&v| v as u8).collect::<Vec<u8>>().into(), None)
    } else {
        (typed_bytes(t, dt).into(), None)
    };
    if let Some(k) = packed {
        if bytes.len() != stored && !(t.raw_data.is_none() && t.data_location() != DataLocation::External && bytes.len() == n) {
            return Err(bad(format!("{} bytes of data for shape {shape:?} of {} ({stored} bytes)", bytes.len(), k.as_str_name())));
        }
        let bytes = if bytes.len() == n && stored != n { unpacked(&bytes, narrow::bits(k)) } else { bytes.to_vec() };
        return Ok(Tensor::from_bytes(&narrow::decode(k, &bytes, n), dt, shape));
    }
    if bytes.len() != n * dt.itemsize() {
        return Err(bad(format!("{} bytes of data for shape {shape:?} of {dt} ({} bytes)", bytes.len(), n * dt.itemsize())));
    }
    Ok(Tensor::from_blob(with_overread(bytes, whole.as_ref()), dt, shape))
}

/// The value a `TensorProto` holds: a tensor as [`tensor_from_proto`] reads it, or a string tensor.
///
/// # Errors
/// As [`tensor_from_proto`]; for strings, a count that does not fit the shape.
pub fn value_from_proto(t: &TensorProto, dir: &Path, model: &Path) -> Result<Value> {
    if t.data_type() != DataType::String as i32 {
        return tensor_from_proto(t, dir, model).map(Value::Tensor);
    }
    let shape: Vec<usize> = t.dims.iter().map(|&d| d.max(0) as usize).collect();
    let data: Vec<String> = t.string_data.iter().map(|s| String::from_utf8_lossy(s).into_owned()).collect();
    if data.len() != shape.iter().product::<usize>() {
        return Err(Error::Format {
            path: model.into(),
            msg: format!("tensor {:?}: {} strings for shape {shape:?}", t.name(), data.len()),
        });
    }
    Ok(Value::Strings(Strings { shape, data }))
}

/// A tensor's typed fields as native bytes of `dt` (ONNX keeps 8- and 16-bit ints, bool and 16-bit floats in
/// `int32_data`, one value each; uint32 and uint64 in `uint64_data`).
fn typed_bytes(t: &TensorProto, dt: DType) -> Vec<u8> {
    let narrow = |size: usize| t.int32_data.iter().flat_map(|v| v.to_le_bytes()[..size].to_vec()).collect::<Vec<u8>>();
    match dt {
        d if d == dtypes::FLOAT32 => t.float_data.iter().flat_map(|v| v.to_le_bytes()).collect(),
        d if d == dtypes::FLOAT64 => t.double_data.iter().flat_map(|v| v.to_le_bytes()).collect(),
        d if d == dtypes::INT64 => t.int64_data.iter().flat_map(|v| v.to_le_bytes()).collect(),
        d if d == dtypes::INT32 => narrow(4),
        d if d == dtypes::UINT64 => t.uint64_data.iter().flat_map(|v| v.to_le_bytes()).collect(),
        d if d == dtypes::UINT32 => t.uint64_data.iter().flat_map(|v| (*v as u32).to_le_bytes()).collect(),
        d => narrow(d.itemsize()),
    }
}

/// One code per byte repacked `bits` per element, little end first (as narrow types are stored raw).
fn unpacked(codes: &[u8], bits: usize) -> Vec<u8> {
    let mut out = vec![0u8; (codes.len() * bits).div_ceil(8)];
    for (i, &c) in codes.iter().enumerate() {
        out[i * bits / 8] |= (c & ((1 << bits) - 1) as u8) << (i * bits % 8);
    }
    out
}

/// The element type a graph input or output declares, if it is a tensor.
fn elem_type(v: &proto::ValueInfoProto) -> Option<i32> {
    match v.r#type.as_ref()?.value.as_ref()? {
        proto::type_proto::Value::TensorType(t) => t.elem_type,
        _ => None,
    }
}

/// A graph input's or output's declaration: its kind, and for a tensor its dtype and dims.
fn spec(v: &proto::ValueInfoProto) -> ValueSpec {
    use proto::type_proto::Value as T;
    let (kind, tensor) = match v.r#type.as_ref().and_then(|t| t.value.as_ref()) {
        Some(T::TensorType(t)) => (ValueKind::Tensor, Some(t)),
        Some(T::SequenceType(_)) => (ValueKind::Sequence, None),
        Some(T::OptionalType(_)) => (ValueKind::Optional, None),
        _ => (ValueKind::Tensor, None),
    };
    let dtype = tensor.and_then(|t| t.elem_type).and_then(|e| DataType::try_from(e).ok()).and_then(|k| dtype_of(k).or(narrow::storage(k)));
    let dims = tensor.and_then(|t| t.shape.as_ref()).map(|s| {
        s.dim
            .iter()
            .map(|d| match &d.value {
                Some(proto::tensor_shape_proto::dimension::Value::DimValue(n)) if *n >= 0 => Dim::Fixed(*n as usize),
                Some(proto::tensor_shape_proto::dimension::Value::DimParam(p)) => Dim::Symbolic(p.clone()),
                _ => Dim::Symbolic(String::new()),
            })
            .collect()
    });
    ValueSpec { name: v.name().to_string(), kind, dtype, dims }
}
