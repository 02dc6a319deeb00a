//! Rendering. In: a [`LinearKernel`] (the program codegen made). Out: source text for a device's compiler. One file
//! per language: `cstyle` (the C-style base, a `CStyle` trait whose defaults are GNU C for the CPU), `opencl` and
//! `cuda` (the dialects' overrides), `python` (a listing of the UOps, which the interpreter device runs). Below
//! codegen, as tinygrad's: [`Renderer`] describes what a target offers, which codegen reads to choose and check
//! optimizations, and the language it prints (tinygrad `renderer/__init__.py` `Renderer`), with its [`TensorCore`]s.

pub mod cstyle;
pub mod cuda;
pub mod opencl;
pub mod python;

use crate::dtype::DType;
use crate::uop::{Opt, UOp};

use std::sync::LazyLock;

/// Bytes past a buffer's end that CPU kernels may read (the CPU allocator allocates them): two AVX-512 vectors, so
/// a vector load in a padded lane (PADTO on an output axis) stays inside the allocation, as does a masked vector load
/// of a padded row's last 16 floats starting up to 31 floats short of its end (a matmul operand's panel copy).
pub const CPU_OVERREAD: usize = 128;

/// A kernel ready to render: what codegen's `full_rewrite` makes and a renderer prints (tinygrad `ProgramSpec`, which
/// `renderer/__init__.py` keeps beside `Renderer` for the same reason: the renderer needs nothing from codegen).
pub struct LinearKernel {
    /// tinygrad-style name: `E_` (elementwise) or `r_` (with reductions), then the axis sizes (a C identifier).
    pub name: String,
    /// The name colored by axis kind, as tinygrad's DEBUG output shows it.
    pub display_name: String,
    /// The UOps in print order.
    pub uops: Vec<UOp>,
    /// Size of the THREAD axis, which the runtime splits over cores (0: none).
    pub outer: usize,
    /// Workgroups of the launch in each of three dimensions (tinygrad `global_size`); on the CPU, the THREAD
    /// axis's iterations and 1, 1.
    pub global_size: [usize; 3],
    /// Threads of a workgroup in each dimension (tinygrad `local_size`); 1, 1, 1 without LOCAL axes.
    pub local_size: [usize; 3],
    /// Estimated floating-point (or integer ALU) operations of one run, a loop of symbolic size counted at its largest
    /// (an upper bound: DEBUG=2's GFLOPS for such a kernel read high at smaller values).
    pub ops: u64,
    /// Bytes of the buffers the kernel touches (each once).
    pub mem: u64,
    /// The optimizations applied.
    pub opts: Vec<Opt>,
    /// The symbolic variables (DEFINE_VAR) the kernel reads, sorted by name: a launch's `vals` in this order.
    pub vars: Vec<std::sync::Arc<str>>,
}

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
    /// The warp-wide matrix multiply-accumulate units the TC opt may use (empty: none).
    pub tensor_cores: &'static [TensorCore],
    /// Whether float `a*b + c` becomes one MULACC, rendered as a fused multiply-add (`fma`; the interpreter's
    /// `mul_add`): the graph, not the target's compiler, decides every contraction (compilers are told not to),
    /// so a value two kernels compute is the same bits in both (tinygrad forms MULACC where a renderer has it).
    /// False on a CPU without FMA instructions, where `fmaf` would be a library call.
    pub mulacc: bool,
    /// The host CPU's features, on the CPU target (None elsewhere).
    pub cpu: Option<CpuFeatures>,
}

/// One tensor-core instruction (tinygrad `TensorCore`): the `threads` of a warp together compute `D = A·B + C`
/// with A `dims.0`×`dims.2`, B `dims.2`×`dims.1` and C, D `dims.0`×`dims.1`, each thread holding a few elements of
/// each matrix (its fragments) in registers. Where each element sits is [`TensorCore::fragments`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TensorCore {
    /// The WMMA function renderers define for it (`__{name}(a, b, c)`), and the WMMA UOp's arg.
    pub name: &'static str,
    /// `(M, N, K)`: rows of A and C, columns of B and C, and the reduction (PTX's `m16n8k16` is `(16, 8, 16)`).
    pub dims: (usize, usize, usize),
    /// Threads of the warp that execute it together (lane `l` is thread `l` of the workgroup's dimension 0).
    pub threads: usize,
    /// The dtype of A and B.
    pub dtype_in: DType,
    /// The dtype of C and D (the accumulator).
    pub dtype_out: DType,
    /// The layouts of A, B and C (D as C).
    pub fragments: [Fragment; 3],
}

/// Where a thread's fragment elements sit in their matrix: element `e` of lane `l` is at row
/// `Σ row.0[b]·bit_b(l) + Σ row.1[b]·bit_b(e)` and column likewise from `col`; a fragment holds `2^row.1.len()`
/// elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fragment {
    /// `(weights of the lane's bits, weights of the element's bits)` summing to the row.
    pub row: (&'static [usize], &'static [usize]),
    /// The same for the column.
    pub col: (&'static [usize], &'static [usize]),
}

impl Fragment {
    /// Elements each thread holds.
    pub fn elements(&self) -> usize {
        1 << self.row.1.len()
    }
    /// `(row, column)` of element `e` held by lane `l`.
    pub fn at(&self, l: usize, e: usize) -> (usize, usize) {
        let sum = |(lane, elem): (&[usize], &[usize])| -> usize {
            lane.iter().enumerate().map(|(b, w)| (l >> b & 1) * w).sum::<usize>()
                + elem.iter().enumerate().map(|(b, w)| (e >> b & 1) * w).sum::<usize>()
        };
        (sum(self.row), sum(self.col))
    }
}

/// PTX `mma.sync.aligned.m16n8k16.row.col` fragments (PTX ISA, "Matrix Fragments for mma.m16n8k16"): with
/// `g = lane / 4` and `t = lane % 4`, A's element `i` is at `(g + 8·i₁, 2t + i₀ + 8·i₂)`, B's element `j` at
/// `(2t + j₀ + 8·j₁, g)`, C's element `c` at `(g + 8·c₁, 2t + c₀)` (subscripts are bits).
const MMA_16_8_16: [Fragment; 3] = [
    Fragment { row: (&[0, 0, 1, 2, 4], &[0, 8, 0]), col: (&[2, 4, 0, 0, 0], &[1, 0, 8]) },
    Fragment { row: (&[2, 4, 0, 0, 0], &[1, 8]), col: (&[0, 0, 1, 2, 4], &[0, 0]) },
    Fragment { row: (&[0, 0, 1, 2, 4], &[0, 8]), col: (&[2, 4, 0, 0, 0], &[1, 0]) },
];

/// NVIDIA's tensor cores from sm_80 (Ampere) on: half or bfloat16 inputs, float accumulation (tinygrad
/// `tc.cuda_sm80`'s float-accumulating entries).
pub const CUDA_TENSOR_CORES: &[TensorCore] = &[
    TensorCore {
        name: "WMMA_16_8_16_half_float",
        dims: (16, 8, 16),
        threads: 32,
        dtype_in: crate::dtype::dtypes::FLOAT16,
        dtype_out: crate::dtype::dtypes::FLOAT32,
        fragments: MMA_16_8_16,
    },
    TensorCore {
        name: "WMMA_16_8_16_bf16_float",
        dims: (16, 8, 16),
        threads: 32,
        dtype_in: crate::dtype::dtypes::BFLOAT16,
        dtype_out: crate::dtype::dtypes::FLOAT32,
        fragments: MMA_16_8_16,
    },
];

/// The tensor core named `name` (a WMMA UOp's arg).
pub fn tensor_core(name: &str) -> Option<&'static TensorCore> {
    CUDA_TENSOR_CORES.iter().find(|tc| tc.name == name)
}

/// The source language a [`Renderer`] prints: one file of this module each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Language {
    /// C with GNU vector types, for the CPU device's C compiler ([`cstyle`]; tinygrad `ClangRenderer`).
    C,
    /// The linear UOps listed one a line, which the interpreter device runs ([`python`]; tinygrad `PythonRenderer`).
    UOps,
    /// OpenCL C ([`opencl`]; tinygrad `OpenCLRenderer`).
    OpenCL,
    /// CUDA C++ for NVRTC ([`cuda`]; tinygrad `CUDARenderer`).
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

    /// How a C target streams the rows of a vector-matrix product `x @ W` with `W` a row-major `(rows, cols)` of
    /// `item`-byte sums: `Some((tile, chunks))`, the columns in `chunks` parts (at least one a thread, each at most
    /// 4,096 columns, its accumulators in L1) of `tile`-column register tiles (4 registers or fewer), each part's rows
    /// read 8 at a time by an INNER loop over its tiles (codegen's heuristic); `None` where that does not fit (then
    /// the scheduler splits the rows into blocks whose partial sums a second kernel adds: `schedule/target.rs`).
    /// OpenBLAS's `gemv_n` blocking; tinygrad has no counterpart.
    pub fn matvec_chunks(&self, rows: usize, cols: usize, item: usize) -> Option<(usize, usize)> {
        let lanes = self.vector_bytes / item.max(1);
        if self.language != Language::C || self.has_local || lanes < 4 || !rows.is_multiple_of(8) || rows * cols < 1 << 20 {
            return None;
        }
        // (a tile of at most 64 lanes: unrolled by 8 rows, 512 lanes in all, codegen's most)
        let t = self.threads.max(1);
        [4, 2, 1]
            .map(|r| r * lanes)
            .into_iter()
            .filter(|&w| w <= 64)
            .find_map(|tile| (t..=cols / (2 * tile)).find(|&c| cols.is_multiple_of(c * tile) && cols / c <= 4096).map(|c| (tile, c)))
    }

    /// A GPU-shaped target, the base the others change: workgroups and shared memory, no CPU threads, 16-byte
    /// vectors, no slack past a buffer's end, halves, THREEFRY decomposed, no tensor cores, MULACC.
    fn gpu(device: &'static str, language: Language) -> Renderer {
        Renderer {
            device,
            language,
            has_local: true,
            has_shared: true,
            threads: 1,
            vector_bytes: 16,
            vector_registers: 16,
            overread: 0,
            half: true,
            decomposed: &[crate::uop::Ops::THREEFRY],
            tensor_cores: &[],
            mulacc: true,
            cpu: None,
        }
    }

    /// The C renderer for this machine: its [`CpuFeatures`] (vector width and register count, FMA) detected at run
    /// time, threads from `NUM_CPU_THREADS`; loops instead of a grid, float32 EXP2 decomposed (so it vectorizes).
    pub fn cpu() -> Renderer {
        let f = CpuFeatures::host();
        Renderer {
            has_local: false,
            has_shared: false,
            threads: usize::try_from(crate::helpers::NUM_CPU_THREADS.value()).unwrap_or(1).max(1),
            vector_bytes: f.vector_bytes(),
            vector_registers: f.vector_registers(),
            overread: CPU_OVERREAD,
            decomposed: &[crate::uop::Ops::EXP2, crate::uop::Ops::THREEFRY],
            mulacc: f.fma,
            cpu: Some(f),
            ..Renderer::gpu("CPU", Language::C)
        }
    }

    /// The OpenCL C renderer (tinygrad `OpenCLRenderer`): workgroups and shared memory, 16-byte vectors (`float4`),
    /// halves only where the device has `cl_khr_fp16` (`fp16`).
    pub fn opencl(fp16: bool) -> Renderer {
        Renderer { half: fp16, ..Renderer::gpu("CL", Language::OpenCL) }
    }

    /// The CUDA renderer (tinygrad `CUDARenderer`) for sm_80 and later: workgroups (blocks) and shared memory,
    /// halves, tensor cores ([`CUDA_TENSOR_CORES`]; a GPU before sm_80 gets none, see [`Renderer::cuda_for`]), and
    /// no vectors (CUDA's vector types have no arithmetic: lanes are unrolled).
    pub fn cuda() -> Renderer {
        Renderer::cuda_for(80)
    }

    /// The CUDA renderer for a GPU of compute capability `sm` (`86` for 8.6): tensor cores from 80 on.
    pub fn cuda_for(sm: u32) -> Renderer {
        let tensor_cores = if sm >= 80 { CUDA_TENSOR_CORES } else { &[] };
        Renderer { vector_bytes: 0, tensor_cores, ..Renderer::gpu("CUDA", Language::Cuda) }
    }

    /// The interpreter's renderer (tinygrad `PythonRenderer`): GPU-shaped, as tinygrad's PYTHON device (a launch
    /// grid, workgroups and their shared memory, so the interpreter checks what GPU codegen makes), 16-byte vectors
    /// (so kernels keep vector loads, stores and accumulators, which the interpreter checks too), no slack past a
    /// buffer's end (every out-of-bounds access is an error there), THREEFRY decomposed. With `EMULATE=CUDA` (as
    /// tinygrad's), it emulates CUDA's codegen instead: no vectors, and CUDA's tensor cores, whose WMMA the
    /// interpreter computes warp by warp.
    pub fn python() -> Renderer {
        static EMULATE: LazyLock<bool> = LazyLock::new(|| crate::helpers::emulate() == "CUDA");
        let base = if *EMULATE { Renderer::cuda() } else { Renderer::gpu("PYTHON", Language::UOps) };
        Renderer { device: "PYTHON", language: Language::UOps, ..base }
    }
}

/// The host CPU's features that codegen and kernels use, detected once at run time (never assumed from the build
/// target: the same binary runs on AVX2 and AVX-512 machines).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CpuFeatures {
    /// Fused multiply-add instructions (x86-64's FMA3; every AArch64 core).
    pub fma: bool,
    /// 32-byte integer and float vectors (x86-64 AVX2; AVX alone counts for float vectors).
    pub avx2: bool,
    /// 64-byte vectors and 32 vector registers (x86-64 AVX-512F).
    pub avx512: bool,
    /// 8-bit dot products into 32-bit sums (x86-64 AVX-512 VNNI or AVX-VNNI).
    pub vnni: bool,
    /// 128-bit vectors and 32 registers (AArch64 NEON).
    pub neon: bool,
    /// Rows of a matrix a core's loads stream at once in a vector-matrix product's partial sums (the row blocks of
    /// `schedule/target.rs`'s `split_matvec`): 64 on Intel's cores, whose prefetchers kept up with 64 (a 4096 x 4096
    /// float32 product's partial kernel: 1.6 ms at 64 rows, 2.4-2.8 ms at 8, on a Xeon of the Sapphire Rapids kind),
    /// else 8 (AMD's Zen: 2.2 ms at 8 rows, 2.5-2.8 ms at 16).
    pub stream_rows: usize,
    /// How far ahead, in bytes, a kernel's one sequential stream (a weight repacked tile by tile) is prefetched by the
    /// kernel itself (`codegen::lower::add_prefetches`); 0: not at all. 2 KB on AMD's Zen 1 and 2 (family 0x17), where
    /// prefetches 1 KB ahead took Gemma 3's decode step from 34.5-35.4 to 30.3-32.5 ms and 2 KB ahead to 24.9-28.0 (an
    /// AVX2 EPYC, 2 cores; its Q8_0 output projection was 40% of the step, alone 10.6 ms at 2 KB, 10.1-12.0 at 4,
    /// 11.4-11.6 at 8). 6 KB on Intel's: against none, SmolLM2's Q4_1 gate and up projection (`r_192_16_4_18`, 1.1
    /// MB, four rows) alone on a Sapphire Rapids Xeon's 2 cores 48-51 us without, 31-33 with them 2 KB ahead; in the
    /// process (`llm --benchmark 128`, alternated 4 times) 2 KB gave decode 286-309 tok/s and 4 streams 552-596, 4 KB
    /// 300-336 and 632-697, 10 KB 305-323 and 636-682; 6 KB against 2 KB: decode 290-305 -> 310-332, 4 streams
    /// 556-629 -> 652-727, Gemma 3 decode 87-90 -> 97-100, SmolLM2 under `x86-64-v3` 231-233 -> 252-260 (a 4-row
    /// kernel's arithmetic holds its loads in the reorder window longer, so 2 KB came too late). 0 on AMD's family
    /// 0x19 and later (Zen 3 and 4; measured on a Zen 4, whose prefetchers follow it): that projection's kernel alone,
    /// 2 cores, 35-49 GB/s without, 28-33 with them 2 KB ahead. An x86-64 level in `CPU_TARGET` keeps it (a property
    /// of the memory system, not of the instructions).
    pub sequential_ahead: usize,
}

impl CpuFeatures {
    /// This machine's features (detected on first call), less those the x86-64 level in `CPU_TARGET` lacks
    /// ([`helpers::cpu_target`](crate::helpers::cpu_target)).
    pub fn host() -> CpuFeatures {
        static HOST: LazyLock<CpuFeatures> = LazyLock::new(|| CpuFeatures::detect().limited_to(&crate::helpers::cpu_target()));
        *HOST
    }

    /// These features less those x86-64 level `level` lacks (`x86-64-v3`: AVX2 and FMA, no AVX-512 or VNNI;
    /// `x86-64-v4`: no VNNI; `x86-64` and `-v2`: 16-byte vectors); unchanged for any other `level` ("").
    pub fn limited_to(self, level: &str) -> CpuFeatures {
        let v = match level {
            "x86-64" | "x86-64-v2" => 2,
            "x86-64-v3" => 3,
            "x86-64-v4" => 4,
            _ => return self,
        };
        CpuFeatures { fma: self.fma && v >= 3, avx2: self.avx2 && v >= 3, avx512: self.avx512 && v >= 4, vnni: false, neon: false, ..self }
    }

    fn detect() -> CpuFeatures {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            let id = std::arch::x86_64::__cpuid(0);
            let intel = [id.ebx, id.edx, id.ecx].map(u32::to_le_bytes).concat() == *b"GenuineIntel";
            // (the family: base, plus the extended one where the base is 0xF; AMD's Zen 1 and 2 are 0x17)
            let eax = std::arch::x86_64::__cpuid(1).eax;
            let family = (eax >> 8 & 0xF) + if eax >> 8 & 0xF == 0xF { eax >> 20 & 0xFF } else { 0 };
            CpuFeatures {
                fma: has!("fma"),
                avx2: has!("avx2") || has!("avx"),
                avx512: has!("avx512f"),
                vnni: has!("avx512vnni") || has!("avxvnni"),
                neon: false,
                stream_rows: if intel { 64 } else { 8 },
                // (Intel's families are 6 and 0xF: `family <= 0x17` alone would hold for them too)
                sequential_ahead: if intel {
                    6144
                } else if family <= 0x17 {
                    2048
                } else {
                    0
                },
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let arm = cfg!(target_arch = "aarch64");
            CpuFeatures { fma: arm, avx2: false, avx512: false, vnni: false, neon: arm, stream_rows: 8, sequential_ahead: 0 }
        }
    }

    /// Width of the widest vector register in bytes: 64 with AVX-512, 32 with AVX2, else 16 (SSE, NEON).
    pub fn vector_bytes(&self) -> usize {
        if self.avx512 {
            64
        } else if self.avx2 {
            32
        } else {
            16
        }
    }

    /// Vector registers a register tile may use: 32 with AVX-512 and on NEON, else 16.
    pub fn vector_registers(&self) -> usize {
        if self.avx512 || self.neon {
            32
        } else {
            16
        }
    }
}

#[cfg(test)]
mod tests {
    use super::CpuFeatures;

    #[test]
    fn an_x86_64_level_limits_the_features() {
        let all = CpuFeatures { fma: true, avx2: true, avx512: true, vnni: true, neon: false, stream_rows: 8, sequential_ahead: 2048 };
        let (v2, v3, v4) = (all.limited_to("x86-64-v2"), all.limited_to("x86-64-v3"), all.limited_to("x86-64-v4"));
        assert_eq!(v3.sequential_ahead, all.sequential_ahead, "a level keeps the prefetch distance");
        assert_eq!((v2.vector_bytes(), v2.vector_registers(), v2.fma), (16, 16, false));
        assert_eq!((v3.vector_bytes(), v3.vector_registers(), v3.fma, v3.vnni), (32, 16, true, false));
        assert_eq!((v4.vector_bytes(), v4.vector_registers(), v4.vnni), (64, 32, false));
        assert_eq!(all.limited_to(""), all);
        // (a level never adds what the machine lacks)
        let avx2 = CpuFeatures { avx512: false, vnni: false, ..all };
        assert_eq!(avx2.limited_to("x86-64-v4").vector_bytes(), 32);
    }
}
