//! The CPU device (tinygrad `runtime/ops_cpu.py`): host memory with a free cache, the system C compiler writing
//! objects into a content-addressed disk cache, kernels linked in-process ([`super::elf`]) and run on a thread pool.

use super::elf::Image;
use super::{Allocator, Compiled, Compiler, Device, FreeCache, Program, RawBuffer};
use crate::error::{Error, Result};
use crate::helpers::{cache_dir, CACHELEVEL, DEBUG, NUM_CPU_THREADS};
use crate::renderer::LinearKernel;
use crate::renderer::Renderer;
use libloading::Library;
use parking_lot::Mutex;
use rayon::prelude::*;
use rustc_hash::FxHashMap;
use sha2::{Digest, Sha256};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
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
    /// enough to pay for it (2^19 operations or 4-byte words moved: below that, waking the pool costs about what the split saves; a decoder's 0.5 MB matmuls ran 20% faster unsplit).
    fn load(&self, k: &LinearKernel, compiled: &Compiled) -> Result<Box<dyn Program>> {
        let mut p = CpuProgram::load(compiled)?;
        p.parallel = parallel_launch(k);
        Ok(Box::new(p))
    }
}

/// Whether launches of `k` split its THREAD axis over the cores: it has one, and is big enough to pay for it.
pub fn parallel_launch(k: &LinearKernel) -> bool {
    k.outer > 1 && k.ops.max(k.mem / 4) >= 1 << 19 && NUM_CPU_THREADS.value() > 1
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

    fn free(&self, buf: RawBuffer) {
        buf.check_owner("host");
        self.cache.free(buf);
    }

    fn free_cache(&self) {
        self.cache.clear();
    }

    fn copyin(&self, dst: &RawBuffer, src: &[u8]) -> Result<()> {
        dst.check_owner("host");
        assert_eq!(dst.size(), src.len(), "copyin: buffer is {} bytes, source {}", dst.size(), src.len());
        // SAFETY: dst is valid for its size bytes; src is a Rust slice, so it cannot overlap device memory that only
        // raw pointers reach.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst.as_ptr(), src.len()) };
        Ok(())
    }

    fn copyout(&self, dst: &mut [u8], src: &RawBuffer) -> Result<()> {
        src.check_owner("host");
        assert_eq!(dst.len(), src.size(), "copyout: buffer is {} bytes, destination {}", src.size(), dst.len());
        // SAFETY: src is valid for its size bytes; dst is an exclusive Rust slice, disjoint from it.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst.as_mut_ptr(), dst.len()) };
        Ok(())
    }
}

// **************** compiler ****************

/// Compiler flags. IEEE semantics (no `-ffast-math`); no contraction of multiply-adds (`-ffp-contract=off`): the
/// kernel's MULACCs are its fused multiply-adds (`__builtin_fmaf`, see [`Renderer::mulacc`]), so gcc and clang, and
/// two kernels computing one expression, round it alike; signed integers wrap (`-fwrapv`), as constant folding does.
const FLAGS: [&str; 6] = ["-O2", "-march=native", "-fPIC", "-ffp-contract=off", "-fno-math-errno", "-fwrapv"];

/// x86-64's extra flags: kernels' vectors are as wide as the widest registers, and clang, which otherwise prefers
/// 256-bit registers on AVX-512 machines, splits each 512-bit vector in two and spills a matmul tile's accumulators
/// (a 1024 matmul 157 -> 300 GFLOP/s).
const X86_FLAGS: [&str; 1] = ["-mprefer-vector-width=512"];

/// What kernels compile with: [`FLAGS`], and [`X86_FLAGS`] on x86-64.
static COMPILE_FLAGS: LazyLock<Vec<&'static str>> =
    LazyLock::new(|| FLAGS.iter().chain(if cfg!(target_arch = "x86_64") { &X86_FLAGS[..] } else { &[] }).copied().collect());

/// Whether kernels compile to relocatable objects that [`Image`] links in-process (x86-64 ELF), else to shared
/// objects that `dlopen` loads.
const RELOCATABLE: bool = cfg!(all(target_arch = "x86_64", target_os = "linux"));

/// What the compiler makes of one source: a relocatable object, or a shared object linked with libm.
fn output_flags() -> &'static [&'static str] {
    if RELOCATABLE {
        &["-c"]
    } else {
        &["-shared", "-lm"]
    }
}

/// Compiles C kernels with the system C compiler into x86-64 relocatable objects (shared objects elsewhere), cached
/// at `cache_dir()/kernels/<key>.o` (tinygrad `ClangJITCompiler`), the key being the SHA-256 of the compiler's
/// identity (its `--version`, and what `-march=native` means to it on this CPU), the flags and the source. A
/// kernel's function is renamed to `<name>_<key prefix>` ([`Compiled::entry`]), so kernels of one name can share a
/// file: [`compile_many`](Compiler::compile_many) compiles a batch as one C file per core, one compiler run each
/// (a compiler process costs more than most kernels), and caches the object under every kernel's key (hard links).
///
/// Each cached object ends in a trailer that holds the keys it was compiled for and the SHA-256 of the object
/// bytes. A cached file that is truncated, corrupt or made for another key is recompiled, with a warning on stderr
/// at `DEBUG>=1`, so a damaged cache never reaches the loader. Files are written to a name unique to the compile
/// and renamed into place, so concurrent compiles of a kernel (threads or processes) each succeed and a reader
/// never sees a partial file.
#[derive(Debug, Clone)]
pub struct ClangCompiler {
    cc: String,
    /// What makes this compiler's output differ from another's: its version and its `-march=native` expansion.
    identity: String,
}

/// [`Error::NoCompiler`] for compiler `cc` (the default list when `None`).
fn no_compiler(cc: Option<String>) -> Error {
    Error::NoCompiler { tried: cc.map_or_else(|| "tried clang, cc and gcc".into(), |cc| format!("CC={cc:?} does not run")) }
}

impl ClangCompiler {
    /// The compiler in env `CC` if set, else the first of `clang`, `cc`, `gcc` on `PATH` that runs. Errors with
    /// [`Error::NoCompiler`] when the chosen one does not run.
    pub fn new() -> Result<Self> {
        match crate::helpers::cc() {
            Some(cc) => Self::with_cc(&cc),
            None => ["clang", "cc", "gcc"].into_iter().find_map(|cc| Self::with_cc(cc).ok()).ok_or_else(|| no_compiler(None)),
        }
    }

    /// Uses `cc` (a program name or path, no arguments). Errors with [`Error::NoCompiler`] when `cc --version` fails.
    pub fn with_cc(cc: &str) -> Result<Self> {
        let run = |args: &[&str]| Command::new(cc).args(args).stdin(Stdio::null()).output().ok();
        let version = run(&["--version"]).filter(|o| o.status.success()).ok_or_else(|| no_compiler(Some(cc.into())))?;
        // `-###` prints the driver's commands without running them: for gcc the expanded -march=native, for clang
        // its target cpu and features
        let native = run(&["-###", "-march=native", "-x", "c", "-c", "/dev/null", "-o", "/dev/null"]).map(|o| o.stderr).unwrap_or_default();
        let identity = format!("{}\n{}", String::from_utf8_lossy(&version.stdout), target_flags(&String::from_utf8_lossy(&native)));
        Ok(ClangCompiler { cc: cc.to_string(), identity })
    }

    /// The compiler command in use.
    pub fn cc(&self) -> &str {
        &self.cc
    }

    /// The cache key of `src`: SHA-256 of the compiler, its identity, the flags and the source.
    fn key(&self, src: &str) -> [u8; 32] {
        sha256_parts(&[&self.cc, &self.identity, &COMPILE_FLAGS.join(" "), &output_flags().join(" "), src])
    }

    /// Where the object for `src` is cached.
    fn entry_path(&self, src: &str) -> PathBuf {
        cache_dir().join("kernels").join(format!("{}.o", hex(&self.key(src))))
    }

    /// Kernel `name` of `src` compiled to `object`: its function is `<name>_<first 16 hex digits of the key>`.
    fn compiled(&self, name: &str, src: &str, object: Arc<[u8]>) -> Compiled {
        Compiled { object, entry: format!("{name}_{}", &hex(&self.key(src))[..16]) }
    }

    /// `src` with kernel `name`'s function renamed to its entry symbol.
    fn renamed(&self, name: &str, src: &str) -> String {
        src.replacen(&format!("void {name}("), &format!("void {}(", self.compiled(name, src, Arc::from([])).entry), 1)
    }

    /// The cached object for `src`, if a good one is there (never under CACHELEVEL=0).
    fn cached(&self, src: &str) -> Option<Vec<u8>> {
        let path = self.entry_path(src);
        if CACHELEVEL.value() == 0 {
            return None;
        }
        let why = match std::fs::read(&path) {
            Ok(mut file) => match entry_object(&file, &self.key(src)) {
                Ok(len) => {
                    file.truncate(len);
                    return Some(file);
                }
                // replaced by an atomic rename when recompiled, so a concurrent reader sees the old file or the new one
                Err(why) => why.to_string(),
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
            Err(e) => format!("unreadable ({e})"),
        };
        if DEBUG.value() >= 1 {
            eprintln!("kernel cache: {} is {why}; recompiling", path.display());
        }
        None
    }

    /// Seals the object in `tmp` (compiled from `srcs`) with its trailer and renames it into the cache under the
    /// first source's key, then links it under the others'. `tmp` is consumed.
    fn store(&self, srcs: &[&str], tmp: &Path) -> Result<Vec<u8>> {
        let keys: Vec<[u8; 32]> = srcs.iter().map(|s| self.key(s)).collect();
        let first = self.entry_path(srcs[0]);
        let sealed = std::fs::read(tmp).and_then(|object| {
            std::fs::OpenOptions::new().append(true).open(tmp)?.write_all(&trailer(&keys, &object))?;
            std::fs::rename(tmp, &first).map(|_| object)
        });
        if sealed.is_err() {
            let _ = std::fs::remove_file(tmp);
        }
        let object = sealed.map_err(io_err(&first))?;
        for src in &srcs[1..] {
            let (link, path) = (self.scratch("link")?, self.entry_path(src));
            std::fs::hard_link(&first, &link).or_else(|_| std::fs::copy(&first, &link).map(|_| ())).map_err(io_err(&link))?;
            std::fs::rename(&link, &path).map_err(io_err(&path))?;
        }
        Ok(object)
    }

    /// A path unique to this compile in the kernel cache directory (created), for `what`.
    fn scratch(&self, what: &str) -> Result<PathBuf> {
        static TMP_ID: AtomicU64 = AtomicU64::new(0);
        let dir = cache_dir().join("kernels");
        std::fs::create_dir_all(&dir).map_err(io_err(&dir))?;
        Ok(dir.join(format!("{what}.{}.{}.tmp", std::process::id(), TMP_ID.fetch_add(1, Relaxed))))
    }

    /// Compiles C source `src` (fed on stdin) into the object file `out`; the compiler's stderr on failure.
    fn run(&self, src: &str, out: &Path) -> Result<std::result::Result<(), Vec<u8>>> {
        let cc_path = Path::new(&self.cc);
        let mut child = Command::new(cc_path)
            .args(COMPILE_FLAGS.iter())
            .args(["-x", "c", "-", "-o"])
            .arg(out)
            .args(output_flags())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(io_err(cc_path))?;
        let mut stdin = child.stdin.take().expect("stdin is piped");
        // write from another thread so a compiler that reports errors before reading all input cannot deadlock us;
        // a write error (the compiler exited early) shows up in its exit status
        let done = std::thread::scope(|s| {
            s.spawn(move || stdin.write_all(src.as_bytes()));
            child.wait_with_output()
        })
        .map_err(io_err(cc_path))?;
        if !done.status.success() {
            let _ = std::fs::remove_file(out);
            return Ok(Err(done.stderr));
        }
        Ok(Ok(()))
    }

    /// Compiles the uncached `kernels` as one C file. `None` when that fails (some kernel has an error: each is then
    /// compiled alone, to name it).
    fn compile_batch(&self, kernels: &[(&str, &str)]) -> Result<Option<Arc<[u8]>>> {
        let tu: String = kernels.iter().map(|(name, src)| self.renamed(name, src)).collect();
        let tmp = self.scratch("batch")?;
        match self.run(&tu, &tmp)? {
            Ok(()) => self.store(&kernels.iter().map(|k| k.1).collect::<Vec<_>>(), &tmp).map(|o| Some(o.into())),
            Err(_) => Ok(None),
        }
    }
}

/// Lowercase hex of `bytes`.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The target flags in a compiler driver's `-###` output: gcc's `-m...` (the expanded `-march=native`), clang's
/// `-target-cpu` and `-target-feature` values. The rest varies per run (gcc names random temporary files).
fn target_flags(driver: &str) -> String {
    let tokens: Vec<&str> = driver.split_whitespace().map(|t| t.trim_matches('"')).collect();
    let mut kept = Vec::new();
    for (i, t) in tokens.iter().enumerate() {
        if t.starts_with("-m") {
            kept.push(*t);
        } else if matches!(*t, "-target-cpu" | "-target-feature") {
            kept.extend(tokens.get(i + 1));
        }
    }
    kept.join(" ")
}

/// SHA-256 of the parts, each followed by a 0 byte (so `["ab", "c"]` and `["a", "bc"]` differ).
fn sha256_parts(parts: &[&str]) -> [u8; 32] {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update([0]);
    }
    h.finalize().into()
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io { path: path.to_path_buf(), source }
}

/// Ends every trailer, naming its format.
const ENTRY_MAGIC: &[u8; 8] = b"TGKCv2\0\0";
/// Bytes a cache entry's trailer has besides its keys: the key count (8, little endian), SHA-256 of the object
/// (32), the object's length (8), [`ENTRY_MAGIC`] (8). The keys (32 bytes each) come first.
const TRAILER_FIXED: usize = 56;

/// The trailer of a cache entry for `object`, compiled for `keys`.
fn trailer(keys: &[[u8; 32]], object: &[u8]) -> Vec<u8> {
    let digest: [u8; 32] = Sha256::digest(object).into();
    [keys.concat().as_slice(), &(keys.len() as u64).to_le_bytes(), &digest, &(object.len() as u64).to_le_bytes(), ENTRY_MAGIC].concat()
}

/// The length of the object at the start of cache entry `file` when it is a good one for `key`, else why not.
fn entry_object(file: &[u8], key: &[u8; 32]) -> std::result::Result<usize, &'static str> {
    let Some(fixed) = file.len().checked_sub(TRAILER_FIXED) else {
        return Err("truncated");
    };
    let (head, tail) = file.split_at(fixed);
    let u64_at = |b: &[u8]| u64::from_le_bytes(b.try_into().expect("8 bytes"));
    let (nkeys, len) = (u64_at(&tail[..8]), u64_at(&tail[40..48]));
    let keys_at =
        usize::try_from(len).ok().filter(|&l| l <= head.len()).and_then(|l| Some((l, usize::try_from(nkeys).ok()?.checked_mul(32)?)));
    let Some((len, keys_len)) = keys_at.filter(|&(l, k)| &tail[48..] == ENTRY_MAGIC && l.checked_add(k) == Some(head.len())) else {
        return Err("truncated or not a tinygrad kernel cache entry");
    };
    let (object, keys) = head.split_at(len);
    debug_assert_eq!(keys.len(), keys_len);
    if !keys.chunks_exact(32).any(|k| k == key) {
        Err("made for another kernel, compiler or CPU")
    } else if tail[8..40] != Sha256::digest(object)[..] {
        Err("corrupt (its content hash does not match)")
    } else {
        Ok(len)
    }
}

impl Compiler for ClangCompiler {
    fn compile(&self, name: &str, src: &str) -> Result<Compiled> {
        if let Some(object) = self.cached(src) {
            return Ok(self.compiled(name, src, object.into()));
        }
        let tmp = self.scratch("kernel")?;
        if let Err(stderr) = self.run(&self.renamed(name, src), &tmp)? {
            let source_path = self.entry_path(src).with_extension("c");
            std::fs::write(&source_path, src).map_err(io_err(&source_path))?;
            let stderr = String::from_utf8_lossy(&stderr).into_owned();
            return Err(Error::Compile { name: name.to_string(), compiler: self.cc.clone(), source_path, stderr });
        }
        let object = self.store(&[src], &tmp)?;
        Ok(self.compiled(name, src, object.into()))
    }

    /// One C file of kernels per core (`NUM_CPU_THREADS`), balanced by source length, each compiled by one compiler
    /// run; a file that fails is compiled kernel by kernel, so each error names its kernel.
    fn compile_many(&self, kernels: &[(&str, &str)]) -> Vec<Result<Compiled>> {
        let mut out: Vec<Option<Result<Compiled>>> =
            kernels.iter().map(|(name, src)| self.cached(src).map(|o| Ok(self.compiled(name, src, o.into())))).collect();
        let mut todo: Vec<usize> = (0..kernels.len()).filter(|&i| out[i].is_none()).collect();
        // a kernel twice in the list compiles once
        todo.sort_by_key(|&i| (std::cmp::Reverse(kernels[i].1.len()), kernels[i].1));
        todo.dedup_by_key(|i| kernels[*i].1);
        // longest first, each to the least loaded share
        let mut shares: Vec<(usize, Vec<usize>)> = vec![(0, vec![]); threads().min(todo.len())];
        for i in todo {
            let s = shares.iter_mut().min_by_key(|s| s.0).expect("at least one share");
            s.0 += kernels[i].1.len();
            s.1.push(i);
        }
        let ctx = crate::helpers::Context::snapshot();
        let done: Vec<(usize, Result<Compiled>)> = shares
            .par_iter()
            .with_max_len(1)
            .flat_map_iter(|(_, idx)| {
                let _g = ctx.enter();
                let batch: Vec<(&str, &str)> = idx.iter().map(|&i| kernels[i]).collect();
                let objects: Vec<Result<Compiled>> = match self.compile_batch(&batch) {
                    Ok(Some(object)) => batch.iter().map(|(name, src)| Ok(self.compiled(name, src, object.clone()))).collect(),
                    _ => batch.iter().map(|(name, src)| self.compile(name, src)).collect(),
                };
                idx.clone().into_iter().zip(objects)
            })
            .collect();
        for (i, r) in done {
            out[i] = Some(r);
        }
        let again: Vec<usize> = (0..kernels.len()).filter(|&i| out[i].is_none()).collect();
        for i in again {
            out[i] = Some(self.compile(kernels[i].0, kernels[i].1));
        }
        out.into_iter().map(|o| o.expect("every kernel compiled")).collect()
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

/// Runs `f`, a batch of kernel launches, on a thread of the kernels' pool when no other batch is there (else on
/// this thread): a parallel launch made on a pool thread runs its first chunk there while the others take the
/// rest, instead of this thread handing the whole launch over and sleeping until it is done. One batch at a time,
/// because a pool thread waiting for its chunks may pick up queued work, and a second batch blocking on a buffer
/// lock the first holds would never return to it; single kernel chunks never block, so they are safe to pick up.
pub fn run_batch<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    static BATCH: parking_lot::Mutex<()> = parking_lot::Mutex::new(());
    match BATCH.try_lock() {
        Some(_one) if threads() > 1 => {
            // (with this thread's Context overrides: DEBUG=2 in a Context still prints each launch)
            let ctx = crate::helpers::Context::snapshot();
            POOL.install(move || {
                let _g = ctx.enter();
                f()
            })
        }
        _ => f(),
    }
}

/// One launch's arguments, shared by the threads that run its chunks.
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
                Ok(CpuProgram { f: unsafe { std::mem::transmute::<*const (), KernelFn>(f) }, _code: code.clone(), parallel: false })
            })
            .collect()
    }
}

impl Program for CpuProgram {
    /// [`CpuProgram::run`] over `global[0]` iterations of the THREAD axis, in parallel as [`CpuProgram::parallel`]
    /// says; `local` is unused (the CPU has no workgroups).
    fn launch(&self, bufs: &[*mut u8], vals: &[i32], global: [usize; 3], _local: [usize; 3]) -> Result<Duration> {
        Ok(self.run(bufs, vals, global[0], self.parallel))
    }
}

impl CpuProgram {
    /// Runs the kernel on `bufs` (buffer start pointers, in the kernel's argument order) with variable values `vals`,
    /// over `outer` iterations of its THREAD axis: `[0, outer)` in `min(outer, NUM_CPU_THREADS)` contiguous chunks
    /// on the pool when `parallel`, else one call over `[0, max(outer, 1))` on this thread. Returns the wall time.
    /// As [`Program::launch`], the pointers must be live buffers the kernel may use alone.
    pub fn run(&self, bufs: &[*mut u8], vals: &[i32], outer: usize, parallel: bool) -> Duration {
        let st = Instant::now();
        let l = Launch { f: self.f, bufs: bufs.as_ptr(), vals: vals.as_ptr() };
        let n = outer.min(threads());
        if parallel && n > 1 {
            POOL.install(|| (0..n).into_par_iter().with_max_len(1).for_each(|i| l.run(i * outer / n, (i + 1) * outer / n)));
        } else {
            l.run(0, outer.max(1));
        }
        st.elapsed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::helpers::Context;
    use std::os::unix::fs::MetadataExt;

    /// A source that no earlier run compiled, so the first compile is a real one.
    fn fresh(src: &str) -> String {
        static N: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
        format!("// {}-{nanos}-{}\n{src}", std::process::id(), N.fetch_add(1, Relaxed))
    }

    const AXPB: &str = "void axpb(void** bufs, const int* vals, int core_start, int core_end) {
  float* out = (float*)bufs[0]; const float* a = (const float*)bufs[1]; int* starts = (int*)bufs[2];
  for (int i = core_start; i < core_end; i++) { out[i] = a[i]*2.0f + (float)vals[0]; starts[i] = core_start; }
}";

    fn f32s(b: &[u8]) -> Vec<f32> {
        b.chunks_exact(4).map(|c| f32::from_ne_bytes(c.try_into().unwrap())).collect()
    }

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
        let a = CpuAllocator::new();
        let src: Vec<u8> = (0..=255).collect();
        let b = a.alloc(256).unwrap();
        a.copyin(&b, &src).unwrap();
        let mut dst = vec![0u8; 256];
        a.copyout(&mut dst, &b).unwrap();
        assert_eq!(dst, src);
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
        let prog = CpuProgram::load(&cc.compile("axpb", &src).unwrap()).unwrap();
        std::fs::remove_file(cc.entry_path(&src)).unwrap(); // tests leave no fresh kernels behind
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
    fn second_compile_hits_disk_cache() {
        let cc = ClangCompiler::new().unwrap();
        let src = fresh(AXPB);
        let _g = Context::new(&[(&CACHELEVEL, 2)]);
        let (o1, path) = (cc.compile("axpb", &src).unwrap(), cc.entry_path(&src));
        let ino = std::fs::metadata(&path).unwrap().ino();
        assert_eq!(cc.compile("axpb", &src).unwrap(), o1);
        assert_eq!(std::fs::metadata(&path).unwrap().ino(), ino, "not recompiled");
        assert_eq!(Context::with(&[(&CACHELEVEL, 0)], || cc.compile("axpb", &src).unwrap()), o1);
        assert_ne!(std::fs::metadata(&path).unwrap().ino(), ino, "CACHELEVEL=0 recompiles");
        assert_eq!(path.parent().unwrap(), cache_dir().join("kernels"));
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn compiler_identity_is_the_same_every_run_and_names_the_target() {
        let (a, b) = (ClangCompiler::new().unwrap(), ClangCompiler::new().unwrap());
        assert_eq!(a.identity, b.identity, "gcc's -### names random temporary files: they must not reach the cache key");
        assert!(a.identity.contains("-m") || a.identity.contains("+"), "target flags kept: {}", a.identity);
        assert_eq!(target_flags(r#" "cc1" "-march=znver3" "-o" "/tmp/ccAb.s" "-target-cpu" "x86-64" "#), "-march=znver3 x86-64");
    }

    #[test]
    fn concurrent_compiles_of_one_kernel() {
        let src = fresh(AXPB);
        let objects: Vec<Compiled> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..4).map(|_| s.spawn(|| ClangCompiler::new().unwrap().compile("axpb", &src).unwrap())).collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(objects.iter().all(|o| *o == objects[0]));
        CpuProgram::load(&objects[0]).unwrap();
        let path = ClangCompiler::new().unwrap().entry_path(&src);
        let whole = std::fs::read(&path).unwrap();
        assert_eq!(&whole[..objects[0].object.len()], &objects[0].object[..], "the cache holds the object, then its trailer");
        assert_eq!(whole.len(), objects[0].object.len() + 32 + TRAILER_FIXED, "one key");
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn a_batch_compiles_each_kernel_once_and_names_the_broken_one() {
        let cc = ClangCompiler::new().unwrap();
        let good: Vec<String> = (0..3).map(|i| fresh(&AXPB.replace("2.0f", &format!("{i}.0f")))).collect();
        let broken = fresh("void broken(void** bufs) { int x = ; }");
        let cached = cc.compile("axpb", &good[0]).unwrap();
        let kernels: Vec<(&str, &str)> = vec![("axpb", &good[0]), ("axpb", &good[1]), ("broken", &broken), ("axpb", &good[2])];
        let objects = cc.compile_many(&kernels);
        assert_eq!(objects[0].as_ref().unwrap(), &cached);
        assert!(matches!(&objects[2], Err(Error::Compile { name, .. }) if name == "broken"));
        let a = CpuAllocator::new();
        let (out, inp, starts) = (a.alloc(8).unwrap(), a.alloc(8).unwrap(), a.alloc(8).unwrap());
        a.copyin(&inp, &[1f32, 3.0].iter().flat_map(|x| x.to_ne_bytes()).collect::<Vec<_>>()).unwrap();
        for (i, o) in [0, 1, 3].into_iter().zip([0.0f32, 1.0, 2.0]) {
            let prog = CpuProgram::load(objects[i].as_ref().unwrap()).unwrap();
            prog.run(&[out.as_ptr(), inp.as_ptr(), starts.as_ptr()], &[5], 2, false);
            let mut bytes = vec![0u8; 8];
            a.copyout(&mut bytes, &out).unwrap();
            assert_eq!(f32s(&bytes), [o + 5.0, 3.0 * o + 5.0], "kernel {i} computes its own source");
        }
        for src in good.iter().chain([&broken]) {
            let _ = std::fs::remove_file(cc.entry_path(src));
            let _ = std::fs::remove_file(cc.entry_path(src).with_extension("c"));
        }
    }

    #[test]
    fn shared_objects_load_too() {
        let cc = ClangCompiler::new().unwrap();
        let dir = std::env::temp_dir().join(format!("tinygrad-so-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("k.c"), AXPB).unwrap();
        let ok = Command::new(cc.cc())
            .args(COMPILE_FLAGS.iter())
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

    #[test]
    fn syntax_error_keeps_source() {
        let src = fresh("void broken(void** bufs) { int x = ; }");
        let Err(Error::Compile { name, stderr, source_path, .. }) = ClangCompiler::new().unwrap().compile("broken", &src) else {
            panic!("expected a compile error")
        };
        assert_eq!(name, "broken");
        assert!(stderr.contains("error"), "{stderr}");
        assert_eq!(std::fs::read_to_string(&source_path).unwrap(), src);
        assert_eq!(source_path.extension().unwrap(), "c");
        std::fs::remove_file(source_path).unwrap();
    }

    #[test]
    fn missing_compiler() {
        let Err(err) = ClangCompiler::with_cc("/nonexistent/cc") else { panic!("no such compiler") };
        assert!(matches!(err, Error::NoCompiler { .. }));
        assert!(err.to_string().contains("\"/nonexistent/cc\" does not run") && err.to_string().contains("apt-get install clang"), "{err}");
        // whichever compiler this machine has (gcc-only machines have no clang) is accepted by its path
        let found = ClangCompiler::new().unwrap();
        let path =
            String::from_utf8(Command::new("sh").args(["-c", &format!("command -v {}", found.cc())]).output().unwrap().stdout).unwrap();
        assert_eq!(ClangCompiler::with_cc(path.trim()).unwrap().cc(), path.trim());
    }

    #[test]
    fn cache_key_is_stable() {
        // sha256("a\0") from Python's hashlib
        assert_eq!(sha256_parts(&["a"])[..4], [0xff, 0xe9, 0xaa, 0xea]);
        assert_ne!(sha256_parts(&["ab", "c"]), sha256_parts(&["a", "bc"]), "parts are separated");
        let cc = ClangCompiler::new().unwrap();
        assert_eq!(cc.key("x"), cc.key("x"));
        assert_ne!(cc.key("x"), ClangCompiler { identity: "another CPU".into(), ..cc.clone() }.key("x"));
    }

    #[test]
    fn entries_are_checked() {
        let (key, other) = (sha256_parts(&["k"]), sha256_parts(&["other"]));
        let object = b"an object".to_vec();
        let good = [object.clone(), trailer(&[other, key], &object)].concat();
        assert_eq!(entry_object(&good, &key), Ok(object.len()));
        assert_eq!(entry_object(&good, &other), Ok(object.len()), "a batch's object serves each of its keys");
        assert_eq!(entry_object(&good[..good.len() - 1], &key), Err("truncated or not a tinygrad kernel cache entry"));
        assert_eq!(entry_object(&good[1..], &key), Err("truncated or not a tinygrad kernel cache entry"));
        assert_eq!(entry_object(&good[..10], &key), Err("truncated"));
        assert_eq!(entry_object(&good, &sha256_parts(&["third"])), Err("made for another kernel, compiler or CPU"));
        let mut flipped = good.clone();
        flipped[3] ^= 1;
        assert_eq!(entry_object(&flipped, &key), Err("corrupt (its content hash does not match)"));
        assert_eq!(entry_object(&object, &key), Err("truncated"));
    }
}
