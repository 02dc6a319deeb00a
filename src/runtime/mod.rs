//! Runtime: each device is tinygrad's three parts (`device.py`) plus the renderer it compiles: a [`Device`]. In:
//! rendered kernel source and byte buffers. Out: compiled programs ([`Compiler`], [`Program`]), device memory
//! ([`Allocator`], [`RawBuffer`]) and timed launches. One module per device: `cpu` (C compiled by clang or gcc,
//! cached on disk and linked in-process by `elf`), `python` (an interpreter of the linear UOps), `cl` (OpenCL, with
//! libOpenCL loaded at run time), `cuda` (CUDA through NVRTC and the driver API, both loaded at run time). Here too
//! what the devices share: the registry, host memory and its free cache, and a failed kernel's source kept for its
//! error. The runtime knows nothing of tensors.

pub mod cl;
pub mod cpu;
pub mod cuda;
pub mod elf;
pub mod python;
#[cfg(test)]
mod testing;

pub use cpu::{ClangCompiler, CpuAllocator, CpuProgram};

use crate::error::{Error, Result};
use crate::helpers::{cache_dir, dev, getenv_str};
use crate::renderer::{LinearKernel, Renderer};
use sha2::{Digest, Sha256};
use std::alloc::Layout;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::time::Duration;

// **************** the device registry ****************

/// One kind of device this build has (tinygrad's `Device._devices` entry): its name, its other names, and how to
/// open it. Adding a device is a file here, a renderer, and one line in [`DEVICES`].
pub struct DeviceEntry {
    /// The canonical name (`CPU`).
    pub name: &'static str,
    /// Other names `DEV` may use for it (`CLANG`, the CPU's old name).
    pub aliases: &'static [&'static str],
    /// The device, opened on first use (later calls return the same one, or the same error).
    pub open: fn() -> Result<&'static dyn Device>,
    /// Whether `NAME:1`, `NAME:2`, ... are instances of it (tinygrad's `CPU:1`): separate devices to the engine
    /// (their own buffers and launches) on the one runtime device. False where an index names other hardware.
    pub instances: bool,
}

/// The devices of this build, the default first: `CPU` (C compiled by clang or gcc), `PYTHON` (the interpreter of
/// linear UOps, tinygrad's PYTHON device), `CL` (OpenCL), `CUDA` (NVIDIA GPUs).
pub static DEVICES: [DeviceEntry; 4] = [
    DeviceEntry { name: "CPU", aliases: &["CLANG"], open: || Ok(cpu::device()), instances: true },
    DeviceEntry { name: "PYTHON", aliases: &[], open: || Ok(python::device()), instances: true },
    DeviceEntry { name: "CL", aliases: &[], open: || Ok(cl::device()?), instances: true },
    DeviceEntry { name: "CUDA", aliases: &[], open: || Ok(cuda::device()?), instances: false },
];

/// The registry's device names, comma-separated, for messages.
pub fn device_names() -> String {
    DEVICES.iter().map(|d| d.name).collect::<Vec<_>>().join(", ")
}

/// A device name parsed (tinygrad `Device.canonicalize`): `cuda:1` is the registry's CUDA entry and index 1; the
/// name before any `:` in any case, an alias for its device. `None` for a name this build does not have.
pub fn parse_device(name: &str) -> Option<(&'static DeviceEntry, usize)> {
    let (base, index) = name.split_once(':').map_or((name, Some(0)), |(b, i)| (b, i.parse().ok()));
    let entry = DEVICES.iter().find(|d| d.name.eq_ignore_ascii_case(base) || d.aliases.iter().any(|a| a.eq_ignore_ascii_case(base)))?;
    Some((entry, index?))
}

/// A device name in canonical form: the registry's name, then `:index` unless it is 0 (`cpu:0` -> `CPU`, `cl:1` ->
/// `CL:1`, `clang` -> `CPU`); a name this build does not have is upper-cased before any `:`.
pub fn canonicalize_device(name: &str) -> String {
    let canon = |base: &str, i: &str| if i == "0" || i.is_empty() { base.to_string() } else { format!("{base}:{i}") };
    let (base, index) = name.split_once(':').unwrap_or((name, ""));
    match parse_device(name) {
        Some((d, i)) => canon(d.name, &i.to_string()),
        None => canon(&base.to_uppercase(), index),
    }
}

/// The runtime device named `name` (any case; `:0` optional), opened on first use. Instances (`CPU:1`, `CL:2`: see
/// [`DeviceEntry::instances`]) are the same runtime device; the engine keeps their buffers and launches apart.
///
/// # Errors
/// [`Error::Device`] for a name this build does not have, an index other than 0 of a device without instances (one
/// GPU is opened), or a device that does not open (no OpenCL driver, no GPU), saying what to do.
pub fn open_device(name: &str) -> Result<&'static dyn Device> {
    let err = |msg: String| Error::Device { device: name.into(), msg };
    match parse_device(name) {
        Some((d, i)) if i == 0 || d.instances => (d.open)(),
        Some((d, i)) => Err(err(format!("device {} index {i}: this build opens the first {} device only; use {}", d.name, d.name, d.name))),
        None => Err(err(format!("unknown device; this build has {} (set DEV to one of them)", device_names()))),
    }
}

/// The device tensors are created on when none is given: `DEV` canonicalized, else `CPU` (tinygrad
/// `Device.DEFAULT`).
pub fn default_device() -> String {
    match dev() {
        d if d.is_empty() => DEVICES[0].name.into(),
        d => canonicalize_device(&d),
    }
}

/// Checks the settings once, at program start, so a typo is one clear error instead of a panic deep in a run:
/// tinygrad's integer knobs ([`crate::helpers::check_settings`]), `DEV` a device of [`DEVICES`] that opens, and the C
/// compiler (`CC`, else clang, cc or gcc) runs when the CPU is the default device or `CC` is set.
///
/// # Errors
/// [`Error::Env`] naming the variable, its value and what is allowed; the device's error when `DEV`'s does not open
/// ([`Error::NoCompiler`] for the CPU without a C compiler; NVRTC missing for CUDA).
pub fn check_env() -> Result<()> {
    crate::helpers::check_settings()?;
    let env_err = |var: &str, value: &str, allowed: String| Error::Env { var: var.into(), value: value.into(), allowed };
    if let Some(cc) = crate::helpers::cc() {
        ClangCompiler::with_cc(&cc).map_err(|_| {
            env_err("CC", &cc, format!("`{cc} --version` does not run; set CC to a working C compiler (clang or gcc) or unset it"))
        })?;
    }
    let target = crate::helpers::cpu_target();
    let known = cfg!(target_arch = "x86_64") && crate::helpers::CPU_TARGETS.contains(&target.as_str());
    if !target.is_empty() && !known {
        let allowed = format!("one of {} on x86-64 (or unset it for this machine's own features)", crate::helpers::CPU_TARGETS.join(", "));
        return Err(env_err("CPU_TARGET", &target, allowed));
    }
    let host = crate::renderer::CpuFeatures::host();
    if (target == "x86-64-v3" && !(host.avx2 && host.fma)) || (target == "x86-64-v4" && !host.avx512) {
        return Err(env_err("CPU_TARGET", &target, "a level this CPU runs: it lacks that level's vector instructions".into()));
    }
    let dev = getenv_str("DEV", "");
    if !dev.is_empty() && parse_device(&dev).is_none() {
        return Err(env_err("DEV", &dev, format!("unknown device; this build has {} (or unset DEV for CPU)", device_names())));
    }
    // the default device must work: its compiler too (the interpreter needs none)
    open_device(&default_device())?.compiler().map(drop)
}

/// Runs a program's `main` body and turns its outcome into an exit code: on error prints `error: {e}` (one line,
/// the [`Error`]'s `Display` text) to stderr and fails, rather than the `Debug` struct `fn main() -> Result` prints.
pub fn run_main(body: impl FnOnce() -> Result<()>) -> std::process::ExitCode {
    match body() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

// **************** memory ****************

/// Device memory of [`size`](Self::size) bytes (tinygrad's allocator "opaque"): a handle and the function that
/// releases it, both chosen by the allocator that made it. On the CPU and the interpreter the handle is a host
/// allocation aligned to 64 bytes (a cache line, and an AVX-512 vector), or host bytes borrowed read-only and
/// aligned to their elements ([`RawBuffer::borrow_host`]); on OpenCL it is a `cl_mem`. Released when dropped.
#[derive(Debug)]
pub struct RawBuffer {
    ptr: NonNull<u8>,
    size: usize,
    release: unsafe fn(NonNull<u8>, usize),
    /// The kind of memory, which only its own allocator may touch: `host`, `CL`, `CUDA`.
    owner: &'static str,
    /// For host memory borrowed from bytes the buffer was made from ([`RawBuffer::borrow_host`]): what keeps them
    /// alive. Such a buffer is read-only and never cached for reuse.
    keep: Option<bytes::Bytes>,
}

/// Host buffers of at least this many bytes are 2 MiB aligned and advised onto huge pages.
const HUGE: usize = 4 << 20;
/// The size of a huge page on x86-64 and arm64 Linux.
const HUGE_PAGE: usize = 2 << 20;

/// Bytes past the end of every host [`RawBuffer`] that a kernel may read (never write): what the CPU renderer's
/// [`crate::renderer::Renderer::overread`] promises codegen.
pub const OVERREAD: usize = crate::renderer::CPU_OVERREAD;

// SAFETY: a RawBuffer exclusively owns its allocation (a borrowed one shares read-only `Bytes`, which are Send and
// Sync) and hands out only raw pointers; synchronizing accesses
// through them (e.g. not copying in while a kernel writes) is the caller's job, as with any device memory.
unsafe impl Send for RawBuffer {}
// SAFETY: as for Send: no method reads or writes the memory through `&self` except the allocator copies, whose
// callers own the synchronization.
unsafe impl Sync for RawBuffer {}

impl RawBuffer {
    /// The layout of a `size`-byte host buffer: 64-byte aligned, with [`OVERREAD`] readable bytes past its end (so
    /// `size` 0 is a real allocation too).
    fn layout(size: usize) -> Option<Layout> {
        let align = if size >= HUGE { HUGE_PAGE } else { 64 };
        Layout::from_size_align(size.checked_add(OVERREAD)?, align).ok()
    }

    /// A new uninitialized 64-byte-aligned host buffer of `size` bytes. Errors with [`Error::Device`] when the
    /// allocation fails or `size` overflows `isize`.
    pub(crate) fn host(size: usize) -> Result<Self> {
        let oom = || Error::Device {
            device: "CPU".into(),
            msg: format!("out of host memory allocating {size} bytes; free buffers or shrink the model"),
        };
        let layout = Self::layout(size).ok_or_else(oom)?;
        // SAFETY: the layout has non-zero size.
        let ptr = unsafe { std::alloc::alloc(layout) };
        // a large buffer on 2 MiB pages where the kernel allows (transparent huge pages in `madvise` mode, as numpy
        // asks for its large arrays): a kernel striding through it (a matrix-vector product reading a column strip of
        // every row) misses the TLB once per 2 MiB instead of once per 4 KiB
        #[cfg(target_os = "linux")]
        if size >= HUGE && !ptr.is_null() {
            // SAFETY: `ptr` starts a live allocation of `layout.size()` bytes, 2 MiB aligned; MADV_HUGEPAGE is advice
            // that changes no contents, and a failure (no THP in this kernel) leaves ordinary pages.
            unsafe { libc::madvise(ptr.cast(), layout.size(), libc::MADV_HUGEPAGE) };
        }
        /// Frees a host buffer.
        ///
        /// # Safety
        /// `ptr` came from `alloc` with `RawBuffer::layout(size)` and is freed once.
        unsafe fn free(ptr: NonNull<u8>, size: usize) {
            // SAFETY: the function's contract.
            unsafe { std::alloc::dealloc(ptr.as_ptr(), RawBuffer::layout(size).expect("layout was valid at allocation")) }
        }
        Ok(RawBuffer { ptr: NonNull::new(ptr).ok_or_else(oom)?, size, release: free, owner: "host", keep: None })
    }

    /// The first `size` of host memory `bytes` as a read-only host buffer, without copying (tinygrad
    /// `Tensor.from_blob`'s external memory): where their start is `align`-aligned (a kernel's element type) and
    /// the [`OVERREAD`] bytes past `size` are readable: within `bytes`, or in the same 4 KiB page as the last byte
    /// (memory is readable page by page). None otherwise, and for `size` 0: the caller copies.
    pub fn borrow_host(bytes: &bytes::Bytes, size: usize, align: usize) -> Option<Self> {
        const PAGE: usize = 4096;
        let start = bytes.as_ptr() as usize;
        let last = start + size.max(1) - 1;
        let overread_ok = bytes.len() >= size + OVERREAD || last / PAGE == (last + OVERREAD) / PAGE;
        if size == 0 || bytes.len() < size || !start.is_multiple_of(align.max(1)) || !overread_ok {
            return None;
        }
        /// Releases nothing: `keep` holds the memory.
        unsafe fn keep_alive(_: NonNull<u8>, _: usize) {}
        let ptr = NonNull::new(bytes.as_ptr().cast_mut())?;
        Some(RawBuffer { ptr, size, release: keep_alive, owner: "host", keep: Some(bytes.clone()) })
    }

    /// Whether this buffer borrows host memory ([`RawBuffer::borrow_host`]): read-only, never reused.
    pub fn is_borrowed(&self) -> bool {
        self.keep.is_some()
    }
    /// The host bytes this buffer borrows ([`RawBuffer::borrow_host`]); None for memory of its own.
    pub fn borrowed_bytes(&self) -> Option<&bytes::Bytes> {
        self.keep.as_ref()
    }

    /// A buffer of `size` bytes from a device handle of memory kind `owner`, which `release` frees when the
    /// buffer drops.
    ///
    /// # Safety
    /// `release(handle, size)` must be sound to call once, after every use of the handle.
    pub(crate) unsafe fn from_handle(
        handle: NonNull<u8>,
        size: usize,
        release: unsafe fn(NonNull<u8>, usize),
        owner: &'static str,
    ) -> Self {
        RawBuffer { ptr: handle, size, release, owner, keep: None }
    }

    /// Panics unless this buffer is memory of kind `owner` (an allocator handed another's buffer would treat a host
    /// pointer as a device handle, or the reverse).
    pub fn check_owner(&self, owner: &str) {
        assert_eq!(self.owner, owner, "a {} buffer handed to the {owner} allocator", self.owner);
    }

    /// Panics unless `copyin` may fill this buffer from `src`: memory of kind `owner`, of `src`'s size.
    pub fn check_copyin(&self, owner: &str, src: &[u8]) {
        self.check_owner(owner);
        assert!(!self.is_borrowed(), "copyin: the buffer is borrowed read-only host memory (RawBuffer::borrow_host)");
        assert_eq!(self.size, src.len(), "copyin: buffer is {} bytes, source {}", self.size, src.len());
    }

    /// Panics unless `copyout` may read this buffer into `dst`: memory of kind `owner`, of `dst`'s size.
    pub fn check_copyout(&self, owner: &str, dst: &[u8]) {
        self.check_owner(owner);
        assert_eq!(dst.len(), self.size, "copyout: buffer is {} bytes, destination {}", self.size, dst.len());
    }

    /// The size in bytes.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The handle: for host buffers the start of the memory (64-byte aligned unless borrowed), valid for [`size`](Self::size)
    /// bytes while `self` lives.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }
}

impl Drop for RawBuffer {
    fn drop(&mut self) {
        // SAFETY: `release` is the function made for this handle (see `host` and `from_handle`), called once.
        unsafe { (self.release)(self.ptr, self.size) }
    }
}

/// Most bytes a [`FreeCache`] keeps; a buffer freed beyond it is released (tinygrad caches without bound).
const CACHE_CAP: usize = 1 << 30;

/// Freed buffers kept by size for reuse (tinygrad `LRUAllocator`'s cache), up to 1 GiB in all: what every
/// device's allocator is built on.
#[derive(Debug, Default)]
pub struct FreeCache(parking_lot::Mutex<(std::collections::HashMap<usize, Vec<RawBuffer>>, usize)>);

impl FreeCache {
    /// A cached buffer of `size` bytes, else `create(size)`; when that fails the cache is released and `create`
    /// tried once more.
    pub fn alloc(&self, size: usize, create: impl Fn(usize) -> Result<RawBuffer>) -> Result<RawBuffer> {
        let cached = {
            let mut c = self.0.lock();
            let buf = c.0.get_mut(&size).and_then(Vec::pop);
            c.1 -= buf.as_ref().map_or(0, RawBuffer::size);
            buf
        };
        match cached {
            Some(buf) => Ok(buf),
            None => create(size).or_else(|_| {
                self.clear();
                create(size)
            }),
        }
    }
    /// Keeps `buf` for reuse, or releases it when the cache is full or it is borrowed memory.
    pub fn free(&self, buf: RawBuffer) {
        let mut c = self.0.lock();
        if !buf.is_borrowed() && c.1 + buf.size() <= CACHE_CAP {
            c.1 += buf.size();
            c.0.entry(buf.size()).or_default().push(buf);
        }
    }
    /// Releases every cached buffer.
    pub fn clear(&self) {
        *self.0.lock() = Default::default();
    }
    /// The bytes and the number of buffers cached.
    pub fn cached(&self) -> (usize, usize) {
        let c = self.0.lock();
        (c.1, c.0.values().map(Vec::len).sum())
    }
}

/// The argument slots a kernel's parameters take, in order (its DEFINE_GLOBALs'): a kernel need not use every
/// buffer of its launch, and devices whose kernels take parameters by position set only these.
pub fn global_slots(k: &LinearKernel) -> Vec<usize> {
    let mut slots: Vec<usize> = k
        .uops
        .iter()
        .filter_map(|u| match u.arg {
            crate::uop::Arg::Int(s) if u.op == crate::uop::Ops::DEFINE_GLOBAL => Some(s as usize),
            _ => None,
        })
        .collect();
    slots.sort_unstable();
    slots.dedup();
    slots
}

/// What [`Allocator::in_host`] runs: a source's bytes read, a destination's written.
pub type InHost<'a> = dyn FnMut(&[u8], &mut [u8]) -> Result<()> + 'a;

/// A device's memory manager (tinygrad `Allocator` with `LRUAllocator`'s cache): freed buffers are kept, keyed by
/// size, and handed back by the next `alloc` of the same size.
pub trait Allocator: Send + Sync {
    /// A buffer of `size` bytes, uninitialized (a reused one holds stale data). On failure the cache is released and
    /// the allocation retried once; then errors with [`Error::Device`].
    fn alloc(&self, size: usize) -> Result<RawBuffer>;
    /// The first `size` of host bytes `bytes` as a buffer of this device without a copy, where its kernels read
    /// host memory and the bytes allow it ([`RawBuffer::borrow_host`], `align` the element size); None (the
    /// default) to copy them.
    fn borrow(&self, _bytes: &bytes::Bytes, _size: usize, _align: usize) -> Option<RawBuffer> {
        None
    }
    /// Returns `buf` to the cache, or releases it when the cache is full.
    fn free(&self, buf: RawBuffer);
    /// Releases every cached buffer (tinygrad `LRUAllocator.free_cache`).
    fn free_cache(&self);
    /// Copies host bytes `src` into `dst` (tinygrad `_copyin`). Errors with [`Error::Device`] when the device
    /// fails (a GPU driver may report a failed allocation only now). Panics when the sizes differ.
    fn copyin(&self, dst: &RawBuffer, src: &[u8]) -> Result<()>;
    /// Copies `src` into host bytes `dst` (tinygrad `_copyout`). Errors as [`Allocator::copyin`]; panics when the
    /// sizes differ.
    fn copyout(&self, dst: &mut [u8], src: &RawBuffer) -> Result<()>;
    /// Runs `f` on the bytes of `src` and of `dst`, two distinct buffers of this device, in place, where its memory is
    /// host memory (the CPU's), so a host-side consumer (a sum over MPI) copies nothing; `dst` is zeroed first. None
    /// (the default): the caller copies out and in.
    ///
    /// # Safety
    /// `src` and `dst` are distinct, disjoint, live buffers; nothing else reads `dst` or writes either while `f` runs
    /// (the caller holds their locks), and `f` reaches neither through other means.
    ///
    /// # Panics
    /// If `src` and `dst` start at the same address.
    unsafe fn in_host(&self, _src: &RawBuffer, _dst: &RawBuffer, _f: &mut InHost) -> Option<Result<()>> {
        None
    }
}

/// A compiled kernel: the object's bytes and the name of the kernel's function in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compiled {
    /// The object (for the CPU, an ELF relocatable object or a shared object); it may hold other kernels too.
    pub object: std::sync::Arc<[u8]>,
    /// The kernel's function in `object`.
    pub entry: String,
}

/// Source to binary (tinygrad `Compiler`), with a content-addressed disk cache that `CACHELEVEL=0` bypasses.
pub trait Compiler: Send + Sync {
    /// Compiles `src`, which defines the kernel `name`, and returns the object. Errors:
    /// [`Error::Compile`] with the compiler's output, [`Error::Io`] when the cache directory is not writable.
    fn compile(&self, name: &str, src: &str) -> Result<Compiled>;
    /// Compiles each `(name, src)` of `kernels`, as [`compile`](Self::compile) would, in whatever batches and
    /// parallelism the compiler does best (one by one here).
    fn compile_many(&self, kernels: &[(&str, &str)]) -> Vec<Result<Compiled>> {
        kernels.iter().map(|(name, src)| self.compile(name, src)).collect()
    }
}

/// Lowercase hex of `bytes`.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The first 8 bytes of `bytes`' SHA-256, in hex: the name of a kept source.
fn short_hash(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes)[..8])
}

/// [`Error::Io`] on `path`, for `map_err`.
fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io { path: path.to_path_buf(), source }
}

/// Writes `text`, a source that failed to compile, to `cache_dir()/kernels/<file>` for the compile error to point
/// at. Errors with [`Error::Io`].
fn keep_source(file: String, text: &[u8]) -> Result<PathBuf> {
    let path = cache_dir().join("kernels").join(file);
    std::fs::create_dir_all(path.parent().expect("a file in a directory")).map_err(io_err(&path))?;
    std::fs::write(&path, text).map_err(io_err(&path))?;
    Ok(path)
}

/// A loaded kernel (tinygrad `Program`/`CPUProgram`).
pub trait Program: Send + Sync {
    /// Runs the kernel on `bufs` (buffer handles in the kernel's argument order: host pointers on the CPU and the
    /// interpreter) with symbolic variable values `vals` (in the kernel's variable order) over a grid of `global`
    /// workgroups of `local` threads each (tinygrad's `global_size`/`local_size`; on the CPU, `global[0]` is the
    /// THREAD axis's iterations, which the launch hands out to cores). Returns the wall time of the whole launch.
    /// The handles must be live buffers at least as large as the kernel indexes, not accessed by anything else
    /// during the launch. Errors with [`Error::Device`] when the device fails (the interpreter: an access out of
    /// bounds).
    fn launch(&self, bufs: &[*mut u8], vals: &[i32], global: [usize; 3], local: [usize; 3]) -> Result<Duration>;

    /// Starts the kernel as [`launch`](Program::launch) does, without waiting for it where the device queues work
    /// in order (CUDA: a later launch or copy on the stream waits for it; tinygrad does not wait either); the others
    /// run it to the end. Errors as `launch`, except that a queued kernel's failure shows at the next wait.
    fn enqueue(&self, bufs: &[*mut u8], vals: &[i32], global: [usize; 3], local: [usize; 3]) -> Result<()> {
        self.launch(bufs, vals, global, local).map(drop)
    }
}

/// How a device runs kernels: what the engine and BEAM need to know beyond what its [`Renderer`] offers codegen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Launcher {
    /// On the host's cores: a launch splits the kernel's THREAD axis over the CPU thread pool, and BEAM compiles
    /// candidates in batches and times a sample of that axis (the CPU).
    HostThreads,
    /// A grid of workgroups on the device, timed whole (OpenCL, CUDA).
    Grid,
    /// Interpreted: launch times say nothing of the code, so BEAM takes the hand-coded opts (PYTHON).
    Interpreted,
}

/// A device (tinygrad `Compiled`): the renderer its kernels are written for, its memory, its compiler, and the
/// loader of what that compiler makes. One static per device, found by name in the engine.
pub trait Device: Send + Sync {
    /// The canonical name (`CPU`, `PYTHON`).
    fn name(&self) -> &'static str;
    /// How kernels run, which decides how the engine launches them and how BEAM times them.
    fn launcher(&self) -> Launcher;
    /// Whether its kernels already spread over all the host's cores (the CPU's pool, an OpenCL CPU device): devices
    /// that do share one launch queue in the engine, as two at once would only split the same cores.
    fn on_host_cores(&self) -> bool {
        false
    }
    /// What codegen may use on this device and the language it renders (read at each use: it follows settings
    /// such as `NUM_CPU_THREADS`).
    fn renderer(&self) -> Renderer;
    /// The device's memory.
    fn allocator(&self) -> &dyn Allocator;
    /// The device's compiler, found at first use. Errors when there is none: [`Error::NoCompiler`] on the CPU,
    /// [`Error::Device`] naming what to install elsewhere (NVRTC).
    fn compiler(&self) -> Result<&dyn Compiler>;
    /// The program for `kernel` from `compiled`, what [`Device::compiler`] made of `kernel`'s source. Errors with
    /// [`Error::Load`] when it does not load.
    fn load(&self, kernel: &LinearKernel, compiled: &Compiled) -> Result<Box<dyn Program>>;
    /// A second compiler whose build of every kernel the engine also runs, on copies of the kernel's inputs, and
    /// compares with the first's output (a compiler differential check; on the CPU `CC_CHECK`). None by default.
    fn check_compiler(&self) -> Result<Option<&dyn Compiler>> {
        Ok(None)
    }
    /// Waits for every kernel queued on the device (tinygrad `Device.synchronize`): what a timer of realizes needs
    /// where launches do not wait ([`Program::enqueue`]). Errors with [`Error::Device`] when a queued kernel failed.
    fn synchronize(&self) -> Result<()> {
        Ok(())
    }
}
