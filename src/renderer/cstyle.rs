//! The C renderer: linear UOps to a C function for the CPU device (clang or gcc), in the CPU kernel ABI
//! `void name(void** bufs, const int* vals, int core_start, int core_end)` where the outermost output loop
//! runs over `[core_start, core_end)`. Follows tinygrad `renderer/cstyle.py` (`CStyleLanguage`, `ClangRenderer`).

use crate::codegen::LinearKernel;
use crate::dtype::{ConstValue, DType, Scalar};
use crate::uop::{Arg, GroupOp, Ops, UOp};
use rustc_hash::FxHashMap;
use std::fmt::Write;

/// The C type of a scalar dtype (`weakint` is `int` when `index_64` is false, else `long`). Halves are clang's
/// storage type `__fp16` (arithmetic happens in float, as in tinygrad's ClangRenderer).
fn ctype(dt: DType, index_64: bool) -> &'static str {
    match dt.scalar {
        Scalar::Bool => "_Bool",
        Scalar::Int8 => "signed char",
        Scalar::UInt8 => "unsigned char",
        Scalar::Int16 => "short",
        Scalar::UInt16 => "unsigned short",
        Scalar::Int32 => "int",
        Scalar::UInt32 => "unsigned int",
        Scalar::Int64 => "long",
        Scalar::UInt64 => "unsigned long",
        Scalar::WeakInt if index_64 => "long",
        Scalar::WeakInt => "int",
        Scalar::Float16 => "__fp16",
        Scalar::BFloat16 => "__bf16",
        Scalar::Float32 | Scalar::WeakFloat => "float",
        Scalar::Float64 => "double",
        Scalar::Void => "void",
    }
}

fn literal(v: ConstValue, dt: DType, index_64: bool) -> String {
    let ty = ctype(dt, index_64);
    match v {
        ConstValue::Bool(b) => (b as u8).to_string(),
        ConstValue::Float(f) if dt.is_float() => {
            let s = if f.is_nan() {
                "__builtin_nan(\"\")".into()
            } else if f.is_infinite() {
                format!("{}__builtin_inf()", if f < 0.0 { "-" } else { "" })
            } else {
                format!("{f:?}")
            };
            match dt.scalar {
                Scalar::Float64 => s,
                _ if !f.is_finite() => format!("(({ty}){s})"),
                Scalar::Float32 | Scalar::WeakFloat => format!("{s}f"),
                _ => format!("(({ty}){s}f)"),
            }
        }
        v if dt.is_float() => literal(ConstValue::Float(v.as_f64()), dt, index_64),
        v => {
            let i = v.as_i128();
            match dt.scalar {
                Scalar::Int32 | Scalar::WeakInt if (i32::MIN as i128 + 1..=i32::MAX as i128).contains(&i) => {
                    if i < 0 {
                        format!("({i})")
                    } else {
                        i.to_string()
                    }
                }
                Scalar::UInt64 => format!("{}ul", i as u64),
                Scalar::UInt32 => format!("{}u", i as u32),
                _ if i == i64::MIN as i128 => format!("(({ty})(-9223372036854775807l-1))"),
                _ => format!("(({ty}){i}l)"),
            }
        }
    }
}

/// Renders `k` as one C function named `k.name`.
pub fn render(k: &LinearKernel) -> String {
    let uops = &k.uops;
    let index_64 = uops.iter().any(|u| {
        u.dtype.is_int() && u.dtype.is_weak() && {
            let (lo, hi) = u.bounds();
            lo < i32::MIN as i128 || hi > i32::MAX as i128
        }
    });
    let mut uses: FxHashMap<&UOp, usize> = FxHashMap::default();
    uops.iter().flat_map(|u| u.src.iter()).for_each(|s| *uses.entry(s).or_default() += 1);
    let mut r: FxHashMap<&UOp, String> = FxHashMap::default();
    let mut globals: Vec<(i64, DType)> = Vec::new();
    let (mut body, mut depth, mut n) = (String::new(), 1usize, 0usize);
    let line = |body: &mut String, depth: usize, s: &str| {
        let _ = writeln!(body, "{}{s}", "  ".repeat(depth));
    };
    for u in uops {
        let ty = |dt: DType| ctype(dt, index_64);
        let s = |i: usize| r[&u.src[i]].clone();
        let expr = match u.op {
            Ops::DEFINE_GLOBAL => {
                let Arg::Int(slot) = u.arg else { unreachable!() };
                globals.push((slot, u.dtype.base()));
                format!("data{slot}")
            }
            Ops::CONST => literal(u.const_value().unwrap(), u.dtype, index_64),
            Ops::RANGE => {
                let Arg::Int(id) = u.arg else { unreachable!() };
                let (start, end): (String, String) =
                    if id == 0 && k.outer > 0 { ("core_start".into(), "core_end".into()) } else { ("0".into(), s(0)) };
                line(&mut body, depth, &format!("for ({} ridx{id} = {start}; ridx{id} < {end}; ridx{id}++) {{", ty(u.dtype)));
                depth += 1;
                format!("ridx{id}")
            }
            Ops::END => {
                for _ in u.src.iter().filter(|s| s.op == Ops::RANGE) {
                    depth -= 1;
                    line(&mut body, depth, "}");
                }
                continue;
            }
            Ops::DEFINE_REG => {
                let Arg::Int(id) = u.arg else { unreachable!() };
                line(&mut body, depth, &format!("{} acc{id};", ty(u.dtype.base())));
                format!("acc{id}")
            }
            Ops::INDEX if u.src[0].op == Ops::DEFINE_REG => s(0),
            Ops::INDEX => format!("{}[{}]", s(0), s(1)),
            Ops::LOAD if u.src[0].src[0].op == Ops::DEFINE_REG => s(0),
            Ops::LOAD => {
                let idx = &u.src[0];
                let e = if idx.src.len() > 2 {
                    format!("({}?{}:{})", r[&idx.src[2]], s(0), literal(ConstValue::Int(0), u.dtype, index_64))
                } else {
                    s(0)
                };
                let name = format!("val{n}");
                n += 1;
                line(&mut body, depth, &format!("{} {name} = {e};", ty(u.dtype)));
                r.insert(u, name);
                continue;
            }
            Ops::STORE => {
                line(&mut body, depth, &format!("{} = {};", s(0), s(1)));
                continue;
            }
            Ops::CAST => format!("(({})({}))", ty(u.dtype), s(0)),
            Ops::BITCAST => {
                format!("({{{} __x = {}; {} __y; __builtin_memcpy(&__y, &__x, sizeof(__y)); __y;}})", ty(u.src[0].dtype), s(0), ty(u.dtype))
            }
            op if GroupOp::ALU.contains(op) => alu(u, &u.src.iter().map(|x| r[x].as_str()).collect::<Vec<_>>(), index_64),
            Ops::SINK | Ops::NOOP => continue,
            op => panic!("C renderer: can't render {op}"),
        };
        let inline = matches!(u.op, Ops::CONST | Ops::DEFINE_GLOBAL | Ops::RANGE | Ops::DEFINE_REG | Ops::INDEX)
            || (uses.get(u).copied().unwrap_or(0) <= 1 && u.op != Ops::WHERE);
        if inline {
            r.insert(u, expr);
        } else {
            let name = format!("alu{n}");
            n += 1;
            line(&mut body, depth, &format!("{} {name} = {expr};", ty(u.dtype)));
            r.insert(u, name);
        }
    }
    globals.sort_by_key(|g| g.0);
    let params: String = globals
        .iter()
        .map(|(slot, dt)| {
            format!(
                "  {}{}* restrict data{slot} = ({}*)bufs[{slot}];\n",
                if *slot == 0 { "" } else { "const " },
                ctype(*dt, false),
                ctype(*dt, false)
            )
        })
        .collect();
    format!(
        "#include <math.h>\nvoid {}(void** bufs, const int* vals, int core_start, int core_end) {{\n  (void)vals; (void)core_start; (void)core_end;\n{params}{body}}}\n",
        k.name
    )
}

/// The C expression of an ALU op over rendered operands.
fn alu(u: &UOp, a: &[&str], index_64: bool) -> String {
    let f = |name: &str| match u.dtype.scalar {
        Scalar::Float64 => format!("{name}({})", a[0]),
        Scalar::Float32 | Scalar::WeakFloat => format!("{name}f({})", a[0]),
        _ => format!("(({})({name}f((float){})))", ctype(u.dtype, index_64), a[0]),
    };
    let floor_safe = |u: &UOp| u.src[0].bounds().0 >= 0 && u.src[1].bounds().0 > 0;
    match u.op {
        Ops::ADD => format!("({}+{})", a[0], a[1]),
        Ops::SUB => format!("({}-{})", a[0], a[1]),
        Ops::MUL => format!("({}*{})", a[0], a[1]),
        Ops::FDIV | Ops::CDIV => format!("({}/{})", a[0], a[1]),
        Ops::CMOD => format!("({}%{})", a[0], a[1]),
        Ops::FLOORDIV if floor_safe(u) => format!("({}/{})", a[0], a[1]),
        Ops::FLOORMOD if floor_safe(u) => format!("({}%{})", a[0], a[1]),
        Ops::FLOORDIV => format!("(({0}/{1})-((({0}%{1})!=0)&&((({0})<0)!=(({1})<0))))", a[0], a[1]),
        Ops::FLOORMOD => format!("(((({0}%{1})+{1})%{1}))", a[0], a[1]),
        Ops::MAX => format!("(({0}<{1})?{1}:{0})", a[0], a[1]),
        Ops::CMPLT => format!("({}<{})", a[0], a[1]),
        Ops::CMPNE => format!("({}!={})", a[0], a[1]),
        Ops::CMPEQ => format!("({}=={})", a[0], a[1]),
        Ops::AND => format!("({}&{})", a[0], a[1]),
        Ops::OR => format!("({}|{})", a[0], a[1]),
        Ops::XOR => format!("({}^{})", a[0], a[1]),
        Ops::SHL => format!("({}<<{})", a[0], a[1]),
        Ops::SHR => format!("({}>>{})", a[0], a[1]),
        Ops::WHERE => format!("({}?{}:{})", a[0], a[1], a[2]),
        Ops::MULACC => format!("(({}*{})+{})", a[0], a[1], a[2]),
        Ops::NEG => format!("(-{})", a[0]),
        Ops::RECIPROCAL => format!("({}/{})", literal(ConstValue::Float(1.0), u.dtype, index_64), a[0]),
        Ops::SQRT => f("sqrt"),
        Ops::EXP2 => f("exp2"),
        Ops::LOG2 => f("log2"),
        Ops::SIN => f("sin"),
        Ops::TRUNC => f("trunc"),
        Ops::POW => match u.dtype.scalar {
            Scalar::Float64 => format!("pow({}, {})", a[0], a[1]),
            _ => format!("(({})powf({}, {}))", ctype(u.dtype, index_64), a[0], a[1]),
        },
        op => panic!("C renderer: no code for {op}"),
    }
}
