//! ONNX's narrow data types (float8 e4m3fn/e4m3fnuz/e5m2/e5m2fnuz/e8m0, float4 e2m1, int4/uint4, int2/uint2), which the
//! project has no storage for: decoded at load to a wider dtype that holds every value exactly (float32 for the
//! floats, int8/uint8 for the ints), and casts to them done as ONNX defines them (round to nearest even, saturate
//! or overflow to inf/NaN for the floats; wrap for the ints), on the host. In: packed bytes or a tensor's values.
//! Out: the wider tensor, whose values are those of the narrow type.

use super::proto::tensor_proto::DataType;
use crate::dtype::{dtypes, DType};
use crate::tensor::Tensor;

/// A narrow float format: exponent and mantissa bits, bias, largest finite value, whether it has infinities, and
/// its NaN encoding.
struct MiniFloat {
    exp: u32,
    mant: u32,
    bias: i32,
    max: f64,
    inf: bool,
    /// `fnuz`: the only NaN is `0x80` (no negative zero); else (`fn`) all-ones exponent and mantissa, or IEEE.
    uz: bool,
    nan: bool,
}

fn format(t: DataType) -> Option<MiniFloat> {
    let f = |exp, mant, bias, max, inf, uz, nan| MiniFloat { exp, mant, bias, max, inf, uz, nan };
    Some(match t {
        DataType::Float8e4m3fn => f(4, 3, 7, 448.0, false, false, true),
        DataType::Float8e4m3fnuz => f(4, 3, 8, 240.0, false, true, true),
        DataType::Float8e5m2 => f(5, 2, 15, 57344.0, true, false, true),
        DataType::Float8e5m2fnuz => f(5, 2, 16, 57344.0, false, true, true),
        DataType::Float4e2m1 => f(2, 1, 1, 6.0, false, false, false),
        _ => return None,
    })
}

/// The width in bits of the narrow ints, and whether they are signed.
fn int_format(t: DataType) -> Option<(u32, bool)> {
    Some(match t {
        DataType::Int4 => (4, true),
        DataType::Uint4 => (4, false),
        DataType::Int2 => (2, true),
        DataType::Uint2 => (2, false),
        _ => return None,
    })
}

/// The wider dtype that holds narrow type `t`, if `t` is one.
pub fn storage(t: DataType) -> Option<DType> {
    if format(t).is_some() || t == DataType::Float8e8m0 {
        return Some(dtypes::FLOAT32);
    }
    int_format(t).map(|(_, signed)| if signed { dtypes::INT8 } else { dtypes::UINT8 })
}

/// Bits per element of narrow type `t` (8 for float8; 4 and 2 for the packed types).
pub fn bits(t: DataType) -> usize {
    match t {
        DataType::Float4e2m1 | DataType::Int4 | DataType::Uint4 => 4,
        DataType::Int2 | DataType::Uint2 => 2,
        _ => 8,
    }
}

/// The value of the `bits`-wide code `c` of narrow float format `f`.
fn decode_float(f: &MiniFloat, c: u32) -> f32 {
    let width = 1 + f.exp + f.mant;
    let (sign, e, m) = (c >> (width - 1) & 1, (c >> f.mant) & ((1 << f.exp) - 1), c & ((1 << f.mant) - 1));
    let all = (1 << f.exp) - 1;
    if f.uz && c == 1 << (width - 1) && f.nan {
        return f32::NAN;
    }
    if f.nan && !f.uz && e == all && (f.inf || m == (1 << f.mant) - 1) {
        return if f.inf && m == 0 {
            if sign == 1 {
                f32::NEG_INFINITY
            } else {
                f32::INFINITY
            }
        } else {
            f32::NAN
        };
    }
    let v = if e == 0 {
        m as f64 * 2f64.powi(1 - f.bias - f.mant as i32)
    } else {
        (1.0 + m as f64 / (1u32 << f.mant) as f64) * 2f64.powi(e as i32 - f.bias)
    };
    (if sign == 1 { -v } else { v }) as f32
}

/// `n` elements of narrow type `t` from `codes` (one per element, or packed little end first), as the bytes of
/// its storage dtype.
pub fn decode(t: DataType, codes: &[u8], n: usize) -> Vec<u8> {
    let b = bits(t);
    let code = |i: usize| ((codes.get(i * b / 8).copied().unwrap_or(0) as u32) >> (i * b % 8)) & ((1 << b) - 1);
    if let Some(f) = format(t) {
        return (0..n).flat_map(|i| decode_float(&f, code(i)).to_le_bytes()).collect();
    }
    if t == DataType::Float8e8m0 {
        // (an exponent alone: 2^(code - 127), 255 NaN)
        return (0..n).flat_map(|i| if code(i) == 255 { f32::NAN } else { 2f32.powi(code(i) as i32 - 127) }.to_le_bytes()).collect();
    }
    let signed = int_format(t).is_some_and(|(_, s)| s);
    (0..n).map(|i| if signed && code(i) >> (b - 1) == 1 { (code(i) as i32 - (1 << b)) as u8 } else { code(i) as u8 }).collect()
}

/// `x` rounded to narrow float format `f` (nearest, ties to even), out-of-range values saturating to the largest
/// finite one, or else becoming inf (formats that have it) or NaN.
fn round_float(f: &MiniFloat, x: f64, saturate: bool) -> f64 {
    let over = |s: f64| {
        if saturate || !f.nan {
            s * f.max
        } else if f.inf {
            s * f64::INFINITY
        } else {
            f64::NAN
        }
    };
    if x.is_nan() {
        return if f.nan { f64::NAN } else { 0.0 };
    }
    let (s, a) = (x.signum(), x.abs());
    if a.is_infinite() {
        return over(s);
    }
    let emin = 1 - f.bias;
    let e = if a > 0.0 { (a.log2().floor() as i32).max(emin) } else { emin };
    let q = 2f64.powi(e - f.mant as i32);
    let r = (a / q).round_ties_even() * q;
    let r = if r > f.max { over(1.0) } else { r };
    if r == 0.0 && f.uz {
        return 0.0;
    }
    s * r
}

/// `x` cast to narrow type `t` as ONNX's `Cast` does (`saturate` for the float8 types), in `t`'s storage dtype.
///
/// # Errors
/// If `t` is not a narrow type, or reading `x` fails.
pub fn cast(x: &Tensor, t: DataType, saturate: bool) -> Result<Tensor, String> {
    cast_rounding(x, t, saturate, "up")
}

/// The float8 e8m0 code of `x`: its float32 exponent, rounded `up` (any mantissa bumps it), `down` or to `nearest`;
/// NaN and inf give 255, or saturate to 254 when rounding would reach it.
fn e8m0(x: f32, saturate: bool, round: &str) -> u32 {
    let bits = x.to_bits();
    let (e, m) = ((bits >> 23) & 0xFF, bits & 0x7F_FFFF);
    if e == 0xFF {
        return 0xFF;
    }
    let bump = match round {
        "down" => false,
        "nearest" => m & 0x40_0000 != 0 && (m & 0x3F_FFFF != 0 || e > 0),
        _ => m != 0,
    };
    if bump && !(saturate && e == 0xFE) {
        e + 1
    } else {
        e
    }
}

/// [`cast`] with e8m0's rounding mode (`up`, `down`, `nearest`; the other types round to nearest even).
///
/// # Errors
/// As [`cast`].
pub fn cast_rounding(x: &Tensor, t: DataType, saturate: bool, round: &str) -> Result<Tensor, String> {
    let v = x.cast(dtypes::FLOAT64).to_vec::<f64>().map_err(|e| e.to_string())?;
    let dt = storage(t).ok_or_else(|| format!("{} is not a narrow type", t.as_str_name()))?;
    if t == DataType::Float8e8m0 {
        let out: Vec<f32> = v
            .iter()
            .map(|&x| e8m0(x as f32, saturate, round))
            .map(|c| if c == 255 { f32::NAN } else { 2f32.powi(c as i32 - 127) })
            .collect();
        return Ok(Tensor::from_slice(&out, [out.len()]).reshape(x.shape()));
    }
    let out: Vec<f64> = match (format(t), int_format(t)) {
        (Some(f), _) => v.iter().map(|&x| round_float(&f, x, saturate)).collect(),
        (_, Some((b, signed))) => {
            let (lo, span) = (if signed { -(1i64 << (b - 1)) } else { 0 }, 1i64 << b);
            v.iter().map(|&x| ((x.trunc() as i64 - lo).rem_euclid(span) + lo) as f64).collect()
        }
        _ => unreachable!("storage checked the type"),
    };
    Ok(Tensor::from_slice(&out, [out.len()]).cast(dt).reshape(x.shape()))
}

/// `x` (already divided by its scale and shifted) quantized to narrow type `t`: floats rounded as [`cast`] does,
/// ints rounded half to even and clamped to their range.
pub fn quantize(x: &Tensor, t: DataType, saturate: bool) -> Result<Tensor, String> {
    match int_format(t) {
        Some((b, signed)) => {
            let (lo, hi) = if signed { (-(1i64 << (b - 1)), (1i64 << (b - 1)) - 1) } else { (0, (1i64 << b) - 1) };
            cast(&x.round().clamp(lo as f64, hi as f64), t, saturate)
        }
        None => cast(x, t, saturate),
    }
}

/// Whether ONNX data type number `t` is narrow.
pub fn is_narrow(t: i32) -> Option<DataType> {
    DataType::try_from(t).ok().filter(|&d| storage(d).is_some())
}
