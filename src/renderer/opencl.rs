//! The OpenCL C dialect of the C-style renderer (tinygrad `OpenCLRenderer`). In: the pieces
//! [`super::cstyle::render_with`] asks a [`CStyle`] for. Out: their OpenCL spelling: `__kernel void name(__global
//! T* data0, ...)`, grid indices from `get_group_id`/`get_local_id`, `__local` and `barrier`, the built-in vector
//! types with `vload`/`vstore` and `select`, bool buffers as bytes, halves through `vload_half` without `cl_khr_fp16`.

use super::cstyle::{any_dtype, c_cast, ctype, globals, is_bf16, literal, CStyle};
use super::LinearKernel;
use crate::dtype::{ConstValue, DType, Scalar};
use crate::uop::{Ops, UOp};

/// OpenCL C (see [`crate::renderer::Renderer::opencl`]).
pub struct OpenCL {
    /// Whether `half` is a type values can have (`cl_khr_fp16`). Without it, half values are floats rounded to half
    /// precision where they are made, and half buffers are read and written with `vload_half`/`vstore_half`, which
    /// OpenCL has everywhere.
    pub half: bool,
}

impl OpenCL {
    /// Whether values of `dt` are floats standing in for halves (see [`OpenCL::half`]).
    fn emulated_half(&self, dt: DType) -> bool {
        !self.half && dt.scalar == Scalar::Float16
    }
}

impl CStyle for OpenCL {
    fn ty(&self, dt: DType) -> &'static str {
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
    fn vtype(&self, dt: DType, _defs: &mut Vec<String>) -> String {
        format!("{}{}", self.ty(dt.scalar()), dt.count)
    }
    fn nan(&self) -> &'static str {
        "NAN"
    }
    fn infinity(&self) -> &'static str {
        "INFINITY"
    }
    fn define_var(&self, _name: &str, _slot: usize) -> Option<String> {
        None
    }
    fn workitem(&self, global: bool, dim: usize) -> String {
        format!("{}({dim})", if global { "get_group_id" } else { "get_local_id" })
    }
    fn smem_prefix(&self) -> &'static str {
        "__local"
    }
    fn barrier(&self) -> &'static str {
        "barrier(CLK_LOCAL_MEM_FENCE);"
    }
    /// Vectors through `vload`, which needs no alignment; bools are stored as bytes.
    fn load(&self, addr: &str, dt: DType, global: bool, _defs: &mut Vec<String>) -> String {
        if dt.count > 1 {
            format!("vload{}(0, &{addr})", dt.count)
        } else if dt.scalar == Scalar::Bool {
            format!("({addr}!=0)")
        } else if global && self.emulated_half(dt) {
            format!("vload_half(0, &{addr})")
        } else {
            addr.to_string()
        }
    }
    fn zero(&self, dt: DType, defs: &mut Vec<String>) -> String {
        if dt.count > 1 {
            format!("(({})(0))", self.vtype(dt, defs))
        } else {
            literal(ConstValue::Int(0), dt, self)
        }
    }
    fn store(&self, addr: &str, val: &str, dt: DType, buf: Ops, _defs: &mut Vec<String>) -> String {
        match buf {
            _ if dt.count > 1 && buf != Ops::DEFINE_REG => format!("vstore{}({val}, 0, &{addr});", dt.count),
            _ if dt.scalar == Scalar::Bool && buf != Ops::DEFINE_REG => format!("{addr} = (uchar)({val});"),
            Ops::DEFINE_GLOBAL if self.emulated_half(dt) => format!("vstore_half({val}, 0, &{addr});"),
            _ => format!("{addr} = {val};"),
        }
    }
    fn gep(&self, x: &str, lane: i64) -> String {
        format!("{x}.s{lane:x}")
    }
    fn shuffle(&self, _vt: &str, x: &str, lanes: &[i64]) -> String {
        format!("{x}.s{}", lanes.iter().map(|k| format!("{k:x}")).collect::<String>())
    }
    fn vectorize(&self, vt: &str, lanes: &[&str]) -> String {
        format!("(({vt})({}))", lanes.join(", "))
    }
    fn cast(&self, x: &str, from: DType, to: DType, defs: &mut Vec<String>) -> String {
        match from.scalar {
            _ if to.count > 1 => format!("convert_{}({x})", self.vtype(to, defs)),
            Scalar::BFloat16 if self.emulated_half(to) => format!("tg_round_half(tg_bf2f({x}))"),
            _ if self.emulated_half(to) => format!("tg_round_half((float)({x}))"),
            _ => c_cast(x, from, to, defs, self),
        }
    }
    fn bitcast(&self, x: &str, from: DType, to: DType, defs: &mut Vec<String>) -> String {
        if self.emulated_half(from) {
            format!("(({})tg_half_bits({x}))", self.ty(to))
        } else if self.emulated_half(to) {
            format!("tg_bits_half((ushort)({x}))")
        } else if to.count > 1 {
            format!("as_{}({x})", self.vtype(to, defs))
        } else {
            format!("as_{}({x})", self.ty(to))
        }
    }
    /// OpenCL's built-ins are overloaded.
    fn math(&self, name: &str, dt: DType, x: &str) -> String {
        match dt.scalar {
            Scalar::Float64 | Scalar::Float32 | Scalar::WeakFloat => format!("{name}({x})"),
            _ => format!("(({})({name}((float){x})))", self.ty(dt)),
        }
    }
    fn mulacc(&self, _dt: DType, a: &[&str]) -> String {
        format!("fma({}, {}, {})", a[0], a[1], a[2])
    }
    fn mulacc_vector(&self, u: &UOp, a: &[&str], _defs: &mut Vec<String>) -> String {
        self.mulacc(u.dtype, a)
    }
    /// `select` takes the lane masks.
    fn select_vector(&self, _dt: DType, a: &[&str], _defs: &mut Vec<String>) -> String {
        format!("select({},{},{})", a[2], a[1], a[0])
    }
    fn pow(&self, dt: DType, a: &str, b: &str) -> String {
        if dt.is_float() {
            format!("(({})pow({a}, {b}))", self.ty(dt))
        } else {
            format!("(({})pow((double){a}, (double){b}))", self.ty(dt))
        }
    }
    /// Multiply-adds fuse where the graph says, MULACC, and nowhere else (see [`crate::renderer::Renderer::mulacc`]).
    fn render_kernel(&self, k: &LinearKernel, body: &str, defs: &[String]) -> String {
        // (no bool buffers: bytes; half buffers whether or not values can be halves)
        let buf_ty = |dt: DType| match dt.scalar {
            Scalar::Bool => "uchar",
            Scalar::Float16 => "half",
            _ => self.ty(dt),
        };
        let params: Vec<String> = globals(k)
            .iter()
            .map(|(slot, dt)| format!("__global {}{}* restrict data{slot}", if *slot == 0 { "" } else { "const " }, buf_ty(*dt)))
            .chain(k.vars.iter().map(|v| format!("const int var_{v}")))
            .collect();
        let f64_used = k.uops.iter().any(|u| u.dtype.scalar == Scalar::Float64 || (u.op == Ops::POW && !u.dtype.is_float()));
        let fp64 = if f64_used { "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n" } else { "" };
        let fp16 = if self.half && any_dtype(k, |dt| dt.scalar == Scalar::Float16) {
            "#pragma OPENCL EXTENSION cl_khr_fp16 : enable\n"
        } else {
            ""
        };
        format!(
            "#pragma OPENCL FP_CONTRACT OFF\n{fp64}{fp16}{}{}{}__kernel void {}({}) {{\n{body}}}\n",
            if any_dtype(k, |dt| self.emulated_half(dt)) { HALF_PRELUDE } else { "" },
            if any_dtype(k, is_bf16) { BF16_PRELUDE } else { "" },
            defs.concat(),
            k.name,
            params.join(", ")
        )
    }
}

/// The C prelude's float <-> bfloat16 in OpenCL C, with `as_float`/`as_uint` for the bit casts.
const BF16_PRELUDE: &str = "float tg_bf2f(ushort b) { return as_float((uint)b << 16); }
ushort tg_f2bf(float f) { uint u = as_uint(f);
  u = (-u & 0x7f800000u) ? u + ((u >> 16) & 1u) + 0x7fffu : (u & 0xffffu) ? (u | 0x10000u) : u; return (ushort)(u >> 16); }
";

/// Halves without `cl_khr_fp16`: a float rounded to half precision, a half's bits, and back, through a private
/// `ushort` with `vstore_half`/`vload_half` (round to nearest even).
const HALF_PRELUDE: &str =
    "float tg_round_half(float x) { ushort t; vstore_half(x, 0, (__private half*)&t); return vload_half(0, (__private half*)&t); }
ushort tg_half_bits(float x) { ushort t; vstore_half(x, 0, (__private half*)&t); return t; }
float tg_bits_half(ushort b) { return vload_half(0, (__private half*)&b); }
";
