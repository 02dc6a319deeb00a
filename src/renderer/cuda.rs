//! The CUDA C++ dialect of the C-style renderer (tinygrad `CUDARenderer`), for NVRTC. In: the pieces
//! [`super::cstyle::render_with`] asks a [`CStyle`] for. Out: their CUDA spelling: `blockIdx`/`threadIdx`,
//! `__shared__` and `__syncthreads`, `cuda_fp16` halves, no vectors (CUDA's have no arithmetic: lanes are
//! unrolled) but tensor-core fragments as structs, and WMMA as an inline-PTX `mma.sync` function.

use super::cstyle::{any_dtype, c_cast, ctype, define, globals, is_bf16, CStyle};
use super::LinearKernel;
use super::TensorCore;
use crate::dtype::{DType, Scalar};

/// CUDA C++ for NVRTC (see [`crate::renderer::Renderer::cuda`]).
pub struct Cuda;

impl CStyle for Cuda {
    fn ty(&self, dt: DType) -> &'static str {
        if dt.scalar == Scalar::Bool {
            "bool"
        } else {
            ctype(dt, true)
        }
    }
    /// Only tensor-core fragments are vectors in CUDA: a struct of an array, lanes `.v[k]`.
    fn vtype(&self, dt: DType, defs: &mut Vec<String>) -> String {
        let base = self.ty(dt.scalar());
        let name = format!("tg_{}{}", base.replace(' ', "_"), dt.count);
        define(
            defs,
            format!(
                "#ifndef TG_{name}\n#define TG_{name}\nstruct __align__({}) {name} {{ {base} v[{}]; }};\n#endif\n",
                dt.itemsize(),
                dt.count
            ),
        );
        name
    }
    fn nan(&self) -> &'static str {
        "__int_as_float(0x7fc00000)"
    }
    fn infinity(&self) -> &'static str {
        "__int_as_float(0x7f800000)"
    }
    fn define_var(&self, _name: &str, _slot: usize) -> Option<String> {
        None
    }
    fn workitem(&self, global: bool, dim: usize) -> String {
        format!("{}.{}", if global { "blockIdx" } else { "threadIdx" }, ["x", "y", "z"][dim])
    }
    fn smem_prefix(&self) -> &'static str {
        "__shared__"
    }
    fn barrier(&self) -> &'static str {
        "__syncthreads();"
    }
    fn gep(&self, x: &str, lane: i64) -> String {
        format!("{x}.v[{lane}]")
    }
    fn vectorize(&self, vt: &str, lanes: &[&str]) -> String {
        format!("{vt}{{{{{}}}}}", lanes.join(", "))
    }
    fn wmma(&self, tc: &TensorCore, a: &[&str], defs: &mut Vec<String>) -> String {
        let def = wmma(tc, defs, self);
        define(defs, def);
        format!("__{}({}, {}, {})", tc.name, a[0], a[1], a[2])
    }
    /// CUDA's half converts from and to float only; bf16 is bits.
    fn cast(&self, x: &str, from: DType, to: DType, defs: &mut Vec<String>) -> String {
        use Scalar::*;
        match (from.scalar, to.scalar) {
            _ if to.count > 1 => c_cast(x, from, to, defs, self),
            (BFloat16, Float16) => format!("((half)tg_bf2f({x}))"),
            (Float16, BFloat16) => format!("tg_f2bf((float)({x}))"),
            (Float16, Float32) => format!("((float)({x}))"),
            (Float16, _) => format!("(({})(float)({x}))", self.ty(to)),
            (_, Float16) => format!("((half)(float)({x}))"),
            _ => c_cast(x, from, to, defs, self),
        }
    }
    fn bitcast(&self, x: &str, _from: DType, to: DType, _defs: &mut Vec<String>) -> String {
        format!("tg_bitcast<{}>({x})", self.ty(to))
    }
    fn math(&self, name: &str, dt: DType, x: &str) -> String {
        match dt.scalar {
            Scalar::Float64 => format!("{name}({x})"),
            Scalar::Float32 | Scalar::WeakFloat => format!("{name}f({x})"),
            _ => format!("(({})({name}f((float){x})))", self.ty(dt)),
        }
    }
    fn mulacc(&self, dt: DType, a: &[&str]) -> String {
        format!("{}({}, {}, {})", if dt.scalar == Scalar::Float64 { "fma" } else { "fmaf" }, a[0], a[1], a[2])
    }
    fn pow(&self, dt: DType, a: &str, b: &str) -> String {
        match dt.scalar {
            Scalar::Float64 => format!("pow({a}, {b})"),
            _ if dt.is_float() => format!("(({})powf((float){a}, (float){b}))", self.ty(dt)),
            _ => format!("(({})pow((double){a}, (double){b}))", self.ty(dt)),
        }
    }
    fn render_kernel(&self, k: &LinearKernel, body: &str, defs: &[String]) -> String {
        let params: Vec<String> = globals(k)
            .iter()
            .map(|(slot, dt)| format!("{}{}* __restrict__ data{slot}", if *slot == 0 { "" } else { "const " }, self.ty(*dt)))
            .chain(k.vars.iter().map(|v| format!("const int var_{v}")))
            .collect();
        let half = if any_dtype(k, |dt| dt.scalar == Scalar::Float16) { "#include <cuda_fp16.h>\n" } else { "" };
        format!(
            "{half}{PRELUDE}{}{}extern \"C\" __global__ void __launch_bounds__({}) {}({}) {{\n{body}}}\n",
            if any_dtype(k, is_bf16) { BF16_PRELUDE } else { "" },
            defs.concat(),
            k.local_size.iter().product::<usize>(),
            k.name,
            params.join(", ")
        )
    }
}

/// CUDA helpers: a bit cast between types of one size (guarded, so kernels concatenate).
const PRELUDE: &str = "#ifndef TG_BITCAST\n#define TG_BITCAST\ntemplate <class T, class F> __device__ __forceinline__ T tg_bitcast(F x) { T y; memcpy(&y, &x, sizeof(T)); return y; }\n#endif\n";

/// The C prelude's float <-> bfloat16 in CUDA, with `__uint_as_float`/`__float_as_uint` for the bit casts.
const BF16_PRELUDE: &str = "#ifndef TG_BF16\n#define TG_BF16\n__device__ __forceinline__ float tg_bf2f(unsigned short b) { return __uint_as_float((unsigned int)b << 16); }
__device__ __forceinline__ unsigned short tg_f2bf(float f) { unsigned int u = __float_as_uint(f);
  u = (-u & 0x7f800000u) ? u + ((u >> 16) & 1u) + 0x7fffu : (u & 0xffffu) ? (u | 0x10000u) : u; return (unsigned short)(u >> 16); }
#endif
";

/// The CUDA function computing tensor core `tc` (`D = A·B + C` on a warp's fragments) with one PTX `mma.sync`:
/// fragments of 16-bit inputs travel as 32-bit registers of two elements each, the accumulator as floats updated in
/// place. Its fragment types are added to `defs` (they precede it there).
fn wmma(tc: &TensorCore, defs: &mut Vec<String>, d: &Cuda) -> String {
    let [fa, fb, fc] = &tc.fragments;
    let (ta, tb, tc_) = (
        d.vtype(tc.dtype_in.vec(fa.elements() as u16), defs),
        d.vtype(tc.dtype_in.vec(fb.elements() as u16), defs),
        d.vtype(tc.dtype_out.vec(fc.elements() as u16), defs),
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
