//! Rendering. In: a linearized kernel. Out: source text for a device's compiler. One file per language:
//! `cstyle` (C for the CPU). [`Renderer`] describes what a target offers, which codegen reads to choose and
//! check optimizations (tinygrad `renderer/__init__.py` `Renderer`).

pub mod cstyle;

use std::sync::LazyLock;

/// Bytes past a buffer's end that CPU kernels may read (the CPU allocator allocates them): one AVX-512 vector,
/// so a vector load in a padded lane (PADTO on an output axis) stays inside the allocation.
pub const CPU_OVERREAD: usize = 64;

/// What a render target offers the optimizer (tinygrad `Renderer`'s fields).
#[derive(Clone, Debug, PartialEq, Eq)]

pub struct Renderer {
    /// The device this renders for (`CPU`).
    pub device: &'static str,
    /// GPU workgroups (LOCAL opts).
    pub has_local: bool,
    /// Workgroup shared memory (GROUP and GROUPTOP opts).
    pub has_shared: bool,
    /// Cores the launcher splits a THREAD axis over (0: no THREAD opt).
    pub threads: usize,
    /// Width of the widest vector register in bytes (16 for SSE/NEON, 32 for AVX2, 64 for AVX-512).
    pub vector_bytes: usize,
    /// Vector registers available to a register tile (16 on AVX2, 32 on AVX-512 and NEON).
    pub vector_registers: usize,
    /// Bytes past a buffer's end that a kernel may read, whose values it discards (the allocator's guarantee:
    /// [`crate::runtime::OVERREAD`] on the CPU); lets loads in padded lanes go unmasked.
    pub overread: usize,
    /// Ops the renderer has no code for, which codegen builds from ops it has (tinygrad: the ops missing from a
    /// renderer's `code_for_op`, which its decompositions rewrite): on the CPU, float32 EXP2 (a polynomial, so it
    /// vectorizes) and THREEFRY.
    pub decomposed: &'static [crate::uop::Ops],
}

impl Renderer {
    /// The C renderer for this machine: vector width and register count detected at run time, threads from
    /// `NUM_CPU_THREADS`.
    pub fn cpu() -> Renderer {
        static VECTORS: LazyLock<(usize, usize)> = LazyLock::new(host_vectors);
        let threads = usize::try_from(crate::helpers::NUM_CPU_THREADS.value()).unwrap_or(1).max(1);
        Renderer {
            device: "CPU",
            has_local: false,
            has_shared: false,
            threads,
            vector_bytes: VECTORS.0,
            vector_registers: VECTORS.1,
            overread: CPU_OVERREAD,
            decomposed: &[crate::uop::Ops::EXP2, crate::uop::Ops::THREEFRY],
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
