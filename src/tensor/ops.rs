//! Tensor ops: elementwise math with broadcasting and dtype promotion, movement, reductions and casts, each
//! building UOps (tinygrad `mixin/elementwise.py`, `mixin/movement.py`, `mixin/reduce.py`).

use super::Tensor;
use crate::dtype::{dtypes, least_upper_dtype, strong_dtype, sum_acc_dtype, ConstValue, DType};
use crate::uop::{reshape_groups, Arg, Ops, Sint, UOp};

/// Dims that may be negative (`-1`: infer in `reshape`, keep in `expand`): ints, arrays, slices and `Vec`s.
pub trait IntoDims {
    /// The dims as signed ints.
    fn into_dims(self) -> Vec<i64>;
}
macro_rules! into_dims {
    ($($t:ty),*) => {$(
        impl<const N: usize> IntoDims for [$t; N] { fn into_dims(self) -> Vec<i64> { self.iter().map(|&x| x as i64).collect() } }
        impl IntoDims for &[$t] { fn into_dims(self) -> Vec<i64> { self.iter().map(|&x| x as i64).collect() } }
        impl IntoDims for Vec<$t> { fn into_dims(self) -> Vec<i64> { self.iter().map(|&x| x as i64).collect() } }
        impl IntoDims for &Vec<$t> { fn into_dims(self) -> Vec<i64> { self.iter().map(|&x| x as i64).collect() } }
        impl IntoDims for $t { fn into_dims(self) -> Vec<i64> { vec![self as i64] } }
    )*};
}
into_dims!(usize, i64, i32, isize);
impl IntoDims for () {
    fn into_dims(self) -> Vec<i64> {
        vec![]
    }
}

/// Axes to reduce over: an int or a list (negative counts from the end), or `..` for all axes.
pub trait IntoAxes {
    /// The axes, in `0..ndim`, sorted and deduplicated.
    ///
    /// # Panics
    /// If an axis is out of range.
    fn into_axes(self, ndim: usize) -> Vec<usize>;
}
impl<T: IntoDims> IntoAxes for T {
    fn into_axes(self, ndim: usize) -> Vec<usize> {
        let mut axes: Vec<usize> = self.into_dims().into_iter().map(|a| norm_axis(a, ndim, "axis")).collect();
        axes.sort();
        axes.dedup();
        axes
    }
}
impl IntoAxes for std::ops::RangeFull {
    fn into_axes(self, ndim: usize) -> Vec<usize> {
        (0..ndim).collect()
    }
}

pub(super) fn norm_axis(a: i64, ndim: usize, op: &str) -> usize {
    let n = ndim.max(1) as i64;
    assert!((-n..n).contains(&a), "{op}: axis {a} out of range for {ndim} dims");
    a.rem_euclid(n) as usize
}

/// Right-hand sides of binary ops: tensors, and Rust numbers and bools, which are weakly typed constants
/// (as Python numbers in tinygrad: `int_tensor * 2` stays int, `int_tensor * 2.5` is float).
pub trait IntoOperand {
    /// The operand as a tensor (a weak dtype for constants), shaped like nothing in particular.
    fn into_operand(self) -> Tensor;
}
impl IntoOperand for Tensor {
    fn into_operand(self) -> Tensor {
        self
    }
}
impl IntoOperand for &Tensor {
    fn into_operand(self) -> Tensor {
        self.clone()
    }
}
macro_rules! scalar_operand {
    ($($t:ty => $dt:expr),*) => {$( impl IntoOperand for $t {
        fn into_operand(self) -> Tensor { Tensor::from_uop(UOp::const_($dt, ConstValue::from(self))) }
    })*};
}
scalar_operand!(f64 => dtypes::WEAKFLOAT, i64 => dtypes::WEAKINT, i32 => dtypes::WEAKINT, bool => dtypes::BOOL);
impl IntoOperand for f32 {
    fn into_operand(self) -> Tensor {
        (self as f64).into_operand()
    }
}

/// The symbolic args of movement op `op` with concrete `arg` on a source of symbolic shape `src`, where a symbolic
/// dim passes through: EXPAND and SHRINK keep a dim they leave whole; RESHAPE keeps a dim that stays alone in its
/// group ([`reshape_groups`]), moves one beside new 1s, and multiplies out one merged with others. `None` when
/// no symbol survives. Any choice is exact at the bound values (the schedule falls back to them where rangeify
/// could not tell a broadcast, `schedule::sym_indexable`); whether it holds at other values is the caller's to keep.
fn infer_sym_args(op: Ops, src: &[Sint], arg: &[i64]) -> Option<Vec<Sint>> {
    let int = |x: i64| Sint::Int(x as usize);
    let out: Vec<Sint> = match op {
        Ops::EXPAND => src.iter().zip(arg).map(|(s, &a)| if s.value() as i64 == a { s.clone() } else { int(a) }).collect(),
        Ops::SHRINK => src
            .iter()
            .zip(arg.chunks(2))
            .flat_map(|(s, c)| if c[0] == 0 && c[1] == s.value() as i64 { [Sint::Int(0), s.clone()] } else { [int(c[0]), int(c[1])] })
            .collect(),
        Ops::RESHAPE => {
            let (dst, vals): (Vec<usize>, Vec<usize>) = (arg.iter().map(|&d| d as usize).collect(), src.iter().map(Sint::value).collect());
            let mut out: Vec<Sint> = dst.iter().map(|&d| Sint::Int(d)).collect();
            for (a, b) in reshape_groups(&dst, &vals) {
                let syms: Vec<&Sint> = src[b.clone()].iter().filter(|d| d.int().is_none()).collect();
                if syms.is_empty() {
                    continue;
                }
                // the one dim (or the one not 1) takes the group's product; a symbol at 1 takes the first of 1s
                match (&a.clone().filter(|&i| dst[i] != 1).collect::<Vec<_>>()[..], &syms[..]) {
                    (&[i], _) => out[i] = Sint::product(&src[b]),
                    ([], [s]) if !a.is_empty() => out[a.start] = (*s).clone(),
                    _ => {}
                }
            }
            out
        }
        _ => return None,
    };
    out.iter().any(|d| d.int().is_none()).then_some(out)
}

/// The broadcast of two shapes (numpy rules), or `None`.
fn broadcast_shape(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let n = a.len().max(b.len());
    let pad = |s: &[usize]| [vec![1; n - s.len()], s.to_vec()].concat();
    pad(a)
        .iter()
        .zip(pad(b))
        .map(|(&x, y)| {
            if x == y || y == 1 {
                Some(x)
            } else if x == 1 {
                Some(y)
            } else {
                None
            }
        })
        .collect()
}

impl Tensor {
    fn unary_op(&self, op: Ops) -> Tensor {
        let u = self.uop();
        Tensor::from_uop(UOp::new(op, u.dtype, [u], Arg::None))
    }
    /// `self` and `y` broadcast to one shape and promoted to one dtype (tinygrad `_broadcasted`).
    ///
    /// # Panics
    /// If the shapes don't broadcast; the message names `op` and both shapes.
    pub fn broadcasted(&self, y: impl IntoOperand, op: &str) -> (Tensor, Tensor) {
        let y = y.into_operand();
        let (sx, sy) = (self.shape(), y.shape());
        let shape = broadcast_shape(&sx, &sy).unwrap_or_else(|| panic!("{op}: shapes {sx:?} and {sy:?} can't be broadcast"));
        let dt = strong_dtype(least_upper_dtype(&[self.dtype(), y.dtype()]));
        let fit = |t: &Tensor| {
            let t = t.cast(dt);
            let s = t.shape();
            t.reshape([vec![1; shape.len() - s.len()], s].concat()).expand(shape.clone())
        };
        if !self.uop().is_symbolic() && !y.uop().is_symbolic() {
            return (fit(self), fit(&y));
        }
        // a dim either side has symbolic is that symbol on both
        let pad = |t: &Tensor| [vec![Sint::Int(1); shape.len() - t.ndim()], t.sym_shape()].concat();
        let (px, py) = (pad(self), pad(&y));
        let target: Vec<Sint> = (0..shape.len())
            .map(|i| {
                [&px[i], &py[i]].into_iter().find(|d| d.value() == shape[i] && d.int().is_none()).cloned().unwrap_or(Sint::Int(shape[i]))
            })
            .collect();
        let fit = |t: &Tensor, p: Vec<Sint>| t.cast(dt).reshape_sym(&p).expand_sym(&target);
        (fit(self, px), fit(&y, py))
    }
    fn binop(&self, op: Ops, y: impl IntoOperand, name: &str) -> Tensor {
        let (a, b) = self.broadcasted(y, name);
        let (ua, ub) = (a.uop(), b.uop());
        Tensor::from_uop(ua.alu(op, &[&ub]))
    }

    /// `self + y`.
    pub fn add(&self, y: impl IntoOperand) -> Tensor {
        self.binop(Ops::ADD, y, "add")
    }
    /// `self - y`.
    pub fn sub(&self, y: impl IntoOperand) -> Tensor {
        let (a, b) = self.broadcasted(y, "sub");
        a.add(b.neg())
    }
    /// `self * y`.
    pub fn mul(&self, y: impl IntoOperand) -> Tensor {
        self.binop(Ops::MUL, y, "mul")
    }
    /// True division `self / y`; ints divide as floats (tinygrad `div`).
    pub fn div(&self, y: impl IntoOperand) -> Tensor {
        let (a, b) = self.broadcasted(y, "div");
        let (a, b) = if a.dtype().is_float() { (a, b) } else { (a.cast(dtypes::DEFAULT_FLOAT), b.cast(dtypes::DEFAULT_FLOAT)) };
        a.mul(b.reciprocal())
    }
    /// Division rounded toward zero: C division for ints (CDIV), `trunc(x/y)` for floats (tinygrad
    /// `div(..., rounding_mode="trunc")`).
    pub fn div_trunc(&self, y: impl IntoOperand) -> Tensor {
        let (a, b) = self.broadcasted(y, "div");
        if a.dtype().is_int() {
            let (ua, ub) = (a.uop(), b.uop());
            return Tensor::from_uop(ua.alu(Ops::CDIV, &[&ub]));
        }
        a.div(b).trunc()
    }
    /// Division rounded down: FLOORDIV for ints, `floor(x/y)` for floats (tinygrad `//`).
    pub fn div_floor(&self, y: impl IntoOperand) -> Tensor {
        let (a, b) = self.broadcasted(y, "div");
        if a.dtype().is_int() {
            let (ua, ub) = (a.uop(), b.uop());
            return Tensor::from_uop(ua.alu(Ops::FLOORDIV, &[&ub]));
        }
        a.div(b).floor()
    }
    /// Rounds toward zero (ints unchanged).
    pub fn trunc(&self) -> Tensor {
        if !self.dtype().is_float() {
            return self.clone();
        }
        self.unary_op(Ops::TRUNC)
    }
    /// `max(self, y)` elementwise.
    pub fn maximum(&self, y: impl IntoOperand) -> Tensor {
        self.binop(Ops::MAX, y, "maximum")
    }
    /// `min(self, y)` elementwise.
    pub fn minimum(&self, y: impl IntoOperand) -> Tensor {
        let (a, b) = self.broadcasted(y, "minimum");
        a.flip_order().maximum(b.flip_order()).flip_order()
    }
    /// An order-reversing bijection: `-x` for floats, `!x` (bitwise) for ints and bools, which is exact for
    /// unsigned ints and `INT_MIN` too (tinygrad's `_inverse`).
    fn flip_order(&self) -> Tensor {
        if self.dtype().is_float() {
            self.neg()
        } else {
            self.bitwise_not()
        }
    }
    /// `self < y` (bool).
    pub fn lt(&self, y: impl IntoOperand) -> Tensor {
        self.binop(Ops::CMPLT, y, "lt")
    }
    /// `self > y` (bool).
    pub fn gt(&self, y: impl IntoOperand) -> Tensor {
        let (a, b) = self.broadcasted(y, "gt");
        b.lt(a)
    }
    /// `self != y` (bool).
    pub fn ne(&self, y: impl IntoOperand) -> Tensor {
        self.binop(Ops::CMPNE, y, "ne")
    }
    /// `self == y` (bool).
    pub fn eq(&self, y: impl IntoOperand) -> Tensor {
        self.binop(Ops::CMPEQ, y, "eq")
    }
    /// `self <= y` (bool).
    pub fn le(&self, y: impl IntoOperand) -> Tensor {
        self.gt(y).logical_not()
    }
    /// `self >= y` (bool).
    pub fn ge(&self, y: impl IntoOperand) -> Tensor {
        self.lt(y).logical_not()
    }
    /// Bool negation.
    pub fn logical_not(&self) -> Tensor {
        self.cast(dtypes::BOOL).ne(true)
    }
    /// `self ? x : y` with `self` as the condition (tinygrad `where`), broadcast together.
    pub fn where_(&self, x: impl IntoOperand, y: impl IntoOperand) -> Tensor {
        let (x, y) = x.into_operand().broadcasted(y, "where");
        let (c, x) = self.cast(dtypes::BOOL).broadcasted(&x, "where");
        let (c, y) = (c.cast(dtypes::BOOL), y.expand(x.shape()));
        let (cu, xu, yu) = (c.uop(), x.uop(), y.uop());
        Tensor::from_uop(cu.alu(Ops::WHERE, &[&xu, &yu]))
    }
    /// `acc + Σ_k u8(byte k of self) · i8(byte k of b)`, elementwise on int32 tensors broadcast together: four 8-bit
    /// products a word, `self`'s bytes unsigned and `b`'s signed (CUDA `__dp4a`, x86 VNNI `vpdpbusd`; no tinygrad
    /// op). Wraps on overflow, as int32 sums do. Quantized matrix products use it: 4-bit weights times int8
    /// activations, four a word. No gradient.
    ///
    /// # Panics
    /// If `self`, `b` or `acc` is not int32, or the shapes do not broadcast.
    pub fn dp4a(&self, b: &Tensor, acc: impl IntoOperand) -> Tensor {
        self.dot_bytes(Ops::DP4A, b, acc)
    }
    /// [`Tensor::dp4a`] with `self`'s bytes signed too, and `b`'s bytes read as at least -127 (symmetric int8, as
    /// quantized activations are): `acc + Σ_k i8(byte k of self) · max(i8(byte k of b), -127)` (CUDA's signed
    /// `__dp4a`; AVX2 takes it as llama.cpp's `mul_sum_i8_pairs`, `vpsignb` then `vpmaddubsw`, exact under that
    /// bound). Q8_0 weights times int8 activations. No gradient.
    ///
    /// # Panics
    /// If `self`, `b` or `acc` is not int32, or the shapes do not broadcast.
    pub fn dp4a_signed(&self, b: &Tensor, acc: impl IntoOperand) -> Tensor {
        self.dot_bytes(Ops::DP4AS, b, acc)
    }
    fn dot_bytes(&self, op: Ops, b: &Tensor, acc: impl IntoOperand) -> Tensor {
        let acc = acc.into_operand();
        let acc = if acc.dtype().is_weak() { acc.cast(dtypes::INT32) } else { acc };
        let name = if op == Ops::DP4AS { "dp4a_signed" } else { "dp4a" };
        let dts = [self.dtype(), b.dtype(), acc.dtype()];
        assert!(dts.iter().all(|&d| d == dtypes::INT32), "{name}: needs int32 words, got {} . {} + {}", dts[0], dts[1], dts[2]);
        let (a, b) = self.broadcasted(b, name);
        let (a, acc) = a.broadcasted(&acc, name);
        let b = b.expand(a.shape());
        Tensor::from_uop(a.uop().alu(op, &[&b.uop(), &acc.uop()]))
    }
    /// `-self` (logical not for bools).
    pub fn neg(&self) -> Tensor {
        if self.dtype().is_bool() {
            self.logical_not()
        } else {
            self.mul(-1)
        }
    }
    /// `1/self` (floats; ints become float first).
    pub fn reciprocal(&self) -> Tensor {
        self.float_if_int().unary_op(Ops::RECIPROCAL)
    }
    fn float_if_int(&self) -> Tensor {
        if self.dtype().is_float() {
            self.clone()
        } else {
            self.cast(dtypes::DEFAULT_FLOAT)
        }
    }
    /// `sqrt(self)`.
    pub fn sqrt(&self) -> Tensor {
        self.float_if_int().unary_op(Ops::SQRT)
    }
    /// `1/sqrt(self)`.
    pub fn rsqrt(&self) -> Tensor {
        self.sqrt().reciprocal()
    }
    /// `2^self`.
    pub fn exp2(&self) -> Tensor {
        self.float_if_int().unary_op(Ops::EXP2)
    }
    /// `log2(self)`.
    pub fn log2(&self) -> Tensor {
        self.float_if_int().unary_op(Ops::LOG2)
    }
    /// `e^self`, as `2^(self/ln 2)`.
    pub fn exp(&self) -> Tensor {
        self.float_if_int().mul(std::f64::consts::LOG2_E).exp2()
    }
    /// `ln(self)`, as `log2(self)*ln 2`.
    pub fn log(&self) -> Tensor {
        self.log2().mul(std::f64::consts::LN_2)
    }
    /// `sin(self)`.
    pub fn sin(&self) -> Tensor {
        self.float_if_int().unary_op(Ops::SIN)
    }
    /// `1/(1+e^-self)`.
    pub fn sigmoid(&self) -> Tensor {
        self.neg().exp().add(1.0).reciprocal()
    }
    /// `self ** e` as the POW op, elementwise and broadcast (no special cases; see `pow` for tinygrad's).
    pub fn pow_tensor(&self, e: impl IntoOperand) -> Tensor {
        let (b, e) = self.float_if_int().broadcasted(e, "pow");
        let (bu, eu) = (b.uop(), e.uop());
        Tensor::from_uop(bu.alu(Ops::POW, &[&eu]))
    }
    /// `self*self`.
    pub fn square(&self) -> Tensor {
        self.mul(self)
    }
    /// Converts elements to `dtype` (tinygrad `cast`).
    pub fn cast(&self, dtype: DType) -> Tensor {
        let u = self.uop();
        if u.dtype == dtype {
            return self.clone();
        }
        if u.op == Ops::CONST {
            return Tensor::from_uop(UOp::const_(dtype, u.const_value().unwrap()));
        }
        Tensor::from_uop(u.cast(dtype))
    }

    /// Movement op `op` with concrete args. On a symbolic tensor, dims that carry a symbolic dim through unchanged
    /// (or merge it with others) keep it ([`infer_sym_args`]); the values are always the bound ones.
    fn mop(&self, op: Ops, arg: Vec<i64>) -> Tensor {
        let u = self.uop();
        let arg = match u.is_symbolic() {
            true => {
                infer_sym_args(op, &u.sym_shape().expect("a tensor"), &arg).map_or_else(|| Arg::Ints(arg.into()), |a| Arg::Sints(a.into()))
            }
            false => Arg::Ints(arg.into()),
        };
        Tensor::from_uop(UOp::new(op, u.dtype, [u], arg))
    }
    /// Movement op `op` with args that may be symbolic.
    fn mop_sym(&self, op: Ops, arg: Vec<Sint>) -> Tensor {
        if arg.iter().all(|d| d.int().is_some()) {
            return self.mop(op, arg.iter().map(|d| d.value() as i64).collect());
        }
        let u = self.uop();
        Tensor::from_uop(UOp::new(op, u.dtype, [u], Arg::Sints(arg.into())))
    }
    /// The dims, symbolic ones as expressions over their bound variables (tinygrad `shape` with `sint`s).
    pub fn sym_shape(&self) -> Vec<Sint> {
        self.uop().sym_shape().expect("tensor has a shape")
    }
    /// The same elements in `shape`, whose dims may be symbolic (tinygrad `reshape` with `Variable`s bound to
    /// values): a graph built on them schedules with the variables, so it runs for any of their values.
    ///
    /// # Panics
    /// If the element counts (at the bound values) differ.
    pub fn reshape_sym(&self, shape: &[Sint]) -> Tensor {
        let (old, numel) = (self.sym_shape(), self.numel());
        let n: usize = shape.iter().map(Sint::value).product();
        assert_eq!(n, numel, "reshape: shape {old:?} ({numel} elements) can't become {shape:?} ({n} elements)");
        if old == shape {
            return self.clone();
        }
        self.mop_sym(Ops::RESHAPE, shape.to_vec())
    }
    /// Size-1 dims repeated to `shape`, whose dims may be symbolic (as [`Tensor::reshape_sym`]).
    ///
    /// # Panics
    /// If the ranks differ or a dim that is not 1 would change value.
    pub fn expand_sym(&self, shape: &[Sint]) -> Tensor {
        let old = self.sym_shape();
        assert!(
            old.len() == shape.len() && old.iter().zip(shape).all(|(o, n)| o.value() == 1 || o.value() == n.value()),
            "expand: shape {old:?} can't expand to {shape:?}"
        );
        if old == shape {
            return self.clone();
        }
        self.mop_sym(Ops::EXPAND, shape.to_vec())
    }
    /// The same elements in `shape`; one dim may be `-1` (inferred).
    ///
    /// # Panics
    /// If the element counts differ or more than one dim is `-1`.
    pub fn reshape(&self, shape: impl IntoDims) -> Tensor {
        let (old, mut new) = (self.shape(), shape.into_dims());
        let numel: usize = old.iter().product();
        let known: i64 = new.iter().filter(|&&d| d != -1).product();
        if let Some(i) = new.iter().position(|&d| d == -1) {
            assert!(new.iter().filter(|&&d| d == -1).count() == 1 && known > 0, "reshape: can't infer {new:?} from {old:?}");
            new[i] = numel as i64 / known;
        }
        assert!(
            new.iter().all(|&d| d >= 0) && new.iter().product::<i64>() == numel as i64,
            "reshape: shape {old:?} ({numel} elements) can't become {new:?}"
        );
        if new.iter().map(|&d| d as usize).eq(old.iter().copied()) {
            return self.clone();
        }
        self.mop(Ops::RESHAPE, new)
    }
    /// Dims reordered: dim `i` of the result is dim `order[i]` of `self`.
    ///
    /// # Panics
    /// If `order` is not a permutation of the dims.
    pub fn permute(&self, order: impl IntoDims) -> Tensor {
        let n = self.ndim();
        let order: Vec<i64> = order.into_dims().into_iter().map(|a| norm_axis(a, n, "permute") as i64).collect();
        let mut sorted = order.clone();
        sorted.sort();
        assert!(sorted == (0..n as i64).collect::<Vec<_>>(), "permute: {order:?} is not a permutation of {n} dims");
        if order.iter().enumerate().all(|(i, &o)| i as i64 == o) {
            return self.clone();
        }
        self.mop(Ops::PERMUTE, order)
    }
    /// Size-1 dims repeated to `shape` (`-1` keeps a dim); new leading dims are added as needed.
    ///
    /// # Panics
    /// If a dim that is not 1 would change.
    pub fn expand(&self, shape: impl IntoDims) -> Tensor {
        let new = shape.into_dims();
        let old = self.shape();
        assert!(new.len() >= old.len(), "expand: shape {old:?} can't expand to {new:?}");
        let base = if new.len() > old.len() { self.reshape([vec![1; new.len() - old.len()], old.clone()].concat()) } else { self.clone() };
        let old = base.shape();
        let new: Vec<i64> = new.iter().zip(&old).map(|(&n, &o)| if n == -1 { o as i64 } else { n }).collect();
        assert!(new.iter().zip(&old).all(|(&n, &o)| n as usize == o || o == 1), "expand: shape {old:?} can't expand to {new:?}");
        if new.iter().zip(&old).all(|(&n, &o)| n as usize == o) {
            return base;
        }
        base.mop(Ops::EXPAND, new)
    }
    /// Zero padding `(before, after)` per dim; negative amounts crop (tinygrad `pad` with constant 0).
    ///
    /// # Panics
    /// If `pads` has the wrong length or a crop exceeds the dim.
    pub fn pad(&self, pads: &[(i64, i64)]) -> Tensor {
        let shape = self.shape();
        assert_eq!(pads.len(), shape.len(), "pad: {} pads for shape {shape:?}", pads.len());
        let crop: Vec<(usize, usize)> =
            pads.iter().zip(&shape).map(|(&(b, a), &s)| ((-b).max(0) as usize, (s as i64 - (-a).max(0)) as usize)).collect();
        let t = self.shrink(&crop);
        if pads.iter().all(|&(b, a)| b <= 0 && a <= 0) {
            return t;
        }
        t.mop(Ops::PAD, pads.iter().flat_map(|&(b, a)| [b.max(0), a.max(0)]).collect())
    }
    /// Padding with the constant `value` (tinygrad `pad(..., value=v)`).
    pub fn pad_value(&self, pads: &[(i64, i64)], value: f64) -> Tensor {
        if value == 0.0 {
            return self.pad(pads);
        }
        let mask = Tensor::full_dtype(self.shape(), true, dtypes::BOOL).pad(pads);
        mask.where_(self.pad(pads), Tensor::full_dtype((), value, self.dtype()))
    }
    /// The sub-block `[start, end)` of each dim.
    ///
    /// # Panics
    /// If a bound is out of the dim.
    pub fn shrink(&self, bounds: &[(usize, usize)]) -> Tensor {
        let shape = self.shape();
        assert!(
            bounds.len() == shape.len() && bounds.iter().zip(&shape).all(|(&(s, e), &d)| s <= e && e <= d),
            "shrink: bounds {bounds:?} don't fit shape {shape:?}"
        );
        if bounds.iter().zip(&shape).all(|(&(s, e), &d)| s == 0 && e == d) {
            return self.clone();
        }
        self.mop(Ops::SHRINK, bounds.iter().flat_map(|&(s, e)| [s as i64, e as i64]).collect())
    }
    /// The elements in `[begin, end)` along each dim, with bounds that may be symbolic (tinygrad `shrink` with bound
    /// `Variable`s): `x.shrink_sym(&[(0.into(), n)])` of a buffer sized for `n`'s max is the input a TinyJit replays
    /// for every value of `n`.
    ///
    /// # Panics
    /// If `bounds` has the wrong length or a bound (at the bound values) is outside its dim.
    pub fn shrink_sym(&self, bounds: &[(Sint, Sint)]) -> Tensor {
        let shape = self.sym_shape();
        assert!(
            bounds.len() == shape.len() && bounds.iter().zip(&shape).all(|((b, e), d)| b.value() <= e.value() && e.value() <= d.value()),
            "shrink: bounds {bounds:?} don't fit shape {shape:?}"
        );
        if bounds.iter().zip(&shape).all(|((b, e), d)| *b == Sint::Int(0) && e == d) {
            return self.clone();
        }
        self.mop_sym(Ops::SHRINK, bounds.iter().flat_map(|(b, e)| [b.clone(), e.clone()]).collect())
    }
    /// The elements of `axes` in reverse order.
    pub fn flip(&self, axes: impl IntoAxes) -> Tensor {
        let axes = axes.into_axes(self.ndim());
        if axes.is_empty() {
            return self.clone();
        }
        self.mop(Ops::FLIP, (0..self.ndim()).map(|i| axes.contains(&i) as i64).collect())
    }
    /// Dims `a` and `b` swapped.
    pub fn transpose(&self, a: i64, b: i64) -> Tensor {
        let n = self.ndim();
        let (a, b) = (norm_axis(a, n, "transpose"), norm_axis(b, n, "transpose"));
        let mut order: Vec<usize> = (0..n).collect();
        order.swap(a, b);
        self.permute(order)
    }
    /// All dims from `start` on merged into one.
    pub fn flatten(&self, start: i64) -> Tensor {
        let s = self.shape();
        let start = norm_axis(start, s.len(), "flatten");
        self.reshape([s[..start].to_vec(), vec![s[start..].iter().product()]].concat())
    }

    /// Reduces `axes` with `op` (ADD, MUL or MAX), keeping them as size 1 (a symbolic dim is reduced whatever its
    /// bound value).
    fn reduce(&self, op: Ops, axes: &[usize], keepdim: bool) -> Tensor {
        let (shape, one) = (self.sym_shape(), Sint::Int(1));
        let axes: Vec<usize> = axes.iter().copied().filter(|&a| shape[a] != one || !keepdim).collect();
        let r = if axes.iter().all(|&a| shape[a] == one) { self.clone() } else { self.reduce_axis(op, &axes) };
        if keepdim {
            return r;
        }
        r.reshape_sym(&shape.iter().enumerate().filter(|(i, _)| !axes.contains(i)).map(|(_, d)| d.clone()).collect::<Vec<_>>())
    }
    fn reduce_axis(&self, op: Ops, axes: &[usize]) -> Tensor {
        let u = self.uop();
        Tensor::from_uop(UOp::new(Ops::REDUCE_AXIS, u.dtype, [u], Arg::ReduceAxis(op, axes.into())))
    }

    /// The sum over `axis` (ints sum in int32 or wider; half floats in float32, then back; tinygrad `sum`).
    pub fn sum(&self, axis: impl IntoAxes) -> Tensor {
        self.sum_impl(axis.into_axes(self.ndim()), false)
    }
    /// The sum over `axis`, keeping the reduced dims as size 1.
    pub fn sum_keepdim(&self, axis: impl IntoAxes) -> Tensor {
        self.sum_impl(axis.into_axes(self.ndim()), true)
    }
    fn sum_impl(&self, axes: Vec<usize>, keepdim: bool) -> Tensor {
        let ret = self.cast(sum_acc_dtype(self.dtype())).reduce(Ops::ADD, &axes, keepdim);
        if matches!(self.dtype(), dtypes::FLOAT16 | dtypes::BFLOAT16) {
            ret.cast(self.dtype())
        } else {
            ret
        }
    }
    /// The product over `axis` (tinygrad `prod`).
    pub fn prod(&self, axis: impl IntoAxes) -> Tensor {
        self.reduce(Ops::MUL, &axis.into_axes(self.ndim()), false)
    }
    /// The product over `axis`, keeping the reduced dims.
    pub fn prod_keepdim(&self, axis: impl IntoAxes) -> Tensor {
        self.reduce(Ops::MUL, &axis.into_axes(self.ndim()), true)
    }
    /// The maximum over `axis`.
    pub fn max(&self, axis: impl IntoAxes) -> Tensor {
        self.reduce(Ops::MAX, &axis.into_axes(self.ndim()), false)
    }
    /// The maximum over `axis`, keeping the reduced dims.
    pub fn max_keepdim(&self, axis: impl IntoAxes) -> Tensor {
        self.reduce(Ops::MAX, &axis.into_axes(self.ndim()), true)
    }
    /// The minimum over `axis`, as `-max(-self)`.
    pub fn min(&self, axis: impl IntoAxes) -> Tensor {
        self.flip_order().max(axis).flip_order()
    }
    /// The minimum over `axis`, keeping the reduced dims.
    pub fn min_keepdim(&self, axis: impl IntoAxes) -> Tensor {
        self.flip_order().max_keepdim(axis).flip_order()
    }
    /// The mean over `axis`.
    pub fn mean(&self, axis: impl IntoAxes) -> Tensor {
        self.mean_impl(axis.into_axes(self.ndim()), false)
    }
    /// The mean over `axis`, keeping the reduced dims.
    pub fn mean_keepdim(&self, axis: impl IntoAxes) -> Tensor {
        self.mean_impl(axis.into_axes(self.ndim()), true)
    }
    fn mean_impl(&self, axes: Vec<usize>, keepdim: bool) -> Tensor {
        let n: usize = axes.iter().map(|&a| self.shape()[a]).product();
        let x = self.float_if_int();
        // (over no elements: 0/0, NaN, as tinygrad and torch)
        x.sum_impl(axes, keepdim).div(n as f64).cast(x.dtype())
    }
    /// `log(softmax(self))` over `axis`, computed stably (tinygrad `log_softmax`). The max is detached, as tinygrad's
    /// `_softmax`: its gradient cancels, and an equality mask taken through it would only add rounding.
    pub fn log_softmax(&self, axis: i64) -> Tensor {
        let m = self.sub(self.max_keepdim(axis).detach());
        m.sub(m.exp().sum_keepdim(axis).log())
    }
    /// `log(sum(exp(self)))` over `axis`, computed stably (tinygrad `logsumexp`), the max detached as in
    /// [`Tensor::log_softmax`] (the gradient is exactly the softmax).
    pub fn logsumexp(&self, axis: impl IntoAxes, keepdim: bool) -> Tensor {
        let axes = axis.into_axes(self.ndim());
        let m = self.max_keepdim(axes.clone()).detach();
        let s = self.sub(&m).exp().sum_keepdim(axes.clone()).log().add(&m);
        if keepdim {
            s
        } else {
            let shape = self.shape();
            s.reshape(shape.iter().enumerate().filter(|(i, _)| !axes.contains(i)).map(|(_, &d)| d).collect::<Vec<_>>())
        }
    }
    /// Matrix product with tinygrad's broadcasting of leading dims (tinygrad `dot`/`matmul`): `(..., n, k) @ (..., k, m)`;
    /// 1-D operands are vectors.
    ///
    /// # Panics
    /// If an operand is 0-d or the inner dims differ; the message names both shapes.
    pub fn matmul(&self, w: &Tensor) -> Tensor {
        let (xs, ws) = (self.shape(), w.shape());
        let (dx, dw) = (xs.len(), ws.len());
        assert!(dx > 0 && dw > 0, "matmul: both operands need a dim, got shapes {xs:?} and {ws:?}");
        let axis_w = dw - dw.min(2);
        assert_eq!(xs[dx - 1], ws[axis_w], "matmul: shapes {xs:?} and {ws:?} don't match on the inner dim");
        let ones = vec![1; (dx - 1).min(dw - 1).min(1)];
        let x = self.reshape([xs[..dx - 1].to_vec(), ones.clone(), vec![xs[dx - 1]]].concat());
        let w = w.reshape([ws[..dw - dw.min(2)].to_vec(), ones, ws[axis_w..].to_vec()].concat());
        let w = w.transpose(-1, -(dw.min(2) as i64));
        let dt = least_upper_dtype(&[x.dtype(), w.dtype()]);
        x.mul(w).sum(-1).cast(dt)
    }
    /// Alias of [`Tensor::matmul`] (tinygrad `dot`).
    pub fn dot(&self, w: &Tensor) -> Tensor {
        self.matmul(w)
    }
    /// `softmax` over `axis`: `exp(x - max) / sum(exp(x - max))`, the max detached (tinygrad `_softmax`).
    pub fn softmax(&self, axis: i64) -> Tensor {
        let e = self.sub(self.max_keepdim(axis).detach()).exp();
        e.div(e.sum_keepdim(axis))
    }
}

macro_rules! tensor_binops {
    ($($tr:ident $m:ident),*) => {$(
        impl<T: IntoOperand> std::ops::$tr<T> for &Tensor { type Output = Tensor; fn $m(self, y: T) -> Tensor { Tensor::$m(self, y) } }
        impl<T: IntoOperand> std::ops::$tr<T> for Tensor { type Output = Tensor; fn $m(self, y: T) -> Tensor { Tensor::$m(&self, y) } }
    )*};
}
tensor_binops!(Add add, Sub sub, Mul mul, Div div);
macro_rules! scalar_lhs_binops {
    ($($t:ty),*) => {$(
        impl std::ops::Add<&Tensor> for $t { type Output = Tensor; fn add(self, y: &Tensor) -> Tensor { self.into_operand().add(y) } }
        impl std::ops::Sub<&Tensor> for $t { type Output = Tensor; fn sub(self, y: &Tensor) -> Tensor { self.into_operand().sub(y) } }
        impl std::ops::Mul<&Tensor> for $t { type Output = Tensor; fn mul(self, y: &Tensor) -> Tensor { self.into_operand().mul(y) } }
        impl std::ops::Div<&Tensor> for $t { type Output = Tensor; fn div(self, y: &Tensor) -> Tensor { self.into_operand().div(y) } }
    )*};
}
// `1.0 - &t`: a Rust number on the left is a weak constant, as a Python number is in tinygrad
scalar_lhs_binops!(f64, i64);
impl std::ops::Neg for &Tensor {
    type Output = Tensor;
    fn neg(self) -> Tensor {
        Tensor::neg(self)
    }
}
impl std::ops::Neg for Tensor {
    type Output = Tensor;
    fn neg(self) -> Tensor {
        Tensor::neg(&self)
    }
}
