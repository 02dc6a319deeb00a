//! Conformance op table: the math ops (see dispatch.rs): unary math, activations, binary and ternary math,
//! bitwise ops, bitcast.

use crate::runner::{Args, Operand, R};
use serde_json::Value;
use tinygrad::dtype::DType;
use tinygrad::Tensor;

/// `Some(outputs)` when `op` is one of this table's ops.
pub fn dispatch(op: &str, a: &Args) -> Option<R<Vec<Tensor>>> {
    run(op, a).map(|t| t.map(|t| vec![t])).transpose()
}

/// Positional argument `i`, else keyword `name`, if given.
fn param<'a>(a: &'a Args, i: usize, name: &str) -> Option<&'a Value> {
    a.arg(i).or_else(|| a.kw(name))
}

fn run(op: &str, a: &Args) -> R<Option<Tensor>> {
    let x = || a.t(0);
    let f = |i: usize, name: &str, default: f64| param(a, i, name).and_then(Value::as_f64).unwrap_or(default);
    let b = |i: usize, name: &str, default: bool| param(a, i, name).and_then(Value::as_bool).unwrap_or(default);
    let operand = |i: usize, name: &str| param(a, i, name).map(|v| a.operand_of(v)).transpose();
    let rev = a.kw_bool("reverse", false);
    let binop = |f: fn(&Tensor, Operand) -> Tensor| -> R<Tensor> {
        let y = param(a, 1, "x").or_else(|| a.kw("other")).ok_or("missing argument 1")?;
        let (x, y) = (a.operand(0)?, a.operand_of(y)?);
        Ok(if rev { f(&y.into_t(), x) } else { f(&x.into_t(), y) })
    };
    Ok(Some(match op {
        "sin" => x()?.sin(),
        "cos" => x()?.cos(),
        "tan" => x()?.tan(),
        "asin" => x()?.asin(),
        "acos" => x()?.acos(),
        "atan" => x()?.atan(),
        "sinh" => x()?.sinh(),
        "cosh" => x()?.cosh(),
        "tanh" => x()?.tanh(),
        "asinh" => x()?.asinh(),
        "acosh" => x()?.acosh(),
        "atanh" => x()?.atanh(),
        "erf" => x()?.erf(),
        "log10" => x()?.log10(),
        "sign" => x()?.sign(),
        "trunc" => x()?.trunc(),
        "floor" => x()?.floor(),
        "ceil" => x()?.ceil(),
        "round" => x()?.round(),
        "isnan" => x()?.isnan(),
        "isinf" => x()?.isinf_with(b(1, "detect_positive", true), b(2, "detect_negative", true)),
        "isfinite" => x()?.isfinite(),
        "bitwise_not" => x()?.bitwise_not(),
        "relu6" => x()?.relu6(),
        "leaky_relu" => x()?.leaky_relu(f(1, "neg_slope", 0.01)),
        "elu" => x()?.elu(f(1, "alpha", 1.0)),
        "celu" => x()?.celu(f(1, "alpha", 1.0)),
        "selu" => x()?.selu_with(f(1, "alpha", 1.67326), f(2, "gamma", 1.0507)),
        "gelu" => match param(a, 1, "approximate").and_then(Value::as_str).unwrap_or("tanh") {
            "tanh" => x()?.gelu(),
            "none" => x()?.gelu_erf(),
            m => return Err(format!("gelu: approximate={m} is not supported")),
        },
        "quick_gelu" => x()?.quick_gelu(),
        "silu" => x()?.silu(),
        "swish" => x()?.swish(),
        "hardsigmoid" => x()?.hardsigmoid_with(f(1, "alpha", 1.0 / 6.0), f(2, "beta", 0.5)),
        "hardswish" => x()?.hardswish(),
        "hardtanh" => {
            let lo = operand(1, "min_val")?.unwrap_or(Operand::I(-1));
            x()?.hardtanh(lo, operand(2, "max_val")?.unwrap_or(Operand::I(1)))
        }
        "mish" => x()?.mish(),
        "softplus" => x()?.softplus(f(1, "beta", 1.0)),
        "softsign" => x()?.softsign(),
        "logsigmoid" => x()?.logsigmoid(),
        "mod" => binop(|x, y| x.mod_(y))?,
        "fmod" => binop(|x, y| x.fmod(y))?,
        "pow" => binop(|x, y| x.pow(y))?,
        "copysign" => binop(|x, y| x.copysign(y))?,
        "logaddexp" => binop(|x, y| x.logaddexp(y))?,
        "bitwise_and" => binop(|x, y| x.bitwise_and(y))?,
        "bitwise_or" => binop(|x, y| x.bitwise_or(y))?,
        "bitwise_xor" => binop(|x, y| x.bitwise_xor(y))?,
        "lshift" => binop(|x, y| x.lshift(y))?,
        "rshift" => binop(|x, y| x.rshift(y))?,
        "lerp" => x()?.lerp(&a.t(1)?, operand(2, "weight")?.ok_or("lerp: no weight")?),
        "clamp" | "clip" => match (operand(1, "min_")?, operand(2, "max_")?) {
            (Some(lo), Some(hi)) => x()?.clamp(lo, hi),
            (Some(lo), None) => x()?.clamp_min(lo),
            (None, Some(hi)) => x()?.clamp_max(hi),
            (None, None) => return Err(format!("{op}: needs min_ or max_")),
        },
        "masked_fill" => x()?.masked_fill(&a.t(1)?, operand(2, "value")?.ok_or("masked_fill: no value")?),
        "isclose" | "allclose" => {
            let other = operand(1, "other")?.ok_or("isclose: no other")?;
            let (rtol, atol, equal_nan) = (f(2, "rtol", 1e-5), f(3, "atol", 1e-8), b(4, "equal_nan", false));
            if op == "isclose" {
                x()?.isclose(other, rtol, atol, equal_nan)
            } else {
                x()?.allclose(other, rtol, atol, equal_nan)
            }
        }
        "bitcast" => {
            let name = param(a, 1, "dtype").and_then(Value::as_str).ok_or("bitcast: no dtype")?;
            x()?.bitcast(DType::from_name(name).ok_or_else(|| format!("unknown dtype {name}"))?)
        }
        _ => return Ok(None),
    }))
}
