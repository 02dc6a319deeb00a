//! The C-style renderers: linear UOps to one kernel function, in C for the CPU device (clang or gcc) or in OpenCL
//! C. One base ([`render_with`]) and a [`Dialect`] of what differs, as tinygrad's `CStyleLanguage` and its
//! `ClangRenderer` and `OpenCLRenderer` (`renderer/cstyle.py`).
//!
//! C: the CPU kernel ABI `void name(void** bufs, const int* vals, int core_start, int core_end)`, where the THREAD
//! axis (the outermost loop) runs over `[core_start, core_end)`; vectors are GNU C vector types (arithmetic on them
//! is lane-wise, a scalar operand is broadcast). OpenCL C: `__kernel void name(__global T* data0, ...)`, grid
//! indices from `get_group_id`/`get_local_id`, the built-in vector types with `vload`/`vstore`.

use super::LinearKernel;
use crate::dtype::{dtypes, ConstValue, DType, Scalar};
use crate::uop::{Arg, AxisType, GroupOp, Ops, UOp};
use rustc_hash::FxHashMap;
use std::fmt::Write;

/// What one C dialect does differently (tinygrad `CStyleLanguage`'s fields and overrides).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dialect {
    /// OpenCL C rather than GNU C.
    pub opencl: bool,
    /// CUDA C++ (NVRTC) rather than GNU C: no vectors (its vector types have no arithmetic).
    pub cuda: bool,
    /// Whether `half` is a type values can have (OpenCL: `cl_khr_fp16`). Without it, half values are floats
    /// rounded to half precision where they are made, and half buffers are read and written with
    /// `vload_half`/`vstore_half`, which OpenCL has everywhere.
    pub half: bool,
}

/// GNU C for the CPU device.
pub const C: Dialect = Dialect { opencl: false, cuda: false, half: true };

impl Dialect {
    /// The type of scalar dtype `dt` in this dialect ([`ctype`] in C).
    fn ty(self, dt: DType) -> &'static str {
        if self.cuda {
            return if dt.scalar == Scalar::Bool { "bool" } else { ctype(dt, true) };
        }
        if !self.opencl {
            return ctype(dt, true);
        }
        match dt.scalar {
            Scalar::Bool => "bool",
            Scalar::Int8 => "char",
            Scalar::UInt8 => "uchar",
            Scalar::UInt16 | Scalar::BFloat16 => "ushort",
            Scalar::UInt32 => "uint",
            Scalar::UInt64 => "ulong",
            Scalar::WeakInt => "long",
            Scalar::Float16 if !self.half => "float",
            _ => ctype(dt, true),
        }
    }
    /// Whether values of `dt` are floats standing in for halves (see [`Dialect::half`]).
    fn emulated_half(self, dt: DType) -> bool {
        self.opencl && !self.half && dt.scalar == Scalar::Float16
    }
    /// The element type of a buffer of `dt` (OpenCL has no bool buffers: they are bytes).
    fn buf_ty(self, dt: DType) -> &'static str {
        if self.opencl && dt.scalar == Scalar::Bool {
            "uchar"
        } else if self.opencl && dt.scalar == Scalar::Float16 {
            "half"
        } else if self.opencl || self.cuda {
            self.ty(dt)
        } else {
            ctype(dt, false)
        }
    }
}

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

fn literal(v: ConstValue, dt: DType, d: Dialect) -> String {
    let ty = d.ty(dt);
    match v {
        ConstValue::Bool(b) => (b as u8).to_string(),
        ConstValue::Float(f) if dt.is_float() => {
            let s = if f.is_nan() {
                if d.opencl {
                    "NAN"
                } else if d.cuda {
                    "__int_as_float(0x7fc00000)"
                } else {
                    "__builtin_nan(\"\")"
                }
                .into()
            } else if f.is_infinite() {
                let inf = if d.opencl {
                    "INFINITY"
                } else if d.cuda {
                    "__int_as_float(0x7f800000)"
                } else {
                    "__builtin_inf()"
                };
                format!("{}{inf}", if f < 0.0 { "-" } else { "" })
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

/// The name of the GNU C vector type of `dt` (a vector dtype), adding its typedef to `defs` once. Vectors are
/// aligned like their elements: loads and stores of them need no alignment.
fn vtype(dt: DType, defs: &mut Vec<String>, d: Dialect) -> String {
    if d.opencl {
        return format!("{}{}", d.ty(dt.scalar()), dt.count);
    }
    if d.cuda {
        // (only tensor-core fragments are vectors in CUDA: a struct of an array, lanes `.v[k]`)
        let base = d.ty(dt.scalar());
        let name = format!("tg_{}{}", base.replace(' ', "_"), dt.count);
        let def = format!(
            "#ifndef TG_{name}\n#define TG_{name}\nstruct __align__({}) {name} {{ {base} v[{}]; }};\n#endif\n",
            dt.itemsize(),
            dt.count
        );
        if !defs.contains(&def) {
            defs.push(def);
        }
        return name;
    }
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
    render_with(k, C)
}

/// Renders `k` as one OpenCL C kernel named `k.name` (see [`crate::renderer::Renderer::opencl`]).
pub fn render_opencl(k: &LinearKernel, ren: &crate::renderer::Renderer) -> String {
    render_with(k, Dialect { opencl: true, cuda: false, half: ren.half })
}

/// Renders `k` as one CUDA kernel named `k.name` for NVRTC (see [`crate::renderer::Renderer::cuda`]).
pub fn render_cuda(k: &LinearKernel) -> String {
    render_with(k, Dialect { opencl: false, cuda: true, half: true })
}

/// Renders `k` as one kernel function in dialect `d`. Index math is `long`, as wide as a pointer, even where `int`
/// holds it: an `int` index is sign-extended at every address, which LLVM's loop analyses (SCEV) take 3-4x longer
/// over in tiled kernels.
pub fn render_with(k: &LinearKernel, d: Dialect) -> String {
    let uops = &k.uops;
    let at: FxHashMap<&UOp, usize> = uops.iter().enumerate().map(|(i, u)| (u, i)).collect();
    // per uop: its C expression or name, how often it is used, how deep its inlined expression nests
    let mut r: Vec<String> = vec![String::new(); uops.len()];
    let mut uses: Vec<usize> = vec![0; uops.len()];
    let mut nesting: Vec<usize> = vec![0; uops.len()];
    // MAX prints its operands twice, a vector MULACC its scalar operands once a lane: count them as used twice so
    // they get a name
    let twice =
        |u: &UOp, s: &UOp| u.op == Ops::MAX || (u.op == Ops::MULACC && u.dtype.count > s.dtype.count) || division_guard(u).is_some();
    uops.iter().for_each(|u| u.src.iter().for_each(|s| uses[at[s]] += if twice(u, s) { 2 } else { 1 }));
    let mut globals: Vec<(i64, DType)> = Vec::new();
    let mut vtypes: Vec<String> = Vec::new();
    let (mut body, mut depth, mut n) = (String::new(), 1usize, 0usize);
    let indent = |body: &mut String, depth: usize| (0..depth).for_each(|_| body.push_str("  "));
    for (i, u) in uops.iter().enumerate() {
        let ty = |dt: DType| d.ty(dt);
        let src: Vec<usize> = u.src.iter().map(|x| at[x]).collect();
        let s = |j: usize| r[src[j]].as_str();
        let expr = match u.op {
            Ops::DEFINE_GLOBAL => {
                let Arg::Int(slot) = u.arg else { unreachable!() };
                globals.push((slot, u.dtype.base()));
                format!("data{slot}")
            }
            Ops::CONST => literal(u.const_value().unwrap(), u.dtype, d),
            // a symbolic variable: a kernel parameter on GPUs, the launch's `vals` array on the CPU
            Ops::DEFINE_VAR => {
                // (prefixed: a variable named like a kernel's own names, `vals` or `alu0`, would clash)
                let name = u.var_name();
                if !(d.opencl || d.cuda) {
                    let k = k.vars.iter().position(|v| &**v == name).expect("LinearKernel::vars lists every DEFINE_VAR");
                    indent(&mut body, depth);
                    let _ = writeln!(body, "long var_{name} = (long)vals[{k}];");
                }
                r[i] = format!("var_{name}");
                continue;
            }
            Ops::SPECIAL => {
                let Arg::Str(name) = &u.arg else { unreachable!("SPECIAL without a name") };
                let dim = &name[name.len() - 1..];
                let f = match (d.cuda, name.starts_with('g')) {
                    (false, true) => format!("get_group_id({dim})"),
                    (false, false) => format!("get_local_id({dim})"),
                    (true, g) => {
                        format!("{}.{}", if g { "blockIdx" } else { "threadIdx" }, ["x", "y", "z"][usize::from(dim.as_bytes()[0] - b'0')])
                    }
                };
                indent(&mut body, depth);
                let _ = writeln!(body, "long {name} = (long){f}; /* {} */", s(0));
                r[i] = name.to_string();
                continue;
            }
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
                let t = if u.dtype.count > 1 { vtype(u.dtype.base(), &mut vtypes, d) } else { ty(u.dtype.base()).to_string() };
                indent(&mut body, depth);
                let _ = writeln!(body, "{t} acc{id};");
                format!("acc{id}")
            }
            Ops::DEFINE_LOCAL => {
                let Arg::Int(id) = u.arg else { unreachable!("DEFINE_LOCAL without an id") };
                indent(&mut body, depth);
                let _ =
                    writeln!(body, "{} {} temp{id}[{}];", if d.cuda { "__shared__" } else { "__local" }, ty(u.dtype.base()), u.dtype.size);
                format!("temp{id}")
            }
            Ops::BARRIER => {
                indent(&mut body, depth);
                body.push_str(if d.cuda { "__syncthreads();\n" } else { "barrier(CLK_LOCAL_MEM_FENCE);\n" });
                continue;
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
                // (OpenCL: vectors through vload/vstore, which need no alignment; bools are stored as bytes)
                let (vload, bool_buf) = (format!("vload{}(0, &{})", u.dtype.count, s(0)), d.opencl && u.dtype.scalar == Scalar::Bool);
                if u.dtype.count > 1 {
                    let vt = vtype(u.dtype, &mut vtypes, d);
                    let _ = match (gate, d.opencl) {
                        (Some(g), false) => writeln!(body, "{vt} {name} = ({g}?*(({vt}*)(&{})):(({vt}){{0}}));", s(0)),
                        (None, false) => writeln!(body, "{vt} {name} = *(({vt}*)(&{}));", s(0)),
                        (Some(g), true) => writeln!(body, "{vt} {name} = ({g}?{vload}:(({vt})(0)));"),
                        (None, true) => writeln!(body, "{vt} {name} = {vload};"),
                    };
                } else {
                    let global = u.src[0].src[0].op == Ops::DEFINE_GLOBAL;
                    let v = if bool_buf {
                        format!("({}!=0)", s(0))
                    } else if global && d.emulated_half(u.dtype) {
                        format!("vload_half(0, &{})", s(0))
                    } else {
                        s(0).to_string()
                    };
                    let _ = match gate {
                        Some(g) => writeln!(body, "{} {name} = ({g}?{v}:{});", ty(u.dtype), literal(ConstValue::Int(0), u.dtype, d)),
                        None => writeln!(body, "{} {name} = {v};", ty(u.dtype)),
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
                    if d.opencl {
                        writeln!(body, "vstore{}({}, 0, &{});", u.src[1].dtype.count, s(1), s(0))
                    } else {
                        writeln!(body, "*(({}*)(&{})) = {};", vtype(u.src[1].dtype, &mut vtypes, d), s(0), s(1))
                    }
                } else if d.opencl && u.src[1].dtype.scalar == Scalar::Bool && u.src[0].src[0].op != Ops::DEFINE_REG {
                    writeln!(body, "{} = (uchar)({});", s(0), s(1))
                } else if d.emulated_half(u.src[1].dtype) && u.src[0].src[0].op == Ops::DEFINE_GLOBAL {
                    writeln!(body, "vstore_half({}, 0, &{});", s(1), s(0))
                } else {
                    writeln!(body, "{} = {};", s(0), s(1))
                };
                continue;
            }
            Ops::GEP => {
                let Arg::Int(k) = u.arg else { unreachable!("GEP of one lane") };
                if d.cuda {
                    format!("{}.v[{k}]", s(0))
                } else if d.opencl {
                    format!("{}.s{k:x}", s(0))
                } else {
                    format!("{}[{k}]", s(0))
                }
            }
            Ops::VECTORIZE if d.cuda => {
                format!("{}{{{{{}}}}}", vtype(u.dtype, &mut vtypes, d), (0..src.len()).map(s).collect::<Vec<_>>().join(", "))
            }
            Ops::WMMA if d.cuda => {
                let Arg::Str(name) = &u.arg else { unreachable!("WMMA without a name") };
                let tc = crate::renderer::tensor_core(name).expect("the spec checks WMMA names");
                let def = wmma_cuda(tc, &mut vtypes, d);
                if !vtypes.contains(&def) {
                    vtypes.push(def);
                }
                format!("__{name}({}, {}, {})", s(0), s(1), s(2))
            }
            Ops::VECTORIZE => {
                let (open, close) = if d.opencl { ("(", ")") } else { ("{", "}") };
                let mut e = format!("(({}){open}", vtype(u.dtype, &mut vtypes, d));
                for j in 0..src.len() {
                    e.push_str(if j == 0 { "" } else { ", " });
                    e.push_str(s(j));
                }
                e + close + ")"
            }
            Ops::CAST if u.dtype.count > 1 && d.opencl => format!("convert_{}({})", vtype(u.dtype, &mut vtypes, d), s(0)),
            Ops::CAST if u.dtype.count > 1 => format!("__builtin_convertvector({}, {})", s(0), vtype(u.dtype, &mut vtypes, d)),
            Ops::CAST => cast(s(0), u.src[0].dtype, u.dtype, d),
            Ops::BITCAST if d.emulated_half(u.src[0].dtype) => format!("(({})tg_half_bits({}))", ty(u.dtype), s(0)),
            Ops::BITCAST if d.emulated_half(u.dtype) => format!("tg_bits_half((ushort)({}))", s(0)),
            Ops::BITCAST if d.cuda => format!("tg_bitcast<{}>({})", ty(u.dtype), s(0)),
            Ops::BITCAST if d.opencl => {
                let t = if u.dtype.count > 1 { vtype(u.dtype, &mut vtypes, d) } else { ty(u.dtype).to_string() };
                format!("as_{t}({})", s(0))
            }
            // a GNU vector cast between vectors of one size reinterprets the bits
            Ops::BITCAST if u.dtype.count > 1 => format!("(({})({}))", vtype(u.dtype, &mut vtypes, d), s(0)),
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
                let e =
                    alu(u, if is_bf16(u.dtype) { dtypes::FLOAT32 } else { u.dtype }, &a.iter().map(String::as_str).collect::<Vec<_>>(), d);
                if is_bf16(u.dtype) {
                    format!("tg_f2bf({e})")
                } else {
                    e
                }
            }
            // (GNU C broadcasts a scalar operand of vector arithmetic, but not of a call)
            Ops::MULACC if u.dtype.count > 1 && !d.opencl => {
                let (f, vt) = (fma_vector(u.dtype, &mut vtypes, d), vtype(u.dtype, &mut vtypes, d));
                let arg = |j: usize| match u.src[j].dtype.count {
                    1 => format!("(({vt}){{{}}})", vec![s(j); u.dtype.count as usize].join(", ")),
                    _ => s(j).to_string(),
                };
                format!("{f}({}, {}, {})", arg(0), arg(1), arg(2))
            }
            // lane-wise max of vectors: OpenCL's select takes the comparison's lane masks
            Ops::MAX if u.dtype.count > 1 && d.opencl => format!("select({0},{1},{0}<{1})", s(0), s(1)),
            // C has no vector `?:`, so select bits with the comparison's mask
            Ops::MAX if u.dtype.count > 1 => {
                let (vt, mt) = (vtype(u.dtype, &mut vtypes, d), vtype(mask_dtype(u.dtype), &mut vtypes, d));
                let (a, b) = (s(0), s(1));
                format!("((({vt})((({mt})({a}<{b})&({mt}){b})|(~({mt})({a}<{b})&({mt}){a}))))")
            }
            op if GroupOp::ALU.contains(op) => alu(u, u.dtype, &(0..src.len()).map(s).collect::<Vec<_>>(), d),
            Ops::SINK | Ops::NOOP => continue,
            op => panic!("C renderer: can't render {op}"),
        };
        // an expression nested deeper than MAX_NESTING gets a name: compilers cap bracket nesting, and a long chain
        // inlined whole would be copied once per level
        let nest = 1 + src.iter().map(|&j| nesting[j]).max().unwrap_or(0);
        let inline = matches!(u.op, Ops::CONST | Ops::DEFINE_GLOBAL | Ops::DEFINE_LOCAL | Ops::RANGE | Ops::DEFINE_REG | Ops::INDEX)
            || (uses[i] <= 1 && u.op != Ops::WHERE && nest <= MAX_NESTING);
        if inline {
            nesting[i] = nest;
            r[i] = expr;
        } else {
            let name = format!("alu{n}");
            n += 1;
            let t = if u.dtype.count > 1 { vtype(u.dtype, &mut vtypes, d) } else { ty(u.dtype).to_string() };
            indent(&mut body, depth);
            let _ = writeln!(body, "{t} {name} = {expr};");
            r[i] = name;
        }
    }
    globals.sort_by_key(|g| g.0);
    let bf16 = uops.iter().any(|u| is_bf16(u.dtype));
    if d.cuda {
        let params: Vec<String> = globals
            .iter()
            .map(|(slot, dt)| format!("{}{}* __restrict__ data{slot}", if *slot == 0 { "" } else { "const " }, d.buf_ty(*dt)))
            .chain(k.vars.iter().map(|v| format!("const int var_{v}")))
            .collect();
        let half = if uops.iter().any(|u| u.dtype.scalar == Scalar::Float16) { "#include <cuda_fp16.h>\n" } else { "" };
        return format!(
            "{half}{CUDA_PRELUDE}{}{}extern \"C\" __global__ void __launch_bounds__({}) {}({}) {{\n{body}}}\n",
            if bf16 { BF16_PRELUDE_CUDA } else { "" },
            vtypes.concat(),
            k.local_size.iter().product::<usize>(),
            k.name,
            params.join(", ")
        );
    }
    if d.opencl {
        let params: Vec<String> = globals
            .iter()
            .map(|(slot, dt)| format!("__global {}{}* restrict data{slot}", if *slot == 0 { "" } else { "const " }, d.buf_ty(*dt)))
            .chain(k.vars.iter().map(|v| format!("const int var_{v}")))
            .collect();
        let fp64 = if uops.iter().any(|u| u.dtype.scalar == Scalar::Float64 || (u.op == Ops::POW && !u.dtype.is_float())) {
            "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n"
        } else {
            ""
        };
        let fp16 = if d.half && uops.iter().any(|u| u.dtype.scalar == Scalar::Float16) {
            "#pragma OPENCL EXTENSION cl_khr_fp16 : enable\n"
        } else {
            ""
        };
        let halves = if uops.iter().any(|u| d.emulated_half(u.dtype)) { HALF_PRELUDE_OPENCL } else { "" };
        // (multiply-adds fuse where the graph says, MULACC, and nowhere else: see Renderer::mulacc)
        return format!(
            "#pragma OPENCL FP_CONTRACT OFF\n{fp64}{fp16}{halves}{}__kernel void {}({}) {{\n{body}}}\n",
            if bf16 { BF16_PRELUDE_OPENCL } else { "" },
            k.name,
            params.join(", ")
        );
    }
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
        "{HALF}{}{}void {}(void** bufs, const int* vals, int core_start, int core_end) {{\n  (void)vals; (void)core_start; (void)core_end;\n{params}{body}}}\n",
        if bf16 { BF16_PRELUDE } else { "" },
        vtypes.concat(),
        k.name
    )
}

/// The name of a function computing the fused multiply-add of GNU C vectors of `dt`, adding its definition to `defs`
/// once: x86's FMA instruction for a whole register (`__builtin_ia32_vfmadd*`, the builtins behind `_mm*_fmadd_p*`
/// in gcc's and clang's headers, without the headers' parsing cost), else one `fma` a lane. C has no lane-wise fma
/// for vectors, and kernels compile with contraction off, so `a*b + c` would not fuse.
fn fma_vector(dt: DType, defs: &mut Vec<String>, d: Dialect) -> String {
    let vt = vtype(dt, defs, d);
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
    let def = format!(
        "#ifndef TG_FMA_{vt}\n#define TG_FMA_{vt}\nstatic inline __attribute__((always_inline)) {vt} {name}({vt} a, {vt} b, {vt} c) {{ return {body}; }}\n#endif\n"
    );
    if !defs.contains(&def) {
        defs.push(def);
    }
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

/// [`BF16_PRELUDE`] in OpenCL C, with `as_float`/`as_uint` for the bit casts.
const BF16_PRELUDE_OPENCL: &str = "float tg_bf2f(ushort b) { return as_float((uint)b << 16); }
ushort tg_f2bf(float f) { uint u = as_uint(f);
  u = (-u & 0x7f800000u) ? u + ((u >> 16) & 1u) + 0x7fffu : (u & 0xffffu) ? (u | 0x10000u) : u; return (ushort)(u >> 16); }
";

/// CUDA helpers: a bit cast between types of one size (guarded, so kernels concatenate).
const CUDA_PRELUDE: &str = "#ifndef TG_BITCAST\n#define TG_BITCAST\ntemplate <class T, class F> __device__ __forceinline__ T tg_bitcast(F x) { T y; memcpy(&y, &x, sizeof(T)); return y; }\n#endif\n";

/// The CUDA function computing tensor core `tc` (`D = A·B + C` on a warp's fragments) with one PTX `mma.sync`:
/// fragments of 16-bit inputs travel as 32-bit registers of two elements each, the accumulator as floats updated in
/// place. Its fragment types are added to `defs` (they precede it there).
fn wmma_cuda(tc: &crate::renderer::TensorCore, defs: &mut Vec<String>, d: Dialect) -> String {
    let [fa, fb, fc] = &tc.fragments;
    let (ta, tb, tc_) = (
        vtype(tc.dtype_in.vec(fa.elements() as u16), defs, d),
        vtype(tc.dtype_in.vec(fb.elements() as u16), defs, d),
        vtype(tc.dtype_out.vec(fc.elements() as u16), defs, d),
    );
    let regs = |n: usize| n * tc.dtype_in.itemsize() / 4;
    let (na, nb, nc) = (regs(fa.elements()), regs(fb.elements()), fc.elements());
    let list = |from: usize, n: usize| (from..from + n).map(|i| format!("%{i}")).collect::<Vec<_>>().join(",");
    let ptx_in = if tc.dtype_in.scalar == Scalar::BFloat16 { "bf16" } else { "f16" };
    let (m, n, k) = tc.dims;
    let outs: Vec<String> = (0..nc).map(|i| format!("\"+f\"(c.v[{i}])")).collect();
    let ins: Vec<String> = (0..na).map(|i| format!("\"r\"(a_[{i}])")).chain((0..nb).map(|i| format!("\"r\"(b_[{i}])"))).collect();
    format!(
        "#ifndef TG_{name}\n#define TG_{name}\n__device__ __forceinline__ {tc_} __{name}({ta} a, {tb} b, {tc_} c) {{\n  const unsigned *a_ = (const unsigned *)&a, *b_ = (const unsigned *)&b;\n  asm(\"mma.sync.aligned.m{m}n{n}k{k}.row.col.f32.{ptx_in}.{ptx_in}.f32 {{{}}}, {{{}}}, {{{}}}, {{{}}};\"\n      : {} : {});\n  return c;\n}}\n#endif\n",
        list(0, nc),
        list(nc, na),
        list(nc + na, nb),
        list(0, nc),
        outs.join(", "),
        ins.join(", "),
        name = tc.name,
    )
}

/// [`BF16_PRELUDE`] in CUDA, with `__uint_as_float`/`__float_as_uint` for the bit casts.
const BF16_PRELUDE_CUDA: &str = "#ifndef TG_BF16\n#define TG_BF16\n__device__ __forceinline__ float tg_bf2f(unsigned short b) { return __uint_as_float((unsigned int)b << 16); }
__device__ __forceinline__ unsigned short tg_f2bf(float f) { unsigned int u = __float_as_uint(f);
  u = (-u & 0x7f800000u) ? u + ((u >> 16) & 1u) + 0x7fffu : (u & 0xffffu) ? (u | 0x10000u) : u; return (unsigned short)(u >> 16); }
#endif
";

/// Halves in OpenCL C without `cl_khr_fp16`: a float rounded to half precision, a half's bits, and back, through
/// a private `ushort` with `vstore_half`/`vload_half` (round to nearest even).
const HALF_PRELUDE_OPENCL: &str =
    "float tg_round_half(float x) { ushort t; vstore_half(x, 0, (__private half*)&t); return vload_half(0, (__private half*)&t); }
ushort tg_half_bits(float x) { ushort t; vstore_half(x, 0, (__private half*)&t); return t; }
float tg_bits_half(ushort b) { return vload_half(0, (__private half*)&b); }
";

/// The C conversion of `x` from `from` to `to`. bf16 goes through float (see [`BF16_PRELUDE`]), and so does
/// every conversion to half except from float: x86 has no direct double/int -> half instruction and the
/// libcalls may be missing (tinygrad's ClangRenderer rewrites these casts the same way).
fn cast(x: &str, from: DType, to: DType, d: Dialect) -> String {
    use Scalar::*;
    match (from.scalar, to.scalar) {
        (BFloat16, Float16) if d.emulated_half(to) => format!("tg_round_half(tg_bf2f({x}))"),
        (_, Float16) if d.emulated_half(to) => format!("tg_round_half((float)({x}))"),
        // (CUDA's half converts from and to float only; bf16 is bits)
        (BFloat16, Float16) if d.cuda => format!("((half)tg_bf2f({x}))"),
        (Float16, BFloat16) if d.cuda => format!("tg_f2bf((float)({x}))"),
        (Float16, Float32) if d.cuda => format!("((float)({x}))"),
        (Float16, _) if d.cuda => format!("(({})(float)({x}))", d.ty(to)),
        (_, Float16) if d.cuda => format!("((half)(float)({x}))"),
        (BFloat16, Float32) => format!("tg_bf2f({x})"),
        (BFloat16, _) => format!("(({})tg_bf2f({x}))", d.ty(to)),
        (Float32, BFloat16) => format!("tg_f2bf({x})"),
        (_, BFloat16) => format!("tg_f2bf((float)({x}))"),
        (Float32 | WeakFloat, Float16) => format!("((half)({x}))"),
        (_, Float16) => format!("((half)(float)({x}))"),
        _ => format!("(({})({x}))", d.ty(to)),
    }
}

/// The expression of an ALU op computing in `dt` over rendered operands. Math functions are GNU C builtins, or
/// OpenCL's overloaded built-ins.
fn alu(u: &UOp, dt: DType, a: &[&str], d: Dialect) -> String {
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

/// [`alu`] without the division guards.
fn alu_unguarded(u: &UOp, dt: DType, a: &[&str], d: Dialect) -> String {
    let f = |name: &str| match dt.scalar {
        Scalar::Float64 | Scalar::Float32 | Scalar::WeakFloat if d.opencl => format!("{name}({})", a[0]),
        Scalar::Float64 if d.cuda => format!("{name}({})", a[0]),
        Scalar::Float32 | Scalar::WeakFloat if d.cuda => format!("{name}f({})", a[0]),
        _ if d.cuda => format!("(({})({name}f((float){})))", d.ty(dt), a[0]),
        _ if d.opencl => format!("(({})({name}((float){})))", d.ty(dt), a[0]),
        Scalar::Float64 => format!("__builtin_{name}({})", a[0]),
        Scalar::Float32 | Scalar::WeakFloat => format!("__builtin_{name}f({})", a[0]),
        _ => format!("(({})(__builtin_{name}f((float){})))", d.ty(dt), a[0]),
    };
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
        // a fused multiply-add, one rounding (codegen forms MULACC for float32 and float64 only)
        Ops::MULACC if d.opencl || (d.cuda && dt.scalar == Scalar::Float64) => format!("fma({}, {}, {})", a[0], a[1], a[2]),
        Ops::MULACC if d.cuda => format!("fmaf({}, {}, {})", a[0], a[1], a[2]),
        Ops::MULACC if dt.scalar == Scalar::Float64 => format!("__builtin_fma({}, {}, {})", a[0], a[1], a[2]),
        Ops::MULACC => format!("__builtin_fmaf({}, {}, {})", a[0], a[1], a[2]),
        Ops::NEG => format!("(-{})", a[0]),
        Ops::RECIPROCAL => format!("({}/{})", literal(ConstValue::Float(1.0), dt, d), a[0]),
        Ops::SQRT => f("sqrt"),
        Ops::EXP2 => f("exp2"),
        Ops::LOG2 => f("log2"),
        Ops::SIN => f("sin"),
        Ops::TRUNC => f("trunc"),
        Ops::POW if d.cuda && dt.scalar == Scalar::Float64 => format!("pow({}, {})", a[0], a[1]),
        Ops::POW if d.cuda && dt.is_float() => format!("(({})powf((float){}, (float){}))", d.ty(dt), a[0], a[1]),
        Ops::POW if d.cuda => format!("(({})pow((double){}, (double){}))", d.ty(dt), a[0], a[1]),
        Ops::POW if d.opencl && dt.is_float() => format!("(({})pow({}, {}))", d.ty(dt), a[0], a[1]),
        Ops::POW if d.opencl => format!("(({})pow((double){}, (double){}))", d.ty(dt), a[0], a[1]),
        Ops::POW => match dt.scalar {
            Scalar::Float64 => format!("__builtin_pow({}, {})", a[0], a[1]),
            Scalar::Float32 | Scalar::WeakFloat => format!("__builtin_powf({}, {})", a[0], a[1]),
            // ints in double: exact while the result fits 53 bits
            _ if !dt.is_float() => format!("(({})__builtin_pow((double){}, (double){}))", d.ty(dt), a[0], a[1]),
            _ => format!("(({})__builtin_powf({}, {}))", d.ty(dt), a[0], a[1]),
        },
        op => panic!("C renderer: no code for {op}"),
    }
}
