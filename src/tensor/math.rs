//! Tensor ops: math (tinygrad `mixin/elementwise.py`, `mixin/dtype.py`). Built from the primitive ops in
//! `ops.rs`, so each differentiates through the primitives' gradient rules; the formulas are tinygrad's, so
//! values match it to the last rounding.

use super::{IntoOperand, Tensor};
use crate::dtype::{dtypes, least_upper_dtype, least_upper_float, ConstValue, DType};
use crate::uop::{Ops, UOp};
use std::f64::consts::FRAC_PI_2;

/// Whether `t` is a bare weak constant (a Rust number passed as an operand, tinygrad's `ConstType`).
fn is_weak_const(t: &Tensor) -> bool {
    let u = t.uop();
    u.op == Ops::CONST && u.dtype.is_weak()
}

impl Tensor {
    /// A 0-d constant of `self`'s dtype (tinygrad `const_like`).
    fn const_of(&self, v: impl Into<ConstValue>) -> Tensor {
        Tensor::from_uop(UOp::const_(self.dtype(), v))
    }
    /// `op` on `self` and `y` after broadcasting and promotion, for ops defined on ints and bools only.
    pub(super) fn int_binop(&self, op: Ops, y: impl IntoOperand, name: &str) -> Tensor {
        let (a, b) = self.broadcasted(y, name);
        assert!(!a.dtype().is_float(), "{name}: needs int or bool operands, got {} and {}", self.dtype(), b.dtype());
        Tensor::from_uop(a.uop().alu(op, &[&b.uop()]))
    }
    /// `self` evaluated as the polynomial with coefficients `coeffs`, highest power first (tinygrad `polyN`).
    fn poly_n(&self, coeffs: &[f64]) -> Tensor {
        coeffs.iter().fold(self.zeros_like(), |acc, &c| acc * self + c)
    }

    // unary math

    /// -1, 0 or 1 by the sign of each element, in `self`'s dtype (tinygrad `sign`).
    pub fn sign(&self) -> Tensor {
        self.ne(0).where_(self.lt(0).where_(self.const_of(-1), self.const_of(1)), self.const_of(0))
    }
    /// `|self|` as `self * sign(self)` (tinygrad `abs`): unsigned ints are unchanged, the gradient at 0 is 0.
    pub fn abs(&self) -> Tensor {
        self.mul(self.sign())
    }
    /// Rounds down, keeping the dtype (tinygrad `floor`; ints are unchanged).
    pub fn floor(&self) -> Tensor {
        let t = self.trunc();
        self.lt(&t).where_(t.sub(1), &t)
    }
    /// Rounds up, keeping the dtype (tinygrad `ceil`; ints are unchanged).
    pub fn ceil(&self) -> Tensor {
        let t = self.trunc();
        self.gt(&t).where_(t.add(1), &t)
    }
    /// Rounds to the nearest integer, ties to even (tinygrad `round`); ints become float.
    pub fn round(&self) -> Tensor {
        let b = self.trunc().div(2.0);
        self.gt(0).eq(b.trunc().eq(&b)).where_(self.sub(0.5).ceil(), self.add(0.5).floor())
    }
    /// `cos(self)` as `sin(pi/2 - self)` computed in at least float32 (tinygrad `cos`).
    pub fn cos(&self) -> Tensor {
        let x = self.cast(least_upper_float(self.dtype()));
        x.cast(least_upper_dtype(&[x.dtype(), dtypes::FLOAT32])).neg().add(FRAC_PI_2).sin().cast(x.dtype())
    }
    /// `tan(self)` as `sin/cos` (tinygrad `tan`).
    pub fn tan(&self) -> Tensor {
        self.sin().div(self.cos())
    }
    /// `asin(self)` by the polynomial of Abramowitz-Stegun 4.4.46 (tinygrad `asin`); NaN outside [-1, 1].
    pub fn asin(&self) -> Tensor {
        let c = [-0.0012624911, 0.0066700901, -0.0170881256, 0.0308918810, -0.0501743046, 0.0889789874, -0.2145988016, 1.5707963050];
        let a = self.abs();
        let x = a.neg().add(1.0).sqrt().mul(a.poly_n(&c)).neg().add(FRAC_PI_2);
        self.sign().mul(x)
    }
    /// `acos(self)` as `pi/2 - asin(self)` (tinygrad `acos`).
    pub fn acos(&self) -> Tensor {
        self.asin().neg().add(FRAC_PI_2)
    }
    /// `atan(self)` as `asin(self / sqrt(1 + self^2))` (tinygrad `atan`).
    pub fn atan(&self) -> Tensor {
        self.div(self.mul(self).add(1.0).sqrt()).asin()
    }
    /// `sinh(self) = (e^x - e^-x) / 2` (tinygrad `sinh`).
    pub fn sinh(&self) -> Tensor {
        self.exp().sub(self.neg().exp()).div(2)
    }
    /// `cosh(self) = (e^x + e^-x) / 2` (tinygrad `cosh`).
    pub fn cosh(&self) -> Tensor {
        self.exp().add(self.neg().exp()).div(2)
    }
    /// `tanh(self) = 2 sigmoid(2x) - 1` (tinygrad `tanh`).
    pub fn tanh(&self) -> Tensor {
        self.mul(2.0).sigmoid().mul(2.0).sub(1.0)
    }
    /// `asinh(self) = ln(x + sqrt(x^2 + 1))` (tinygrad `asinh`).
    pub fn asinh(&self) -> Tensor {
        self.add(self.square().add(1).sqrt()).log()
    }
    /// `acosh(self) = ln(x + sqrt(x^2 - 1))` (tinygrad `acosh`).
    pub fn acosh(&self) -> Tensor {
        self.add(self.square().sub(1).sqrt()).log()
    }
    /// `atanh(self) = ln((1 + x) / (1 - x)) / 2` (tinygrad `atanh`).
    pub fn atanh(&self) -> Tensor {
        self.add(1).div(self.neg().add(1)).log().div(2)
    }
    /// The error function by Abramowitz-Stegun 7.1.26 (tinygrad `erf`; absolute error below 1.5e-7).
    pub fn erf(&self) -> Tensor {
        let t = self.abs().mul(0.3275911).add(1.0).reciprocal();
        let p = t.poly_n(&[1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592]);
        self.sign().mul(t.mul(p).mul(self.square().neg().exp()).neg().add(1.0))
    }
    /// `log10(self)` as `log2(self) * log10(2)` (tinygrad `log10`).
    pub fn log10(&self) -> Tensor {
        self.log2().mul(std::f64::consts::LOG10_2)
    }
    /// Whether each element is NaN (bool; tinygrad `isnan`).
    pub fn isnan(&self) -> Tensor {
        self.ne(self)
    }
    /// Whether each element is +inf or -inf (bool; tinygrad `isinf`).
    pub fn isinf(&self) -> Tensor {
        self.isinf_with(true, true)
    }
    /// Whether each element is an infinity of a detected sign (bool; tinygrad `isinf(detect_positive,
    /// detect_negative)`).
    pub fn isinf_with(&self, detect_positive: bool, detect_negative: bool) -> Tensor {
        let pos = self.eq(f64::INFINITY).bitwise_and(detect_positive);
        pos.bitwise_or(self.eq(f64::NEG_INFINITY).bitwise_and(detect_negative))
    }
    /// Whether each element is neither infinite nor NaN (bool; tinygrad `isfinite`).
    pub fn isfinite(&self) -> Tensor {
        self.isinf().bitwise_or(self.isnan()).logical_not()
    }
    /// `~self`: bit complement for ints, logical not for bools (tinygrad `bitwise_not`).
    ///
    /// # Panics
    /// If `self` is float.
    pub fn bitwise_not(&self) -> Tensor {
        let dt = self.dtype();
        assert!(!dt.is_float(), "bitwise_not: needs an int or bool tensor, got {dt}");
        match dt {
            _ if dt.is_bool() => self.logical_not(),
            _ if dt.is_unsigned() => self.bitwise_xor(self.const_of(dt.max())),
            _ => self.bitwise_xor(-1),
        }
    }

    // activations

    /// `max(self, 0)` as `self > 0 ? self : 0`, so the gradient at 0 is 0 (tinygrad `relu`).
    pub fn relu(&self) -> Tensor {
        self.gt(0).where_(self, 0)
    }
    /// `min(max(self, 0), 6)` as `relu(x) - relu(x - 6)` (tinygrad `relu6`).
    pub fn relu6(&self) -> Tensor {
        self.relu().sub(self.sub(6).relu())
    }
    /// `self` where positive, `neg_slope * self` where negative (tinygrad `leaky_relu`, default slope 0.01).
    pub fn leaky_relu(&self, neg_slope: f64) -> Tensor {
        self.lt(0).where_(self.mul(neg_slope), self)
    }
    /// `self` where positive, `alpha * (e^x - 1)` where negative (tinygrad `elu`, default alpha 1).
    pub fn elu(&self, alpha: f64) -> Tensor {
        self.relu().sub(self.exp().neg().add(1.0).relu().mul(alpha))
    }
    /// `max(0, x) + min(0, alpha * (e^(x/alpha) - 1))` (tinygrad `celu`, default alpha 1).
    pub fn celu(&self, alpha: f64) -> Tensor {
        self.maximum(0).add(self.div(alpha).exp().sub(1).mul(alpha).minimum(0))
    }
    /// SELU with tinygrad's default constants (alpha 1.67326, gamma 1.0507).
    pub fn selu(&self) -> Tensor {
        self.selu_with(1.67326, 1.0507)
    }
    /// `gamma * (x >= 0 ? x : alpha * (e^x - 1))` (tinygrad `selu`).
    pub fn selu_with(&self, alpha: f64, gamma: f64) -> Tensor {
        self.ge(0).where_(self, self.exp().sub(1).mul(alpha)).mul(gamma)
    }
    /// GELU, tanh approximation (tinygrad `gelu()`, `approximate="tanh"`).
    pub fn gelu(&self) -> Tensor {
        let inner = self.add(self.pow(3).mul(0.044715)).mul((2.0 / std::f64::consts::PI).sqrt());
        self.mul(0.5).mul(inner.tanh().add(1))
    }
    /// GELU, exact: `x/2 * (1 + erf(x/sqrt 2))` (tinygrad `gelu(approximate="none")`).
    pub fn gelu_erf(&self) -> Tensor {
        self.mul(0.5).mul(self.div(std::f64::consts::SQRT_2).erf().add(1.0))
    }
    /// `x * sigmoid(1.702 x)` (tinygrad `quick_gelu`).
    pub fn quick_gelu(&self) -> Tensor {
        self.mul(self.mul(1.702).sigmoid())
    }
    /// `x * sigmoid(x)` (tinygrad `swish`).
    pub fn swish(&self) -> Tensor {
        self.mul(self.sigmoid())
    }
    /// `x * sigmoid(x)`, the same as [`Tensor::swish`] (tinygrad `silu`).
    pub fn silu(&self) -> Tensor {
        self.swish()
    }
    /// Hardsigmoid with torch's constants (alpha 1/6, beta 0.5; tinygrad `hardsigmoid()`).
    pub fn hardsigmoid(&self) -> Tensor {
        self.hardsigmoid_with(1.0 / 6.0, 0.5)
    }
    /// `clip(alpha x + beta, 0, 1)` as a difference of relus (tinygrad `hardsigmoid(alpha, beta)`).
    pub fn hardsigmoid_with(&self, alpha: f64, beta: f64) -> Tensor {
        let y = self.mul(alpha).add(beta);
        y.relu().sub(y.sub(1).relu())
    }
    /// `x * relu6(x + 3) / 6` (tinygrad `hardswish`).
    pub fn hardswish(&self) -> Tensor {
        self.mul(self.add(3).relu6()).mul(1.0 / 6.0)
    }
    /// `self` clipped to `[min_val, max_val]` (tinygrad `hardtanh`, defaults -1 and 1).
    pub fn hardtanh(&self, min_val: impl IntoOperand, max_val: impl IntoOperand) -> Tensor {
        self.clamp(min_val, max_val)
    }
    /// `x * tanh(softplus(x))` (tinygrad `mish`).
    pub fn mish(&self) -> Tensor {
        self.mul(self.softplus(1.0).tanh())
    }
    /// `ln(1 + e^(beta x)) / beta`, computed stably as a `logaddexp` (tinygrad `softplus`, default beta 1).
    pub fn softplus(&self, beta: f64) -> Tensor {
        self.mul(beta).logaddexp(0.0).mul(1.0 / beta)
    }
    /// `x / (1 + |x|)` (tinygrad `softsign`).
    pub fn softsign(&self) -> Tensor {
        self.div(self.abs().add(1))
    }
    /// `ln(sigmoid(x)) = -softplus(-x)` (tinygrad `logsigmoid`).
    pub fn logsigmoid(&self) -> Tensor {
        self.neg().softplus(1.0).neg()
    }

    // binary and ternary math

    /// Remainder with the sign of the divisor (Python `%`; tinygrad `mod`): FLOORMOD for ints,
    /// `a - floor(a/b) * b` for floats.
    pub fn mod_(&self, y: impl IntoOperand) -> Tensor {
        let (a, b) = self.broadcasted(y, "mod");
        if a.dtype().is_int() {
            return Tensor::from_uop(a.uop().alu(Ops::FLOORMOD, &[&b.uop()]));
        }
        a.sub(a.div_floor(&b).mul(&b))
    }
    /// Remainder with the sign of the dividend (C `fmod`; tinygrad `fmod`): CMOD for ints,
    /// `a - trunc(a/b) * b` for floats.
    pub fn fmod(&self, y: impl IntoOperand) -> Tensor {
        let (a, b) = self.broadcasted(y, "fmod");
        if a.dtype().is_int() {
            return Tensor::from_uop(a.uop().alu(Ops::CMOD, &[&b.uop()]));
        }
        a.sub(a.div_trunc(&b).mul(&b))
    }
    /// `self ** e`, broadcast (tinygrad `pow`). Int tensors stay int; a negative base gives a real result
    /// for an integer exponent (odd negates) and NaN otherwise; `x ** 0` is 1. For tinygrad's
    /// `pow(x, reverse=True)` (`2.0 ** t`) call it on the constant: `Tensor::from(2.0f32).pow(&t)` or
    /// `2.0.into_operand().pow(&t)`.
    ///
    /// # Panics
    /// If the result would be int and a constant operand is negative or fractional (tinygrad: "base needs to
    /// be float").
    pub fn pow(&self, e: impl IntoOperand) -> Tensor {
        let e = e.into_operand();
        let (b, x) = self.broadcasted(&e, "pow");
        let bad_const =
            |t: &Tensor| is_weak_const(t) && t.uop().const_value().is_some_and(|v| v.as_f64() < 0.0 || v.as_f64().fract() != 0.0);
        assert!(
            b.dtype().is_float() || !(bad_const(self) || bad_const(&e)),
            "pow: base needs to be float for a negative or fractional constant, got {} ** {}",
            self.dtype(),
            e.dtype()
        );
        Tensor::from_uop(b.uop().alu(Ops::POW, &[&x.uop()]))
    }
    /// `|self|` with the sign of `other`, where `-0.0` counts as negative (tinygrad `copysign`).
    pub fn copysign(&self, other: impl IntoOperand) -> Tensor {
        let (a, b) = self.broadcasted(other, "copysign");
        let mag = a.abs();
        b.lt(0).bitwise_or(b.reciprocal().lt(0)).where_(mag.neg(), &mag)
    }
    /// `ln(e^self + e^other)`, computed stably (tinygrad `logaddexp`).
    pub fn logaddexp(&self, other: impl IntoOperand) -> Tensor {
        let (a, b) = self.broadcasted(other, "logaddexp");
        let m = a.maximum(&b);
        a.sub(&m).exp().add(b.sub(&m).exp()).log().add(&m)
    }
    /// `self & y` for ints and bools (tinygrad `bitwise_and`).
    ///
    /// # Panics
    /// If an operand is float.
    pub fn bitwise_and(&self, y: impl IntoOperand) -> Tensor {
        self.int_binop(Ops::AND, y, "bitwise_and")
    }
    /// `self | y` for ints and bools (tinygrad `bitwise_or`).
    ///
    /// # Panics
    /// If an operand is float.
    pub fn bitwise_or(&self, y: impl IntoOperand) -> Tensor {
        self.int_binop(Ops::OR, y, "bitwise_or")
    }
    /// `self ^ y` for ints and bools (tinygrad `bitwise_xor`).
    ///
    /// # Panics
    /// If an operand is float.
    pub fn bitwise_xor(&self, y: impl IntoOperand) -> Tensor {
        self.int_binop(Ops::XOR, y, "bitwise_xor")
    }
    /// `self << y` for ints (tinygrad `lshift`).
    ///
    /// # Panics
    /// If an operand is float.
    pub fn lshift(&self, y: impl IntoOperand) -> Tensor {
        self.int_binop(Ops::SHL, y, "lshift")
    }
    /// `self >> y` for ints, arithmetic for signed dtypes (tinygrad `rshift`).
    ///
    /// # Panics
    /// If an operand is float.
    pub fn rshift(&self, y: impl IntoOperand) -> Tensor {
        self.int_binop(Ops::SHR, y, "rshift")
    }
    /// `self + (end - self) * weight` (tinygrad `lerp`). For uint8 tensors with a tensor weight, tinygrad's
    /// fixed-point form (7-bit weight) is used, so results match it exactly.
    pub fn lerp(&self, end: &Tensor, weight: impl IntoOperand) -> Tensor {
        let w = weight.into_operand();
        if self.dtype() == dtypes::UINT8 && !is_weak_const(&w) {
            let w_i = w.mul(128).add(0.5).cast(dtypes::INT16);
            let step = end.sub(self).cast(dtypes::INT8).mul(w_i).add(64).cast(dtypes::UINT16).rshift(7);
            return self.add(step).cast(dtypes::UINT8);
        }
        self.add(end.sub(self).mul(w))
    }
    /// `self` clipped to `[min_, max_]` (tinygrad `clamp`); bounds are constants or tensors and promote like
    /// any binary op.
    pub fn clamp(&self, min_: impl IntoOperand, max_: impl IntoOperand) -> Tensor {
        self.clamp_min(min_).clamp_max(max_)
    }
    /// `self` with values below `min_` raised to it (tinygrad `clamp(min_=..)`).
    pub fn clamp_min(&self, min_: impl IntoOperand) -> Tensor {
        let m = min_.into_operand();
        self.lt(&m).where_(&m, self)
    }
    /// `self` with values above `max_` lowered to it (tinygrad `clamp(max_=..)`).
    pub fn clamp_max(&self, max_: impl IntoOperand) -> Tensor {
        let m = max_.into_operand();
        self.gt(&m).where_(&m, self)
    }
    /// Alias of [`Tensor::clamp`] (tinygrad `clip`).
    pub fn clip(&self, min_: impl IntoOperand, max_: impl IntoOperand) -> Tensor {
        self.clamp(min_, max_)
    }
    /// `value` where `mask` is true, else `self`, broadcast (tinygrad `masked_fill`).
    pub fn masked_fill(&self, mask: &Tensor, value: impl IntoOperand) -> Tensor {
        mask.where_(value, self)
    }
    /// Whether `|self - other| <= atol + rtol * |other|` elementwise, with infinities close only to
    /// themselves and NaNs close to each other only if `equal_nan` (bool; tinygrad `isclose`, defaults
    /// `rtol=1e-5, atol=1e-8, equal_nan=false`).
    pub fn isclose(&self, other: impl IntoOperand, rtol: f64, atol: f64, equal_nan: bool) -> Tensor {
        let o = other.into_operand();
        let tol = o.abs().mul(rtol).add(atol);
        let finite = self.isfinite().bitwise_and(o.isfinite()).bitwise_and(self.sub(&o).abs().le(tol));
        let infinite = self.isinf().bitwise_or(o.isinf()).bitwise_and(self.eq(&o));
        let nans = self.isnan().bitwise_and(o.isnan()).bitwise_and(equal_nan);
        finite.bitwise_or(infinite).bitwise_or(nans)
    }
    /// Whether all elements are [`isclose`](Tensor::isclose) (a 0-d bool tensor; tinygrad `allclose`).
    pub fn allclose(&self, other: impl IntoOperand, rtol: f64, atol: f64, equal_nan: bool) -> Tensor {
        self.isclose(other, rtol, atol, equal_nan).min(..)
    }

    // dtypes

    /// The same bits read as `dtype` (tinygrad `bitcast`); no gradient flows through.
    ///
    /// # Panics
    /// If either dtype is weak, or the item sizes differ (tinygrad rescales the last axis then; not supported).
    pub fn bitcast(&self, dtype: DType) -> Tensor {
        let dt = self.dtype();
        assert!(!dt.is_weak() && !dtype.is_weak(), "bitcast: needs concrete dtypes, got {dt} -> {dtype}");
        assert_eq!(dt.itemsize(), dtype.itemsize(), "bitcast: {dt} -> {dtype} changes the item size");
        if dt == dtype {
            return self.clone();
        }
        Tensor::from_uop(self.uop().bitcast(dtype))
    }
}

macro_rules! tensor_int_binops {
    ($($tr:ident $m:ident $f:ident),*) => {$(
        impl<T: IntoOperand> std::ops::$tr<T> for &Tensor { type Output = Tensor; fn $m(self, y: T) -> Tensor { Tensor::$f(self, y) } }
        impl<T: IntoOperand> std::ops::$tr<T> for Tensor { type Output = Tensor; fn $m(self, y: T) -> Tensor { Tensor::$f(&self, y) } }
    )*};
}
tensor_int_binops!(Rem rem mod_, BitAnd bitand bitwise_and, BitOr bitor bitwise_or, BitXor bitxor bitwise_xor, Shl shl lshift, Shr shr rshift);
impl std::ops::Not for &Tensor {
    type Output = Tensor;
    fn not(self) -> Tensor {
        self.bitwise_not()
    }
}
impl std::ops::Not for Tensor {
    type Output = Tensor;
    fn not(self) -> Tensor {
        self.bitwise_not()
    }
}
