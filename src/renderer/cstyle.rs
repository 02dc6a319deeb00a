//! The C-style renderers. In: a linearized kernel. Out: its source as one kernel function, in C for the CPU
//! device (clang or gcc), OpenCL C ([`super::opencl`]) or CUDA C++ ([`super::cuda`]). One base, as tinygrad's
//! `CStyleLanguage` (`renderer/cstyle.py`): [`render_with`] walks the UOps and asks a [`CStyle`] dialect how to
//! spell each piece. The trait's default methods are GNU C for the CPU ([`C`], tinygrad `ClangRenderer`); another
//! dialect is a file overriding what it spells differently.
//!
//! C: the CPU kernel ABI `void name(void** bufs, const int* vals, int core_start, int core_end)`, where the THREAD
//! axis (the outermost loop) runs over `[core_start, core_end)`; vectors are GNU C vector types (arithmetic on them
//! is lane-wise, a scalar operand is broadcast).

use super::cuda::Cuda;
use super::opencl::OpenCL;
use super::{LinearKernel, TensorCore};
use crate::dtype::{dtypes, ConstValue, DType, Scalar};
use crate::uop::{Arg, AxisType, GroupOp, Ops, UOp};
use rustc_hash::FxHashMap;
use std::borrow::Cow;
use std::fmt::Write;

/// How a C dialect spells each piece of a kernel (tinygrad `CStyleLanguage`'s fields and methods). The defaults
/// are GNU C for the CPU device; a dialect overrides what differs. `defs` collects what the kernel needs defined
/// before it (vector types, helper functions), each once, in the order first needed.
pub trait CStyle {
    /// The type of values of scalar dtype `dt`.
    fn ty(&self, dt: DType) -> &'static str {
        ctype(dt, true)
    }
    /// The type of vector dtype `dt`: a GNU C vector type, aligned like its elements (loads and stores of it need
    /// no alignment).
    fn vtype(&self, dt: DType, defs: &mut Vec<String>) -> String {
        let base = ctype(dt.scalar(), false);
        let name = format!("{}{}", base.replace(' ', "_"), dt.count);
        define(
            defs,
            format!("typedef {base} {name} __attribute__((vector_size({}), aligned({})));\n", dt.itemsize(), dt.scalar().itemsize()),
        );
        name
    }
    /// A float NaN.
    fn nan(&self) -> &'static str {
        "__builtin_nan(\"\")"
    }
    /// A float infinity.
    fn infinity(&self) -> &'static str {
        "__builtin_inf()"
    }
    /// The statement defining symbolic variable `var_{name}`, the kernel's `slot`th: read from the launch's `vals`
    /// array. `None` where variables are kernel parameters.
    fn define_var(&self, name: &str, slot: usize) -> Option<String> {
        Some(format!("long var_{name} = (long)vals[{slot}];"))
    }
    /// The index along dimension `dim` of the workgroup (`global`) or of the thread in it (tinygrad
    /// `code_for_workitem`).
    fn workitem(&self, _global: bool, _dim: usize) -> String {
        panic!("C renderer: no workgroups on this target")
    }
    /// The qualifier of workgroup shared memory (tinygrad `smem_prefix`). On a CPU, where a DEFINE_LOCAL holds an INNER
    /// axis's accumulators, none: an array on the stack of the thread running the kernel, aligned to cache lines.
    fn smem_prefix(&self) -> &'static str {
        "__attribute__((aligned(64)))"
    }
    /// The statement that waits for the workgroup's threads (tinygrad `barrier`).
    fn barrier(&self) -> &'static str {
        panic!("C renderer: no workgroups on this target")
    }
    /// The value a load of `dt` reads at element `addr` of a buffer (`global`: a kernel argument).
    fn load(&self, addr: &str, dt: DType, _global: bool, defs: &mut Vec<String>) -> String {
        if dt.count > 1 {
            format!("*(({}*)(&{addr}))", self.vtype(dt, defs))
        } else {
            addr.to_string()
        }
    }
    /// The value a gated load of `dt` gives where its gate is false.
    fn zero(&self, dt: DType, defs: &mut Vec<String>) -> String {
        if dt.count > 1 {
            format!("(({}){{0}})", self.vtype(dt, defs))
        } else {
            literal(ConstValue::Int(0), dt, self)
        }
    }
    /// The statement storing `val` of `dt` at element `addr` of a buffer `buf` defines (a DEFINE_GLOBAL,
    /// DEFINE_LOCAL or DEFINE_REG).
    fn store(&self, addr: &str, val: &str, dt: DType, buf: Ops, defs: &mut Vec<String>) -> String {
        if dt.count > 1 && buf != Ops::DEFINE_REG {
            format!("*(({}*)(&{addr})) = {val};", self.vtype(dt, defs))
        } else {
            format!("{addr} = {val};")
        }
    }
    /// Lane `lane` of vector `x`.
    fn gep(&self, x: &str, lane: i64) -> String {
        format!("{x}[{lane}]")
    }
    /// A vector of type `vt` from its lanes.
    fn vectorize(&self, vt: &str, lanes: &[&str]) -> String {
        format!("(({vt}){{{}}})", lanes.join(", "))
    }
    /// A vector of type `vt` from lanes `lanes` of vector `x` (printed once a lane: its caller names it). In GNU C a
    /// vector of the lanes: compilers make it a shuffle, as fast as `__builtin_shufflevector` (a harness of the scores
    /// kernel, clang and gcc), which gcc before 12 lacks.
    fn shuffle(&self, vt: &str, x: &str, lanes: &[i64]) -> String {
        let picked: Vec<String> = lanes.iter().map(|&k| self.gep(x, k)).collect();
        self.vectorize(vt, &picked.iter().map(String::as_str).collect::<Vec<_>>())
    }
    /// Tensor core `tc`'s `D = A·B + C` on a warp's fragments `a`, a call of a function it adds to `defs`.
    fn wmma(&self, _tc: &TensorCore, _a: &[&str], _defs: &mut Vec<String>) -> String {
        panic!("C renderer: no tensor cores on this target")
    }
    /// The conversion of `x` from `from` to `to`: GNU C's casts, bf16 and half through float. A vector of 8- or
    /// 16-bit integers becomes floats through int32 lanes, from a value gcc must hold in a vector register (an empty
    /// asm, `TG_HOLD`, for 8 to 16 bytes): gcc 12 converts them lane by lane otherwise, and a loaded vector it widens
    /// as scalar loads, one sign extension each (Q4_1 and Q8_0 matrix-vector products 1.7 and 2.9 GB/s against
    /// clang's 16 and 37; with it, 15-16 and 36-38). Vectors of halves to and from float32: `half_vector_cast`.
    fn cast(&self, x: &str, from: DType, to: DType, defs: &mut Vec<String>) -> String {
        let pair = [from.scalar, to.scalar];
        if (pair == [Scalar::Float16, Scalar::Float32] || pair == [Scalar::Float32, Scalar::Float16]) && matches!(to.count, 8 | 16) {
            return half_vector_cast(x, from, to, self, defs);
        }
        let narrow = from.is_int() && from.scalar().itemsize() <= 2 && matches!(to.scalar, Scalar::Float32 | Scalar::Float64);
        if to.count == 1 || !narrow {
            return c_cast(x, from, to, defs, self);
        }
        let held = if (8..=16).contains(&from.itemsize()) {
            define(defs, HOLD_PRELUDE.to_string());
            format!("({{ {} __w = {x}; TG_HOLD(__w); __w; }})", self.vtype(from, defs))
        } else {
            x.to_string()
        };
        let wide = format!("__builtin_convertvector({held}, {})", self.vtype(dtypes::INT32.vec(to.count), defs));
        format!("__builtin_convertvector({wide}, {})", self.vtype(to, defs))
    }
    /// The bits of `x` (a `from`) as a `to` of the same size.
    fn bitcast(&self, x: &str, from: DType, to: DType, defs: &mut Vec<String>) -> String {
        if to.count > 1 {
            // a GNU vector cast between vectors of one size reinterprets the bits
            format!("(({})({x}))", self.vtype(to, defs))
        } else {
            format!("({{{} __x = {x}; {} __y; __builtin_memcpy(&__y, &__x, sizeof(__y)); __y;}})", self.ty(from), self.ty(to))
        }
    }
    /// Math function `name` (`sqrt`, `exp2`, ...) of `x` in `dt`: GNU C builtins, narrower floats in float.
    fn math(&self, name: &str, dt: DType, x: &str) -> String {
        match dt.scalar {
            Scalar::Float64 => format!("__builtin_{name}({x})"),
            Scalar::Float32 | Scalar::WeakFloat => format!("__builtin_{name}f({x})"),
            _ => format!("(({})(__builtin_{name}f((float){x})))", self.ty(dt)),
        }
    }
    /// The fused multiply-add `a[0]*a[1] + a[2]` in `dt`, one rounding (codegen forms MULACC for float32 and float64
    /// only).
    fn mulacc(&self, dt: DType, a: &[&str]) -> String {
        let f = if dt.scalar == Scalar::Float64 { "__builtin_fma" } else { "__builtin_fmaf" };
        format!("{f}({}, {}, {})", a[0], a[1], a[2])
    }
    /// MULACC `u` of vectors, over operands `a`: C has no lane-wise fma, so a helper function (`tg_fma_*`); GNU C
    /// broadcasts a scalar operand of vector arithmetic, but not of a call, so scalar operands become vectors.
    fn mulacc_vector(&self, u: &UOp, a: &[&str], defs: &mut Vec<String>) -> String {
        let (f, vt) = (fma_vector(u.dtype, defs, self), self.vtype(u.dtype, defs));
        let arg = |j: usize| match u.src[j].dtype.count {
            1 => format!("(({vt}){{{}}})", vec![a[j]; u.dtype.count as usize].join(", ")),
            _ => a[j].to_string(),
        };
        format!("{f}({}, {}, {})", arg(0), arg(1), arg(2))
    }
    /// DP4A `a[2] + Σ_k u8(byte k of a[0]) · i8(byte k of a[1])` on int32 scalars (CUDA `__dp4a`'s sum with `a[0]`'s
    /// bytes unsigned; `signed`, DP4AS: `a[0]`'s signed, `a[1]`'s at least -127): bytes masked or sign-extended by
    /// shifts, C every dialect compiles.
    fn dp4a(&self, a: &[&str], signed: bool) -> String {
        let byte = |x: &str, k: usize| format!("(((int)((unsigned){x}<<{}))>>24)", 24 - 8 * k);
        let terms: String = (0..4)
            .map(|k| match signed {
                true => format!("+({}*({1}<-127?-127:{1}))", byte(a[0], k), byte(a[1], k)),
                false => format!("+((({}>>{})&255)*{})", a[0], 8 * k, byte(a[1], k)),
            })
            .collect();
        format!("({}{terms})", a[2])
    }
    /// DP4A `u` of vectors, over operands `a` (scalars broadcast): [`CStyle::dp4a`] a lane.
    fn dp4a_vector(&self, u: &UOp, a: &[&str], defs: &mut Vec<String>) -> String {
        dp4a_lanes(self, u, a, defs)
    }
    /// The lane-wise select of vectors of `dt` `a[1]` where lane masks `a[0]` (as wide as `dt`'s lanes) are set, else
    /// `a[2]`: C has no vector `?:`, so bits. A vector MAX is the select on its comparison's masks.
    fn select_vector(&self, dt: DType, a: &[&str], defs: &mut Vec<String>) -> String {
        let (vt, mt) = (self.vtype(dt, defs), self.vtype(mask_dtype(dt), defs));
        format!("(({vt})((({mt}){0}&({mt}){1})|(~({mt}){0}&({mt}){2})))", a[0], a[1], a[2])
    }
    /// `a` to the power `b` in `dt` (ints in double: exact while the result fits 53 bits).
    fn pow(&self, dt: DType, a: &str, b: &str) -> String {
        match dt.scalar {
            Scalar::Float64 => format!("__builtin_pow({a}, {b})"),
            Scalar::Float32 | Scalar::WeakFloat => format!("__builtin_powf({a}, {b})"),
            _ if !dt.is_float() => format!("(({})__builtin_pow((double){a}, (double){b}))", self.ty(dt)),
            _ => format!("(({})__builtin_powf({a}, {b}))", self.ty(dt)),
        }
    }
    /// The whole source: the kernel function named `k.name` around `body`, after the preludes and `defs` it needs
    /// (tinygrad `render_kernel`).
    fn render_kernel(&self, k: &LinearKernel, body: &str, defs: &[String]) -> String {
        let params: String = globals(k)
            .iter()
            .map(|&(slot, dt)| {
                let t = ctype(dt, false);
                format!("  {}{t}* restrict data{slot} = ({t}*)bufs[{slot}];\n", if slot == 0 { "" } else { "const " })
            })
            .collect();
        format!(
            "{HALF}{}{}void {}(void** bufs, const int* vals, int core_start, int core_end) {{\n  (void)vals; (void)core_start; (void)core_end;\n{params}{body}}}\n",
            if any_dtype(k, is_bf16) { BF16_PRELUDE } else { "" },
            defs.concat(),
            k.name
        )
    }
}

/// GNU C for the CPU device: [`CStyle`]'s defaults, and DP4A on vectors as the host's instructions.
pub struct C;
impl CStyle for C {
    /// DP4A on vectors: `vpdpbusd` where the host has VNNI, else on AVX2 `pmaddubsw` then `pmaddwd` by ones where the
    /// first operand's bytes are known to be at most 127 ([`max_byte`]: exact, no pair saturates), else (16 or 32
    /// bytes) each word's bytes split into even and odd 16-bit lanes, unsigned and sign-extended, summed by `pmaddwd`.
    /// DP4AS on AVX2: the first operand's signs moved onto the second by `psignb`, then as the small-byte DP4A (or
    /// `vpdpbusd`). Other widths and targets a lane at a time.
    fn dp4a_vector(&self, u: &UOp, a: &[&str], defs: &mut Vec<String>) -> String {
        let f = crate::renderer::CpuFeatures::host();
        let (x86, bytes) = (cfg!(target_arch = "x86_64"), u.dtype.itemsize());
        let avx2 = x86 && f.avx2 && host_has_avx2();
        let vt = self.vtype(u.dtype, defs);
        let (w, ct, st) = (bytes * 8, format!("tg_char{bytes}"), format!("tg_short{}", bytes / 2));
        let types =
            format!(" typedef char {ct} __attribute__((vector_size({bytes}))); typedef short {st} __attribute__((vector_size({bytes})));");
        let vnni = |x: &str, y: &str| {
            let (clang, gcc) = (format!("__builtin_ia32_vpdpbusd{w}"), format!("__builtin_ia32_vpdpbusd_v{}si", w / 32));
            format!("\n#if defined(__clang__)\n  return {clang}(c, {x}, {y});\n#else\n  return {gcc}(c, {x}, {y});\n#endif\n")
        };
        let madd = || {
            let (mask, sh) = ("0x00ff00ff", format!("__builtin_ia32_pmaddwd{w}"));
            format!(
                "{types} return c + {sh}(({st})(a & {mask}), ((({st})(b << 8)) >> 8)) + {sh}(({st})((a >> 8) & {mask}), (({st})b) >> 8); "
            )
        };
        // a's bytes all at most 127 (4- to 6-bit quants): pmaddubsw's pairs of u8 * i8 fit a short exactly, and
        // pmaddwd by ones adds the pairs (llama.cpp's `mul_sum_us8_pairs_float`): two instructions for eight
        let small = |x: &str, y: &str| {
            let ones = vec!["1"; w / 16].join(",");
            format!("{types} return c + __builtin_ia32_pmaddwd{w}(__builtin_ia32_pmaddubsw{w}({x}, {y}), ({st}){{{ones}}}); ")
        };
        // DP4AS: a's signs moved onto b (at least -127, so negating it is exact), times |a| (at most 128) as unsigned
        // bytes: llama.cpp's `mul_sum_i8_pairs`; no pair of pmaddubsw's saturates
        let signs = |dot: &dyn Fn(&str, &str) -> String, cast: &str| {
            let (x, y) = (format!("({cast})__builtin_ia32_psignb{w}(x, x)"), format!("({cast})__builtin_ia32_psignb{w}(y, x)"));
            // (b's -128 read as -127: one vpmaxsb, clang's elementwise builtin or gcc's)
            let max = format!("__builtin_ia32_pmaxsb{w}(y, ({ct}){{}} - 127)");
            let clamp =
                format!("\n#if defined(__clang__)\n  y = __builtin_elementwise_max(y, ({ct}){{}} - 127);\n#else\n  y = {max};\n#endif\n");
            format!("{types} {ct} x = ({ct})a, y = ({ct})b;{clamp}{}", dot(&x, &y))
        };
        let (ca, cb) = (format!("({ct})a"), format!("({ct})b"));
        // (a helper takes vectors only; expansion broadcasts DP4A's operands, so this is a guard)
        // (the helper's name says its form: a kernel may take several)
        let (form, body) = match (u.op, bytes) {
            _ if u.src.iter().any(|s| s.dtype.count == 1) => return dp4a_lanes(self, u, a, defs),
            (Ops::DP4AS, 16 | 32) if avx2 && f.vnni => ("s", signs(&vnni, &vt)),
            (Ops::DP4AS, 16 | 32) if avx2 => ("s", signs(&small, &ct)),
            (Ops::DP4AS, _) => return dp4a_lanes(self, u, a, defs),
            (_, 16 | 32) if x86 && f.vnni => ("", vnni("a", "b")),
            (_, 64) if x86 && f.vnni && f.avx512 => ("", vnni("a", "b")),
            (_, 16 | 32) if avx2 && max_byte(&u.src[0]).is_some_and(|m| m <= 0x7f) => ("7", small(&ca, &cb)),
            (_, 32) if avx2 => ("", madd()),
            (_, 16) if x86 => ("", madd()),
            _ => return dp4a_lanes(self, u, a, defs),
        };
        let name = format!("tg_dp4a{form}_{vt}");
        define(
            defs,
            format!("#ifndef TG_DP4A{form}_{vt}\n#define TG_DP4A{form}_{vt}\nstatic inline __attribute__((always_inline)) {vt} {name}({vt} a, {vt} b, {vt} c) {{{body}}}\n#endif\n"),
        );
        format!("{name}({}, {}, {})", a[0], a[1], a[2])
    }
}

/// The largest any byte of the int32 words `u` can hold, where its ops say: an AND with a constant bounds each byte
/// by the constant's, an OR by the larger of its operands' with every lower bit set (the 4- to 6-bit quants
/// `QuantMatrix::matmul_t` unpacks).
fn max_byte(u: &UOp) -> Option<u8> {
    match u.op {
        Ops::CONST => match u.arg {
            Arg::Const(ConstValue::Int(v)) => (v as u32).to_le_bytes().into_iter().max(),
            _ => None,
        },
        Ops::VECTORIZE => u.src.iter().map(max_byte).try_fold(0, |m, b| b.map(|b| m.max(b))),
        Ops::AND => match (max_byte(&u.src[0]), max_byte(&u.src[1])) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        },
        Ops::OR => Some(u8::MAX.checked_shr(max_byte(&u.src[0])?.max(max_byte(&u.src[1])?).leading_zeros()).unwrap_or(0)),
        _ => None,
    }
}

/// [`CStyle::dp4a_vector`]'s default: a lane at a time.
fn dp4a_lanes(d: &(impl CStyle + ?Sized), u: &UOp, a: &[&str], defs: &mut Vec<String>) -> String {
    let lanes: Vec<String> = (0..u.dtype.count as i64)
        .map(|k| {
            let g: Vec<String> = u.src.iter().zip(a).map(|(s, x)| if s.dtype.count == 1 { x.to_string() } else { d.gep(x, k) }).collect();
            d.dp4a(&[&g[0], &g[1], &g[2]], u.op == Ops::DP4AS)
        })
        .collect();
    let vt = d.vtype(u.dtype, defs);
    d.vectorize(&vt, &lanes.iter().map(String::as_str).collect::<Vec<_>>())
}

/// Whether this x86-64 CPU has AVX2's 32-byte integer instructions (`CpuFeatures::avx2` counts AVX alone too).
fn host_has_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Renders `k` as one C function named `k.name`.
pub fn render(k: &LinearKernel) -> String {
    render_with(k, &C)
}

/// Renders `k` as one OpenCL C kernel named `k.name` (see [`crate::renderer::Renderer::opencl`]).
pub fn render_opencl(k: &LinearKernel, ren: &crate::renderer::Renderer) -> String {
    render_with(k, &OpenCL { half: ren.half })
}

/// Renders `k` as one CUDA kernel named `k.name` for NVRTC (see [`crate::renderer::Renderer::cuda`]).
pub fn render_cuda(k: &LinearKernel) -> String {
    render_with(k, &Cuda)
}

/// How deep an inlined expression may nest before it is given a name.
const MAX_NESTING: usize = 32;

/// What rendering one UOp gives.
enum Code {
    /// An expression: inlined where it is used, or given a name if it is used twice or nests deep.
    Expr(String),
    /// A name a statement defined, or a value read where it is used.
    Named(String),
    /// A statement only.
    Stmt,
}

/// Renders `k` as one kernel function in dialect `d`. Index math is `long`, as wide as a pointer, even where `int`
/// holds it: an `int` index is sign-extended at every address, which LLVM's loop analyses (SCEV) take 3-4x longer
/// over in tiled kernels.
pub fn render_with(k: &LinearKernel, d: &(impl CStyle + ?Sized)) -> String {
    let uops = &k.uops;
    let at: FxHashMap<&UOp, usize> = uops.iter().enumerate().map(|(i, u)| (u, i)).collect();
    // per uop: its C expression or name, how often it is used, how deep its inlined expression nests
    let mut r: Vec<String> = vec![String::new(); uops.len()];
    let mut uses: Vec<usize> = vec![0; uops.len()];
    let mut nesting: Vec<usize> = vec![0; uops.len()];
    // MAX prints its operands twice, DP4A four times, a vector MULACC its scalar operands once a lane: count them as used twice so
    // they get a name
    let twice = |u: &UOp, s: &UOp| {
        matches!(u.op, Ops::MAX | Ops::DP4A | Ops::DP4AS)
            || matches!(u.arg, Arg::Ints(_)) && u.op == Ops::GEP
            || (u.op == Ops::MULACC && u.dtype.count > s.dtype.count)
            || division_guard(u).is_some()
    };
    uops.iter().for_each(|u| u.src.iter().for_each(|s| uses[at[s]] += if twice(u, s) { 2 } else { 1 }));
    let mut w = Writer { d, defs: Vec::new(), body: String::new(), depth: 1, names: 0 };
    for (i, u) in uops.iter().enumerate() {
        let a: Vec<&str> = u.src.iter().map(|x| r[at[x]].as_str()).collect();
        let code = match u.op {
            Ops::DEFINE_GLOBAL | Ops::CONST | Ops::DEFINE_VAR | Ops::SPECIAL | Ops::DEFINE_REG | Ops::DEFINE_LOCAL => {
                w.definition(k, u, &a)
            }
            Ops::RANGE | Ops::END | Ops::BARRIER => w.control_flow(u, &a),
            Ops::INDEX | Ops::LOAD | Ops::STORE => {
                // (a gated load or store: its INDEX's third source)
                let gate = u.src.first().and_then(|x| x.src.get(2)).map(|g| r[at[g]].as_str());
                w.memory(u, &a, gate)
            }
            Ops::GEP | Ops::VECTORIZE | Ops::WMMA | Ops::CAST | Ops::BITCAST => Code::Expr(w.lanes(u, &a)),
            op if GroupOp::ALU.contains(op) => Code::Expr(w.alu(u, &a)),
            Ops::SINK | Ops::NOOP => Code::Stmt,
            // a statement from a format string over the sources' expressions (a prefetch)
            Ops::CUSTOM => {
                let Arg::Str(f) = &u.arg else { unreachable!("CUSTOM without a format") };
                w.line(format_args!("{}", a.iter().enumerate().fold(f.to_string(), |s, (i, x)| s.replace(&format!("{{{i}}}"), x))));
                Code::Stmt
            }
            op => panic!("C renderer: can't render {op}"),
        };
        r[i] = match code {
            Code::Stmt => continue,
            Code::Named(name) => name,
            Code::Expr(expr) => {
                // an expression nested deeper than MAX_NESTING gets a name: compilers cap bracket nesting, and a long
                // chain inlined whole would be copied once per level
                let nest = 1 + u.src.iter().map(|x| nesting[at[x]]).max().unwrap_or(0);
                let inline =
                    matches!(u.op, Ops::CONST | Ops::DEFINE_GLOBAL | Ops::DEFINE_LOCAL | Ops::RANGE | Ops::DEFINE_REG | Ops::INDEX)
                        || (uses[i] <= 1 && u.op != Ops::WHERE && nest <= MAX_NESTING);
                if inline {
                    nesting[i] = nest;
                    expr
                } else {
                    let (name, t) = (w.name("alu"), w.ty_of(u.dtype));
                    w.line(format_args!("{t} {name} = {expr};"));
                    name
                }
            }
        };
    }
    d.render_kernel(k, &w.body, &w.defs)
}

/// A kernel function as it is written: its body so far, at loop depth `depth`, the definitions it needs before it,
/// and how many names (`val`, `alu`) it has given.
struct Writer<'a, D: ?Sized> {
    d: &'a D,
    defs: Vec<String>,
    body: String,
    depth: usize,
    names: usize,
}

impl<D: CStyle + ?Sized> Writer<'_, D> {
    /// Appends statement `s` at the current depth.
    fn line(&mut self, s: std::fmt::Arguments) {
        (0..self.depth).for_each(|_| self.body.push_str("  "));
        let _ = self.body.write_fmt(s);
        self.body.push('\n');
    }
    /// A new name starting with `prefix`.
    fn name(&mut self, prefix: &str) -> String {
        let name = format!("{prefix}{}", self.names);
        self.names += 1;
        name
    }
    /// The type of vector dtype `dt`.
    fn vtype(&mut self, dt: DType) -> String {
        // (a bool vector is a comparison's lane masks: ints of its operands' 4 bytes, all bits set where true)
        let dt = if dt.is_bool() { dtypes::INT32.vec(dt.count) } else { dt };
        self.d.vtype(dt, &mut self.defs)
    }
    /// The type of values of `dt`, a scalar or a vector.
    fn ty_of(&mut self, dt: DType) -> Cow<'static, str> {
        if dt.count > 1 {
            self.vtype(dt).into()
        } else {
            self.d.ty(dt).into()
        }
    }

    /// Buffers, constants, variables, grid indices, registers and shared memory.
    fn definition(&mut self, k: &LinearKernel, u: &UOp, a: &[&str]) -> Code {
        match (u.op, &u.arg) {
            (Ops::DEFINE_GLOBAL, Arg::Int(slot)) => Code::Expr(format!("data{slot}")),
            (Ops::CONST, _) => Code::Expr(literal(u.const_value().unwrap(), u.dtype, self.d)),
            // a symbolic variable: a kernel parameter on GPUs, the launch's `vals` array on the CPU (prefixed: a
            // variable named like a kernel's own names, `vals` or `alu0`, would clash)
            (Ops::DEFINE_VAR, _) => {
                let name = u.var_name();
                let slot = k.vars.iter().position(|v| &**v == name).expect("LinearKernel::vars lists every DEFINE_VAR");
                if let Some(s) = self.d.define_var(name, slot) {
                    self.line(format_args!("{s}"));
                }
                Code::Named(format!("var_{name}"))
            }
            (Ops::SPECIAL, Arg::Str(name)) => {
                let f = self.d.workitem(name.starts_with('g'), usize::from(name.as_bytes()[name.len() - 1] - b'0'));
                self.line(format_args!("long {name} = (long){f}; /* {} */", a[0]));
                Code::Named(name.to_string())
            }
            (Ops::DEFINE_REG, Arg::Int(id)) => {
                let t = self.ty_of(u.dtype.base());
                self.line(format_args!("{t} acc{id};"));
                Code::Expr(format!("acc{id}"))
            }
            (Ops::DEFINE_LOCAL, Arg::Int(id)) => {
                let t = self.ty_of(u.dtype.base());
                self.line(format_args!("{} {t} temp{id}[{}];", self.d.smem_prefix(), u.dtype.size));
                Code::Expr(format!("temp{id}"))
            }
            (op, arg) => unreachable!("{op} with arg {arg:?}"),
        }
    }

    /// Loops and barriers.
    fn control_flow(&mut self, u: &UOp, a: &[&str]) -> Code {
        match u.op {
            Ops::RANGE => {
                let (id, kind) = u.axis();
                let (start, end) = if kind == AxisType::Thread { ("core_start", "core_end") } else { ("0", a[0]) };
                self.line(format_args!("for ({} ridx{id} = {start}; ridx{id} < {end}; ridx{id}++) {{", self.d.ty(u.dtype)));
                self.depth += 1;
                Code::Expr(format!("ridx{id}"))
            }
            Ops::END => {
                for _ in u.src.iter().filter(|s| s.op == Ops::RANGE) {
                    self.depth -= 1;
                    self.line(format_args!("}}"));
                }
                Code::Stmt
            }
            Ops::BARRIER => {
                self.line(format_args!("{}", self.d.barrier()));
                Code::Stmt
            }
            op => unreachable!("{op} is not control flow"),
        }
    }

    /// Addresses, loads and stores, `gate` the expression of a gated one's condition.
    fn memory(&mut self, u: &UOp, a: &[&str], gate: Option<&str>) -> Code {
        match u.op {
            Ops::INDEX if u.src[0].op == Ops::DEFINE_REG => Code::Expr(a[0].to_string()),
            Ops::INDEX => Code::Expr(format!("{}[{}]", a[0], a[1])),
            // a register is read where it is used, never copied (the copy would go stale)
            Ops::LOAD if u.src[0].src[0].op == Ops::DEFINE_REG => Code::Named(a[0].to_string()),
            Ops::LOAD => {
                let (name, t) = (self.name("val"), self.ty_of(u.dtype));
                let v = self.d.load(a[0], u.dtype, u.src[0].src[0].op == Ops::DEFINE_GLOBAL, &mut self.defs);
                match gate {
                    Some(g) => {
                        let zero = self.d.zero(u.dtype, &mut self.defs);
                        self.line(format_args!("{t} {name} = ({g}?{v}:{zero});"))
                    }
                    None => self.line(format_args!("{t} {name} = {v};")),
                }
                Code::Named(name)
            }
            Ops::STORE => {
                let s = self.d.store(a[0], a[1], u.src[1].dtype, u.src[0].src[0].op, &mut self.defs);
                match gate {
                    Some(g) => self.line(format_args!("if ({g}) {s}")),
                    None => self.line(format_args!("{s}")),
                }
                Code::Stmt
            }
            op => unreachable!("{op} is not a memory access"),
        }
    }

    /// Lanes, vectors, tensor cores and conversions.
    fn lanes(&mut self, u: &UOp, a: &[&str]) -> String {
        let d = self.d;
        match (u.op, &u.arg) {
            // (a lane of masks is all bits or none: a bool is 0 or 1)
            (Ops::GEP, Arg::Int(lane)) if u.dtype.is_bool() => format!("({}!=0)", d.gep(a[0], *lane)),
            (Ops::GEP, Arg::Int(lane)) => d.gep(a[0], *lane),
            (Ops::GEP, Arg::Ints(lanes)) => {
                let vt = self.vtype(u.dtype);
                d.shuffle(&vt, a[0], lanes)
            }
            (Ops::VECTORIZE, _) => {
                let vt = self.vtype(u.dtype);
                d.vectorize(&vt, a)
            }
            (Ops::WMMA, Arg::Str(name)) => {
                d.wmma(super::tensor_core(name).expect("codegen makes WMMAs only from the renderer's tensor cores"), a, &mut self.defs)
            }
            (Ops::CAST, _) => match wrap_via(u.src[0].dtype, u.dtype) {
                Some(mid) => {
                    let wide = d.cast(a[0], u.src[0].dtype, mid, &mut self.defs);
                    d.cast(&wide, mid, u.dtype, &mut self.defs)
                }
                None => d.cast(a[0], u.src[0].dtype, u.dtype, &mut self.defs),
            },
            (Ops::BITCAST, _) => d.bitcast(a[0], u.src[0].dtype, u.dtype, &mut self.defs),
            (op, arg) => unreachable!("{op} with arg {arg:?}"),
        }
    }

    /// Arithmetic: bf16 math in float, lane-wise ops on vectors that have no C operator, else [`alu`].
    fn alu(&mut self, u: &UOp, a: &[&str]) -> String {
        let d = self.d;
        match u.op {
            // bf16 math happens in float: operands widen, the result narrows (a WHERE only selects bits)
            op if op != Ops::WHERE && (is_bf16(u.dtype) || u.src.iter().any(|x| is_bf16(x.dtype))) => {
                let a: Vec<String> =
                    u.src.iter().zip(a).map(|(x, s)| if is_bf16(x.dtype) { format!("tg_bf2f({s})") } else { s.to_string() }).collect();
                let e =
                    alu(u, if is_bf16(u.dtype) { dtypes::FLOAT32 } else { u.dtype }, &a.iter().map(String::as_str).collect::<Vec<_>>(), d);
                if is_bf16(u.dtype) {
                    format!("tg_f2bf({e})")
                } else {
                    e
                }
            }
            Ops::WHERE if u.src[0].dtype.count > 1 => d.select_vector(u.dtype, a, &mut self.defs),
            Ops::MULACC if u.dtype.count > 1 => d.mulacc_vector(u, a, &mut self.defs),
            Ops::DP4A | Ops::DP4AS if u.dtype.count > 1 => d.dp4a_vector(u, a, &mut self.defs),
            Ops::MAX if u.dtype.count > 1 => d.select_vector(u.dtype, &[&format!("({}<{})", a[0], a[1]), a[1], a[0]], &mut self.defs),
            // (C computes narrow ints as `int`: the result wraps back to its type, as a `char` store would)
            _ if u.dtype.count == 1 && u.dtype.is_int() && u.dtype.itemsize() < 4 => {
                format!("(({})({}))", d.ty(u.dtype), alu(u, u.dtype, a, d))
            }
            _ => alu(u, u.dtype, a, d),
        }
    }
}

/// Adds definition `def` to `defs` unless it is there.
pub(super) fn define(defs: &mut Vec<String>, def: String) {
    if !defs.contains(&def) {
        defs.push(def);
    }
}

/// The kernel's buffers, `(slot, element dtype)` by slot.
pub(super) fn globals(k: &LinearKernel) -> Vec<(i64, DType)> {
    let mut globals: Vec<(i64, DType)> = k
        .uops
        .iter()
        .filter_map(|u| match u.arg {
            Arg::Int(slot) if u.op == Ops::DEFINE_GLOBAL => Some((slot, u.dtype.base())),
            _ => None,
        })
        .collect();
    globals.sort_by_key(|g| g.0);
    globals
}

/// Whether some UOp of `k` has a dtype `f` holds for.
pub(super) fn any_dtype(k: &LinearKernel, f: impl Fn(DType) -> bool) -> bool {
    k.uops.iter().any(|u| f(u.dtype))
}

/// The C type of a scalar dtype (`weakint` is `int` when `index_64` is false, else `long`). Halves are `half`:
/// clang's storage type `__fp16`, or gcc's `_Float16` (see `HALF`; arithmetic happens in float, as in tinygrad's
/// ClangRenderer). bfloat16 values are their
/// bits in an `unsigned short`: clang 14 has no usable `__bf16` on x86, so every bf16 op converts to float and
/// back with bit operations (tinygrad's `pm_manual_bf16_cast` and non-native float patterns).
pub(super) fn ctype(dt: DType, index_64: bool) -> &'static str {
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

/// Constant `v` of `dt` in dialect `d`.
pub(super) fn literal(v: ConstValue, dt: DType, d: &(impl CStyle + ?Sized)) -> String {
    let ty = d.ty(dt);
    match v {
        ConstValue::Bool(b) => (b as u8).to_string(),
        ConstValue::Float(f) if dt.is_float() => {
            let s = if f.is_nan() {
                d.nan().into()
            } else if f.is_infinite() {
                format!("{}{}", if f < 0.0 { "-" } else { "" }, d.infinity())
            } else {
                format!("{f:?}")
            };
            match dt.scalar {
                Scalar::BFloat16 => format!("(({ty}){}u)", half::bf16::from_f64(f).to_bits()),
                Scalar::Float64 => s,
                _ if !f.is_finite() => format!("(({ty}){s})"),
                Scalar::Float32 | Scalar::WeakFloat => format!("{s}f"),
                _ => format!("(({ty}){s}f)"),
            }
        }
        v if dt.is_float() => literal(ConstValue::Float(v.as_f64()), dt, d),
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

/// The half type: clang's storage type `__fp16` (arithmetic in float), else C23's `_Float16` (gcc).
/// Guarded, as the bf16 helpers are, so that kernels concatenated into one file (a compile batch) define it once.
const HALF: &str =
    "#ifndef TG_HALF\n#define TG_HALF\n#if defined(__clang__)\ntypedef __fp16 half;\n#else\ntypedef _Float16 half;\n#endif\n#endif\n";

/// The name of a function computing the fused multiply-add of GNU C vectors of `dt`, adding its definition to `defs`
/// once: x86's FMA instruction for a whole register (`__builtin_ia32_vfmadd*`, the builtins behind `_mm*_fmadd_p*`
/// in gcc's and clang's headers, without the headers' parsing cost), else one `fma` a lane. C has no lane-wise fma
/// for vectors, and kernels compile with contraction off, so `a*b + c` would not fuse.
fn fma_vector(dt: DType, defs: &mut Vec<String>, d: &(impl CStyle + ?Sized)) -> String {
    let vt = d.vtype(dt, defs);
    let double = dt.scalar == Scalar::Float64;
    let x86 = match (cfg!(target_arch = "x86_64"), dt.itemsize(), double) {
        (false, ..) => None,
        (true, 16, false) => Some("__builtin_ia32_vfmaddps(a, b, c)"),
        (true, 32, false) => Some("__builtin_ia32_vfmaddps256(a, b, c)"),
        (true, 64, false) => Some("__builtin_ia32_vfmaddps512_mask(a, b, c, (unsigned short)-1, 4)"),
        (true, 16, true) => Some("__builtin_ia32_vfmaddpd(a, b, c)"),
        (true, 32, true) => Some("__builtin_ia32_vfmaddpd256(a, b, c)"),
        (true, 64, true) => Some("__builtin_ia32_vfmaddpd512_mask(a, b, c, (unsigned char)-1, 4)"),
        _ => None,
    };
    let f = if double { "__builtin_fma" } else { "__builtin_fmaf" };
    let body = x86.map_or_else(
        || format!("({vt}){{{}}}", (0..dt.count).map(|k| format!("{f}(a[{k}], b[{k}], c[{k}])")).collect::<Vec<_>>().join(", ")),
        str::to_string,
    );
    let name = format!("tg_fma_{vt}");
    define(
        defs,
        format!(
            "#ifndef TG_FMA_{vt}\n#define TG_FMA_{vt}\nstatic inline __attribute__((always_inline)) {vt} {name}({vt} a, {vt} b, {vt} c) {{ return {body}; }}\n#endif\n"
        ),
    );
    name
}

/// The signed integer vector a comparison of `dt` vectors gives (same lane count and width).
fn mask_dtype(dt: DType) -> DType {
    let s = match dt.scalar().itemsize() {
        1 => dtypes::INT8,
        2 => dtypes::INT16,
        8 => dtypes::INT64,
        _ => dtypes::INT32,
    };
    s.vec(dt.count)
}

/// Whether `dt` is bfloat16 (a scalar or vector of it).
pub(super) fn is_bf16(dt: DType) -> bool {
    dt.scalar == Scalar::BFloat16
}

/// `TG_HOLD(v)`: under gcc 12 and later on x86-64, an empty asm that takes `v` in a vector register, so that gcc
/// widens it as a vector (see [`CStyle::cast`]); nothing under clang, which widens it well without, and whose `x`
/// constraint rejects an 8-byte vector ("couldn't allocate output register"), nor under older gcc (untested).
const HOLD_PRELUDE: &str = "#ifndef TG_HOLD\n#if defined(__x86_64__) && !defined(__clang__) && __GNUC__ >= 12\n\
#define TG_HOLD(v) __asm__(\"\" : \"+x\"(v))\n#else\n#define TG_HOLD(v) ((void)0)\n#endif\n#endif\n";

/// float <-> bfloat16 for kernels that touch bf16: a bf16 is the top half of a float32; narrowing rounds to
/// nearest even and keeps NaN a NaN (tinygrad `cast_float_to_bf16`).
const BF16_PRELUDE: &str =
    "#ifndef TG_BF16\n#define TG_BF16\nstatic inline float tg_bf2f(unsigned short b) { unsigned int u = (unsigned int)b << 16; float f; \
__builtin_memcpy(&f, &u, 4); return f; }
static inline unsigned short tg_f2bf(float f) { unsigned int u; __builtin_memcpy(&u, &f, 4);
  u = (-u & 0x7f800000u) ? u + ((u >> 16) & 1u) + 0x7fffu : (u & 0xffffu) ? (u | 0x10000u) : u; return (unsigned short)(u >> 16); }
#endif
";

/// A vector of 8 or 16 halves as float32, or float32 as halves, through a function in `defs`: under gcc on x86-64
/// with F16C (8) or AVX-512 (16) one instruction's conversion, rounding to nearest even (gcc 12 converts
/// `__builtin_convertvector` of halves lane by lane: Gemma 3's Q8_0 output projection, its scales halves, 11 -> 7.4
/// ms under gcc, clang's 5.5; SmolLM2's decode step 8.8 -> 5.7 ms), else `__builtin_convertvector`.
fn half_vector_cast(x: &str, from: DType, to: DType, d: &(impl CStyle + ?Sized), defs: &mut Vec<String>) -> String {
    let (ft, tt, n) = (d.vtype(from, defs), d.vtype(to, defs), to.count);
    let isa = if n == 16 { "__AVX512F__" } else { "__F16C__" };
    let (gcc, name) = match (from.scalar, n) {
        (Scalar::Float16, 16) => (format!("__builtin_ia32_vcvtph2ps512_mask((tg_hbits{n})x, ({tt}){{0}}, (unsigned short)-1, 4)"), "h2f"),
        (Scalar::Float16, _) => (format!("__builtin_ia32_vcvtph2ps256((tg_hbits{n})x)"), "h2f"),
        (_, 16) => (format!("({tt})__builtin_ia32_vcvtps2ph512_mask(x, 0, (tg_hbits{n}){{0}}, (unsigned short)-1)"), "f2h"),
        _ => (format!("({tt})__builtin_ia32_vcvtps2ph256(x, 0)"), "f2h"),
    };
    define(
        defs,
        format!("#ifndef TG_HBITS{n}\n#define TG_HBITS{n}\ntypedef short tg_hbits{n} __attribute__((vector_size({})));\n#endif\n", 2 * n),
    );
    define(
        defs,
        format!(
            "#ifndef TG_{name}_{tt}\n#define TG_{name}_{tt}\n\
static inline __attribute__((always_inline)) {tt} tg_{name}_{tt}({ft} x) {{\n#if defined(__x86_64__) && !defined(__clang__) && defined({isa})\n  \
return {gcc};\n#else\n  return __builtin_convertvector(x, {tt});\n#endif\n}}\n#endif\n"
        ),
    );
    format!("tg_{name}_{tt}({x})")
}

/// GNU C's conversion of `x` from `from` to `to` (the default [`CStyle::cast`]; dialects fall back to it). bf16 goes
/// through float (see [`BF16_PRELUDE`]), and so does every conversion to half except from float: x86 has no direct
/// double/int -> half instruction and the libcalls may be missing (tinygrad's ClangRenderer rewrites these casts
/// the same way).
pub(super) fn c_cast(x: &str, from: DType, to: DType, defs: &mut Vec<String>, d: &(impl CStyle + ?Sized)) -> String {
    use Scalar::*;
    if to.count > 1 {
        return format!("__builtin_convertvector({x}, {})", d.vtype(to, defs));
    }
    match (from.scalar, to.scalar) {
        (BFloat16, Float32) => format!("tg_bf2f({x})"),
        (BFloat16, _) => format!("(({})tg_bf2f({x}))", d.ty(to)),
        (Float32, BFloat16) => format!("tg_f2bf({x})"),
        (_, BFloat16) => format!("tg_f2bf((float)({x}))"),
        (Float32 | WeakFloat, Float16) => format!("((half)({x}))"),
        (_, Float16) => format!("((half)(float)({x}))"),
        _ => format!("(({})({x}))", d.ty(to)),
    }
}

/// For a cast from a float to an int narrower than 32 bits or to uint32, the signed int of the same lane count that
/// it goes through: C leaves a float out of the target's range undefined (clang on AVX2 saturates `(unsigned
/// char)-1.5f` to 0, on AVX-512 it wraps to 255), the wider int holds it, and the int-to-int step wraps as numpy,
/// torch, the interpreter and the constant folder do (`-1.5 -> 255`, `300.0 -> 44`). uint64 and the wider ints
/// convert directly.
fn wrap_via(from: DType, to: DType) -> Option<DType> {
    use Scalar::*;
    let via = match to.scalar {
        Int8 | UInt8 | Int16 | UInt16 => dtypes::INT32,
        UInt32 => dtypes::INT64,
        _ => return None,
    };
    from.is_float().then(|| via.vec(to.count))
}

/// The expression of an ALU op computing in `dt` over rendered operands.
fn alu(u: &UOp, dt: DType, a: &[&str], d: &(impl CStyle + ?Sized)) -> String {
    // (an integer division's defined values where C's are undefined or trap: see `division_guard`)
    let Some(minus_one) = division_guard(u) else { return alu_unguarded(u, dt, a, d) };
    let (b, zero) = (a[1], literal(ConstValue::Int(0), dt, d));
    match u.op {
        Ops::CDIV | Ops::FLOORDIV if minus_one => format!("(({b}==0)?{zero}:(({b}==-1)?(-{}):{}))", a[0], alu_unguarded(u, dt, a, d)),
        Ops::CDIV | Ops::FLOORDIV => format!("(({b}==0)?{zero}:{})", alu_unguarded(u, dt, a, d)),
        _ if minus_one => format!("(({b}==0||{b}==-1)?{zero}:{})", alu_unguarded(u, dt, a, d)),
        _ => format!("(({b}==0)?{zero}:{})", alu_unguarded(u, dt, a, d)),
    }
}

/// For an integer division or remainder `u` whose divisor may be 0, `Some(whether it may also be the dividend's
/// dtype's minimum divided by -1)`: C leaves both undefined (x86 traps, killing the process). Defined here as numpy
/// does: `x / 0 = x % 0 = 0` (trunc and floor alike), `MIN / -1 = MIN` (it wraps), `MIN % -1 = 0`; the interpreter
/// and the constant folder compute the same ([`crate::uop::exec_alu`]). `None` when the divisor's bounds rule both
/// out (a constant divisor, say): the division is plain. Only 32- and 64-bit ints can overflow (narrower ones
/// divide as `int`).
fn division_guard(u: &UOp) -> Option<bool> {
    if !matches!(u.op, Ops::CDIV | Ops::CMOD | Ops::FLOORDIV | Ops::FLOORMOD) || u.dtype.is_float() {
        return None;
    }
    let (lo, hi) = u.src[1].bounds();
    let minus_one =
        !u.dtype.is_unsigned() && u.dtype.itemsize() >= 4 && lo <= -1 && hi >= -1 && u.src[0].bounds().0 <= u.dtype.min().as_i128();
    (lo <= 0 && hi >= 0 || minus_one).then_some(minus_one)
}

/// [`alu`] without the division guards: C's operators, and the dialect's math functions, fma and pow.
fn alu_unguarded(u: &UOp, dt: DType, a: &[&str], d: &(impl CStyle + ?Sized)) -> String {
    // (unsigned ints floor as they truncate)
    let floor_safe = |u: &UOp| u.dtype.is_unsigned() || (u.src[0].bounds().0 >= 0 && u.src[1].bounds().0 > 0);
    match u.op {
        Ops::ADD => format!("({}+{})", a[0], a[1]),
        Ops::SUB => format!("({}-{})", a[0], a[1]),
        Ops::MUL => format!("({}*{})", a[0], a[1]),
        Ops::FDIV | Ops::CDIV => format!("({}/{})", a[0], a[1]),
        Ops::CMOD => format!("({}%{})", a[0], a[1]),
        Ops::FLOORDIV if floor_safe(u) => format!("({}/{})", a[0], a[1]),
        Ops::FLOORMOD if floor_safe(u) => format!("({}%{})", a[0], a[1]),
        Ops::FLOORDIV => format!("(({0}/{1})-((({0}%{1})!=0)&&((({0})<0)!=(({1})<0))))", a[0], a[1]),
        // (the remainder moved into the divisor's sign: `r + b` where their signs differ, which cannot overflow)
        Ops::FLOORMOD => format!("(((({0}%{1})!=0)&&((({0}%{1})<0)!=(({1})<0)))?(({0}%{1})+{1}):({0}%{1}))", a[0], a[1]),
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
        Ops::MULACC => d.mulacc(dt, a),
        Ops::DP4A | Ops::DP4AS => d.dp4a(a, u.op == Ops::DP4AS),
        Ops::NEG => format!("(-{})", a[0]),
        Ops::RECIPROCAL => format!("({}/{})", literal(ConstValue::Float(1.0), dt, d), a[0]),
        Ops::SQRT => d.math("sqrt", dt, a[0]),
        Ops::EXP2 => d.math("exp2", dt, a[0]),
        Ops::LOG2 => d.math("log2", dt, a[0]),
        Ops::SIN => d.math("sin", dt, a[0]),
        Ops::TRUNC => d.math("trunc", dt, a[0]),
        Ops::POW => d.pow(dt, a[0], a[1]),
        op => panic!("C renderer: no code for {op}"),
    }
}
