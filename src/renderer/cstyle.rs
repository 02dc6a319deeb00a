//! The C renderer: linear UOps to a C function for the CPU device (clang or gcc), in the CPU kernel ABI
//! `void name(void** bufs, const int* vals, int core_start, int core_end)` where the THREAD axis (the outermost
//! loop) runs over `[core_start, core_end)`. Vectors are GNU C vector types: arithmetic on them is lane-wise, a
//! scalar operand is broadcast. Follows tinygrad `renderer/cstyle.py` (`CStyleLanguage`, `ClangRenderer`).

use crate::codegen::LinearKernel;
use crate::dtype::{dtypes, ConstValue, DType, Scalar};
use crate::uop::{Arg, AxisType, GroupOp, Ops, UOp};
use rustc_hash::FxHashMap;
use std::fmt::Write;

/// The C type of a scalar dtype (`weakint` is `int` when `index_64` is false, else `long`). Halves are `half`:
/// clang's storage type `__fp16`, or gcc's `_Float16` (see `HALF`; arithmetic happens in float, as in tinygrad's
/// ClangRenderer). bfloat16 values are their
/// bits in an `unsigned short`: clang 14 has no usable `__bf16` on x86, so every bf16 op converts to float and
/// back with bit operations (tinygrad's `pm_manual_bf16_cast` and non-native float patterns).
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
        Scalar::Float16 => "half",
        Scalar::BFloat16 => "unsigned short",
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
                Scalar::BFloat16 => format!("((unsigned short){}u)", half::bf16::from_f64(f).to_bits()),
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

/// The name of the GNU C vector type of `dt` (a vector dtype), adding its typedef to `defs` once. Vectors are
/// aligned like their elements: loads and stores of them need no alignment.
fn vtype(dt: DType, defs: &mut Vec<String>) -> String {
    let base = ctype(dt.scalar(), false);
    let name = format!("{}{}", base.replace(' ', "_"), dt.count);
    let def = format!("typedef {base} {name} __attribute__((vector_size({}), aligned({})));\n", dt.itemsize(), dt.scalar().itemsize());
    if !defs.contains(&def) {
        defs.push(def);
    }
    name
}

/// The half type: clang's storage type `__fp16` (arithmetic in float), else C23's `_Float16` (gcc).
/// Guarded, as the bf16 helpers are, so that kernels concatenated into one file (a compile batch) define it once.
const HALF: &str =
    "#ifndef TG_HALF\n#define TG_HALF\n#if defined(__clang__)\ntypedef __fp16 half;\n#else\ntypedef _Float16 half;\n#endif\n#endif\n";

/// How deep an inlined expression may nest before it is given a name.
const MAX_NESTING: usize = 32;

/// Renders `k` as one C function named `k.name`.
pub fn render(k: &LinearKernel) -> String {
    let uops = &k.uops;
    // index math in `long`, as wide as a pointer, even where `int` holds it: an `int` index is sign-extended at
    // every address, which LLVM's loop analyses (SCEV) take 3-4x longer over in tiled kernels
    let index_64 = true;
    let at: FxHashMap<&UOp, usize> = uops.iter().enumerate().map(|(i, u)| (u, i)).collect();
    // per uop: its C expression or name, how often it is used, how deep its inlined expression nests
    let mut r: Vec<String> = vec![String::new(); uops.len()];
    let mut uses: Vec<usize> = vec![0; uops.len()];
    let mut nesting: Vec<usize> = vec![0; uops.len()];
    // MAX prints its operands twice: count them as used twice so they get a name
    uops.iter().for_each(|u| u.src.iter().for_each(|s| uses[at[s]] += if u.op == Ops::MAX { 2 } else { 1 }));
    let mut globals: Vec<(i64, DType)> = Vec::new();
    let mut vtypes: Vec<String> = Vec::new();
    let (mut body, mut depth, mut n) = (String::new(), 1usize, 0usize);
    let indent = |body: &mut String, depth: usize| (0..depth).for_each(|_| body.push_str("  "));
    for (i, u) in uops.iter().enumerate() {
        let ty = |dt: DType| ctype(dt, index_64);
        let src: Vec<usize> = u.src.iter().map(|x| at[x]).collect();
        let s = |j: usize| r[src[j]].as_str();
        let expr = match u.op {
            Ops::DEFINE_GLOBAL => {
                let Arg::Int(slot) = u.arg else { unreachable!() };
                globals.push((slot, u.dtype.base()));
                format!("data{slot}")
            }
            Ops::CONST => literal(u.const_value().unwrap(), u.dtype, index_64),
            Ops::RANGE => {
                let (id, kind) = u.axis();
                let (start, end) = if kind == AxisType::Thread { ("core_start", "core_end") } else { ("0", s(0)) };
                indent(&mut body, depth);
                let _ = writeln!(body, "for ({} ridx{id} = {start}; ridx{id} < {end}; ridx{id}++) {{", ty(u.dtype));
                depth += 1;
                format!("ridx{id}")
            }
            Ops::END => {
                for _ in u.src.iter().filter(|s| s.op == Ops::RANGE) {
                    depth -= 1;
                    indent(&mut body, depth);
                    body.push_str("}\n");
                }
                continue;
            }
            Ops::DEFINE_REG => {
                let Arg::Int(id) = u.arg else { unreachable!() };
                let t = if u.dtype.count > 1 { vtype(u.dtype.base(), &mut vtypes) } else { ty(u.dtype.base()).to_string() };
                indent(&mut body, depth);
                let _ = writeln!(body, "{t} acc{id};");
                format!("acc{id}")
            }
            Ops::INDEX if u.src[0].op == Ops::DEFINE_REG => s(0).to_string(),
            Ops::INDEX => format!("{}[{}]", s(0), s(1)),
            // a register is read where it is used, never copied (the copy would go stale)
            Ops::LOAD if u.src[0].src[0].op == Ops::DEFINE_REG => {
                r[i] = s(0).to_string();
                continue;
            }
            Ops::LOAD => {
                let name = format!("val{n}");
                n += 1;
                indent(&mut body, depth);
                let gate = u.src[0].src.get(2).map(|g| r[at[g]].as_str());
                if u.dtype.count > 1 {
                    let vt = vtype(u.dtype, &mut vtypes);
                    let _ = match gate {
                        Some(g) => writeln!(body, "{vt} {name} = ({g}?*(({vt}*)(&{})):(({vt}){{0}}));", s(0)),
                        None => writeln!(body, "{vt} {name} = *(({vt}*)(&{}));", s(0)),
                    };
                } else {
                    let _ = match gate {
                        Some(g) => {
                            writeln!(body, "{} {name} = ({g}?{}:{});", ty(u.dtype), s(0), literal(ConstValue::Int(0), u.dtype, index_64))
                        }
                        None => writeln!(body, "{} {name} = {};", ty(u.dtype), s(0)),
                    };
                }
                r[i] = name;
                continue;
            }
            Ops::STORE => {
                indent(&mut body, depth);
                if let Some(g) = u.src[0].src.get(2) {
                    let _ = write!(body, "if ({}) ", r[at[g]]);
                }
                let _ = if u.src[1].dtype.count > 1 && u.src[0].src[0].op != Ops::DEFINE_REG {
                    writeln!(body, "*(({}*)(&{})) = {};", vtype(u.src[1].dtype, &mut vtypes), s(0), s(1))
                } else {
                    writeln!(body, "{} = {};", s(0), s(1))
                };
                continue;
            }
            Ops::GEP => format!(
                "{}[{}]",
                s(0),
                match u.arg {
                    Arg::Int(k) => k,
                    _ => 0,
                }
            ),
            Ops::VECTORIZE => {
                let mut e = format!("(({}){{", vtype(u.dtype, &mut vtypes));
                for j in 0..src.len() {
                    e.push_str(if j == 0 { "" } else { ", " });
                    e.push_str(s(j));
                }
                e + "})"
            }
            Ops::CAST if u.dtype.count > 1 => format!("__builtin_convertvector({}, {})", s(0), vtype(u.dtype, &mut vtypes)),
            Ops::CAST => cast(s(0), u.src[0].dtype, u.dtype, index_64),
            // a GNU vector cast between vectors of one size reinterprets the bits
            Ops::BITCAST if u.dtype.count > 1 => format!("(({})({}))", vtype(u.dtype, &mut vtypes), s(0)),
            Ops::BITCAST => {
                format!("({{{} __x = {}; {} __y; __builtin_memcpy(&__y, &__x, sizeof(__y)); __y;}})", ty(u.src[0].dtype), s(0), ty(u.dtype))
            }
            // bf16 math happens in float: operands widen, the result narrows (a WHERE only selects bits)
            op if GroupOp::ALU.contains(op) && op != Ops::WHERE && (is_bf16(u.dtype) || u.src.iter().any(|x| is_bf16(x.dtype))) => {
                let a: Vec<String> = u
                    .src
                    .iter()
                    .enumerate()
                    .map(|(j, x)| if is_bf16(x.dtype) { format!("tg_bf2f({})", s(j)) } else { s(j).to_string() })
                    .collect();
                let e = alu(
                    u,
                    if is_bf16(u.dtype) { dtypes::FLOAT32 } else { u.dtype },
                    &a.iter().map(String::as_str).collect::<Vec<_>>(),
                    index_64,
                );
                if is_bf16(u.dtype) {
                    format!("tg_f2bf({e})")
                } else {
                    e
                }
            }
            // lane-wise max of vectors: C has no vector `?:`, so select bits with the comparison's mask
            Ops::MAX if u.dtype.count > 1 => {
                let (vt, mt) = (vtype(u.dtype, &mut vtypes), vtype(mask_dtype(u.dtype), &mut vtypes));
                let (a, b) = (s(0), s(1));
                format!("((({vt})((({mt})({a}<{b})&({mt}){b})|(~({mt})({a}<{b})&({mt}){a}))))")
            }
            op if GroupOp::ALU.contains(op) => alu(u, u.dtype, &(0..src.len()).map(s).collect::<Vec<_>>(), index_64),
            Ops::SINK | Ops::NOOP => continue,
            op => panic!("C renderer: can't render {op}"),
        };
        // an expression nested deeper than MAX_NESTING gets a name: compilers cap bracket nesting, and a long chain
        // inlined whole would be copied once per level
        let nest = 1 + src.iter().map(|&j| nesting[j]).max().unwrap_or(0);
        let inline = matches!(u.op, Ops::CONST | Ops::DEFINE_GLOBAL | Ops::RANGE | Ops::DEFINE_REG | Ops::INDEX)
            || (uses[i] <= 1 && u.op != Ops::WHERE && nest <= MAX_NESTING);
        if inline {
            nesting[i] = nest;
            r[i] = expr;
        } else {
            let name = format!("alu{n}");
            n += 1;
            let t = if u.dtype.count > 1 { vtype(u.dtype, &mut vtypes) } else { ty(u.dtype).to_string() };
            indent(&mut body, depth);
            let _ = writeln!(body, "{t} {name} = {expr};");
            r[i] = name;
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
    let bf16 = if uops.iter().any(|u| is_bf16(u.dtype)) { BF16_PRELUDE } else { "" };
    format!(
        "{HALF}{bf16}{}void {}(void** bufs, const int* vals, int core_start, int core_end) {{\n  (void)vals; (void)core_start; (void)core_end;\n{params}{body}}}\n",
        vtypes.concat(),
        k.name
    )
}

/// The signed integer vector a comparison of `dt` vectors gives (same lane count and width).
fn mask_dtype(dt: DType) -> DType {
    let s = if dt.scalar().itemsize() == 8 { dtypes::INT64 } else { dtypes::INT32 };
    s.vec(dt.count)
}

fn is_bf16(dt: DType) -> bool {
    dt.scalar == Scalar::BFloat16
}

/// float <-> bfloat16 for kernels that touch bf16: a bf16 is the top half of a float32; narrowing rounds to
/// nearest even and keeps NaN a NaN (tinygrad `cast_float_to_bf16`).
const BF16_PRELUDE: &str =
    "#ifndef TG_BF16\n#define TG_BF16\nstatic inline float tg_bf2f(unsigned short b) { unsigned int u = (unsigned int)b << 16; float f; \
__builtin_memcpy(&f, &u, 4); return f; }
static inline unsigned short tg_f2bf(float f) { unsigned int u; __builtin_memcpy(&u, &f, 4);
  u = (-u & 0x7f800000u) ? u + ((u >> 16) & 1u) + 0x7fffu : (u & 0xffffu) ? (u | 0x10000u) : u; return (unsigned short)(u >> 16); }
#endif
";

/// The C conversion of `x` from `from` to `to`. bf16 goes through float (see [`BF16_PRELUDE`]), and so does
/// every conversion to half except from float: x86 has no direct double/int -> half instruction and the
/// libcalls may be missing (tinygrad's ClangRenderer rewrites these casts the same way).
fn cast(x: &str, from: DType, to: DType, index_64: bool) -> String {
    use Scalar::*;
    match (from.scalar, to.scalar) {
        (BFloat16, Float32) => format!("tg_bf2f({x})"),
        (BFloat16, _) => format!("(({})tg_bf2f({x}))", ctype(to, index_64)),
        (Float32, BFloat16) => format!("tg_f2bf({x})"),
        (_, BFloat16) => format!("tg_f2bf((float)({x}))"),
        (Float32 | WeakFloat, Float16) => format!("((half)({x}))"),
        (_, Float16) => format!("((half)(float)({x}))"),
        _ => format!("(({})({x}))", ctype(to, index_64)),
    }
}

/// The C expression of an ALU op computing in `dt` over rendered operands.
fn alu(u: &UOp, dt: DType, a: &[&str], index_64: bool) -> String {
    let f = |name: &str| match dt.scalar {
        Scalar::Float64 => format!("__builtin_{name}({})", a[0]),
        Scalar::Float32 | Scalar::WeakFloat => format!("__builtin_{name}f({})", a[0]),
        _ => format!("(({})(__builtin_{name}f((float){})))", ctype(dt, index_64), a[0]),
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
        Ops::RECIPROCAL => format!("({}/{})", literal(ConstValue::Float(1.0), dt, index_64), a[0]),
        Ops::SQRT => f("sqrt"),
        Ops::EXP2 => f("exp2"),
        Ops::LOG2 => f("log2"),
        Ops::SIN => f("sin"),
        Ops::TRUNC => f("trunc"),
        Ops::POW => match dt.scalar {
            Scalar::Float64 => format!("__builtin_pow({}, {})", a[0], a[1]),
            Scalar::Float32 | Scalar::WeakFloat => format!("__builtin_powf({}, {})", a[0], a[1]),
            // ints in double: exact while the result fits 53 bits
            _ if !dt.is_float() => format!("(({})__builtin_pow((double){}, (double){}))", ctype(dt, index_64), a[0], a[1]),
            _ => format!("(({})__builtin_powf({}, {}))", ctype(dt, index_64), a[0], a[1]),
        },
        op => panic!("C renderer: no code for {op}"),
    }
}

/// Renders `k` as an OpenCL C kernel for `ren` (see [`crate::renderer::Renderer::opencl`]).
pub fn render_opencl(k: &LinearKernel, ren: &crate::renderer::Renderer) -> String {
    let _ = ren;
    format!("// {} (OpenCL rendering not written yet)\n", k.name)
}
