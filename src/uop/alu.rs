//! ALU semantics on constants: `exec_alu` (constant folding with C semantics: wrapping ints, truncating or
//! floor division, IEEE floats rounded to the dtype) and the value bounds `vmin`/`vmax` of expressions.
//! Follows tinygrad 0.14 `exec_alu`, `python_alu` and `UOp._min_max`.

use super::{Arg, GroupOp, Ops, UOp};
use crate::dtype::{ConstValue, DType};
use ConstValue::{Bool, Float, Int, Invalid};

fn cdiv(a: i128, b: i128) -> i128 {
    if b == 0 {
        0
    } else {
        a.wrapping_div(b)
    }
}
fn floordiv(a: i128, b: i128) -> i128 {
    if b == 0 {
        0
    } else {
        a.wrapping_div(b) - ((a.wrapping_rem(b) != 0) && ((a < 0) != (b < 0))) as i128
    }
}

/// The value of `op` on constant operands, as a value of `dtype` (the op's output dtype).
///
/// Integers compute exactly, then wrap to `dtype`'s width (weakint is unbounded); division and remainder by zero
/// give 0, as numpy's (and `MIN / -1` wraps to `MIN`): the values every device's kernels compute; floats compute in f64, then round to `dtype`. A binary op on
/// `Invalid` is `Invalid`.
///
/// # Panics
/// If `op` is not an ALU op or the operand count is wrong.
pub fn exec_alu(op: Ops, dtype: DType, src: &[ConstValue]) -> ConstValue {
    use Ops::*;
    if src.iter().any(|v| matches!(v, Invalid)) {
        return Invalid;
    }
    let floats = src.iter().any(|v| matches!(v, Float(_)));
    let out = match (op, src) {
        (WHERE, [c, a, b]) => return (if c.as_bool() { *a } else { *b }).cast(dtype),
        (CMPLT | CMPNE | CMPEQ, [a, b]) => Bool(match (a, b) {
            _ if floats => {
                let (a, b) = (a.as_f64(), b.as_f64());
                [a < b, a != b, a == b][(op as usize) - (CMPLT as usize)]
            }
            _ => {
                let (a, b) = (a.as_i128(), b.as_i128());
                [a < b, a != b, a == b][(op as usize) - (CMPLT as usize)]
            }
        }),
        (_, [Bool(a), Bool(b)]) if matches!(op, AND | OR | XOR | MAX | ADD | MUL) => Bool(match op {
            AND | MUL => *a && *b,
            XOR => a != b,
            _ => *a || *b,
        }),
        (_, [a]) if floats || dtype.is_float() => {
            let x = a.as_f64();
            Float(match op {
                NEG => -x,
                EXP2 => x.exp2(),
                LOG2 => x.log2(),
                SIN => x.sin(),
                SQRT => x.sqrt(),
                RECIPROCAL => 1.0 / x,
                TRUNC => x.trunc(),
                _ => panic!("exec_alu: {op} is not a unary float op"),
            })
        }
        (_, [a]) => {
            let x = a.as_i128();
            Int(match op {
                NEG => x.wrapping_neg(),
                TRUNC => x,
                _ => return exec_alu(op, dtype, &[Float(x as f64)]),
            })
        }
        (_, [a, b]) if floats || dtype.is_float() => {
            let (x, y) = (a.as_f64(), b.as_f64());
            Float(match op {
                ADD => x + y,
                SUB => x - y,
                MUL => x * y,
                FDIV => x / y,
                MAX => {
                    if y > x {
                        y
                    } else {
                        x
                    }
                }
                POW => x.powf(y),
                _ => panic!("exec_alu: {op} is not a binary float op"),
            })
        }
        (_, [a, b]) => {
            let (x, y) = (a.as_i128(), b.as_i128());
            Int(match op {
                ADD => x.wrapping_add(y),
                SUB => x.wrapping_sub(y),
                MUL => x.wrapping_mul(y),
                MAX => x.max(y),
                CDIV => cdiv(x, y),
                CMOD if y == 0 => 0,
                CMOD => x.wrapping_sub(cdiv(x, y).wrapping_mul(y)),
                FLOORDIV => floordiv(x, y),
                FLOORMOD if y == 0 => 0,
                FLOORMOD => x.wrapping_sub(floordiv(x, y).wrapping_mul(y)),
                AND => x & y,
                OR => x | y,
                XOR => x ^ y,
                SHL => x.checked_shl(y as u32).unwrap_or(0),
                SHR => x.checked_shr(y as u32).unwrap_or(if x < 0 { -1 } else { 0 }),
                POW => x.checked_pow(y as u32).unwrap_or(0),
                _ => panic!("exec_alu: {op} is not a binary int op"),
            })
        }
        // (a fused multiply-add rounds once, in the dtype: float32 in f32, not in f64 then f32)
        (MULACC, [a, b, c]) if dtype.scalar == crate::dtype::Scalar::Float32 => {
            Float((a.as_f64() as f32).mul_add(b.as_f64() as f32, c.as_f64() as f32) as f64)
        }
        (MULACC, [a, b, c]) if floats || dtype.is_float() => Float(a.as_f64().mul_add(b.as_f64(), c.as_f64())),
        (MULACC, [a, b, c]) => return exec_alu(ADD, dtype, &[exec_alu(MUL, dtype, &[*a, *b]), *c]),
        // (CUDA's `__dp4a`, x86's `vpdpbusd`: the four bytes of `a` unsigned times those of `b` signed, plus `c`;
        // DP4AS: `a`'s signed, `b`'s signed and at least -127, as AVX2's `vpsignb` needs)
        (DP4A | DP4AS, [a, b, c]) => {
            let (a, b) = (a.as_i128() as u32, b.as_i128() as u32);
            let byte = |x: u32, k: u32| ((x >> (8 * k)) & 0xff) as u8;
            let signed = op == DP4AS;
            let term = |k: u32| match signed {
                true => byte(a, k) as i8 as i128 * (byte(b, k) as i8).max(-127) as i128,
                false => byte(a, k) as i128 * byte(b, k) as i8 as i128,
            };
            Int((0..4).map(term).sum::<i128>() + c.as_i128())
        }
        _ => panic!("exec_alu: {op} with {} operands", src.len()),
    };
    out.cast(dtype)
}

/// Whether `_min_max` of `op` reads its sources' bounds (the others take the dtype's range or their arg).
pub(super) fn minmax_needs_src(op: Ops) -> bool {
    GroupOp::ALU.contains(op) || matches!(op, Ops::CAST | Ops::RANGE | Ops::SPECIAL | Ops::AFTER | Ops::INDEX | Ops::VECTORIZE | Ops::BIND)
}

/// The bounds of one node from its sources' (already computed) bounds.
pub(super) fn compute_min_max(u: &UOp) -> (ConstValue, ConstValue) {
    use Ops::*;
    let dt = u.dtype;
    let full = (dt.min(), dt.max());
    let ints = |lo: i128, hi: i128| -> (ConstValue, ConstValue) {
        // a fixed-width result outside its dtype may have wrapped: then anything is possible
        match (dt.min(), dt.max()) {
            (Int(a), Int(b)) if lo < a || hi > b => full,
            _ => (Int(lo), Int(hi)),
        }
    };
    let bools = |lo: bool, hi: bool| (Bool(lo), Bool(hi));
    let s = |i: usize| u.src[i].bounds();
    match u.op {
        CONST => match u.const_value() {
            Some(Invalid) | None => full,
            Some(v) => (v, v),
        },
        DEFINE_VAR => match &u.arg {
            Arg::Var { min, max, .. } => (Int(*min), Int(*max)),
            _ => full,
        },
        BIND | AFTER | INDEX => u.src[0].min_max(),
        RANGE | SPECIAL if !u.src.is_empty() => ints(0, s(0).1 - 1),
        VECTORIZE if !u.src.is_empty() => {
            let mm: Vec<_> = u.src.iter().map(|x| x.bounds()).collect();
            ints(mm.iter().map(|b| b.0).min().unwrap(), mm.iter().map(|b| b.1).max().unwrap())
        }
        WHERE if dt.is_int() => {
            let ((a0, a1), (b0, b1)) = (s(1), s(2));
            ints(a0.min(b0), a1.max(b1))
        }
        CAST if dt.is_int() || dt.is_bool() => {
            let (lo, hi) = u.src[0].min_max();
            if !lo.as_f64().is_finite() || !hi.as_f64().is_finite() {
                return full;
            }
            let (lo, hi) = (lo.as_i128(), hi.as_i128());
            if dt.is_bool() {
                return bools(lo != 0 || hi < 0, hi != 0 || lo < 0);
            }
            ints(lo, hi)
        }
        op if GroupOp::BINARY.contains(op) && !dt.is_float() && !u.src[0].dtype.is_float() => {
            let ((a0, a1), (b0, b1)) = (s(0), s(1));
            let sat = |v: [i128; 4]| (*v.iter().min().unwrap(), *v.iter().max().unwrap());
            match op {
                ADD => ints(a0.saturating_add(b0), a1.saturating_add(b1)),
                SUB => ints(a0.saturating_sub(b1), a1.saturating_sub(b0)),
                MUL => {
                    let (lo, hi) = sat([a0.saturating_mul(b0), a0.saturating_mul(b1), a1.saturating_mul(b0), a1.saturating_mul(b1)]);
                    ints(lo, hi)
                }
                MAX => ints(a0.max(b0), a1.max(b1)),
                AND if dt.is_bool() => bools(a0 != 0 && b0 != 0, a1 != 0 && b1 != 0),
                OR if dt.is_bool() => bools(a0 != 0 || b0 != 0, a1 != 0 || b1 != 0),
                AND if b0 == b1 && b0 >= 0 => ints(0, if a0 < 0 { b1 } else { a1.min(b1) }),
                SHL if b0 == b1 && (0..64).contains(&b0) => ints(a0.saturating_mul(1 << b0), a1.saturating_mul(1 << b0)),
                SHR if b0 == b1 && (0..128).contains(&b0) => ints(a0 >> b0, a1 >> b0),
                XOR if b0 == b1 && b0 == -1 => ints(!a1, !a0),
                CMPLT => bools(a1 < b0, a0 < b1),
                CMPNE => bools(a1 < b0 || b1 < a0, !(a0 == a1 && a1 == b0 && b0 == b1)),
                CMPEQ => bools(a0 == a1 && a1 == b0 && b0 == b1, !(a1 < b0 || b1 < a0)),
                FLOORDIV if a0 > a1 => ints(0, 0),
                FLOORDIV if b0.signum() * b1.signum() > 0 => {
                    let (lo, hi) = sat([floordiv(a0, b0), floordiv(a0, b1), floordiv(a1, b0), floordiv(a1, b1)]);
                    ints(lo, hi)
                }
                CDIV if b0.signum() * b1.signum() > 0 => {
                    let (lo, hi) = sat([cdiv(a0, b0), cdiv(a0, b1), cdiv(a1, b0), cdiv(a1, b1)]);
                    ints(lo, hi)
                }
                FLOORMOD if a0 > a1 => ints(0, 0),
                FLOORMOD if b0 == b1 && b0 != 0 => {
                    let c = b0;
                    if floordiv(a0, c) == floordiv(a1, c) {
                        ints(a0 - floordiv(a0, c) * c, a1 - floordiv(a1, c) * c)
                    } else if c > 0 {
                        ints(0, c - 1)
                    } else {
                        ints(c + 1, 0)
                    }
                }
                FLOORMOD if b0 > 0 => ints(0, b1 - 1),
                FLOORMOD if b1 < 0 => ints(b0 + 1, 0),
                CMOD if b0 > 0 => {
                    let m = b1 - 1;
                    if b0 == b1 && a0 >= 0 && a1 < b0 {
                        ints(a0, a1)
                    } else {
                        ints(if a0 >= 0 { 0 } else { (-m).max(a0) }, if a1 <= 0 { 0 } else { m.min(a1) })
                    }
                }
                _ => full,
            }
        }
        _ => full,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::dtypes::*;
    use Ops::*;

    #[track_caller]
    fn check(op: Ops, dt: DType, src: &[ConstValue], want: ConstValue) {
        assert_eq!(exec_alu(op, dt, src), want, "{op} {dt} {src:?}");
    }

    #[test]
    fn c_semantics() {
        check(CDIV, INT32, &[Int(-7), Int(2)], Int(-3));
        check(CMOD, INT32, &[Int(-7), Int(2)], Int(-1));
        check(FLOORDIV, WEAKINT, &[Int(-7), Int(2)], Int(-4));
        check(FLOORMOD, WEAKINT, &[Int(-7), Int(2)], Int(1));
        check(FLOORMOD, WEAKINT, &[Int(7), Int(-2)], Int(-1));
        check(CDIV, INT32, &[Int(5), Int(0)], Int(0));
        check(ADD, INT32, &[Int(i32::MAX as i128), Int(1)], Int(i32::MIN as i128));
        check(MUL, UINT8, &[Int(16), Int(17)], Int(16));
        check(SUB, UINT32, &[Int(0), Int(1)], Int(u32::MAX as i128));
        check(SHL, INT8, &[Int(1), Int(7)], Int(-128));
        check(SHR, INT32, &[Int(-8), Int(1)], Int(-4));
        check(XOR, UINT16, &[Int(0xff), Int(0x0f)], Int(0xf0));
        check(ADD, FLOAT32, &[Float(0.1), Float(0.2)], Float((0.1f32 as f64 + 0.2f32 as f64) as f32 as f64));
        check(RECIPROCAL, FLOAT32, &[Float(0.0)], Float(f64::INFINITY));
        check(RECIPROCAL, FLOAT32, &[Float(-0.0)], Float(f64::NEG_INFINITY));
        check(SQRT, FLOAT32, &[Float(-1.0)], Float(f64::NAN));
        check(LOG2, FLOAT64, &[Float(0.0)], Float(f64::NEG_INFINITY));
        check(MAX, FLOAT16, &[Float(1.0), Float(70000.0)], Float(f64::INFINITY));
        check(CMPLT, BOOL, &[Float(f64::NAN), Float(1.0)], Bool(false));
        check(CMPNE, BOOL, &[Float(f64::NAN), Float(f64::NAN)], Bool(true));
        check(WHERE, INT8, &[Bool(true), Int(300), Int(1)], Int(44));
        check(AND, BOOL, &[Bool(true), Bool(false)], Bool(false));
        check(NEG, INT8, &[Int(-128)], Int(-128));
        check(TRUNC, FLOAT32, &[Float(-2.5)], Float(-2.0));
        check(MULACC, INT32, &[Int(3), Int(4), Int(5)], Int(17));
        // (bytes 1, 255, 16, 0 of a times 2, -1, 3, 127 of b, plus 10; and a wrap past int32)
        check(DP4A, INT32, &[Int(0x0010_ff01), Int(0x7f03_ff02), Int(10)], Int(2 - 255 + 48 + 10));
        check(DP4A, INT32, &[Int(0xff), Int(0x7f), Int(i32::MAX as i128)], Int(i32::MIN as i128 + 255 * 127 - 1));
        check(DP4AS, INT32, &[Int(0x0010_ff01), Int(0x7f03_ff02), Int(10)], Int(2 + 1 + 48 + 10));
        // (DP4AS: 1, -1, 16, 0 times 2, -1, 3, 127; -128 times -127 four times; b's -128 reads as -127)
        check(DP4AS, INT32, &[Int(0x8080_8080), Int(0x8181_8181u32 as i128), Int(0)], Int(4 * 128 * 127));
        check(DP4AS, INT32, &[Int(0x0000_00ff), Int(0x0000_0080), Int(5)], Int(127 + 5));
        check(ADD, INT32, &[Invalid, Int(1)], Invalid);
    }
}
