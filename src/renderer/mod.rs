//! Rendering. In: a linearized kernel. Out: source text for a device's compiler. One file per language family:
//! `cstyle` (C for the CPU, OpenCL C and CUDA C++, one base with a dialect each), `python` (a listing of the UOps,
//! which the interpreter device runs). [`Renderer`]
//! describes what a target offers, which codegen reads to choose and check optimizations, and the language it
//! prints (tinygrad `renderer/__init__.py` `Renderer`).

pub mod cstyle;
pub mod python;

use crate::codegen::LinearKernel;

use std::sync::LazyLock;

/// Bytes past a buffer's end that CPU kernels may read (the CPU allocator allocates them): one AVX-512 vector,
/// so a vector load in a padded lane (PADTO on an output axis) stays inside the allocation.
pub const CPU_OVERREAD: usize = 64;

/// What a render target offers the optimizer (tinygrad `Renderer`'s fields).
#[derive(Clone, Debug, PartialEq, Eq)]

pub struct Renderer {
    /// The device this renders for (`CPU`, `PYTHON`).
    pub device: &'static str,
    /// The language [`Renderer::render`] prints.
    pub language: Language,
    /// GPU workgroups (LOCAL opts).
    pub has_local: bool,
    /// Workgroup shared memory (GROUP and GROUPTOP opts).
    pub has_shared: bool,
    /// Cores the launcher splits a THREAD axis over (0: no THREAD opt).
    pub threads: usize,
    /// Width of the widest vector register in bytes (16 for SSE/NEON, 32 for AVX2, 64 for AVX-512; 0: no vectors).
    pub vector_bytes: usize,
    /// Vector registers available to a register tile (16 on AVX2, 32 on AVX-512 and NEON).
    pub vector_registers: usize,
    /// Bytes past a buffer's end that a kernel may read, whose values it discards (the allocator's guarantee:
    /// [`crate::runtime::OVERREAD`] on the CPU); lets loads in padded lanes go unmasked.
    pub overread: usize,
    /// Whether half-precision buffers and math render (on OpenCL only with `cl_khr_fp16`; a kernel touching
    /// halves elsewhere fails to compile with a message that says so).
    pub half: bool,
    /// Ops the renderer has no code for, which codegen builds from ops it has (tinygrad: the ops missing from a
    /// renderer's `code_for_op`, which its decompositions rewrite): on the CPU, float32 EXP2 (a polynomial, so it
    /// vectorizes) and THREEFRY.
    pub decomposed: &'static [crate::uop::Ops],
}

/// The source language a [`Renderer`] prints: one file of this module each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Language {
    /// C with GNU vector types, for the CPU device's C compiler ([`cstyle`]; tinygrad `ClangRenderer`).
    C,
    /// The linear UOps listed one a line, which the interpreter device runs ([`python`]; tinygrad `PythonRenderer`).
    UOps,
    /// OpenCL C ([`cstyle`]; tinygrad `OpenCLRenderer`).
    OpenCL,
    /// CUDA C++ for NVRTC ([`cstyle`]; tinygrad `CUDARenderer`).
    Cuda,
}

impl Renderer {
    /// The source of `k` in this renderer's [`Language`].
    pub fn render(&self, k: &LinearKernel) -> String {
        match self.language {
            Language::C => cstyle::render(k),
            Language::OpenCL => cstyle::render_opencl(k, self),
            Language::Cuda => cstyle::render_cuda(k),
            Language::UOps => python::render(k),
        }
    }

    /// The C renderer for this machine: vector width and register count detected at run time, threads from
    /// `NUM_CPU_THREADS`.
    pub fn cpu() -> Renderer {
        static VECTORS: LazyLock<(usize, usize)> = LazyLock::new(host_vectors);
        let threads = usize::try_from(crate::helpers::NUM_CPU_THREADS.value()).unwrap_or(1).max(1);
        Renderer {
            device: "CPU",
            language: Language::C,
            has_local: false,
            has_shared: false,
            threads,
            vector_bytes: VECTORS.0,
            vector_registers: VECTORS.1,
            overread: CPU_OVERREAD,
            half: true,
            decomposed: &[crate::uop::Ops::EXP2, crate::uop::Ops::THREEFRY],
        }
    }

    /// The OpenCL C renderer (tinygrad `OpenCLRenderer`): workgroups and shared memory, 16-byte vectors (`float4`),
    /// no slack past a buffer's end, halves only where the device has `cl_khr_fp16` (`fp16`).
    pub fn opencl(fp16: bool) -> Renderer {
        Renderer {
            device: "CL",
            language: Language::OpenCL,
            has_local: true,
            has_shared: true,
            threads: 1,
            vector_bytes: 16,
            vector_registers: 16,
            overread: 0,
            half: fp16,
            decomposed: &[crate::uop::Ops::THREEFRY],
        }
    }

    /// The CUDA renderer (tinygrad `CUDARenderer`): workgroups (blocks) and shared memory, halves, and no vectors
    /// (CUDA's vector types have no arithmetic: lanes are unrolled).
    pub fn cuda() -> Renderer {
        Renderer {
            device: "CUDA",
            language: Language::Cuda,
            has_local: true,
            has_shared: true,
            threads: 1,
            vector_bytes: 0,
            vector_registers: 16,
            overread: 0,
            half: true,
            decomposed: &[crate::uop::Ops::THREEFRY],
        }
    }

    /// The interpreter's renderer (tinygrad `PythonRenderer`): GPU-shaped, as tinygrad's PYTHON device (a launch
    /// grid, workgroups and their shared memory, so the interpreter checks what GPU codegen makes), 16-byte vectors
    /// (so kernels keep vector loads, stores and accumulators, which the interpreter checks too), no slack past a
    /// buffer's end (every out-of-bounds access is an error there), THREEFRY decomposed.
    pub fn python() -> Renderer {
        Renderer {
            device: "PYTHON",
            language: Language::UOps,
            has_local: true,
            has_shared: true,
            threads: 1,
            vector_bytes: 16,
            vector_registers: 16,
            overread: 0,
            half: true,
            decomposed: &[crate::uop::Ops::THREEFRY],
        }
    }
}

/// `(bytes, count)` of the host's widest vector registers.
fn host_vectors() -> (usize, usize) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            return (64, 32);
        }
        if std::arch::is_x86_feature_detected!("avx2") || std::arch::is_x86_feature_detected!("avx") {
            return (32, 16);
        }
        (16, 16)
    }
    #[cfg(target_arch = "aarch64")]
    {
        (16, 32)
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        (16, 16)
    }
}
