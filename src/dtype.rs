//! Data types: the 13 storage dtypes, tinygrad's weak `weakint`/`weakfloat` (the types of bare Rust
//! number constants and of index math), vector and pointer dtypes, the promotion lattice and constant
//! values with C semantics. Follows tinygrad 0.14 `dtype.py`.

use std::fmt;
use std::hash::{Hash, Hasher};

/// The element type of a [`DType`], ordered as tinygrad orders dtypes (priority, then bit size).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
#[repr(u8)]
pub enum Scalar {
    /// No value (the dtype of SINK, STORE, ...).
    Void,
    /// 1-bit boolean, stored as a byte.
    Bool,
    /// Weakly typed integer: Rust integer constants and index arithmetic (unbounded in constant folding).
    WeakInt,
    Int8,
    UInt8,
    Int16,
    UInt16,
    Int32,
    UInt32,
    Int64,
    UInt64,
    /// Weakly typed float: Rust float constants before they meet a typed tensor.
    WeakFloat,
    Float16,
    BFloat16,
    Float32,
    Float64,
}

use Scalar::*;

impl Scalar {
    /// Bits of one element (`WeakInt`/`WeakFloat` are wider than anything: 800, as tinygrad).
    pub const fn bitsize(self) -> u32 {
        match self {
            Void => 0,
            Bool => 1,
            Int8 | UInt8 => 8,
            Int16 | UInt16 | Float16 | BFloat16 => 16,
            Int32 | UInt32 | Float32 => 32,
            Int64 | UInt64 | Float64 => 64,
            WeakInt | WeakFloat => 800,
        }
    }
    /// tinygrad's promotion priority (the first sort key of the lattice's `min`).
    pub const fn priority(self) -> i32 {
        match self {
            Void => -1,
            Bool | WeakInt => 0,
            Int8 => 1,
            UInt8 => 2,
            Int16 => 3,
            UInt16 => 4,
            Int32 => 5,
            UInt32 => 6,
            Int64 => 7,
            UInt64 => 8,
            WeakFloat => 9,
            Float16 => 12,
            BFloat16 => 13,
            Float32 => 14,
            Float64 => 15,
        }
    }
}

/// Where a pointer points (tinygrad `AddrSpace`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub enum AddrSpace {
    /// Device memory (kernel arguments).
    Global,
    /// Workgroup-shared memory.
    Local,
    /// Registers (accumulators).
    Reg,
}

/// A data type: a scalar element, a vector of `count` elements, or a pointer to those.
///
/// `Copy`, 16 bytes, compared and hashed by value. Pointer dtypes carry the address space and the
/// number of elements pointed to (`size`, -1 when unknown), as tinygrad's `PtrDType`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DType {
    /// Element type.
    pub scalar: Scalar,
    /// Vector width (1 for scalars).
    pub count: u16,
    /// `Some` for pointers: the address space.
    pub addrspace: Option<AddrSpace>,
    /// For pointers: elements pointed to, -1 if unknown.
    pub size: i64,
}

/// The named dtypes, as tinygrad's `dtypes.*`.
pub mod dtypes {
    use super::{DType, Scalar};
    const fn s(scalar: Scalar) -> DType {
        DType { scalar, count: 1, addrspace: None, size: 0 }
    }
    pub const VOID: DType = s(Scalar::Void);
    pub const BOOL: DType = s(Scalar::Bool);
    pub const WEAKINT: DType = s(Scalar::WeakInt);
    pub const WEAKFLOAT: DType = s(Scalar::WeakFloat);
    pub const INT8: DType = s(Scalar::Int8);
    pub const UINT8: DType = s(Scalar::UInt8);
    pub const INT16: DType = s(Scalar::Int16);
    pub const UINT16: DType = s(Scalar::UInt16);
    pub const INT32: DType = s(Scalar::Int32);
    pub const UINT32: DType = s(Scalar::UInt32);
    pub const INT64: DType = s(Scalar::Int64);
    pub const UINT64: DType = s(Scalar::UInt64);
    pub const FLOAT16: DType = s(Scalar::Float16);
    pub const BFLOAT16: DType = s(Scalar::BFloat16);
    pub const FLOAT32: DType = s(Scalar::Float32);
    pub const FLOAT64: DType = s(Scalar::Float64);
    /// The 13 storage dtypes, in tinygrad's order.
    pub const ALL: [DType; 13] = [BOOL, INT8, INT16, INT32, INT64, UINT8, UINT16, UINT32, UINT64, FLOAT16, BFLOAT16, FLOAT32, FLOAT64];
    /// The default float (tinygrad `dtypes.default_float`).
    pub const DEFAULT_FLOAT: DType = FLOAT32;
    /// The default int (tinygrad `dtypes.default_int`).
    pub const DEFAULT_INT: DType = INT32;
}

impl DType {
    /// Bits of one element.
    pub const fn bitsize(self) -> u32 {
        self.scalar.bitsize()
    }
    /// Bytes of one value: a vector's lanes together; 8 for a pointer.
    pub const fn itemsize(self) -> usize {
        if self.addrspace.is_some() {
            return 8;
        }
        self.scalar.bitsize().div_ceil(8) as usize * self.count as usize
    }
    /// Float dtypes, including `weakfloat` (tinygrad `dtypes.is_float`).
    pub fn is_float(self) -> bool {
        matches!(self.scalar, WeakFloat | Float16 | BFloat16 | Float32 | Float64) && !self.is_ptr()
    }
    /// Integer dtypes, including `weakint`, excluding bool (tinygrad `dtypes.is_int`).
    pub fn is_int(self) -> bool {
        matches!(self.scalar, WeakInt | Int8 | UInt8 | Int16 | UInt16 | Int32 | UInt32 | Int64 | UInt64) && !self.is_ptr()
    }
    /// Unsigned integer dtypes.
    pub fn is_unsigned(self) -> bool {
        matches!(self.scalar, UInt8 | UInt16 | UInt32 | UInt64) && !self.is_ptr()
    }
    /// The bool dtype (any vector width).
    pub fn is_bool(self) -> bool {
        self.scalar == Bool && !self.is_ptr()
    }
    /// `weakint` or `weakfloat`.
    pub fn is_weak(self) -> bool {
        matches!(self.scalar, WeakInt | WeakFloat)
    }
    /// A pointer dtype.
    pub fn is_ptr(self) -> bool {
        self.addrspace.is_some()
    }
    /// The vector of `n` of this scalar dtype (`n == 1` gives the scalar).
    ///
    /// # Panics
    /// If `self` is already a vector or a pointer.
    pub fn vec(self, n: u16) -> DType {
        assert!(self.count == 1 && !self.is_ptr() && self.scalar != Void, "vec: can't vectorize {self}");
        DType { count: n, ..self }
    }
    /// The element dtype: drops vector width and pointer (tinygrad `scalar()`).
    pub fn scalar(self) -> DType {
        DType { scalar: self.scalar, count: 1, addrspace: None, size: 0 }
    }
    /// What a pointer points to (the dtype itself for non-pointers; tinygrad `base`).
    pub fn base(self) -> DType {
        DType { addrspace: None, size: 0, ..self }
    }
    /// A pointer to `size` elements of this dtype (-1: unknown) in `addrspace`.
    pub fn ptr(self, size: i64, addrspace: AddrSpace) -> DType {
        DType { addrspace: Some(addrspace), size, ..self.base() }
    }
    /// The smallest value (tinygrad `DType.min`): `Int` for ints, `-inf` for floats, `false` for bool.
    pub fn min(self) -> ConstValue {
        match self.scalar {
            Bool => ConstValue::Bool(false),
            WeakInt => ConstValue::Int(i128::MIN),
            s if self.is_unsigned() || s == Void => ConstValue::Int(0),
            _ if self.is_int() => ConstValue::Int(-(1i128 << (self.bitsize() - 1))),
            _ => ConstValue::Float(f64::NEG_INFINITY),
        }
    }
    /// The largest value (tinygrad `DType.max`).
    pub fn max(self) -> ConstValue {
        match self.scalar {
            Bool => ConstValue::Bool(true),
            WeakInt => ConstValue::Int(i128::MAX),
            Void => ConstValue::Int(0),
            _ if self.is_unsigned() => ConstValue::Int((1i128 << self.bitsize()) - 1),
            _ if self.is_int() => ConstValue::Int((1i128 << (self.bitsize() - 1)) - 1),
            _ => ConstValue::Float(f64::INFINITY),
        }
    }
    /// tinygrad's dtype name (`float32`, `bfloat16`, `weakint`, ...), as in the conformance files.
    pub fn name(self) -> &'static str {
        match self.scalar {
            Void => "void",
            Bool => "bool",
            WeakInt => "weakint",
            Int8 => "int8",
            UInt8 => "uint8",
            Int16 => "int16",
            UInt16 => "uint16",
            Int32 => "int32",
            UInt32 => "uint32",
            Int64 => "int64",
            UInt64 => "uint64",
            WeakFloat => "weakfloat",
            Float16 => "float16",
            BFloat16 => "bfloat16",
            Float32 => "float32",
            Float64 => "float64",
        }
    }
    /// The dtype of a name: tinygrad's names and aliases (`float`, `half`, `double`, `int`, `long`, `uchar`, ...).
    pub fn from_name(name: &str) -> Option<DType> {
        use dtypes::*;
        Some(match name {
            "void" => VOID,
            "bool" => BOOL,
            "weakint" => WEAKINT,
            "weakfloat" => WEAKFLOAT,
            "int8" | "char" => INT8,
            "uint8" | "uchar" => UINT8,
            "int16" | "short" => INT16,
            "uint16" | "ushort" => UINT16,
            "int32" | "int" => INT32,
            "uint32" | "uint" => UINT32,
            "int64" | "long" => INT64,
            "uint64" | "ulong" => UINT64,
            "float16" | "half" => FLOAT16,
            "bfloat16" => BFLOAT16,
            "float32" | "float" => FLOAT32,
            "float64" | "double" => FLOAT64,
            _ => return None,
        })
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "dtypes.{}", self.scalar().name())?;
        if self.count > 1 {
            write!(f, ".vec({})", self.count)?;
        }
        match self.addrspace {
            Some(AddrSpace::Global) => write!(f, ".ptr({})", self.size),
            Some(a) => write!(f, ".ptr({}, {a:?})", self.size),
            None => Ok(()),
        }
    }
}

impl fmt::Debug for DType {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// The dtypes one step up from `s` in tinygrad's promotion lattice (JAX's type promotion, without fp8).
fn promo_parents(s: Scalar) -> &'static [Scalar] {
    match s {
        Bool => &[WeakInt],
        WeakInt => &[Int8, UInt8],
        Int8 => &[Int16],
        Int16 => &[Int32],
        Int32 => &[Int64],
        Int64 | UInt64 => &[WeakFloat],
        UInt8 => &[Int16, UInt16],
        UInt16 => &[Int32, UInt32],
        UInt32 => &[Int64, UInt64],
        WeakFloat => &[Float16, BFloat16],
        Float16 | BFloat16 => &[Float32],
        Float32 => &[Float64],
        Float64 | Void => &[],
    }
}

/// Bit set (by `Scalar` discriminant) of `s` and everything above it in the lattice.
fn recursive_parents(s: Scalar) -> u32 {
    promo_parents(s).iter().fold(1 << s as u32, |acc, &p| acc | recursive_parents(p))
}

/// The least dtype every one of `ds` promotes to (tinygrad `least_upper_dtype`). Vector widths and pointers
/// are ignored: the result is a scalar dtype.
///
/// # Panics
/// If `ds` is empty or holds `void`.
pub fn least_upper_dtype(ds: &[DType]) -> DType {
    assert!(!ds.is_empty() && ds.iter().all(|d| d.scalar != Void), "least_upper_dtype: no dtype in {ds:?}");
    let common = ds.iter().fold(u32::MAX, |acc, d| acc & recursive_parents(d.scalar));
    let all = [Bool, WeakInt, Int8, UInt8, Int16, UInt16, Int32, UInt32, Int64, UInt64, WeakFloat, Float16, BFloat16, Float32, Float64];
    let best = all.into_iter().filter(|s| common & (1 << *s as u32) != 0).min_by_key(|s| (s.priority(), s.bitsize())).unwrap();
    DType { scalar: best, count: 1, addrspace: None, size: 0 }
}

/// The float dtype an op on `dt` computes in (tinygrad `least_upper_float`).
pub fn least_upper_float(dt: DType) -> DType {
    match dt.scalar {
        WeakInt => dtypes::WEAKFLOAT,
        _ if dt.is_float() => dt,
        _ => least_upper_dtype(&[dt, dtypes::DEFAULT_FLOAT]),
    }
}

/// The accumulator dtype of a sum over `dt` (tinygrad `sum_acc_dtype`): uint32+ for unsigned, int32+ for
/// signed and bool, float32+ for floats.
pub fn sum_acc_dtype(dt: DType) -> DType {
    if dt.is_unsigned() {
        least_upper_dtype(&[dt, dtypes::UINT32])
    } else if dt.is_int() || dt.is_bool() {
        least_upper_dtype(&[dt, dtypes::INT32])
    } else {
        least_upper_dtype(&[dt, dtypes::FLOAT32])
    }
}

/// The concrete dtype of a weak one (`weakint` -> int32, `weakfloat` -> float32; tinygrad `strong_dtype`).
pub fn strong_dtype(dt: DType) -> DType {
    match dt.scalar {
        WeakInt => DType { scalar: Int32, ..dt },
        WeakFloat => DType { scalar: Float32, ..dt },
        _ => dt,
    }
}

/// Whether every value of `from` is exactly representable in `to` (tinygrad `can_lossless_cast`).
pub fn can_lossless_cast(from: DType, to: DType) -> bool {
    if from == to || from.scalar == Bool {
        return true;
    }
    let f = from.scalar;
    match to.scalar {
        WeakInt => from.is_int(),
        Float64 => matches!(f, Float32 | Float16 | BFloat16 | UInt32 | UInt16 | UInt8 | Int32 | Int16 | Int8),
        Float32 => matches!(f, Float16 | BFloat16 | UInt16 | UInt8 | Int16 | Int8),
        Float16 => matches!(f, UInt8 | Int8),
        UInt64 => matches!(f, UInt32 | UInt16 | UInt8),
        UInt32 => matches!(f, UInt16 | UInt8),
        UInt16 => f == UInt8,
        Int64 => matches!(f, UInt32 | UInt16 | UInt8 | Int32 | Int16 | Int8),
        Int32 => matches!(f, UInt16 | UInt8 | Int16 | Int8),
        Int16 => matches!(f, UInt8 | Int8),
        _ => false,
    }
}

/// A constant's value: the payload of CONST nodes and the result of constant folding.
///
/// Ints are `i128` so every int dtype (and unbounded index math) fits; floats compare and hash by bits with
/// one canonical NaN, so `-0.0 != 0.0` and `NaN == NaN`, as tinygrad's `ConstFloat`. `Invalid` is tinygrad's
/// marker for an index that must not be accessed.
#[derive(Clone, Copy, Debug)]
pub enum ConstValue {
    Bool(bool),
    Int(i128),
    Float(f64),
    Invalid,
}

impl PartialEq for ConstValue {
    fn eq(&self, o: &Self) -> bool {
        match (self, o) {
            (ConstValue::Bool(a), ConstValue::Bool(b)) => a == b,
            (ConstValue::Int(a), ConstValue::Int(b)) => a == b,
            (ConstValue::Float(a), ConstValue::Float(b)) => a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
            (ConstValue::Invalid, ConstValue::Invalid) => true,
            _ => false,
        }
    }
}
impl Eq for ConstValue {}
impl Hash for ConstValue {
    fn hash<H: Hasher>(&self, h: &mut H) {
        match *self {
            ConstValue::Bool(b) => (0u8, b as i128).hash(h),
            ConstValue::Int(i) => (1u8, i).hash(h),
            ConstValue::Float(f) => (2u8, if f.is_nan() { f64::NAN.to_bits() } else { f.to_bits() } as i128).hash(h),
            ConstValue::Invalid => 3u8.hash(h),
        }
    }
}

impl fmt::Display for ConstValue {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            ConstValue::Bool(b) => write!(f, "{}", if *b { "True" } else { "False" }),
            ConstValue::Int(i) => write!(f, "{i}"),
            ConstValue::Float(x) => write!(f, "{x:?}"),
            ConstValue::Invalid => write!(f, "Invalid"),
        }
    }
}

impl From<bool> for ConstValue {
    fn from(b: bool) -> Self {
        ConstValue::Bool(b)
    }
}
impl From<f64> for ConstValue {
    fn from(x: f64) -> Self {
        ConstValue::Float(x)
    }
}
macro_rules! from_int { ($($t:ty),*) => { $(impl From<$t> for ConstValue { fn from(x: $t) -> Self { ConstValue::Int(x as i128) } })* } }
from_int!(i8, i16, i32, i64, i128, isize, u8, u16, u32, u64, usize);

impl ConstValue {
    /// As a float (bools are 0/1).
    pub fn as_f64(self) -> f64 {
        match self {
            ConstValue::Bool(b) => b as u8 as f64,
            ConstValue::Int(i) => i as f64,
            ConstValue::Float(f) => f,
            ConstValue::Invalid => f64::NAN,
        }
    }
    /// As an integer: floats truncate toward zero (saturating, NaN -> 0), bools are 0/1.
    pub fn as_i128(self) -> i128 {
        match self {
            ConstValue::Bool(b) => b as i128,
            ConstValue::Int(i) => i,
            ConstValue::Float(f) => f as i128,
            ConstValue::Invalid => 0,
        }
    }
    /// Truthiness (nonzero).
    pub fn as_bool(self) -> bool {
        match self {
            ConstValue::Bool(b) => b,
            ConstValue::Int(i) => i != 0,
            ConstValue::Float(f) => f != 0.0,
            ConstValue::Invalid => false,
        }
    }
    /// The integer, if this is an `Int`.
    pub fn int(self) -> Option<i128> {
        if let ConstValue::Int(i) = self {
            Some(i)
        } else {
            None
        }
    }
    /// This value as a constant of `dt` (tinygrad `DType.const`): the Rust type follows the dtype kind
    /// (float, int or bool), then the value is rounded or wrapped to `dt` (tinygrad `truncate`).
    pub fn cast(self, dt: DType) -> ConstValue {
        if let ConstValue::Invalid = self {
            return self;
        }
        let v = if dt.is_float() {
            ConstValue::Float(self.as_f64())
        } else if dt.is_bool() {
            ConstValue::Bool(self.as_bool())
        } else {
            ConstValue::Int(self.as_i128())
        };
        v.truncate(dt)
    }
    /// Rounds or wraps an already-kinded value to `dt`'s width with C semantics: integers wrap modulo
    /// 2^bits, floats round to nearest even (tinygrad `truncate`). Weak dtypes are unbounded.
    pub fn truncate(self, dt: DType) -> ConstValue {
        use ConstValue::*;
        match (self, dt.scalar) {
            (Int(i), Int8) => Int(i as i8 as i128),
            (Int(i), UInt8) => Int(i as u8 as i128),
            (Int(i), Int16) => Int(i as i16 as i128),
            (Int(i), UInt16) => Int(i as u16 as i128),
            (Int(i), Int32) => Int(i as i32 as i128),
            (Int(i), UInt32) => Int(i as u32 as i128),
            (Int(i), Int64) => Int(i as i64 as i128),
            (Int(i), UInt64) => Int(i as u64 as i128),
            (Float(f), Float32) => Float(f as f32 as f64),
            (Float(f), Float16) => Float(half::f16::from_f64(f).to_f64()),
            (Float(f), BFloat16) => Float(half::bf16::from_f32(f as f32).to_f64()),
            (Float(f), _) if f.is_nan() => Float(f64::NAN),
            (v, _) => v,
        }
    }
    /// The raw bits of this value stored as `dt` (for BITCAST folding).
    pub fn to_bits(self, dt: DType) -> u64 {
        let v = self.cast(dt);
        match dt.scalar {
            Float64 => v.as_f64().to_bits(),
            Float32 => (v.as_f64() as f32).to_bits() as u64,
            Float16 => half::f16::from_f64(v.as_f64()).to_bits() as u64,
            BFloat16 => half::bf16::from_f64(v.as_f64()).to_bits() as u64,
            _ => v.as_i128() as u64 & bitmask(dt),
        }
    }
    /// The value of `bits` read as `dt` (the inverse of [`ConstValue::to_bits`]).
    pub fn from_bits(bits: u64, dt: DType) -> ConstValue {
        match dt.scalar {
            Float64 => ConstValue::Float(f64::from_bits(bits)),
            Float32 => ConstValue::Float(f32::from_bits(bits as u32) as f64),
            Float16 => ConstValue::Float(half::f16::from_bits(bits as u16).to_f64()),
            BFloat16 => ConstValue::Float(half::bf16::from_bits(bits as u16).to_f64()),
            Bool => ConstValue::Bool(bits & 1 != 0),
            _ => ConstValue::Int(bits as i128).truncate(dt),
        }
    }
}

fn bitmask(dt: DType) -> u64 {
    match dt.bitsize() {
        b @ 1..=63 => (1u64 << b) - 1,
        _ => u64::MAX,
    }
}

/// Rust types that are tensor elements: their dtype and their bytes (native endian).
pub trait Element: Copy + Send + Sync + 'static {
    /// The dtype of this type.
    const DTYPE: DType;
    /// Appends this value's bytes.
    fn write_bytes(self, out: &mut Vec<u8>);
    /// The value stored in `b` (exactly `DTYPE.itemsize()` bytes).
    fn from_bytes(b: &[u8]) -> Self;
    /// As a constant.
    fn to_const(self) -> ConstValue;
}
macro_rules! element {
    ($($t:ty => $dt:ident, $cv:expr;)*) => {$(
        impl Element for $t {
            const DTYPE: DType = dtypes::$dt;
            fn write_bytes(self, out: &mut Vec<u8>) { out.extend_from_slice(&self.to_ne_bytes()) }
            fn from_bytes(b: &[u8]) -> Self { <$t>::from_ne_bytes(b.try_into().expect("element size")) }
            fn to_const(self) -> ConstValue { ($cv)(self) }
        }
    )*};
}
element! {
    f32 => FLOAT32, |x: f32| ConstValue::Float(x as f64);
    f64 => FLOAT64, ConstValue::Float;
    i8 => INT8, |x: i8| ConstValue::Int(x as i128);
    i16 => INT16, |x: i16| ConstValue::Int(x as i128);
    i32 => INT32, |x: i32| ConstValue::Int(x as i128);
    i64 => INT64, |x: i64| ConstValue::Int(x as i128);
    u8 => UINT8, |x: u8| ConstValue::Int(x as i128);
    u16 => UINT16, |x: u16| ConstValue::Int(x as i128);
    u32 => UINT32, |x: u32| ConstValue::Int(x as i128);
    u64 => UINT64, |x: u64| ConstValue::Int(x as i128);
    half::f16 => FLOAT16, |x: half::f16| ConstValue::Float(x.to_f64());
    half::bf16 => BFLOAT16, |x: half::bf16| ConstValue::Float(x.to_f64());
}
impl Element for bool {
    const DTYPE: DType = dtypes::BOOL;
    fn write_bytes(self, out: &mut Vec<u8>) {
        out.push(self as u8)
    }
    fn from_bytes(b: &[u8]) -> Self {
        b[0] != 0
    }
    fn to_const(self) -> ConstValue {
        ConstValue::Bool(self)
    }
}

#[cfg(test)]
mod tests {
    use super::dtypes::*;
    use super::*;

    #[track_caller]
    fn lub(ds: &[DType], want: DType) {
        assert_eq!(least_upper_dtype(ds), want, "least_upper_dtype({ds:?})");
    }

    #[test]
    fn promotion_lattice() {
        lub(&[BOOL, INT8], INT8);
        lub(&[INT8, UINT8], INT16);
        lub(&[UINT8, INT32], INT32);
        lub(&[UINT32, INT32], INT64);
        lub(&[INT64, UINT64], WEAKFLOAT);
        lub(&[INT64, UINT64, FLOAT32], FLOAT32);
        lub(&[FLOAT16, BFLOAT16], FLOAT32);
        lub(&[FLOAT16, INT64], FLOAT16);
        lub(&[WEAKINT, UINT8], UINT8);
        lub(&[WEAKINT, BOOL], WEAKINT);
        lub(&[WEAKFLOAT, INT32], WEAKFLOAT);
        lub(&[WEAKFLOAT, FLOAT16], FLOAT16);
        lub(&[FLOAT32, FLOAT64], FLOAT64);
        lub(&[BOOL, BOOL], BOOL);
        assert_eq!(sum_acc_dtype(UINT8), UINT32);
        assert_eq!(sum_acc_dtype(INT8), INT32);
        assert_eq!(sum_acc_dtype(BOOL), INT32);
        assert_eq!(sum_acc_dtype(INT64), INT64);
        assert_eq!(sum_acc_dtype(FLOAT16), FLOAT32);
        assert_eq!(sum_acc_dtype(FLOAT64), FLOAT64);
        assert_eq!(least_upper_float(INT32), FLOAT32);
        assert_eq!(least_upper_float(FLOAT16), FLOAT16);
    }

    #[test]
    fn sizes_bounds_and_kinds() {
        assert_eq!(
            (BOOL.itemsize(), BFLOAT16.itemsize(), FLOAT32.vec(4).itemsize(), FLOAT64.ptr(-1, AddrSpace::Global).itemsize()),
            (1, 2, 16, 8)
        );
        assert_eq!((INT8.min(), INT8.max()), (ConstValue::Int(-128), ConstValue::Int(127)));
        assert_eq!(UINT64.max(), ConstValue::Int(u64::MAX as i128));
        assert_eq!(INT64.min(), ConstValue::Int(i64::MIN as i128));
        assert_eq!(FLOAT16.min(), ConstValue::Float(f64::NEG_INFINITY));
        assert!(WEAKINT.is_int() && WEAKFLOAT.is_float() && !BOOL.is_int() && UINT16.is_unsigned() && !INT16.is_unsigned());
        assert!(!FLOAT32.ptr(16, AddrSpace::Local).is_float());
        assert_eq!(FLOAT32.vec(4).ptr(16, AddrSpace::Global).base(), FLOAT32.vec(4));
        assert_eq!(FLOAT32.vec(8).scalar(), FLOAT32);
        assert_eq!(format!("{} {}", FLOAT32.vec(4), HALF_PTR), "dtypes.float32.vec(4) dtypes.float16.ptr(8, Local)");
        assert!(can_lossless_cast(UINT8, FLOAT16) && !can_lossless_cast(INT32, FLOAT32) && can_lossless_cast(INT32, FLOAT64));
        for dt in ALL {
            assert_eq!(DType::from_name(dt.name()), Some(dt));
        }
    }
    const HALF_PTR: DType = DType { scalar: Scalar::Float16, count: 1, addrspace: Some(AddrSpace::Local), size: 8 };

    #[test]
    fn const_values_have_c_semantics() {
        use ConstValue::*;
        assert_eq!(Int(300).cast(UINT8), Int(44));
        assert_eq!(Int(-1).cast(UINT32), Int(4294967295));
        assert_eq!(Int(1 << 31).cast(INT32), Int(-(1 << 31)));
        assert_eq!(Float(-2.7).cast(INT32), Int(-2));
        assert_eq!(Float(0.1).cast(FLOAT32), Float(0.1f32 as f64));
        assert_eq!(Float(65520.0).cast(FLOAT16), Float(f64::INFINITY));
        assert_eq!(Float(1.0 + 1.0 / 256.0).cast(BFLOAT16), Float(1.0));
        assert_eq!(Int(3).cast(BOOL), Bool(true));
        assert_eq!(Float(f64::NAN), Float(-f64::NAN));
        assert_ne!(Float(0.0), Float(-0.0));
        assert_eq!(ConstValue::from_bits(Float(1.0).to_bits(FLOAT32), INT32), Int(0x3f80_0000));
        assert_eq!(ConstValue::from_bits(Int(-1).to_bits(INT16), UINT16), Int(65535));
        assert_eq!(ConstValue::from_bits(Float(-2.0).to_bits(FLOAT16), FLOAT16), Float(-2.0));
    }
}
