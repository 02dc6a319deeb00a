//! The OpenCL device, `DEV=CL` (tinygrad `runtime/ops_cl.py`): OpenCL C from [`Renderer::opencl`] built by the
//! driver into a program binary, `cl_mem` buffers with a free cache, and kernels enqueued as 3-D NDRanges on one
//! in-order queue. libOpenCL is loaded at run time (`opencl3`'s `dynamic` feature), so the crate builds and runs
//! without it: [`device`] then errs.

use super::{keep_source, short_hash, Allocator, Compiled, Compiler, Device, FreeCache, Program, RawBuffer};
use crate::error::{Error, Result};
use crate::renderer::LinearKernel;
use crate::renderer::Renderer;
use opencl3::command_queue::{enqueue_read_buffer, enqueue_write_buffer, CommandQueue};
use opencl3::context::Context;
use opencl3::device::{Device as DeviceId, CL_DEVICE_TYPE_ALL, CL_DEVICE_TYPE_CPU, CL_DEVICE_TYPE_GPU};
use opencl3::error_codes::{error_text, DLOPEN_RUNTIME_LOAD_FAILED};
use opencl3::event::Event;
use opencl3::kernel::Kernel;
use opencl3::memory::{create_buffer, release_mem_object, CL_MEM_READ_WRITE};
use opencl3::platform::get_platforms;
use opencl3::program::Program as ClBuild;
use opencl3::types::{cl_int, cl_mem, cl_uint, CL_BLOCKING};
use parking_lot::Mutex;
use std::ptr::{null, null_mut, NonNull};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// What every kernel is built with: OpenCL C 1.2, which tinygrad's OpenCL renderer targets.
const BUILD_OPTIONS: &str = "-cl-std=CL1.2";

/// `call` failed with OpenCL error `code`: the call, the error's name and its number.
fn cl_fail(call: &str, code: cl_int) -> String {
    format!("{call} failed with {} ({code})", error_text(code))
}

/// An [`Error::Device`] on `CL` with `msg`.
fn device_err(msg: String) -> Error {
    Error::Device { device: "CL".into(), msg }
}

// **************** device ****************

/// The OpenCL device: one context on one device with one in-order queue, [`ClAllocator`], [`ClCompiler`],
/// [`ClProgram`]s, OpenCL C from [`Renderer::opencl`] (with `half` when the device has `cl_khr_fp16`).
#[derive(Debug)]
pub struct ClDevice {
    context: Arc<Context>,
    queue: Arc<CommandQueue>,
    /// Whether the device has `cl_khr_fp16`.
    fp16: bool,
    /// Whether it is the host's CPU (PoCL's, say).
    cpu: bool,
    allocator: ClAllocator,
    compiler: ClCompiler,
}

/// The process's OpenCL device, opened at first use: the first GPU of the first platform that has one, else the
/// first device of any type. Errors with [`Error::Device`] (at every call, never panicking) when libOpenCL does
/// not load, there is no platform or device, or the context or queue cannot be made.
pub fn device() -> Result<&'static ClDevice> {
    static CL: OnceLock<std::result::Result<ClDevice, String>> = OnceLock::new();
    CL.get_or_init(ClDevice::open).as_ref().map_err(|msg| device_err(msg.clone()))
}

impl ClDevice {
    /// Opens the device [`device`] picks. Errors with the message [`device`] returns.
    fn open() -> std::result::Result<ClDevice, String> {
        let id = Self::pick().map_err(|why| {
            format!("no OpenCL platform or device found ({why}); install an OpenCL driver, e.g. Debian's pocl-opencl-icd")
        })?;
        let name = id.name().unwrap_or_default();
        let opening = |e: String| format!("opening OpenCL device {name:?}: {e}");
        let context = Arc::new(Context::from_device(&id).map_err(|e| opening(cl_fail("clCreateContext", e.0)))?);
        // properties 0: an in-order queue without profiling
        let queue = Arc::new(CommandQueue::create_default(&context, 0).map_err(|e| opening(cl_fail("clCreateCommandQueue", e.0)))?);
        let fp16 = id.extensions().is_ok_and(|ext| ext.split_whitespace().any(|e| e == "cl_khr_fp16"));
        let allocator = ClAllocator { context: context.clone(), queue: queue.clone(), cache: FreeCache::default() };
        let compiler = ClCompiler { context: context.clone(), id, name };
        let cpu = id.dev_type().is_ok_and(|t| t & CL_DEVICE_TYPE_CPU != 0);
        Ok(ClDevice { context, queue, fp16, cpu, allocator, compiler })
    }

    /// The first GPU of the first platform that has one, else the first device of any type; why not, as text.
    fn pick() -> std::result::Result<DeviceId, String> {
        let platforms = get_platforms().map_err(|e| match e.0 {
            DLOPEN_RUNTIME_LOAD_FAILED => "libOpenCL does not load".to_string(),
            code => cl_fail("clGetPlatformIDs", code),
        })?;
        let first_of = |ty| platforms.iter().find_map(|p| p.get_devices(ty).ok()?.first().copied());
        let id = first_of(CL_DEVICE_TYPE_GPU).or_else(|| first_of(CL_DEVICE_TYPE_ALL));
        id.map(DeviceId::new).ok_or_else(|| format!("{} platforms, none with a device", platforms.len()))
    }
}

impl Device for ClDevice {
    fn name(&self) -> &'static str {
        "CL"
    }
    fn launcher(&self) -> super::Launcher {
        super::Launcher::Grid
    }
    fn on_host_cores(&self) -> bool {
        self.cpu
    }
    fn renderer(&self) -> Renderer {
        Renderer::opencl(self.fp16)
    }
    fn allocator(&self) -> &dyn Allocator {
        &self.allocator
    }
    fn compiler(&self) -> Result<&dyn Compiler> {
        Ok(&self.compiler)
    }
    fn load(&self, k: &LinearKernel, compiled: &Compiled) -> Result<Box<dyn Program>> {
        let mut p = ClProgram::load(self, compiled)?;
        p.slots = Some(super::global_slots(k));
        Ok(Box::new(p))
    }
}

// **************** allocator ****************

/// Device memory (tinygrad `CLAllocator`, an `LRUAllocator`): each [`RawBuffer`]'s handle is a `cl_mem` made by
/// `clCreateBuffer(CL_MEM_READ_WRITE)` (at least 1 byte: OpenCL has no empty buffers) and released by
/// `clReleaseMemObject`; freed buffers (up to 1 GiB in all) are cached by size for reuse. Copies are blocking
/// transfers on the device's queue, ordered after every kernel enqueued before them.
#[derive(Debug)]
pub struct ClAllocator {
    context: Arc<Context>,
    queue: Arc<CommandQueue>,
    cache: FreeCache,
}

/// Releases a buffer's `cl_mem`.
///
/// # Safety
/// `handle` is a `cl_mem` from `clCreateBuffer` that nothing uses any more, released once.
unsafe fn release_buffer(handle: NonNull<u8>, _size: usize) {
    // SAFETY: the function's contract. A failure (only for an invalid handle) cannot be reported from a drop.
    let _ = unsafe { release_mem_object(handle.as_ptr().cast()) };
}

impl ClAllocator {
    /// A new `cl_mem` of `size` bytes (1 when `size` is 0).
    fn create(&self, size: usize) -> Result<RawBuffer> {
        // SAFETY: the context is live (self holds it) and no host pointer is passed.
        let mem = unsafe { create_buffer(self.context.get(), CL_MEM_READ_WRITE, size.max(1), null_mut()) }.map_err(|code| {
            device_err(format!("allocating {size} bytes: {}; free buffers or shrink the model", cl_fail("clCreateBuffer", code)))
        })?;
        let handle = NonNull::new(mem.cast::<u8>()).expect("clCreateBuffer succeeded with a null cl_mem");
        // SAFETY: `release_buffer` releases this new cl_mem once, when the RawBuffer drops.
        Ok(unsafe { RawBuffer::from_handle(handle, size, release_buffer, "CL") })
    }

    /// Waits for a transfer's event; an error names `call` when it failed to enqueue or run.
    fn wait(call: &str, event: std::result::Result<opencl3::types::cl_event, cl_int>) -> Result<()> {
        let event = Event::new(event.map_err(|code| device_err(cl_fail(call, code)))?);
        event.wait().map_err(|e| device_err(cl_fail(call, e.0)))
    }
}

impl Allocator for ClAllocator {
    fn alloc(&self, size: usize) -> Result<RawBuffer> {
        self.cache.alloc(size, |n| self.create(n))
    }

    fn free(&self, buf: RawBuffer) {
        buf.check_owner("CL");
        self.cache.free(buf);
    }

    fn free_cache(&self) {
        self.cache.clear();
    }

    /// A blocking `clEnqueueWriteBuffer`. Errors naming the call and code when OpenCL fails; panics when the sizes
    /// differ.
    fn copyin(&self, dst: &RawBuffer, src: &[u8]) -> Result<()> {
        dst.check_copyin("CL", src);
        if src.is_empty() {
            return Ok(());
        }
        // SAFETY: dst's handle is a live cl_mem of at least src.len() bytes from this allocator (`check_copyin`); the write is blocking, so src is read before the call returns.
        let ev = unsafe {
            enqueue_write_buffer(self.queue.get(), dst.as_ptr().cast(), CL_BLOCKING, 0, src.len(), src.as_ptr().cast(), 0, null())
        };
        Self::wait("clEnqueueWriteBuffer", ev)
    }

    /// A blocking `clEnqueueReadBuffer`. Errors and panics as [`ClAllocator::copyin`].
    fn copyout(&self, dst: &mut [u8], src: &RawBuffer) -> Result<()> {
        src.check_copyout("CL", dst);
        if dst.is_empty() {
            return Ok(());
        }
        // SAFETY: as in copyin; dst is an exclusive slice of the read's size, written before the blocking call returns.
        let ev = unsafe {
            enqueue_read_buffer(self.queue.get(), src.as_ptr().cast(), CL_BLOCKING, 0, dst.len(), dst.as_mut_ptr().cast(), 0, null())
        };
        Self::wait("clEnqueueReadBuffer", ev)
    }
}

// **************** compiler ****************

/// Builds OpenCL C with the driver (`clCreateProgramWithSource` + `clBuildProgram` with `-cl-std=CL1.2`); the
/// object is the device's program binary (`CL_PROGRAM_BINARIES`), the entry the kernel's name. No disk cache: the
/// driver keeps its own (PoCL's in `~/.cache/pocl`).
#[derive(Debug)]
pub struct ClCompiler {
    context: Arc<Context>,
    id: DeviceId,
    /// The device's name, for errors.
    name: String,
}

impl Compiler for ClCompiler {
    /// Errors with [`Error::Compile`] holding the build log when the build fails (the source is written to
    /// `cache_dir()/kernels/<name>-<hash>.cl`), [`Error::Io`] when that write fails, [`Error::Device`] when OpenCL
    /// fails otherwise.
    fn compile(&self, name: &str, src: &str) -> Result<Compiled> {
        let mut program =
            ClBuild::create_from_source(&self.context, src).map_err(|e| device_err(cl_fail("clCreateProgramWithSource", e.0)))?;
        if let Err(e) = program.build(self.context.devices(), BUILD_OPTIONS) {
            let log = program
                .get_build_log(self.id.id())
                .unwrap_or_else(|e| format!("(no build log: {})", cl_fail("clGetProgramBuildInfo", e.0)));
            let source_path = keep_source(format!("{name}-{}.cl", short_hash(src.as_bytes())), src.as_bytes())?;
            let (compiler, stderr) =
                (format!("OpenCL {BUILD_OPTIONS} on {}", self.name), format!("{}\n{log}", cl_fail("clBuildProgram", e.0)));
            return Err(Error::Compile { name: name.to_string(), compiler, source_path, stderr });
        }
        let binaries = program.get_binaries().map_err(|e| device_err(cl_fail("clGetProgramInfo(CL_PROGRAM_BINARIES)", e.0)))?;
        let object = binaries.into_iter().next().ok_or_else(|| device_err(format!("the build of kernel `{name}` has no binary")))?;
        Ok(Compiled { object: object.into(), entry: name.to_string() })
    }
}

// **************** program ****************

/// A kernel loaded from a program binary (tinygrad `CLProgram`), launchable from any thread: argument setting and
/// enqueueing happen under a lock (OpenCL's `clSetKernelArg` is the one call that is not thread-safe), the wait
/// outside it.
#[derive(Debug)]
pub struct ClProgram {
    name: String,
    /// The buffer slots the kernel's parameters take, in order (a kernel need not use every buffer of its
    /// launch); `None`: every buffer.
    pub slots: Option<Vec<usize>>,
    kernel: Mutex<Kernel>,
    queue: Arc<CommandQueue>,
    /// The program the kernel came from, kept for the kernel's lifetime.
    _program: ClBuild,
}

impl ClProgram {
    /// Loads kernel `c.entry` from the binary `c.object` (what `dev`'s [`ClCompiler`] made), to run on `dev`'s
    /// queue. Errors with [`Error::Load`] when the binary does not build or lacks the kernel.
    pub fn load(dev: &ClDevice, c: &Compiled) -> Result<ClProgram> {
        let load_err = |call, e: opencl3::error_codes::ClError| Error::Load { name: c.entry.clone(), msg: cl_fail(call, e.0) };
        let program = ClBuild::create_and_build_from_binary(&dev.context, &[&c.object], "")
            .map_err(|e| load_err("building the program binary", e))?;
        let kernel = Kernel::create(&program, &c.entry).map_err(|e| load_err("clCreateKernel", e))?;
        Ok(ClProgram { name: c.entry.clone(), slots: None, kernel: Mutex::new(kernel), queue: dev.queue.clone(), _program: program })
    }
}

impl Program for ClProgram {
    /// Sets the kernel's arguments, each `cl_mem` of `bufs` then each `cl_int` of `vals`, enqueues an NDRange of
    /// `global[i] * local[i]` work items in workgroups of `local[i]` (`global` counts workgroups, as tinygrad), and
    /// waits for it. Returns the wall time from setting the arguments to the kernel's end. Errors with
    /// [`Error::Device`] naming the OpenCL call and error code.
    fn launch(&self, bufs: &[*mut u8], vals: &[i32], global: [usize; 3], local: [usize; 3]) -> Result<Duration> {
        let fail = |call, e: opencl3::error_codes::ClError| device_err(format!("kernel `{}`: {}", self.name, cl_fail(call, e.0)));
        let size: [usize; 3] = std::array::from_fn(|i| global[i] * local[i]);
        let st = Instant::now();
        let event = {
            let kernel = self.kernel.lock();
            let slots: Vec<usize> = self.slots.clone().unwrap_or_else(|| (0..bufs.len()).collect());
            for (i, &slot) in slots.iter().enumerate() {
                let b = *bufs.get(slot).ok_or_else(|| device_err(format!("kernel `{}`: no buffer for argument {slot}", self.name)))?;
                let mem: cl_mem = b.cast();
                // SAFETY: a cl_mem by value for a __global pointer parameter; launch's caller guarantees it is live.
                unsafe { kernel.set_arg(i as cl_uint, &mem) }.map_err(|e| fail("clSetKernelArg", e))?;
            }
            for (i, v) in vals.iter().enumerate() {
                // SAFETY: a cl_int (i32) by value for an int parameter.
                unsafe { kernel.set_arg((slots.len() + i) as cl_uint, v) }.map_err(|e| fail("clSetKernelArg", e))?;
            }
            // SAFETY: every argument is set above (the driver errs if one is missing); the work sizes point to 3
            // elements each, read during the call.
            unsafe { self.queue.enqueue_nd_range_kernel(kernel.get(), 3, null(), size.as_ptr(), local.as_ptr(), &[]) }
                .map_err(|e| fail("clEnqueueNDRangeKernel", e))?
        };
        event.wait().map_err(|e| fail("clWaitForEvents", e))?;
        Ok(st.elapsed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::testing;

    /// The device, or `None` (printing why) when this machine has no OpenCL.
    fn cl() -> Option<&'static ClDevice> {
        device().map_err(|e| eprintln!("skipping: {e}")).ok()
    }

    const AXPB: &str = "__kernel void axpb(__global float* out, __global const float* a, int b) {
  int i = get_global_id(0); out[i] = a[i]*2.0f + (float)b;
}";

    #[test]
    fn copy_round_trip() {
        let Some(dev) = cl() else { return };
        testing::copy_round_trip(dev.allocator());
    }

    #[test]
    fn compile_load_launch() {
        let Some(dev) = cl() else { return };
        let compiled = dev.compiler().unwrap().compile("axpb", AXPB).unwrap();
        assert_eq!(compiled.entry, "axpb");
        let prog = ClProgram::load(dev, &compiled).unwrap();
        testing::launch_axpb(dev.allocator(), &prog);
    }

    #[test]
    fn a_syntax_error_is_a_compile_error_with_the_build_log() {
        let Some(dev) = cl() else { return };
        let err = dev.compiler().unwrap().compile("bad", "__kernel void bad(__global float* out) { out[0] = 1.0f }").unwrap_err();
        let Error::Compile { name, stderr, source_path, .. } = &err else { panic!("not a compile error: {err}") };
        std::fs::remove_file(source_path).unwrap(); // tests leave no sources behind
        assert_eq!(name, "bad");
        assert!(stderr.contains("CL_BUILD_PROGRAM_FAILURE") && stderr.contains("error"), "{stderr}");
        assert!(err.to_string().contains(stderr.as_str()), "{err}");
    }
}
