//! The CPU device (tinygrad `runtime/ops_cpu.py`). In: C kernels rendered by [`Renderer::cpu`] and byte buffers.
//! Out: host memory with a free cache ([`CpuAllocator`]), objects from the system C compiler ([`ClangCompiler`], in
//! `clang`) cached on disk (`kernel_cache`), and kernels linked in-process ([`super::elf`]) whose launches run on a
//! team of spinning threads or a pool ([`CpuProgram`], [`run_batch`]).

mod clang;
mod kernel_cache;

pub use clang::ClangCompiler;

use super::elf::Image;
use super::{Allocator, Compiled, Compiler, Device, FreeCache, Program, RawBuffer};
use crate::error::{Error, Result};
use crate::helpers::NUM_CPU_THREADS;
use crate::renderer::LinearKernel;
use crate::renderer::Renderer;
use clang::no_compiler;
use libloading::Library;
use parking_lot::Mutex;
use rayon::prelude::*;
use rustc_hash::FxHashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, LazyLock, OnceLock, Weak};
use std::time::{Duration, Instant};

// **************** device ****************

/// The CPU device: [`CpuAllocator`], [`ClangCompiler`] (found at first use), [`CpuProgram`]s, C from
/// [`Renderer::cpu`].
#[derive(Debug, Default)]
pub struct CpuDevice {
    /// Host memory with a free cache.
    pub allocator: CpuAllocator,
    compiler: OnceLock<std::result::Result<ClangCompiler, String>>,
    /// The compiler named by `CC_CHECK`, if set.
    check: OnceLock<Option<std::result::Result<ClangCompiler, String>>>,
}

/// The process's CPU device.
pub fn device() -> &'static CpuDevice {
    static CPU: LazyLock<CpuDevice> = LazyLock::new(CpuDevice::default);
    &CPU
}

impl CpuDevice {
    /// The C compiler, found at first use ([`ClangCompiler::new`]). Errors with [`Error::NoCompiler`].
    pub fn cc(&self) -> Result<&ClangCompiler> {
        self.compiler
            .get_or_init(|| ClangCompiler::new().map_err(|e| e.to_string()))
            .as_ref()
            .map_err(|_| no_compiler(crate::helpers::cc()))
    }
}

impl Device for CpuDevice {
    fn name(&self) -> &'static str {
        "CPU"
    }
    fn launcher(&self) -> super::Launcher {
        super::Launcher::HostThreads
    }
    fn on_host_cores(&self) -> bool {
        true
    }
    fn renderer(&self) -> Renderer {
        Renderer::cpu()
    }
    fn allocator(&self) -> &dyn Allocator {
        &self.allocator
    }
    fn compiler(&self) -> Result<&dyn Compiler> {
        Ok(self.cc()?)
    }
    /// `CC_CHECK=gcc` (a compiler as `CC` takes it): every kernel is also compiled by it, run on copies of its
    /// inputs and compared with `CC`'s build. Errors with [`Error::Device`] when that compiler does not run.
    fn check_compiler(&self) -> Result<Option<&dyn Compiler>> {
        let check = self.check.get_or_init(|| {
            let cc = crate::helpers::cc_check()?;
            Some(ClangCompiler::with_cc(&cc).map_err(|_| format!("CC_CHECK={cc:?} does not run; set it to a working C compiler")))
        });
        match check {
            None => Ok(None),
            Some(Ok(cc)) => Ok(Some(cc)),
            Some(Err(msg)) => Err(Error::Device { device: "CPU".into(), msg: msg.clone() }),
        }
    }
    /// A [`CpuProgram`] whose launches split the THREAD axis over the cores when the kernel has one and is big
    /// enough to pay for it ([`parallel_launch`] on the team, [`POOL_SPLIT`] on the pool).
    fn load(&self, k: &LinearKernel, compiled: &Compiled) -> Result<Box<dyn Program>> {
        let mut p = CpuProgram::load(compiled)?;
        (p.parallel, p.on_pool) = (parallel_launch(k), k.ops.max(k.mem / 4) >= POOL_SPLIT);
        Ok(Box::new(p))
    }
}

/// Operations or bytes moved from which a launch in a batch splits over the team's spinning helpers (handing a chunk
/// over costs about a microsecond; 2^17 operations take one core 5-10 us, 128 KB from DRAM 10-15 us). A decode
/// step's matrix-vector products (0.2-0.6 MB of weights) split from here: one core of a 2-core Xeon streams about 9
/// GB/s of the 18 both read, and a SmolLM2 step went 10.7-11.0 -> 4.5-4.7 ms; a softmax's exponentials over 9 x 1024
/// scores (46 K operations, 73 KB) ran 2.7 us whole and 6.8 split (DEBUG=2). tinygrad's CPU device runs each kernel
/// on one thread, so it has no counterpart.
const TEAM_SPLIT: u64 = 1 << 17;

/// As [`TEAM_SPLIT`], for a launch outside a batch, on the pool, in operations or 4-byte words moved: waking a pool
/// thread costs about what splitting a 0.5 MB matmul saves.
const POOL_SPLIT: u64 = 1 << 19;

/// Whether launches of `k` in a batch split its THREAD axis over the cores: it has one, and is big enough to pay for
/// it on the team ([`TEAM_SPLIT`]).
pub fn parallel_launch(k: &LinearKernel) -> bool {
    k.outer > 1 && k.ops.max(k.mem) >= TEAM_SPLIT && NUM_CPU_THREADS.value() > 1
}

// **************** allocator ****************

/// Host memory for the CPU device (tinygrad `CPUAllocator`, an `LRUAllocator`): 64-byte-aligned allocations, and
/// freed buffers (up to 1 GiB in all) cached by size for reuse.
#[derive(Debug, Default)]
pub struct CpuAllocator {
    cache: FreeCache,
}

impl CpuAllocator {
    /// An allocator with an empty cache.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Allocator for CpuAllocator {
    fn alloc(&self, size: usize) -> Result<RawBuffer> {
        self.cache.alloc(size, RawBuffer::host)
    }

    fn borrow(&self, bytes: &bytes::Bytes, size: usize, align: usize) -> Option<RawBuffer> {
        RawBuffer::borrow_host(bytes, size, align)
    }

    fn free(&self, buf: RawBuffer) {
        buf.check_owner("host");
        self.cache.free(buf);
    }

    fn free_cache(&self) {
        self.cache.clear();
    }

    fn copyin(&self, dst: &RawBuffer, src: &[u8]) -> Result<()> {
        dst.check_copyin("host", src);
        // SAFETY: dst is valid for its size bytes; src is a Rust slice, so it cannot overlap device memory that only
        // raw pointers reach.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst.as_ptr(), src.len()) };
        Ok(())
    }

    fn copyout(&self, dst: &mut [u8], src: &RawBuffer) -> Result<()> {
        src.check_copyout("host", dst);
        // SAFETY: src is valid for its size bytes; dst is an exclusive Rust slice, disjoint from it.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst.as_mut_ptr(), dst.len()) };
        Ok(())
    }

    unsafe fn in_host(&self, src: &RawBuffer, dst: &RawBuffer, f: &mut crate::runtime::InHost) -> Option<Result<()>> {
        assert!(src.as_ptr() != dst.as_ptr(), "in_host: the source and the destination are one buffer");
        // SAFETY: both are live buffers valid for their size bytes (allocations of this allocator, or borrowed host
        // bytes for src), disjoint and not otherwise accessed while `f` runs (the caller's contract); dst is zeroed
        // before it becomes a slice, so the exclusive slice covers initialized bytes.
        let (s, d) = unsafe {
            std::ptr::write_bytes(dst.as_ptr(), 0, dst.size());
            (std::slice::from_raw_parts(src.as_ptr(), src.size()), std::slice::from_raw_parts_mut(dst.as_ptr(), dst.size()))
        };
        Some(f(s, d))
    }
}

// **************** program ****************

/// The kernel ABI: `void name(void** bufs, const int* vals, int core_start, int core_end)`; the kernel runs its
/// outermost axis over `[core_start, core_end)`.
type KernelFn = unsafe extern "C" fn(*const *mut u8, *const i32, i32, i32);

/// `NUM_CPU_THREADS`, at least 1.
fn threads() -> usize {
    usize::try_from(NUM_CPU_THREADS.value()).unwrap_or(1).max(1)
}

/// The thread pool kernels run on, `NUM_CPU_THREADS` threads (read once, at the first parallel launch).
static POOL: LazyLock<rayon::ThreadPool> = LazyLock::new(|| {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads())
        .thread_name(|i| format!("tinygrad-cpu-{i}"))
        .build()
        .expect("creating the CPU thread pool")
});

/// Runs `f`, a batch of kernel launches, with the cores' [`Team`] held by this thread when no other batch holds
/// it: each parallel launch's chunks are then taken by this thread and the team's, which spin between launches,
/// whichever comes first (a decode step launches ~1,000 kernels; a sleeping pool thread woken per launch cost a tenth
/// of the step in the scheduler). Another batch at the same time, or a launch outside a batch, uses the pool where
/// the launch is big enough for it ([`CpuProgram::on_pool`]), else runs whole on this thread.
pub fn run_batch<R>(f: impl FnOnce() -> R) -> R {
    match TEAM.try_lock() {
        Some(team) if threads() > 1 => {
            /// Lets the team go when the batch ends, or unwinds.
            struct Release;
            impl Drop for Release {
                fn drop(&mut self) {
                    HELD.with(|h| h.take());
                }
            }
            HELD.with(|h| h.replace(Some(team)));
            let _release = Release;
            f()
        }
        _ => f(),
    }
}

thread_local! {
    /// The team [`run_batch`] holds on this thread while its batch runs.
    static HELD: std::cell::RefCell<Option<parking_lot::MutexGuard<'static, Team>>> = const { std::cell::RefCell::new(None) };
}

/// The cores' threads for a batch's launches: `NUM_CPU_THREADS - 1` helpers (started at first use) that spin on
/// the next launch for [`Team::SPIN`] after each, then sleep until one comes (ggml's threadpool does the same).
static TEAM: LazyLock<Mutex<Team>> = LazyLock::new(|| Mutex::new(Team::new(threads() - 1)));

/// The state the launching thread and the helpers share.
struct Shared {
    /// The launch now running as (its epoch, the launch, its outer size, its chunks); helpers read it when
    /// `epoch` moves.
    job: Mutex<Option<(u64, Launch, usize, usize)>>,
    /// Bumped once per launch.
    epoch: std::sync::atomic::AtomicU64,
    /// The next chunk of the current launch to claim, as `epoch << 32 | chunk` (the epoch's low 32 bits: launches
    /// outnumber 2^32 in a day of serving): whichever thread comes first takes a chunk, so a helper the OS has not run
    /// yet (a 2-core machine also serving HTTP) leaves its chunk to the launching thread instead of stalling the
    /// launch for a time slice.
    claim: std::sync::atomic::AtomicU64,
    /// Chunks finished of the current launch.
    done: std::sync::atomic::AtomicUsize,
    /// Helpers asleep (waiting on `wake`).
    sleeping: std::sync::atomic::AtomicUsize,
    wake: parking_lot::Condvar,
}

impl Shared {
    /// Runs chunks of launch `l` (epoch `e`, `[0, outer)` in `n` chunks) while any is left to claim.
    fn run_chunks(&self, e: u64, l: Launch, outer: usize, n: usize) {
        use std::sync::atomic::Ordering::{AcqRel, Acquire, Release};
        let mut at = self.claim.load(Acquire);
        // (the claim holds the epoch's low 32 bits)
        while at >> 32 == e & 0xffff_ffff && ((at & 0xffff_ffff) as usize) < n {
            match self.claim.compare_exchange_weak(at, at + 1, AcqRel, Acquire) {
                Ok(_) => {
                    let c = (at & 0xffff_ffff) as usize;
                    l.run(c * outer / n, (c + 1) * outer / n);
                    self.done.fetch_add(1, Release);
                    at = self.claim.load(Acquire);
                }
                Err(now) => at = now,
            }
        }
    }
}

/// See [`TEAM`].
struct Team {
    shared: Arc<Shared>,
    helpers: usize,
}

impl Team {
    /// How long a helper spins for the next launch before it sleeps.
    const SPIN: Duration = Duration::from_micros(100);

    fn new(helpers: usize) -> Team {
        let shared = Arc::new(Shared {
            job: Mutex::new(None),
            epoch: 0.into(),
            claim: 0.into(),
            done: 0.into(),
            sleeping: 0.into(),
            wake: parking_lot::Condvar::new(),
        });
        for i in 1..=helpers {
            let sh = shared.clone();
            std::thread::Builder::new()
                .name(format!("tinygrad-cpu-team-{i}"))
                .spawn(move || Team::help(&sh))
                .expect("starting a CPU team thread");
        }
        Team { shared, helpers }
    }

    /// A helper's loop: for each launch, the chunks of it left to claim.
    fn help(sh: &Shared) {
        use std::sync::atomic::Ordering::{Acquire, SeqCst};
        let mut seen = 0u64;
        loop {
            let (since, mut spins) = (Instant::now(), 0u32);
            while sh.epoch.load(Acquire) == seen {
                spins = spins.wrapping_add(1);
                // (the clock read once per 64 spins)
                if spins % 64 != 0 || since.elapsed() < Self::SPIN {
                    std::hint::spin_loop();
                    continue;
                }
                let mut job = sh.job.lock();
                sh.sleeping.fetch_add(1, SeqCst);
                if sh.epoch.load(SeqCst) == seen {
                    sh.wake.wait(&mut job);
                }
                sh.sleeping.fetch_sub(1, SeqCst);
            }
            // (the job may be a later one than the epoch seen: its own epoch is what this helper has done)
            let Some((e, l, outer, n)) = *sh.job.lock() else { continue };
            seen = e;
            sh.run_chunks(e, l, outer, n);
        }
    }

    /// Runs `l` over `[0, outer)` in `n` chunks, each claimed by this thread or a helper, whichever comes first
    /// ([`Shared::claim`]); `false` (nothing run) when the team has fewer than `n - 1` helpers (`NUM_CPU_THREADS`
    /// raised after it started).
    fn run(&self, l: Launch, outer: usize, n: usize) -> bool {
        use std::sync::atomic::Ordering::{Acquire, SeqCst};
        if n > self.helpers + 1 {
            return false;
        }
        self.shared.done.store(0, SeqCst);
        let e = self.shared.epoch.load(SeqCst) + 1;
        self.shared.claim.store(e << 32, SeqCst);
        *self.shared.job.lock() = Some((e, l, outer, n));
        self.shared.epoch.store(e, SeqCst);
        if self.shared.sleeping.load(SeqCst) > 0 {
            let _job = self.shared.job.lock();
            self.shared.wake.notify_all();
        }
        self.shared.run_chunks(e, l, outer, n);
        // (spinning, then yielding: a helper waiting for this core, as when more threads than cores run, gets it)
        let mut spins = 0u32;
        while self.shared.done.load(Acquire) < n {
            spins = spins.saturating_add(1);
            if spins < 4096 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        true
    }
}

/// One launch's arguments, shared by the threads that run its chunks.
#[derive(Clone, Copy)]
struct Launch {
    f: KernelFn,
    bufs: *const *mut u8,
    vals: *const i32,
}

// SAFETY: the pointers are only passed to the kernel. `Program::launch`'s caller guarantees the buffers outlive the
// launch and are not otherwise accessed during it; the chunks cover disjoint ranges of the outermost axis, so they
// write disjoint outputs; `bufs`/`vals` point into slices borrowed for the whole launch, which joins all chunks.
unsafe impl Send for Launch {}
// SAFETY: see Send; the kernel only reads `bufs` and `vals`.
unsafe impl Sync for Launch {}

impl Launch {
    fn run(&self, start: usize, end: usize) {
        let (start, end) = (i32::try_from(start).expect("outer axis fits i32"), i32::try_from(end).expect("outer axis fits i32"));
        // SAFETY: `f` has the kernel ABI (every kernel is rendered with it); pointers as in `unsafe impl Send`.
        unsafe { (self.f)(self.bufs, self.vals, start, end) }
    }
}

/// Where a kernel's code lives: mapped by the in-process linker, or in a `dlopen`ed shared object.
#[derive(Debug)]
enum Code {
    Image(Image),
    Shared(Library),
}

/// A kernel loaded from a compiled object (tinygrad `CPUProgram`), callable from any thread.
#[derive(Debug)]
pub struct CpuProgram {
    f: KernelFn,
    /// Keeps `f`'s code mapped.
    _code: Arc<Code>,
    /// Whether [`Program::launch`] splits the THREAD axis over the cores.
    pub parallel: bool,
    /// Whether a split launch splits on the pool too, outside a batch (else it runs on this thread alone).
    pub on_pool: bool,
}

/// Objects by content, each with its loaded code while a program holds it.
type Loaded = FxHashMap<Arc<[u8]>, Weak<Code>>;

/// Loaded objects by content, so the kernels of a compile batch (one object) share one mapping.
static LOADED: LazyLock<Mutex<Loaded>> = LazyLock::new(Default::default);

impl Code {
    /// `object` mapped (an ELF relocatable object) or `dlopen`ed (a shared object), or the mapping already made
    /// of the same bytes. Errors as text.
    fn load(object: &Arc<[u8]>) -> std::result::Result<Arc<Code>, String> {
        if let Some(code) = LOADED.lock().get(object).and_then(Weak::upgrade) {
            return Ok(code);
        }
        let code = Arc::new(if object.starts_with(b"\x7fELF") && object.get(16) == Some(&1) {
            Code::Image(Image::load(object)?)
        } else {
            // a shared object goes through a file for dlopen, deleted once mapped
            static N: AtomicU64 = AtomicU64::new(0);
            let path = std::env::temp_dir().join(format!("tinygrad-{}-{}.so", std::process::id(), N.fetch_add(1, Relaxed)));
            std::fs::write(&path, object).map_err(|e| format!("writing {}: {e}", path.display()))?;
            // SAFETY: our shared objects come from `ClangCompiler` compiling rendered kernels, which have no
            // initializers or global state.
            let lib = unsafe { Library::new(&path) };
            let _ = std::fs::remove_file(&path);
            Code::Shared(lib.map_err(|e| e.to_string())?)
        });
        let mut loaded = LOADED.lock();
        loaded.retain(|_, w| w.strong_count() > 0);
        loaded.insert(object.clone(), Arc::downgrade(&code));
        Ok(code)
    }
}

impl CpuProgram {
    /// Loads the kernel `c` (what [`ClangCompiler`] made). Errors with [`Error::Load`] when the object does not
    /// load or lacks the kernel's function.
    pub fn load(c: &Compiled) -> Result<CpuProgram> {
        Ok(Self::load_all(&c.object, &[&c.entry])?.pop().expect("one program per name"))
    }

    /// Loads `object` once and looks up each kernel function of `names` in it.
    pub fn load_all(object: &Arc<[u8]>, names: &[&str]) -> Result<Vec<CpuProgram>> {
        let code = Code::load(object).map_err(|msg| Error::Load { name: names.join(", "), msg })?;
        names
            .iter()
            .map(|name| {
                let f = match &*code {
                    Code::Image(image) => image.symbol(name).map(|p| p as *const ()),
                    // SAFETY: only the address is taken here.
                    Code::Shared(lib) => unsafe { lib.get::<*const ()>(name.as_bytes()) }.ok().map(|s| *s),
                };
                let f = f.ok_or_else(|| Error::Load { name: name.to_string(), msg: "the object does not define it".into() })?;
                // SAFETY: every kernel is rendered with the `KernelFn` ABI; the pointer is used only while `code` lives,
                // which every program made from it holds.
                Ok(CpuProgram {
                    f: unsafe { std::mem::transmute::<*const (), KernelFn>(f) },
                    _code: code.clone(),
                    parallel: false,
                    on_pool: true,
                })
            })
            .collect()
    }
}

impl Program for CpuProgram {
    /// [`CpuProgram::run`] over `global[0]` iterations of the THREAD axis, in parallel as [`CpuProgram::parallel`]
    /// says; `local` is unused (the CPU has no workgroups).
    fn launch(&self, bufs: &[*mut u8], vals: &[i32], global: [usize; 3], _local: [usize; 3]) -> Result<Duration> {
        let st = Instant::now();
        self.run(bufs, vals, global[0], self.parallel);
        Ok(st.elapsed())
    }
    /// As `launch`, without reading the clock (two reads a launch were 1% of a replayed decode step).
    fn enqueue(&self, bufs: &[*mut u8], vals: &[i32], global: [usize; 3], _local: [usize; 3]) -> Result<()> {
        self.run(bufs, vals, global[0], self.parallel);
        Ok(())
    }
}

impl CpuProgram {
    /// Runs the kernel on `bufs` (buffer start pointers, in the kernel's argument order) with variable values `vals`,
    /// over `outer` iterations of its THREAD axis: `[0, outer)` in `min(outer, NUM_CPU_THREADS)` contiguous chunks
    /// when `parallel`, on the team this thread's batch holds ([`run_batch`]) or else, where [`CpuProgram::on_pool`],
    /// on the pool; otherwise one call over `[0, max(outer, 1))` on this thread.
    /// As [`Program::launch`], the pointers must be live buffers the kernel may use alone.
    pub fn run(&self, bufs: &[*mut u8], vals: &[i32], outer: usize, parallel: bool) {
        let l = Launch { f: self.f, bufs: bufs.as_ptr(), vals: vals.as_ptr() };
        let n = outer.min(threads());
        let split = parallel && n > 1;
        // (on the team this thread's batch holds, else on the pool where that pays, else here)
        if !(split && HELD.with(|h| h.borrow().as_deref().is_some_and(|t| t.run(l, outer, n)))) {
            if split && self.on_pool {
                POOL.install(|| (0..n).into_par_iter().with_max_len(1).for_each(|i| l.run(i * outer / n, (i + 1) * outer / n)));
            } else {
                l.run(0, outer.max(1));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::helpers::Context;
    use crate::runtime::testing::{self, f32s};
    use std::path::PathBuf;
    use std::process::Command;

    /// A source that no earlier run compiled, so the first compile is a real one.
    pub(super) fn fresh(src: &str) -> String {
        static N: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
        format!("// {}-{nanos}-{}\n{src}", std::process::id(), N.fetch_add(1, Relaxed))
    }

    /// Where `cc` caches the object of `src`.
    pub(super) fn entry_path(cc: &ClangCompiler, src: &str) -> PathBuf {
        kernel_cache::path(&cc.key(src))
    }

    pub(super) const AXPB: &str = "void axpb(void** bufs, const int* vals, int core_start, int core_end) {
  float* out = (float*)bufs[0]; const float* a = (const float*)bufs[1]; int* starts = (int*)bufs[2];
  for (int i = core_start; i < core_end; i++) { out[i] = a[i]*2.0f + (float)vals[0]; starts[i] = core_start; }
}";

    fn i32s(b: &[u8]) -> Vec<i32> {
        b.chunks_exact(4).map(|c| i32::from_ne_bytes(c.try_into().unwrap())).collect()
    }

    #[test]
    fn alloc_is_aligned_and_reuses_freed_buffers() {
        let a = CpuAllocator::new();
        let b = a.alloc(1000).unwrap();
        let (p, size) = (b.as_ptr(), b.size());
        assert_eq!((p as usize % 64, size), (0, 1000));
        a.free(b);
        let other = a.alloc(999).unwrap();
        assert_ne!(other.as_ptr(), p, "a different size is a new allocation");
        assert_eq!(a.alloc(1000).unwrap().as_ptr(), p, "same size reuses the freed buffer");
        let z = a.alloc(0).unwrap();
        assert_eq!((z.size(), z.as_ptr() as usize % 64), (0, 0));
        a.free(z);
        // a large buffer starts a 2 MiB page (advised onto a huge page), and is written and read back whole
        let big = a.alloc(5 << 20).unwrap();
        assert_eq!(big.as_ptr() as usize % (2 << 20), 0);
        let bytes: Vec<u8> = (0..5usize << 20).map(|i| (i % 251) as u8).collect();
        a.copyin(&big, &bytes).unwrap();
        let mut back = vec![0u8; 5 << 20];
        a.copyout(&mut back, &big).unwrap();
        assert!(back == bytes);
        a.free(big);
        a.free_cache();
        assert_eq!(a.cache.cached(), (0, 0));
    }

    #[test]
    #[should_panic(expected = "a CL buffer handed to the host allocator")]
    fn another_devices_buffer_is_refused() {
        /// Releases nothing.
        unsafe fn keep(_: std::ptr::NonNull<u8>, _: usize) {}
        let mut host = [0u8; 8];
        // SAFETY: `keep` releases nothing, so any handle is sound to drop.
        let foreign = unsafe { RawBuffer::from_handle(std::ptr::NonNull::from(&mut host).cast(), 8, keep, "CL") };
        CpuAllocator::new().copyin(&foreign, &[0; 8]).unwrap();
    }

    #[test]
    fn free_cache_is_capped() {
        let a = CpuAllocator::new();
        let big = 600 << 20;
        let (x, y) = (a.alloc(big).unwrap(), a.alloc(big).unwrap());
        a.free(x);
        a.free(y); // over the 1 GiB cap: released
        assert_eq!(a.cache.cached(), (big, 1));
    }

    #[test]
    fn copy_round_trip() {
        testing::copy_round_trip(&CpuAllocator::new());
    }

    #[test]
    #[should_panic(expected = "copyin: buffer is 8 bytes, source 4")]
    fn copyin_size_mismatch_panics() {
        let a = CpuAllocator::new();
        a.copyin(&a.alloc(8).unwrap(), &[0; 4]).unwrap();
    }

    #[test]
    fn compile_load_launch() {
        let cc = ClangCompiler::new().unwrap();
        let src = fresh(AXPB);
        let mut prog = CpuProgram::load(&cc.compile("axpb", &src).unwrap()).unwrap();
        std::fs::remove_file(entry_path(&cc, &src)).unwrap(); // tests leave no fresh kernels behind
        let a = CpuAllocator::new();
        let n = 1000;
        let input: Vec<f32> = (0..n).map(|i| i as f32 * 0.5 - 100.0).collect();
        let (out, inp, starts) = (a.alloc(n * 4).unwrap(), a.alloc(n * 4).unwrap(), a.alloc(n * 4).unwrap());
        a.copyin(&inp, &input.iter().flat_map(|x| x.to_ne_bytes()).collect::<Vec<_>>()).unwrap();
        let _g = Context::new(&[(&NUM_CPU_THREADS, 4)]);
        for (parallel, want_starts) in [(false, [0, 0, 0, 0]), (true, [0, 250, 500, 750])] {
            a.copyin(&out, &vec![0; n * 4]).unwrap();
            prog.run(&[out.as_ptr(), inp.as_ptr(), starts.as_ptr()], &[7], n, parallel);
            let mut bytes = vec![0u8; n * 4];
            a.copyout(&mut bytes, &out).unwrap();
            let want: Vec<f32> = input.iter().map(|x| x * 2.0 + 7.0).collect();
            assert_eq!(f32s(&bytes), want, "parallel={parallel}");
            a.copyout(&mut bytes, &starts).unwrap();
            let want: Vec<i32> = (0..n).map(|i| want_starts[i / 250]).collect();
            assert_eq!(i32s(&bytes), want, "chunk starts, parallel={parallel}");
        }
        let object = cc.compile("axpb", AXPB).unwrap().object;
        assert!(CpuProgram::load_all(&object, &["nope"]).is_err_and(|e| matches!(e, Error::Load { .. })));
        // a launch too small to pay for waking the pool runs whole outside a batch (on the team below, it splits)
        prog.on_pool = false;
        prog.run(&[out.as_ptr(), inp.as_ptr(), starts.as_ptr()], &[7], n, true);
        let mut bytes = vec![0u8; n * 4];
        a.copyout(&mut bytes, &starts).unwrap();
        assert_eq!(i32s(&bytes), vec![0; n], "chunk starts of a launch that does not split on the pool");
        // in a batch, on the team: launches back to back (helpers spinning) and after a pause (helpers asleep); on the
        // pool where another test holds the team
        prog.on_pool = true;
        let _g = Context::new(&[(&NUM_CPU_THREADS, 2)]);
        run_batch(|| {
            for round in 0..200 {
                if round % 50 == 49 {
                    std::thread::sleep(Duration::from_millis(2));
                }
                a.copyin(&out, &vec![0; n * 4]).unwrap();
                prog.run(&[out.as_ptr(), inp.as_ptr(), starts.as_ptr()], &[round], n, true);
                let mut bytes = vec![0u8; n * 4];
                a.copyout(&mut bytes, &out).unwrap();
                assert_eq!(f32s(&bytes), input.iter().map(|x| x * 2.0 + round as f32).collect::<Vec<_>>(), "round {round}");
                a.copyout(&mut bytes, &starts).unwrap();
                assert_eq!(i32s(&bytes), (0..n).map(|i| if i < 500 { 0 } else { 500 }).collect::<Vec<i32>>(), "round {round}");
            }
        });
    }

    #[test]
    fn the_launching_thread_runs_the_chunks_no_helper_claimed() {
        let cc = ClangCompiler::new().unwrap();
        let prog = CpuProgram::load(&cc.compile("axpb", AXPB).unwrap()).unwrap();
        let a = CpuAllocator::new();
        let n = 1000;
        let (out, inp, starts) = (a.alloc(n * 4).unwrap(), a.alloc(n * 4).unwrap(), a.alloc(n * 4).unwrap());
        let (bufs, vals) = ([out.as_ptr(), inp.as_ptr(), starts.as_ptr()], [0]);
        let l = Launch { f: prog.f, bufs: bufs.as_ptr(), vals: vals.as_ptr() };
        // (shared state with no helper threads: launch e's four chunks, all left to this thread; past 2^32 launches
        // too, where the claim holds the epoch's low bits)
        for e in [7, (1u64 << 32) + 7] {
            let sh = Shared {
                job: Mutex::new(None),
                epoch: e.into(),
                claim: (e << 32).into(),
                done: 0.into(),
                sleeping: 0.into(),
                wake: Default::default(),
            };
            a.copyin(&starts, &vec![0xff; n * 4]).unwrap();
            sh.run_chunks(e - 1, l, n, 4);
            assert_eq!(sh.done.load(Relaxed), 0, "a stale launch's epoch claims nothing (epoch {e})");
            sh.run_chunks(e, l, n, 4);
            assert_eq!(sh.done.load(Relaxed), 4, "epoch {e}");
            let mut bytes = vec![0u8; n * 4];
            a.copyout(&mut bytes, &starts).unwrap();
            assert_eq!(i32s(&bytes), (0..n).map(|i| (i / 250 * 250) as i32).collect::<Vec<_>>(), "each chunk ran once (epoch {e})");
        }
    }

    #[test]
    fn ieee_and_libm() {
        let src = "float expf(float);\nvoid k(void** bufs, const int* vals, int s, int e) {
  float* o = (float*)bufs[0]; const float* a = (const float*)bufs[1];
  for (int i = s; i < e; i++) { o[2*i] = expf(a[i]); o[2*i+1] = a[i] != a[i] ? 1.0f : 0.0f; }
}";
        let prog = CpuProgram::load(&ClangCompiler::new().unwrap().compile("k", src).unwrap()).unwrap();
        let a = CpuAllocator::new();
        let input = [0.0f32, 1.0, f32::NAN, f32::INFINITY, f32::NEG_INFINITY];
        let (o, i) = (a.alloc(40).unwrap(), a.alloc(20).unwrap());
        a.copyin(&i, &input.iter().flat_map(|x| x.to_ne_bytes()).collect::<Vec<_>>()).unwrap();
        prog.run(&[o.as_ptr(), i.as_ptr()], &[], 5, false);
        let mut bytes = vec![0u8; 40];
        a.copyout(&mut bytes, &o).unwrap();
        let got = f32s(&bytes);
        assert_eq!([got[0], got[2], got[6], got[8]], [1.0, 1f32.exp(), f32::INFINITY, 0.0]);
        assert!(got[4].is_nan());
        assert_eq!([got[1], got[3], got[5], got[7], got[9]], [0.0, 0.0, 1.0, 0.0, 0.0], "NaN != NaN only for NaN");
    }

    /// A vector selected whole on a scalar condition, as the renderer emits a select the same in every lane (gcc 12
    /// on AVX-512 zeroes all lanes but the first of the per-lane form `(float16){c ? w[0] : 0.0f, ...}`): every
    /// compiler on `PATH` must get it right.
    #[test]
    fn vectors_selected_on_a_scalar_with_every_compiler() {
        let src = "typedef float float16 __attribute__((vector_size(64), aligned(4)));
void k(void** bufs, const int* vals, int s, int e) {
  float* restrict o = (float*)bufs[0]; const float* restrict in = (const float*)bufs[1];
  for (long j = s; j < e; j++) {
    float16 acc = {0};
    for (long r = 0; r < 9; r++) {
      int a = (int)r * 10 - 9; a = a < 0 ? 0 : a;
      _Bool c = (a / 18) == (int)j;
      float16 w = *((float16*)(&in[r * 16])) * 0.5f;
      acc = acc + (c ? w : (float16){0});
    }
    for (int l = 0; l < 16; l++) o[j * 16 + l] = acc[l];
  }
}";
        let input: Vec<f32> = (0..144).map(|i| i as f32).collect();
        let want: Vec<f32> = (0..80)
            .map(|i| (0..9).filter(|r| (10 * r - 9).max(0) / 18 == i / 16).map(|r| 0.5 * input[(r * 16 + i % 16) as usize]).sum())
            .collect();
        let a = CpuAllocator::new();
        for cc in ["clang", "gcc"].into_iter().filter_map(|cc| ClangCompiler::with_cc(cc).ok()) {
            let prog = CpuProgram::load(&cc.compile("k", src).unwrap()).unwrap();
            let (o, i) = (a.alloc(80 * 4).unwrap(), a.alloc(144 * 4).unwrap());
            a.copyin(&i, &input.iter().flat_map(|x| x.to_ne_bytes()).collect::<Vec<_>>()).unwrap();
            prog.run(&[o.as_ptr(), i.as_ptr()], &[], 5, false);
            let mut bytes = vec![0u8; 80 * 4];
            a.copyout(&mut bytes, &o).unwrap();
            assert_eq!(f32s(&bytes), want, "{}", cc.cc());
        }
    }

    #[test]
    fn shared_objects_load_too() {
        let cc = ClangCompiler::new().unwrap();
        let dir = std::env::temp_dir().join(format!("tinygrad-so-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("k.c"), AXPB).unwrap();
        let ok = Command::new(cc.cc())
            .args(clang::COMPILE_FLAGS.iter())
            .args(["-shared", "-o"])
            .arg(dir.join("k.so"))
            .arg(dir.join("k.c"))
            .status()
            .unwrap();
        assert!(ok.success());
        let prog = CpuProgram::load(&Compiled { object: std::fs::read(dir.join("k.so")).unwrap().into(), entry: "axpb".into() }).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let a = CpuAllocator::new();
        let (out, inp, starts) = (a.alloc(4).unwrap(), a.alloc(4).unwrap(), a.alloc(4).unwrap());
        a.copyin(&inp, &4f32.to_ne_bytes()).unwrap();
        prog.run(&[out.as_ptr(), inp.as_ptr(), starts.as_ptr()], &[1], 1, false);
        let mut bytes = vec![0u8; 4];
        a.copyout(&mut bytes, &out).unwrap();
        assert_eq!(f32s(&bytes), [9.0]);
    }
}
