//! The conformance runner: loads op vectors made by tinygrad (../shared/conformance/README.md), runs each case's
//! `op(args, kwargs)` through the Rust API (the op tables in `dispatch*.rs` map tinygrad's names and keyword
//! arguments generically), and compares outputs and gradients within the case's tolerances.

#![allow(dead_code)]

use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::Path;
use tinygrad::dtype::{dtypes, DType};
use tinygrad::tensor::IntoOperand;
use tinygrad::Tensor;

/// A case's positional and keyword arguments, with its input tensors.
pub struct Args<'a> {
    pub args: &'a [Value],
    pub kwargs: &'a Map<String, Value>,
    pub tensors: &'a BTreeMap<String, Tensor>,
}

/// A scalar or tensor argument, usable wherever the API takes an operand.
#[derive(Clone)]
pub enum Operand {
    T(Tensor),
    I(i64),
    F(f64),
    B(bool),
}
impl IntoOperand for Operand {
    fn into_operand(self) -> Tensor {
        match self {
            Operand::T(t) => t,
            Operand::I(i) => i.into_operand(),
            Operand::F(f) => f.into_operand(),
            Operand::B(b) => b.into_operand(),
        }
    }
}

impl Operand {
    /// As a tensor (constants become 0-d tensors of a weak dtype).
    pub fn into_t(self) -> Tensor {
        self.into_operand()
    }
}

pub type R<T> = Result<T, String>;

impl Args<'_> {
    /// The value of `v` if it names an input (`"$x"`).
    pub fn tensor_of(&self, v: &Value) -> Option<Tensor> {
        v.as_str().and_then(|s| s.strip_prefix('$')).and_then(|n| self.tensors.get(n).cloned())
    }
    pub fn arg(&self, i: usize) -> Option<&Value> {
        self.args.get(i).filter(|v| !v.is_null())
    }
    pub fn t(&self, i: usize) -> R<Tensor> {
        self.args.get(i).and_then(|v| self.tensor_of(v)).ok_or_else(|| format!("argument {i} is not a tensor"))
    }
    pub fn operand_of(&self, v: &Value) -> R<Operand> {
        if let Some(t) = self.tensor_of(v) {
            return Ok(Operand::T(t));
        }
        match v {
            Value::Bool(b) => Ok(Operand::B(*b)),
            Value::Number(n) if n.is_i64() => Ok(Operand::I(n.as_i64().unwrap())),
            Value::Number(n) => Ok(Operand::F(n.as_f64().unwrap())),
            v => Err(format!("not an operand: {v}")),
        }
    }
    pub fn operand(&self, i: usize) -> R<Operand> {
        self.operand_of(self.args.get(i).ok_or_else(|| format!("missing argument {i}"))?)
    }
    pub fn kw(&self, name: &str) -> Option<&Value> {
        self.kwargs.get(name).filter(|v| !v.is_null())
    }
    pub fn kw_f64(&self, name: &str, default: f64) -> f64 {
        self.kw(name).and_then(Value::as_f64).unwrap_or(default)
    }
    pub fn kw_i64(&self, name: &str, default: i64) -> i64 {
        self.kw(name).and_then(Value::as_i64).unwrap_or(default)
    }
    pub fn kw_bool(&self, name: &str, default: bool) -> bool {
        self.kw(name).and_then(Value::as_bool).unwrap_or(default)
    }
    pub fn kw_str<'b>(&'b self, name: &str, default: &'b str) -> &'b str {
        self.kw(name).and_then(Value::as_str).unwrap_or(default)
    }
    pub fn f64(&self, i: usize) -> R<f64> {
        self.arg(i).and_then(Value::as_f64).ok_or_else(|| format!("argument {i} is not a number"))
    }
    pub fn i64(&self, i: usize) -> R<i64> {
        self.arg(i).and_then(Value::as_i64).ok_or_else(|| format!("argument {i} is not an int"))
    }
    /// Ints from a number or a list of numbers.
    pub fn ints_of(v: &Value) -> R<Vec<i64>> {
        match v {
            Value::Number(n) => n.as_i64().map(|x| vec![x]).ok_or("not an int".into()),
            Value::Array(a) => a.iter().map(|x| x.as_i64().ok_or_else(|| format!("not an int: {x}"))).collect(),
            v => Err(format!("not ints: {v}")),
        }
    }
    pub fn ints(&self, i: usize) -> R<Vec<i64>> {
        Self::ints_of(self.arg(i).ok_or_else(|| format!("missing argument {i}"))?)
    }
    /// The axes of kwarg `name`, or `None` (all axes) when absent.
    pub fn kw_axes(&self, name: &str) -> R<Option<Vec<i64>>> {
        self.kw(name).map(Self::ints_of).transpose()
    }
    /// All positional arguments from `i` on as tensors.
    pub fn tensors_from(&self, i: usize) -> R<Vec<Tensor>> {
        (i..self.args.len()).map(|j| self.t(j)).collect()
    }
}

/// `x` reduced over `axes` (all when `None`) by `f` / `f_keepdim`, honouring `keepdim`.
pub fn reduce_with(a: &Args, x: &Tensor, f: impl Fn(&Tensor, Vec<i64>, bool) -> Tensor) -> R<Tensor> {
    let axes = a.kw_axes("axis")?.unwrap_or_else(|| (0..x.ndim() as i64).collect());
    Ok(f(x, axes, a.kw_bool("keepdim", false)))
}

fn dtype_of(name: &str) -> R<DType> {
    DType::from_name(name).ok_or_else(|| format!("unknown dtype {name}"))
}

fn num(v: &Value) -> R<f64> {
    match v {
        Value::Number(n) => Ok(n.as_f64().unwrap()),
        Value::Bool(b) => Ok(*b as u8 as f64),
        Value::String(s) if s == "nan" => Ok(f64::NAN),
        Value::String(s) if s == "inf" => Ok(f64::INFINITY),
        Value::String(s) if s == "-inf" => Ok(f64::NEG_INFINITY),
        v => Err(format!("bad number {v}")),
    }
}

/// A tensor from the JSON `{"dtype", "shape", "data"}`.
fn load_tensor(v: &Value) -> R<Tensor> {
    let dt = dtype_of(v["dtype"].as_str().ok_or("tensor without dtype")?)?;
    let shape: Vec<usize> = v["shape"].as_array().ok_or("tensor without shape")?.iter().map(|x| x.as_u64().unwrap() as usize).collect();
    let raw = v["data"].as_array().ok_or("tensor without data")?;
    let data: Vec<f64> = raw.iter().map(num).collect::<R<_>>()?;
    // 64-bit ints straight from the JSON integers (f64 would round above 2^53)
    let ints: Vec<i128> = raw.iter().map(|x| x.as_i64().map(i128::from).or(x.as_u64().map(i128::from)).unwrap_or(0)).collect();
    macro_rules! mk {
        ($t:ty, $conv:expr) => {
            Tensor::from_slice(&data.iter().map($conv).collect::<Vec<$t>>(), shape)
        };
    }
    Ok(match dt {
        dtypes::BOOL => mk!(bool, |&x| x != 0.0),
        dtypes::INT8 => mk!(i8, |&x| x as i8),
        dtypes::INT16 => mk!(i16, |&x| x as i16),
        dtypes::INT32 => mk!(i32, |&x| x as i32),
        dtypes::INT64 => Tensor::from_slice(&ints.iter().map(|&x| x as i64).collect::<Vec<_>>(), shape),
        dtypes::UINT8 => mk!(u8, |&x| x as u8),
        dtypes::UINT16 => mk!(u16, |&x| x as u16),
        dtypes::UINT32 => mk!(u32, |&x| x as u32),
        dtypes::UINT64 => Tensor::from_slice(&ints.iter().map(|&x| x as u64).collect::<Vec<_>>(), shape),
        dtypes::FLOAT16 => mk!(half::f16, |&x| half::f16::from_f64(x)),
        dtypes::BFLOAT16 => mk!(half::bf16, |&x| half::bf16::from_f64(x)),
        dtypes::FLOAT32 => mk!(f32, |&x| x as f32),
        dtypes::FLOAT64 => mk!(f64, |&x| x),
        d => return Err(format!("unsupported dtype {d}")),
    })
}

/// A tensor's values as f64, whatever its dtype.
fn values(t: &Tensor) -> R<Vec<f64>> {
    let e = |e: tinygrad::Error| e.to_string();
    Ok(match t.dtype() {
        dtypes::BOOL => t.to_vec::<bool>().map_err(e)?.into_iter().map(|x| x as u8 as f64).collect(),
        dtypes::INT8 => t.to_vec::<i8>().map_err(e)?.into_iter().map(|x| x as f64).collect(),
        dtypes::INT16 => t.to_vec::<i16>().map_err(e)?.into_iter().map(|x| x as f64).collect(),
        dtypes::INT32 => t.to_vec::<i32>().map_err(e)?.into_iter().map(|x| x as f64).collect(),
        dtypes::INT64 => t.to_vec::<i64>().map_err(e)?.into_iter().map(|x| x as f64).collect(),
        dtypes::UINT8 => t.to_vec::<u8>().map_err(e)?.into_iter().map(|x| x as f64).collect(),
        dtypes::UINT16 => t.to_vec::<u16>().map_err(e)?.into_iter().map(|x| x as f64).collect(),
        dtypes::UINT32 => t.to_vec::<u32>().map_err(e)?.into_iter().map(|x| x as f64).collect(),
        dtypes::UINT64 => t.to_vec::<u64>().map_err(e)?.into_iter().map(|x| x as f64).collect(),
        dtypes::FLOAT16 => t.to_vec::<half::f16>().map_err(e)?.into_iter().map(|x| x.to_f64()).collect(),
        dtypes::BFLOAT16 => t.to_vec::<half::bf16>().map_err(e)?.into_iter().map(|x| x.to_f64()).collect(),
        dtypes::FLOAT32 => t.to_vec::<f32>().map_err(e)?.into_iter().map(|x| x as f64).collect(),
        dtypes::FLOAT64 => t.to_vec::<f64>().map_err(e)?,
        d => return Err(format!("unsupported dtype {d}")),
    })
}

/// Checks `got` against the JSON tensor `want`: dtype and shape exactly, values within `atol + rtol*|want|`
/// (ints and bools exactly; NaN matches NaN; infinities match by sign). Returns the largest error.
fn compare(what: &str, got: &Tensor, want: &Value, atol: f64, rtol: f64) -> R<f64> {
    let wdt = dtype_of(want["dtype"].as_str().unwrap_or(""))?;
    let wshape: Vec<usize> = want["shape"].as_array().ok_or("bad expected shape")?.iter().map(|x| x.as_u64().unwrap() as usize).collect();
    if got.dtype() != wdt || got.shape() != wshape {
        return Err(format!("{what}: got {} {:?}, want {} {:?}", got.dtype().name(), got.shape(), wdt.name(), wshape));
    }
    let (g, w) = (values(got)?, want["data"].as_array().ok_or("no data")?.iter().map(num).collect::<R<Vec<f64>>>()?);
    let exact = !wdt.is_float();
    let mut worst = 0.0f64;
    for (i, (&g, &w)) in g.iter().zip(&w).enumerate() {
        let ok = if w.is_nan() {
            g.is_nan()
        } else if w.is_infinite() || exact {
            g == w
        } else {
            (g - w).abs() <= atol + rtol * w.abs()
        };
        let err = if g.is_nan() != w.is_nan() {
            f64::INFINITY
        } else if g == w {
            0.0
        } else {
            (g - w).abs()
        };
        worst = worst.max(err);
        if !ok {
            return Err(format!("{what}: element {i} is {g}, want {w} (max err {worst:.3e})"));
        }
    }
    Ok(worst)
}

/// Runs one case file; `Ok` with the largest error, or the reason it failed.
pub fn run_case(path: &Path) -> R<f64> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let case: Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    let mut tensors = BTreeMap::new();
    for (name, spec) in case["inputs"].as_object().ok_or("no inputs")? {
        let t = load_tensor(spec)?;
        if spec["requires_grad"].as_bool() == Some(true) {
            t.requires_grad_(true);
        }
        tensors.insert(name.clone(), t);
    }
    let (empty_args, empty_kwargs) = (Vec::new(), Map::new());
    let a = Args {
        args: case["args"].as_array().unwrap_or(&empty_args),
        kwargs: case["kwargs"].as_object().unwrap_or(&empty_kwargs),
        tensors: &tensors,
    };
    let op = case["op"].as_str().ok_or("no op")?;
    let outs = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| crate::dispatch::dispatch(op, &a))).map_err(|p| {
        format!("panicked: {}", p.downcast_ref::<String>().cloned().or(p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default())
    })??;
    let (atol, rtol) = (case["atol"].as_f64().unwrap_or(1e-5), case["rtol"].as_f64().unwrap_or(1e-4));
    let wants: Vec<&Value> = match &case["output"] {
        Value::Array(v) => v.iter().collect(),
        v => vec![v],
    };
    if wants.len() != outs.len() {
        return Err(format!("{} outputs, want {}", outs.len(), wants.len()));
    }
    // the gradient graph is built before the outputs are realized (realizing cuts a tensor's graph)
    let mut grad_checks = Vec::new();
    if let (Some(go), Some(grads)) = (case.get("grad_output"), case.get("grads").and_then(Value::as_object)) {
        let go = load_tensor(go)?;
        let loss = (&outs[0] * &go).sum(..);
        let names: Vec<&String> = grads.keys().collect();
        let targets: Vec<&Tensor> = names.iter().map(|n| &tensors[n.as_str()]).collect();
        let got = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| loss.gradient(&targets, None)))
            .map_err(|p| format!("gradient panicked: {}", p.downcast_ref::<String>().cloned().unwrap_or_default()))?;
        grad_checks = names.into_iter().zip(got).map(|(n, g)| (n.clone(), g, &grads[n.as_str()])).collect();
    }
    let mut worst = 0.0f64;
    for (i, (o, w)) in outs.iter().zip(&wants).enumerate() {
        worst = worst.max(compare(&format!("output {i}"), o, w, atol, rtol)?);
    }
    let (gatol, grtol) = (case["grad_atol"].as_f64().unwrap_or(atol), case["grad_rtol"].as_f64().unwrap_or(rtol));
    for (n, g, want) in &grad_checks {
        worst = worst.max(compare(&format!("grad {n}"), g, want, gatol, grtol)?);
    }
    Ok(worst)
}

/// Runs every `*.json` in `dir`, returning (passed, failure lines).
pub fn run_dir(dir: &Path) -> (usize, Vec<String>) {
    let mut files: Vec<_> = std::fs::read_dir(dir).map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect()).unwrap_or_default();
    files.retain(|p| p.extension().is_some_and(|e| e == "json"));
    files.sort();
    let (mut passed, mut failed) = (0, Vec::new());
    for f in files {
        let name = f.file_stem().unwrap().to_string_lossy().to_string();
        match run_case(&f) {
            Ok(_) => passed += 1,
            Err(e) => failed.push(format!("FAIL {name}: {e}")),
        }
    }
    (passed, failed)
}
