//! The Python bindings' Rust core (`tinygrad_rs._tinygrad_rs`): an `RTensor` class holding a [`Tensor`], its ops
//! reached by name through tables built once, and the engine's settings, JIT and state functions. In: Python
//! values (numbers, tuples, slices, numpy byte arrays). Out: `RTensor`s and numpy arrays. The Python package
//! `tinygrad_rs` wraps these in tinygrad's `Tensor` API (its signatures, keywords and defaults); the math, graph,
//! scheduling and kernels stay here. A panic in the engine (a programmer error: bad shapes, bad axes) becomes a
//! Python exception, never an abort; errors from files, devices and compilers are `RuntimeError`s.

use numpy::PyArray1;
use pyo3::exceptions::{PyIndexError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyFloat, PyInt, PyList, PySlice, PyTuple};
use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;
use tinygrad::dtype::{ConstValue, DType};
use tinygrad::helpers::{self, ContextVar};
use tinygrad::tensor::{Conv2dOpts, Index, InterpolateMode, JitState, Pool2dOpts, RandOpts, Reduction, SdpaOpts, Tensor};

/// A numpy array's bytes as [`bytes::Bytes`]: the array itself, kept alive by a reference to it, not a copy.
struct NpBytes {
    _array: Py<PyArray1<u8>>,
    ptr: *const u8,
    len: usize,
}

impl NpBytes {
    /// The bytes of C-contiguous, non-empty `a`.
    fn new(a: Bound<PyArray1<u8>>) -> NpBytes {
        use numpy::{PyArrayMethods, PyUntypedArrayMethods};
        let (ptr, len) = (a.data().cast_const(), a.len());
        NpBytes { _array: a.unbind(), ptr, len }
    }
    fn into_bytes(self) -> bytes::Bytes {
        bytes::Bytes::from_owner(self)
    }
}

// SAFETY: `ptr` points into the array's data, which `_array` keeps alive wherever this value goes; numpy memory may
// be read from any thread (a reference dropped without the GIL is released by pyo3 later, under it).
unsafe impl Send for NpBytes {}

impl AsRef<[u8]> for NpBytes {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: `len` bytes at `ptr` are the C-contiguous array `_array` holds alive. Python code may write a
        // writable array while the engine copies it (tinygrad's NPY buffer has the same race): values, not memory
        // safety, are then at stake, as with any buffer shared with Python.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

/// A tensor of the engine, as the Python `Tensor` holds it.
#[pyclass(name = "RTensor", module = "tinygrad_rs._tinygrad_rs", frozen)]
#[derive(Clone)]
struct RT(Tensor);

type Res<T> = PyResult<T>;

/// Runs `f`, turning a panic into a Python exception: `IndexError` where the message says an index is out of
/// range or there are too many, else `RuntimeError` (the Python layer raises tinygrad's `ValueError`s itself).
fn guard<R>(f: impl FnOnce() -> R) -> Res<R> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|e| {
        let msg = e.downcast_ref::<String>().cloned().or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()));
        let msg = msg.unwrap_or_else(|| "panic in tinygrad-rs".into());
        if ["out of range", "out of bounds", "too many indices", "ellipsis"].iter().any(|m| msg.contains(m)) {
            PyIndexError::new_err(msg)
        } else {
            PyRuntimeError::new_err(msg)
        }
    })
}

fn err(e: tinygrad::Error) -> PyErr {
    PyRuntimeError::new_err(e.to_string())
}

fn dtype(name: &str) -> Res<DType> {
    DType::from_name(name).ok_or_else(|| PyValueError::new_err(format!("unknown dtype {name:?}")))
}

/// A Python number, bool or `RTensor` as a tensor operand (numbers are weakly typed constants, as in tinygrad).
fn operand(o: &Bound<PyAny>) -> Res<Tensor> {
    use tinygrad::tensor::IntoOperand;
    Ok(if let Ok(t) = o.extract::<PyRef<RT>>() {
        t.0.clone()
    } else if o.is_instance_of::<PyBool>() {
        o.extract::<bool>()?.into_operand()
    } else if o.is_instance_of::<PyInt>() {
        match o.extract::<i64>() {
            Ok(i) => i.into_operand(),
            Err(_) => o.extract::<f64>()?.into_operand(),
        }
    } else {
        o.extract::<f64>()?.into_operand()
    })
}

/// A Python number or bool as a constant.
fn constant(o: &Bound<PyAny>) -> Res<ConstValue> {
    Ok(if o.is_instance_of::<PyBool>() {
        ConstValue::Bool(o.extract()?)
    } else if o.is_instance_of::<PyInt>() && !o.is_instance_of::<PyFloat>() {
        ConstValue::Int(o.extract::<i128>()?)
    } else {
        ConstValue::Float(o.extract()?)
    })
}

fn tensors(ts: &[PyRef<RT>]) -> Vec<Tensor> {
    ts.iter().map(|t| t.0.clone()).collect()
}

fn rts(ts: Vec<Tensor>) -> Vec<RT> {
    ts.into_iter().map(RT).collect()
}

fn rand_opts(dt: Option<&str>) -> Res<RandOpts> {
    Ok(RandOpts { dtype: dt.map(dtype).transpose()?, ..Default::default() })
}

type Unary = fn(&Tensor) -> Tensor;
/// The ops of one tensor and nothing else, by tinygrad's names.
#[rustfmt::skip]
const UNARY: &[(&str, Unary)] = &[
    ("neg", Tensor::neg), ("reciprocal", Tensor::reciprocal), ("sqrt", Tensor::sqrt), ("rsqrt", Tensor::rsqrt),
    ("exp", Tensor::exp), ("exp2", Tensor::exp2), ("log", Tensor::log), ("log2", Tensor::log2), ("log10", Tensor::log10),
    ("sin", Tensor::sin), ("cos", Tensor::cos), ("tan", Tensor::tan), ("asin", Tensor::asin), ("acos", Tensor::acos),
    ("atan", Tensor::atan), ("sinh", Tensor::sinh), ("cosh", Tensor::cosh), ("tanh", Tensor::tanh),
    ("asinh", Tensor::asinh), ("acosh", Tensor::acosh), ("atanh", Tensor::atanh), ("erf", Tensor::erf),
    ("sigmoid", Tensor::sigmoid), ("square", Tensor::square), ("sign", Tensor::sign), ("abs", Tensor::abs),
    ("floor", Tensor::floor), ("ceil", Tensor::ceil), ("round", Tensor::round), ("trunc", Tensor::trunc),
    ("isnan", Tensor::isnan), ("isfinite", Tensor::isfinite), ("bitwise_not", Tensor::bitwise_not),
    ("logical_not", Tensor::logical_not), ("relu", Tensor::relu), ("relu6", Tensor::relu6), ("selu", Tensor::selu),
    ("gelu", Tensor::gelu), ("quick_gelu", Tensor::quick_gelu), ("swish", Tensor::swish), ("silu", Tensor::silu),
    ("hardswish", Tensor::hardswish), ("mish", Tensor::mish), ("softsign", Tensor::softsign),
    ("logsigmoid", Tensor::logsigmoid), ("contiguous", Tensor::contiguous),
    ("contiguous_backward", Tensor::contiguous_backward), ("detach", Tensor::detach), ("diag", Tensor::diag),
    ("squeeze_all", Tensor::squeeze_all),
];

type UnaryF = fn(&Tensor, f64) -> Tensor;
/// The ops of one tensor and one number.
#[rustfmt::skip]
const UNARY_F: &[(&str, UnaryF)] = &[
    ("leaky_relu", Tensor::leaky_relu), ("elu", Tensor::elu), ("celu", Tensor::celu), ("softplus", Tensor::softplus),
    ("dropout", Tensor::dropout),
];

type Binary = fn(&Tensor, Tensor) -> Tensor;
/// The broadcasting ops of two operands (numbers are weakly typed), by tinygrad's names.
#[rustfmt::skip]
const BINARY: &[(&str, Binary)] = &[
    ("add", |a, b| a.add(b)), ("sub", |a, b| a.sub(b)), ("mul", |a, b| a.mul(b)), ("div", |a, b| a.div(b)),
    ("floordiv", |a, b| a.div_floor(b)), ("div_trunc", |a, b| a.div_trunc(b)), ("mod", |a, b| a.mod_(b)),
    ("fmod", |a, b| a.fmod(b)), ("pow", |a, b| a.pow(b)), ("maximum", |a, b| a.maximum(b)),
    ("minimum", |a, b| a.minimum(b)), ("lt", |a, b| a.lt(b)), ("gt", |a, b| a.gt(b)), ("le", |a, b| a.le(b)),
    ("ge", |a, b| a.ge(b)), ("eq", |a, b| a.eq(b)), ("ne", |a, b| a.ne(b)), ("bitwise_and", |a, b| a.bitwise_and(b)),
    ("bitwise_or", |a, b| a.bitwise_or(b)), ("bitwise_xor", |a, b| a.bitwise_xor(b)), ("lshift", |a, b| a.lshift(b)),
    ("rshift", |a, b| a.rshift(b)), ("copysign", |a, b| a.copysign(b)), ("logaddexp", |a, b| a.logaddexp(b)),
    ("clamp_min", |a, b| a.clamp_min(b)), ("clamp_max", |a, b| a.clamp_max(b)),
];

type Reduce = fn(&Tensor, Vec<i64>, bool) -> Tensor;
/// The reductions over axes, with keepdim.
#[rustfmt::skip]
const REDUCE: &[(&str, Reduce)] = &[
    ("sum", |t, a, k| if k { t.sum_keepdim(a) } else { t.sum(a) }),
    ("prod", |t, a, k| if k { t.prod_keepdim(a) } else { t.prod(a) }),
    ("max", |t, a, k| if k { t.max_keepdim(a) } else { t.max(a) }),
    ("min", |t, a, k| if k { t.min_keepdim(a) } else { t.min(a) }),
    ("mean", |t, a, k| if k { t.mean_keepdim(a) } else { t.mean(a) }),
    ("any", |t, a, k| t.any(a, k)), ("all", |t, a, k| t.all(a, k)), ("logsumexp", |t, a, k| t.logsumexp(a, k)),
];

type Scan = fn(&Tensor, i64) -> Tensor;
/// The ops along one axis.
#[rustfmt::skip]
const AXIS: &[(&str, Scan)] = &[
    ("cumsum", Tensor::cumsum), ("cumprod", Tensor::cumprod), ("logcumsumexp", Tensor::logcumsumexp),
    ("softmax", Tensor::softmax), ("log_softmax", Tensor::log_softmax), ("softmin", Tensor::softmin),
    ("unsqueeze", Tensor::unsqueeze), ("squeeze", Tensor::squeeze), ("flatten", Tensor::flatten),
];

fn find<T: Copy>(table: &[(&str, T)], name: &str) -> Res<T> {
    table.iter().find(|(n, _)| *n == name).map(|(_, f)| *f).ok_or_else(|| PyValueError::new_err(format!("no op {name:?}")))
}

/// The `Index` of one Python index item: an int, a slice, `None`, `...` or an `RTensor`.
fn index(o: &Bound<PyAny>) -> Res<Index> {
    let py = o.py();
    Ok(if o.is_none() {
        Index::NewAxis
    } else if o.is(py.Ellipsis()) {
        Index::Ellipsis
    } else if let Ok(t) = o.extract::<PyRef<RT>>() {
        Index::Tensor(t.0.clone())
    } else if o.is_instance_of::<PySlice>() {
        let part = |n: &str| -> Res<Option<i64>> { o.getattr(n)?.extract() };
        Index::Slice(part("start")?, part("stop")?, part("step")?)
    } else if o.is_instance_of::<PyBool>() {
        return Err(pyo3::exceptions::PyIndexError::new_err("bool indices are not supported"));
    } else {
        Index::Int(o.extract()?)
    })
}

#[pymethods]
impl RT {
    // ---- construction
    /// A tensor of `shape` and `dtype` over a C-contiguous numpy uint8 array of its bytes, not copied now (tinygrad's
    /// `Tensor(ndarray)`, whose `NPY` buffer is copied at realize): a writable array is copied to the device at the
    /// first realize, so writes before then show and later ones don't, as in tinygrad; a read-only one (a
    /// `np.load(mmap_mode="r")` file, `np.frombuffer` of bytes) is the tensor's memory itself on CPU and PYTHON.
    #[staticmethod]
    fn from_numpy(data: Bound<PyArray1<u8>>, dtype_: &str, shape: Vec<usize>, device: Option<&str>) -> Res<RT> {
        use numpy::PyUntypedArrayMethods;
        let dt = dtype(dtype_)?;
        if !data.is_c_contiguous() {
            return Err(PyValueError::new_err("from_numpy: the byte array must be C-contiguous"));
        }
        let writable: bool = data.getattr("flags")?.getattr("writeable")?.extract()?;
        let bytes = if data.is_empty() { bytes::Bytes::new() } else { NpBytes::new(data).into_bytes() };
        let t = guard(|| if writable { Tensor::from_host(bytes, dt, shape) } else { Tensor::from_blob(bytes, dt, shape) })?;
        Ok(RT(match device {
            Some(d) => t.to(d),
            None => t,
        }))
    }
    /// Whether the tensor is a realized buffer that is a read-only numpy array's memory itself ([`Tensor::is_borrowed`]).
    fn is_borrowed(&self) -> bool {
        self.0.is_borrowed()
    }
    /// `shape` filled with the number `value` as `dtype_`.
    #[staticmethod]
    fn full(shape: Vec<usize>, value: &Bound<PyAny>, dtype_: &str) -> Res<RT> {
        let (v, dt) = (constant(value)?, dtype(dtype_)?);
        guard(|| RT(Tensor::full_dtype(shape, v, dt)))
    }
    #[staticmethod]
    fn empty(shape: Vec<usize>, dtype_: &str) -> Res<RT> {
        let dt = dtype(dtype_)?;
        guard(|| RT(Tensor::empty(shape, dt)))
    }
    #[staticmethod]
    fn arange(start: f64, stop: f64, step: f64) -> Res<RT> {
        guard(|| RT(Tensor::arange(start, stop, step)))
    }
    #[staticmethod]
    fn eye(n: usize, m: usize, dtype_: &str) -> Res<RT> {
        let dt = dtype(dtype_)?;
        guard(|| RT(Tensor::eye(n, m, dt)))
    }
    #[staticmethod]
    fn linspace(start: f64, stop: f64, steps: usize, dtype_: &str) -> Res<RT> {
        let dt = dtype(dtype_)?;
        guard(|| RT(Tensor::linspace(start, stop, steps, dt)))
    }
    #[staticmethod]
    fn manual_seed(seed: u64) {
        Tensor::manual_seed(seed)
    }
    /// A random tensor: `kind` is rand, randn, uniform (a=low, b=high), normal (a=mean, b=std), randint (a=low,
    /// b=high), scaled_uniform, glorot_uniform, kaiming_uniform or kaiming_normal (a = the negative slope).
    #[staticmethod]
    #[pyo3(signature = (kind, shape, dtype_=None, a=0.0, b=1.0))]
    fn random(kind: &str, shape: Vec<usize>, dtype_: Option<&str>, a: f64, b: f64) -> Res<RT> {
        let o = rand_opts(dtype_)?;
        guard(|| match kind {
            "rand" => Some(Tensor::rand_with(shape, o)),
            "randn" => Some(Tensor::randn_with(shape, o)),
            "uniform" => Some(Tensor::uniform_with(shape, a, b, o)),
            "normal" => Some(Tensor::normal_with(shape, a, b, o)),
            "randint" => Some(Tensor::randint_with(shape, a as i64, b as i64, o)),
            "scaled_uniform" => Some(Tensor::scaled_uniform(shape, o)),
            "glorot_uniform" => Some(Tensor::glorot_uniform(shape, o)),
            "kaiming_uniform" => Some(Tensor::kaiming_uniform(shape, a, o)),
            "kaiming_normal" => Some(Tensor::kaiming_normal(shape, a, o)),
            _ => None,
        })?
        .map(RT)
        .ok_or_else(|| PyValueError::new_err(format!("no random kind {kind:?}")))
    }
    #[staticmethod]
    fn randperm(n: usize, dtype_: Option<&str>) -> Res<RT> {
        let o = rand_opts(dtype_)?;
        guard(|| RT(Tensor::randperm(n, o)))
    }
    #[staticmethod]
    fn einsum(formula: &str, operands: Vec<PyRef<RT>>) -> Res<RT> {
        let ts = tensors(&operands);
        guard(|| RT(Tensor::einsum(formula, &ts.iter().collect::<Vec<_>>())))
    }

    // ---- properties
    #[getter]
    fn shape(&self) -> Vec<usize> {
        self.0.shape()
    }
    #[getter]
    fn dtype(&self) -> String {
        self.0.dtype().name().to_string()
    }
    #[getter]
    fn device(&self) -> String {
        self.0.device()
    }
    #[getter]
    fn requires_grad(&self) -> bool {
        self.0.requires_grad()
    }
    fn set_requires_grad(&self, on: bool) {
        self.0.requires_grad_(on);
    }
    #[getter]
    fn grad(&self) -> Option<RT> {
        self.0.grad().map(RT)
    }
    fn set_grad(&self, g: Option<PyRef<RT>>) {
        self.0.set_grad(g.map(|g| g.0.clone()))
    }
    fn is_param(&self) -> bool {
        self.0.is_param()
    }
    fn set_is_param(&self, on: bool) {
        self.0.is_param_(on);
    }

    // ---- realization and data out (the GIL is released while kernels compile and run)
    fn realize(&self, py: Python) -> Res<()> {
        let t = self.0.clone();
        py.detach(|| guard(|| t.realize().map(|_| ())))?.map_err(err)
    }
    #[staticmethod]
    fn realize_all(py: Python, ts: Vec<PyRef<RT>>) -> Res<()> {
        let ts = tensors(&ts);
        py.detach(|| guard(|| Tensor::realize_all(&ts.iter().collect::<Vec<_>>())))?.map_err(err)
    }
    /// The tensor's bytes, row-major, as a numpy uint8 array (its storage handed over, not copied).
    fn to_numpy_bytes<'py>(&self, py: Python<'py>) -> Res<Bound<'py, PyArray1<u8>>> {
        let t = self.0.clone();
        let bytes = py.detach(|| guard(|| t.to_bytes()))?.map_err(err)?;
        Ok(PyArray1::from_vec(py, bytes))
    }
    fn assign(&self, v: &Bound<PyAny>) -> Res<()> {
        let v = operand(v)?;
        guard(|| {
            self.0.assign(v);
        })
    }
    /// Points this tensor at `other`'s graph (tinygrad's `replace`).
    fn replace(&self, other: PyRef<RT>) -> Res<()> {
        guard(|| {
            self.0.replace(&other.0);
        })
    }

    // ---- elementwise
    fn unary(&self, name: &str) -> Res<RT> {
        let f = find(UNARY, name)?;
        guard(|| RT(f(&self.0)))
    }
    fn unary_f(&self, name: &str, x: f64) -> Res<RT> {
        let f = find(UNARY_F, name)?;
        guard(|| RT(f(&self.0, x)))
    }
    /// `self op other`, or `other op self` when `reverse`.
    #[pyo3(signature = (name, other, reverse=false))]
    fn binary(&self, name: &str, other: &Bound<PyAny>, reverse: bool) -> Res<RT> {
        let (f, y) = (find(BINARY, name)?, operand(other)?);
        guard(|| RT(if reverse { f(&y, self.0.clone()) } else { f(&self.0, y) }))
    }
    fn where_(&self, x: &Bound<PyAny>, y: &Bound<PyAny>) -> Res<RT> {
        let (x, y) = (operand(x)?, operand(y)?);
        guard(|| RT(self.0.where_(x, y)))
    }
    fn lerp(&self, end: PyRef<RT>, weight: &Bound<PyAny>) -> Res<RT> {
        let w = operand(weight)?;
        guard(|| RT(self.0.lerp(&end.0, w)))
    }
    fn clamp(&self, lo: &Bound<PyAny>, hi: &Bound<PyAny>) -> Res<RT> {
        let (lo, hi) = (operand(lo)?, operand(hi)?);
        guard(|| RT(self.0.clamp(lo, hi)))
    }
    fn hardtanh(&self, lo: f64, hi: f64) -> Res<RT> {
        guard(|| RT(self.0.hardtanh(lo, hi)))
    }
    fn hardsigmoid(&self, alpha: f64, beta: f64) -> Res<RT> {
        guard(|| RT(self.0.hardsigmoid_with(alpha, beta)))
    }
    fn isinf(&self, pos: bool, neg: bool) -> Res<RT> {
        guard(|| RT(self.0.isinf_with(pos, neg)))
    }
    fn masked_fill(&self, mask: PyRef<RT>, value: &Bound<PyAny>) -> Res<RT> {
        let v = operand(value)?;
        guard(|| RT(self.0.masked_fill(&mask.0, v)))
    }
    fn isclose(&self, other: &Bound<PyAny>, rtol: f64, atol: f64, equal_nan: bool) -> Res<RT> {
        let o = operand(other)?;
        guard(|| RT(self.0.isclose(o, rtol, atol, equal_nan)))
    }
    fn cast(&self, dtype_: &str) -> Res<RT> {
        let dt = dtype(dtype_)?;
        guard(|| RT(self.0.cast(dt)))
    }
    fn bitcast(&self, dtype_: &str) -> Res<RT> {
        let dt = dtype(dtype_)?;
        guard(|| RT(self.0.bitcast(dt)))
    }
    fn to(&self, device: &str) -> Res<RT> {
        guard(|| RT(self.0.to(device)))
    }
    /// Split over `devices` along `axis` (`None`: replicated), tinygrad `shard`.
    #[pyo3(signature = (devices, axis=None))]
    fn shard(&self, devices: Vec<String>, axis: Option<i64>) -> Res<RT> {
        guard(|| RT(self.0.shard(&devices.iter().map(String::as_str).collect::<Vec<_>>(), axis)))
    }
    fn shard_like(&self, y: PyRef<RT>) -> Res<RT> {
        guard(|| RT(self.0.shard_like(&y.0)))
    }

    // ---- reductions and scans
    /// A reduction over `axis` (`None`: all axes).
    fn reduce(&self, name: &str, axis: Option<Vec<i64>>, keepdim: bool) -> Res<RT> {
        let f = find(REDUCE, name)?;
        let axis = axis.unwrap_or_else(|| (0..self.0.ndim() as i64).collect());
        guard(|| RT(f(&self.0, axis, keepdim)))
    }
    fn along(&self, name: &str, axis: i64) -> Res<RT> {
        let f = find(AXIS, name)?;
        guard(|| RT(f(&self.0, axis)))
    }
    /// Variance (`std` false) or standard deviation, and with the mean where `with_mean`.
    fn var(&self, axis: Option<Vec<i64>>, keepdim: bool, correction: f64, std: bool, with_mean: bool) -> Res<Vec<RT>> {
        let axis = axis.unwrap_or_else(|| (0..self.0.ndim() as i64).collect());
        guard(|| match (std, with_mean) {
            (false, false) => vec![RT(self.0.var(axis, keepdim, correction))],
            (true, false) => vec![RT(self.0.std(axis, keepdim, correction))],
            (false, true) => rts(<[Tensor; 2]>::from(self.0.var_mean(axis, keepdim, correction)).to_vec()),
            (true, true) => rts(<[Tensor; 2]>::from(self.0.std_mean(axis, keepdim, correction)).to_vec()),
        })
    }
    fn argmax(&self, axis: Option<i64>, keepdim: bool, min: bool) -> Res<RT> {
        guard(|| RT(if min { self.0.argmin(axis, keepdim) } else { self.0.argmax(axis, keepdim) }))
    }
    fn cummax(&self, axis: i64, min: bool) -> Res<(RT, RT)> {
        guard(|| {
            let (v, i) = if min { self.0.cummin(axis) } else { self.0.cummax(axis) };
            (RT(v), RT(i))
        })
    }
    fn sort(&self, dim: i64, descending: bool) -> Res<(RT, RT)> {
        guard(|| {
            let (v, i) = self.0.sort(dim, descending);
            (RT(v), RT(i))
        })
    }
    fn argsort(&self, dim: i64, descending: bool) -> Res<RT> {
        guard(|| RT(self.0.argsort(dim, descending)))
    }
    fn topk(&self, k: usize, dim: i64, largest: bool) -> Res<(RT, RT)> {
        guard(|| {
            let (v, i) = self.0.topk(k, dim, largest);
            (RT(v), RT(i))
        })
    }
    fn matmul(&self, w: PyRef<RT>) -> Res<RT> {
        guard(|| RT(self.0.matmul(&w.0)))
    }
    fn dot(&self, w: PyRef<RT>) -> Res<RT> {
        guard(|| RT(self.0.dot(&w.0)))
    }

    // ---- movement
    fn reshape(&self, shape: Vec<i64>) -> Res<RT> {
        guard(|| RT(self.0.reshape(shape)))
    }
    fn permute(&self, order: Vec<i64>) -> Res<RT> {
        guard(|| RT(self.0.permute(order)))
    }
    fn expand(&self, shape: Vec<i64>) -> Res<RT> {
        guard(|| RT(self.0.expand(shape)))
    }
    fn transpose(&self, a: i64, b: i64) -> Res<RT> {
        guard(|| RT(self.0.transpose(a, b)))
    }
    fn flatten_range(&self, start: i64, end: i64) -> Res<RT> {
        guard(|| RT(self.0.flatten_range(start, end)))
    }
    fn unflatten(&self, dim: i64, sizes: Vec<i64>) -> Res<RT> {
        guard(|| RT(self.0.unflatten(dim, sizes)))
    }
    /// Pads with (before, after) per dim; `mode` is constant (with `value`), reflect, replicate or circular.
    fn pad(&self, pads: Vec<(i64, i64)>, value: f64, mode: &str) -> Res<RT> {
        let f: fn(&Tensor, &[(i64, i64)], f64) -> Tensor = match mode {
            "constant" => |t, p, v| t.pad_value(p, v),
            "reflect" => |t, p, _| t.pad_reflect(p),
            "replicate" => |t, p, _| t.pad_replicate(p),
            "circular" => |t, p, _| t.pad_circular(p),
            _ => return Err(pyo3::exceptions::PyNotImplementedError::new_err(format!("mode={mode} is not supported"))),
        };
        guard(|| RT(f(&self.0, &pads, value)))
    }
    fn shrink(&self, bounds: Vec<(usize, usize)>) -> Res<RT> {
        guard(|| RT(self.0.shrink(&bounds)))
    }
    fn flip(&self, axes: Vec<i64>) -> Res<RT> {
        guard(|| RT(self.0.flip(axes)))
    }
    fn cat(&self, others: Vec<PyRef<RT>>, dim: i64) -> Res<RT> {
        let o = tensors(&others);
        guard(|| RT(self.0.cat(&o.iter().collect::<Vec<_>>(), dim)))
    }
    fn stack(&self, others: Vec<PyRef<RT>>, dim: i64) -> Res<RT> {
        let o = tensors(&others);
        guard(|| RT(self.0.stack(&o.iter().collect::<Vec<_>>(), dim)))
    }
    fn split_sizes(&self, sizes: Vec<usize>, dim: i64) -> Res<Vec<RT>> {
        guard(|| rts(self.0.split_sizes(&sizes, dim)))
    }
    fn repeat(&self, repeats: Vec<i64>) -> Res<RT> {
        guard(|| RT(self.0.repeat(repeats)))
    }
    fn repeat_interleave(&self, repeats: usize, dim: Option<i64>) -> Res<RT> {
        guard(|| RT(self.0.repeat_interleave(repeats, dim)))
    }
    fn roll(&self, shifts: Vec<i64>, dims: Vec<i64>) -> Res<RT> {
        guard(|| RT(self.0.roll(shifts, dims)))
    }
    fn roll_flat(&self, shift: i64) -> Res<RT> {
        guard(|| RT(self.0.roll_flat(shift)))
    }
    fn unfold(&self, dim: i64, size: usize, step: usize) -> Res<RT> {
        guard(|| RT(self.0.unfold(dim, size, step)))
    }
    fn diagonal(&self, offset: i64, dim1: i64, dim2: i64) -> Res<RT> {
        guard(|| RT(self.0.diagonal(offset, dim1, dim2)))
    }
    fn meshgrid(&self, others: Vec<PyRef<RT>>, indexing: &str) -> Res<Vec<RT>> {
        let o = tensors(&others);
        guard(|| rts(self.0.meshgrid(&o.iter().collect::<Vec<_>>(), indexing)))
    }
    fn rearrange(&self, formula: &str, sizes: Vec<(String, usize)>) -> Res<RT> {
        let s: Vec<(&str, usize)> = sizes.iter().map(|(n, v)| (n.as_str(), *v)).collect();
        guard(|| RT(self.0.rearrange(formula, &s)))
    }
    fn triu(&self, diagonal: i64, lower: bool) -> Res<RT> {
        guard(|| RT(if lower { self.0.tril(diagonal) } else { self.0.triu(diagonal) }))
    }
    fn getitem(&self, indices: &Bound<PyTuple>) -> Res<RT> {
        let idx = indices.iter().map(|o| index(&o)).collect::<Res<Vec<_>>>()?;
        guard(|| RT(self.0.getitem(&idx)))
    }
    fn setitem(&self, indices: &Bound<PyTuple>, v: &Bound<PyAny>) -> Res<()> {
        let idx = indices.iter().map(|o| index(&o)).collect::<Res<Vec<_>>>()?;
        let v = operand(v)?;
        guard(|| self.0.setitem(&idx, v))
    }
    fn gather(&self, dim: i64, index: PyRef<RT>) -> Res<RT> {
        guard(|| RT(self.0.gather(dim, &index.0)))
    }
    #[pyo3(signature = (dim, index, src, reduce=None))]
    fn scatter(&self, dim: i64, index: PyRef<RT>, src: &Bound<PyAny>, reduce: Option<&str>) -> Res<RT> {
        let s = operand(src)?;
        guard(|| {
            RT(match reduce {
                Some(r) => self.0.scatter_with(dim, &index.0, s, r),
                None => self.0.scatter(dim, &index.0, s),
            })
        })
    }
    fn scatter_reduce(&self, dim: i64, index: PyRef<RT>, src: PyRef<RT>, reduce: &str, include_self: bool) -> Res<RT> {
        guard(|| RT(self.0.scatter_reduce(dim, &index.0, &src.0, reduce, include_self)))
    }
    fn masked_select(&self, mask: PyRef<RT>) -> Res<RT> {
        guard(|| self.0.masked_select(&mask.0))?.map(RT).map_err(err)
    }
    fn one_hot(&self, num_classes: usize) -> Res<RT> {
        guard(|| RT(self.0.one_hot(num_classes)))
    }
    fn multinomial(&self, num_samples: usize, replacement: bool) -> Res<RT> {
        guard(|| RT(self.0.multinomial(num_samples, replacement)))
    }

    // ---- networks
    #[pyo3(signature = (weight, bias, groups, stride, dilation, padding, output_padding=None, transpose=false))]
    #[allow(clippy::too_many_arguments)]
    fn conv2d(
        &self,
        weight: PyRef<RT>,
        bias: Option<PyRef<RT>>,
        groups: usize,
        stride: Vec<usize>,
        dilation: Vec<usize>,
        padding: Vec<i64>,
        output_padding: Option<Vec<usize>>,
        transpose: bool,
    ) -> Res<RT> {
        let mut o = Conv2dOpts::default().groups(groups).stride(stride).dilation(dilation).padding(padding);
        if let Some(b) = bias {
            o = o.bias(&b.0);
        }
        if let Some(p) = output_padding {
            o = o.output_padding(p);
        }
        guard(|| RT(if transpose { self.0.conv_transpose2d(&weight.0, o) } else { self.0.conv2d(&weight.0, o) }))
    }
    /// max (`avg` false) or average pooling; with `return_indices` also the max's flat positions.
    #[allow(clippy::too_many_arguments)]
    fn pool(
        &self,
        avg: bool,
        kernel_size: Vec<usize>,
        stride: Option<Vec<usize>>,
        dilation: Vec<usize>,
        padding: Vec<i64>,
        ceil_mode: bool,
        count_include_pad: bool,
        return_indices: bool,
    ) -> Res<Vec<RT>> {
        let o = Pool2dOpts { kernel_size, stride, dilation, padding, ceil_mode, count_include_pad };
        guard(|| match (avg, return_indices) {
            (true, _) => vec![RT(self.0.avg_pool2d(o))],
            (false, false) => vec![RT(self.0.max_pool2d(o))],
            (false, true) => {
                let (v, i) = self.0.max_pool2d_with_indices(o);
                vec![RT(v), RT(i)]
            }
        })
    }
    #[allow(clippy::too_many_arguments)]
    fn max_unpool2d(
        &self,
        indices: PyRef<RT>,
        kernel_size: Vec<usize>,
        stride: Option<Vec<usize>>,
        dilation: Vec<usize>,
        padding: Vec<i64>,
        output_size: Option<Vec<usize>>,
    ) -> Res<RT> {
        let o = Pool2dOpts { kernel_size, stride, dilation, padding, ..Default::default() };
        guard(|| RT(self.0.max_unpool2d(&indices.0, o, output_size.as_deref())))
    }
    fn interpolate(&self, size: Vec<usize>, mode: &str, align_corners: bool) -> Res<RT> {
        let m = match mode {
            "linear" => InterpolateMode::Linear,
            "nearest" => InterpolateMode::Nearest,
            "nearest-exact" => InterpolateMode::NearestExact,
            _ => return Err(PyValueError::new_err(format!("interpolate: mode {mode:?} is not supported"))),
        };
        guard(|| RT(self.0.interpolate(&size, m, align_corners)))
    }
    fn linear(&self, weight: PyRef<RT>, bias: Option<PyRef<RT>>) -> Res<RT> {
        guard(|| RT(self.0.linear(&weight.0, bias.as_ref().map(|b| &b.0))))
    }
    fn layernorm(&self, axis: Vec<i64>, eps: f64) -> Res<RT> {
        guard(|| RT(self.0.layernorm(axis, eps)))
    }
    fn batchnorm(&self, weight: Option<PyRef<RT>>, bias: Option<PyRef<RT>>, mean: PyRef<RT>, invstd: PyRef<RT>, axis: Vec<i64>) -> Res<RT> {
        guard(|| RT(self.0.batchnorm(weight.as_ref().map(|w| &w.0), bias.as_ref().map(|b| &b.0), &mean.0, &invstd.0, axis)))
    }
    fn normalize(&self, p: f64, dim: i64, eps: f64) -> Res<RT> {
        guard(|| RT(self.0.normalize(p, dim, eps)))
    }
    fn scaled_dot_product_attention(
        &self,
        key: PyRef<RT>,
        value: PyRef<RT>,
        attn_mask: Option<PyRef<RT>>,
        dropout_p: f64,
        is_causal: bool,
        enable_gqa: bool,
    ) -> Res<RT> {
        let o = SdpaOpts { attn_mask: attn_mask.map(|m| m.0.clone()), dropout_p, is_causal, enable_gqa };
        guard(|| RT(self.0.scaled_dot_product_attention(&key.0, &value.0, o)))
    }
    /// A loss (`kind`: cross_entropy, sparse_categorical_crossentropy, binary_crossentropy,
    /// binary_crossentropy_logits, nll_loss) of `self` against `y`.
    #[pyo3(signature = (kind, y, reduction="mean", label_smoothing=0.0, ignore_index=None, weight=None))]
    fn loss(
        &self,
        kind: &str,
        y: PyRef<RT>,
        reduction: &str,
        label_smoothing: f64,
        ignore_index: Option<i64>,
        weight: Option<PyRef<RT>>,
    ) -> Res<RT> {
        let r = Reduction::from_name(reduction).ok_or_else(|| PyValueError::new_err(format!("reduction={reduction} is not supported")))?;
        let w = weight.as_ref().map(|w| &w.0);
        guard(|| match kind {
            "cross_entropy" => Some(self.0.cross_entropy(&y.0, r, label_smoothing)),
            "sparse_categorical_crossentropy" => {
                Some(self.0.sparse_categorical_crossentropy(&y.0, ignore_index.unwrap_or(-1), label_smoothing, r))
            }
            "binary_crossentropy" => Some(self.0.binary_crossentropy(&y.0, r)),
            "binary_crossentropy_logits" => Some(self.0.binary_crossentropy_logits(&y.0, r, w)),
            "nll_loss" => Some(self.0.nll_loss(&y.0, w, ignore_index, r)),
            _ => None,
        })?
        .map(RT)
        .ok_or_else(|| PyValueError::new_err(format!("no loss {kind:?}")))
    }

    // ---- autograd
    /// The gradients of `self` (a scalar unless `gradient` is given) for `targets`.
    fn gradient(&self, targets: Vec<PyRef<RT>>, gradient: Option<PyRef<RT>>) -> Res<Vec<RT>> {
        let ts = tensors(&targets);
        guard(|| rts(self.0.gradient(&ts.iter().collect::<Vec<_>>(), gradient.as_ref().map(|g| &g.0))))
    }
    fn backward(&self, gradient: Option<PyRef<RT>>) -> Res<()> {
        guard(|| {
            self.0.backward_with(gradient.as_ref().map(|g| &g.0));
        })
    }
}

/// The settings tinygrad's `Context` and `getenv` reach, by name.
fn context_var(name: &str) -> Option<&'static ContextVar> {
    use helpers::*;
    [&DEBUG, &BEAM, &NOOPT, &JIT, &CACHELEVEL, &IGNORE_BEAM_CACHE, &TRAINING, &SPLIT_REDUCEOP, &TC, &SPEC]
        .into_iter()
        .find(|v| v.key() == name)
}

/// A setting's value (`None` where the engine has no such setting).
#[pyfunction]
fn context_get(name: &str) -> Option<i64> {
    context_var(name).map(|v| v.value())
}

/// Sets a setting; false where the engine has no such setting.
#[pyfunction]
fn context_set(name: &str, value: i64) -> bool {
    context_var(name).map(|v| v.set(value)).is_some()
}

/// The default device's name (`CPU`, `PYTHON`, `CL`, `CUDA`).
#[pyfunction]
fn default_device() -> String {
    tinygrad::tensor::default_device()
}

/// Sets the default device (tinygrad's `Device.DEFAULT = ...`).
#[pyfunction]
fn set_default_device(dev: &str) {
    helpers::set_dev(dev)
}

/// Kernels run and their counts since the last reset: (kernel_count, global_ops, global_mem, time_sum_s).
#[pyfunction]
#[pyo3(signature = (reset=false))]
fn global_counters(reset: bool) -> (u64, u64, u64, f64) {
    let g = &helpers::GLOBAL_COUNTERS;
    let out = (g.kernel_count(), g.global_ops(), g.global_mem(), g.time_sum_ns() as f64 * 1e-9);
    if reset {
        g.reset();
    }
    out
}

/// The safetensors file at `path` as (name, tensor) pairs.
#[pyfunction]
fn safe_load(path: &str) -> Res<Vec<(String, RT)>> {
    let m = tinygrad::nn::state::safe_load(path).map_err(err)?;
    Ok(m.into_iter().map(|(k, v)| (k, RT(v))).collect())
}

/// Writes `tensors` to a safetensors file at `path` (through a temporary file, then a rename).
#[pyfunction]
fn safe_save(py: Python, tensors: Vec<(String, PyRef<RT>)>, path: &str) -> Res<()> {
    let m: BTreeMap<String, Tensor> = tensors.into_iter().map(|(k, v)| (k, v.0.clone())).collect();
    py.detach(|| tinygrad::nn::state::safe_save(&m, path)).map_err(err)
}

/// A GGUF value as Python: ints, floats, bools, strings and lists of them.
fn gguf_value<'py>(py: Python<'py>, v: &tinygrad::nn::gguf::GgufValue) -> Res<Bound<'py, PyAny>> {
    use tinygrad::nn::gguf::GgufValue::*;
    Ok(match v {
        U8(x) => x.into_pyobject(py)?.into_any(),
        I8(x) => x.into_pyobject(py)?.into_any(),
        U16(x) => x.into_pyobject(py)?.into_any(),
        I16(x) => x.into_pyobject(py)?.into_any(),
        U32(x) => x.into_pyobject(py)?.into_any(),
        I32(x) => x.into_pyobject(py)?.into_any(),
        U64(x) => x.into_pyobject(py)?.into_any(),
        I64(x) => x.into_pyobject(py)?.into_any(),
        F32(x) => x.into_pyobject(py)?.into_any(),
        F64(x) => x.into_pyobject(py)?.into_any(),
        Bool(x) => PyBool::new(py, *x).to_owned().into_any(),
        Str(x) => x.into_pyobject(py)?.into_any(),
        Array(xs) => PyList::new(py, xs.iter().map(|x| gguf_value(py, x)).collect::<Res<Vec<_>>>()?)?.into_any(),
    })
}

/// Values by name.
type Named<T> = Vec<(String, T)>;

/// A GGUF file's metadata (key, value) and tensors (dequantized lazily, as the engine reads them).
#[pyfunction]
fn gguf_load<'py>(py: Python<'py>, path: &str) -> Res<(Named<Bound<'py, PyAny>>, Named<RT>)> {
    let (kv, ts) = tinygrad::nn::gguf::gguf_load(path).map_err(err)?;
    let kv = kv.iter().map(|(k, v)| Ok((k.clone(), gguf_value(py, v)?))).collect::<Res<Vec<_>>>()?;
    Ok((kv, ts.into_iter().map(|(k, v)| (k, RT(v))).collect()))
}

/// An ONNX model (tinygrad `nn/onnx.py`'s `OnnxRunner` on the engine's).
#[pyclass(name = "ROnnxRunner", module = "tinygrad_rs._tinygrad_rs", frozen)]
struct ROnnxRunner(tinygrad::onnx::OnnxRunner);

#[pymethods]
impl ROnnxRunner {
    #[new]
    fn new(path: &str) -> Res<Self> {
        tinygrad::onnx::OnnxRunner::load(path).map(ROnnxRunner).map_err(err)
    }
    /// The outputs, by name, of a run on `inputs` (name, tensor).
    fn run(&self, py: Python, inputs: Vec<(String, PyRef<RT>)>) -> Res<Vec<(String, RT)>> {
        let ins: Vec<(String, Tensor)> = inputs.iter().map(|(n, t)| (n.clone(), t.0.clone())).collect();
        let outs = py.detach(|| {
            let named: Vec<(&str, Tensor)> = ins.iter().map(|(n, t)| (n.as_str(), t.clone())).collect();
            guard(|| self.0.run(&named))
        })?;
        Ok(outs.map_err(err)?.into_iter().map(|(n, t)| (n, RT(t))).collect())
    }
    /// The names of the graph's inputs (those that are not initializers).
    fn input_names(&self) -> Vec<String> {
        self.0.inputs().into_iter().map(|s| s.name).collect()
    }
}

/// MNIST from the data dir (`TINYGRAD_DATA_DIR`, else downloaded): (X_train, Y_train, X_test, Y_test).
#[pyfunction]
fn mnist(py: Python) -> Res<(RT, RT, RT, RT)> {
    let (a, b, c, d) = py.detach(tinygrad::nn::datasets::mnist).map_err(err)?;
    Ok((RT(a), RT(b), RT(c), RT(d)))
}

/// An optimizer over parameters (tinygrad `nn/optim.py`): `kind` is sgd, lars, muon, adam, adamw or lamb.
#[pyclass(name = "ROptimizer", module = "tinygrad_rs._tinygrad_rs", frozen)]
struct ROptimizer(tinygrad::nn::optim::Optimizer);

#[pymethods]
impl ROptimizer {
    #[new]
    #[pyo3(signature = (kind, params, lr, momentum=0.0, weight_decay=0.0, nesterov=false, classic=false, b1=0.9, b2=0.999, eps=1e-8, tcoef=0.001, ns_steps=5, ns_coefficients=vec![3.4445, -4.775, 2.0315]))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        kind: &str,
        params: Vec<PyRef<RT>>,
        lr: f64,
        momentum: f64,
        weight_decay: f64,
        nesterov: bool,
        classic: bool,
        b1: f64,
        b2: f64,
        eps: f64,
        tcoef: f64,
        ns_steps: usize,
        ns_coefficients: Vec<f64>,
    ) -> Res<Self> {
        use tinygrad::nn::optim;
        let p = tensors(&params);
        guard(|| match kind {
            "sgd" => Some(optim::sgd(&p, lr, momentum, weight_decay, nesterov, classic)),
            "lars" => Some(optim::lars(&p, lr, momentum, weight_decay, nesterov, classic, tcoef)),
            "muon" => Some(optim::muon(&p, lr, momentum, weight_decay, ns_steps, &ns_coefficients, nesterov)),
            "adam" => Some(optim::adam(&p, lr, b1, b2, eps)),
            "adamw" => Some(optim::adamw(&p, lr, b1, b2, eps, weight_decay)),
            "lamb" => Some(optim::lamb(&p, lr, b1, b2, eps, weight_decay)),
            _ => None,
        })?
        .map(ROptimizer)
        .ok_or_else(|| PyValueError::new_err(format!("no optimizer {kind:?}")))
    }
    fn zero_grad(&self) {
        self.0.zero_grad()
    }
    /// The updated parameters and state, lazy (tinygrad's `schedule_step`).
    fn schedule_step(&self) -> Res<Vec<RT>> {
        guard(|| rts(self.0.schedule_step()))
    }
    fn step(&self, py: Python) -> Res<()> {
        py.detach(|| guard(|| self.0.step()))?.map_err(err)
    }
    fn params(&self) -> Vec<RT> {
        rts(self.0.params.clone())
    }
    fn lr(&self) -> RT {
        RT(self.0.lr.clone())
    }
}

/// One TinyJit's state: the Python function is passed at each call.
#[pyclass(name = "RJit", module = "tinygrad_rs._tinygrad_rs", frozen)]
#[derive(Default)]
struct RJit(Mutex<JitState>);

#[pymethods]
impl RJit {
    #[new]
    fn new() -> Self {
        Self::default()
    }
    /// Runs (first call), captures (second) or replays (later) `f`, a Python function from a list of
    /// `RTensor`s to a list of `RTensor`s, on `inputs`.
    fn call(&self, py: Python, inputs: Vec<PyRef<RT>>, f: Bound<PyAny>) -> Res<Vec<RT>> {
        let ins = tensors(&inputs);
        let mut py_err = None;
        let mut run = |xs: &[Tensor]| -> tinygrad::Result<Vec<Tensor>> {
            let args = PyList::new(py, xs.iter().cloned().map(RT)).and_then(|l| f.call1((l,)));
            match args.and_then(|r| r.extract::<Vec<PyRef<RT>>>().map(|v| tensors(&v))) {
                Ok(ts) => Ok(ts),
                Err(e) => {
                    let msg = e.to_string();
                    py_err = Some(e);
                    Err(tinygrad::Error::Jit(msg))
                }
            }
        };
        let mut jit = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let out = guard(|| jit.call(&ins, &mut run))?;
        match (out, py_err) {
            (_, Some(e)) => Err(e),
            (Ok(ts), None) => Ok(rts(ts)),
            (Err(e), None) => Err(err(e)),
        }
    }
    fn calls(&self) -> usize {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).calls()
    }
    fn reset(&self) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = JitState::default();
    }
}

#[pymodule]
fn _tinygrad_rs(m: &Bound<PyModule>) -> PyResult<()> {
    // (a panic is an engine programmer error, raised as a Python exception by `guard`: its message goes there)
    std::panic::set_hook(Box::new(|info| {
        if std::env::var_os("TINYGRAD_RS_PANIC_TRACE").is_some() {
            eprintln!("{info}");
        }
    }));
    helpers::check_settings().map_err(err)?;
    m.add_class::<RT>()?;
    m.add_class::<ROptimizer>()?;
    m.add_class::<RJit>()?;
    m.add_class::<ROnnxRunner>()?;
    m.add_function(wrap_pyfunction!(gguf_load, m)?)?;
    m.add_function(wrap_pyfunction!(context_get, m)?)?;
    m.add_function(wrap_pyfunction!(context_set, m)?)?;
    m.add_function(wrap_pyfunction!(default_device, m)?)?;
    m.add_function(wrap_pyfunction!(set_default_device, m)?)?;
    m.add_function(wrap_pyfunction!(global_counters, m)?)?;
    m.add_function(wrap_pyfunction!(safe_load, m)?)?;
    m.add_function(wrap_pyfunction!(safe_save, m)?)?;
    m.add_function(wrap_pyfunction!(mnist, m)?)?;
    Ok(())
}
