//! Runtime: each device is tinygrad's three parts (`device.py`). In: rendered kernel source and byte buffers.
//! Out: compiled programs ([`Compiler`], [`Program`]), device memory ([`Allocator`], [`RawBuffer`]) and timed
//! launches. One file per device; the runtime knows nothing of tensors or UOps.

pub mod cpu;
pub mod elf;

pub use cpu::{ClangCompiler, CpuAllocator, CpuProgram};

use crate::error::{Error, Result};
use std::alloc::Layout;
use std::ptr::NonNull;
use std::time::Duration;

/// Device memory of [`size`](Self::size) bytes (tinygrad's allocator "opaque"). For the CPU it is a host allocation
/// aligned to 64 bytes (a cache line, and an AVX-512 vector), freed when dropped.
#[derive(Debug)]
pub struct RawBuffer {
    ptr: NonNull<u8>,
    size: usize,
}

/// Bytes past the end of every [`RawBuffer`] that a kernel may read (never write): what the CPU renderer's
/// [`crate::renderer::Renderer::overread`] promises codegen.
pub const OVERREAD: usize = crate::renderer::CPU_OVERREAD;

// SAFETY: a RawBuffer exclusively owns its allocation and hands out only raw pointers; synchronizing accesses
// through them (e.g. not copying in while a kernel writes) is the caller's job, as with any device memory.
unsafe impl Send for RawBuffer {}
// SAFETY: as for Send: no method reads or writes the memory through `&self` except the allocator copies, whose
// callers own the synchronization.
unsafe impl Sync for RawBuffer {}

impl RawBuffer {
    /// The layout of a `size`-byte buffer: 64-byte aligned, with [`OVERREAD`] readable bytes past its end (so
    /// `size` 0 is a real allocation too).
    fn layout(size: usize) -> Option<Layout> {
        Layout::from_size_align(size.checked_add(OVERREAD)?, 64).ok()
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
        Ok(RawBuffer { ptr: NonNull::new(ptr).ok_or_else(oom)?, size })
    }

    /// The size in bytes.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The start of the memory, 64-byte aligned; valid for [`size`](Self::size) bytes while `self` lives.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }
}

impl Drop for RawBuffer {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from `alloc` with this same layout (it was valid then, so it is now) and is freed once.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), Self::layout(self.size).expect("layout was valid at allocation")) }
    }
}

/// A device's memory manager (tinygrad `Allocator` with `LRUAllocator`'s cache): freed buffers are kept, keyed by
/// size, and handed back by the next `alloc` of the same size.
pub trait Allocator: Send + Sync {
    /// A buffer of `size` bytes, uninitialized (a reused one holds stale data). On failure the cache is released and
    /// the allocation retried once; then errors with [`Error::Device`].
    fn alloc(&self, size: usize) -> Result<RawBuffer>;
    /// Returns `buf` to the cache, or releases it when the cache is full.
    fn free(&self, buf: RawBuffer);
    /// Releases every cached buffer (tinygrad `LRUAllocator.free_cache`).
    fn free_cache(&self);
    /// Copies host bytes `src` into `dst` (tinygrad `_copyin`). Panics when the sizes differ.
    fn copyin(&self, dst: &RawBuffer, src: &[u8]);
    /// Copies `src` into host bytes `dst` (tinygrad `_copyout`). Panics when the sizes differ.
    fn copyout(&self, dst: &mut [u8], src: &RawBuffer);
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

/// A loaded kernel (tinygrad `Program`/`CPUProgram`).
pub trait Program: Send + Sync {
    /// Runs the kernel on `bufs` (buffer start pointers, in the kernel's argument order) with symbolic variable values
    /// `vals`, over `outer` iterations of its outermost axis, split across threads when `parallel`. Returns the wall
    /// time of the whole launch. The pointers must be live buffers at least as large as the kernel indexes, not
    /// accessed by anything else during the launch: the kernel is trusted, generated code.
    fn launch(&self, bufs: &[*mut u8], vals: &[i32], outer: usize, parallel: bool) -> Duration;
}
