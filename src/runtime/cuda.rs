//! The CUDA device, `DEV=CUDA` (tinygrad `runtime/ops_cuda.py`): CUDA C from [`Renderer::cuda`] compiled by NVRTC
//! to PTX for the device's `compute_XY`, loaded by the driver (`cuModuleLoadData`, which assembles it for the GPU),
//! `CUdeviceptr` buffers with a free cache, and kernels queued on the null stream (waited for only where a launch is
//! timed: DEBUG>=2, PROFILE, BEAM; copies out wait for them). NVRTC and the
//! driver (`libcuda.so.1`) are loaded at run time with `libloading`, so the crate builds and runs without them:
//! [`device`] and [`NvrtcCompiler::new`] then err. Without a GPU, [`NvrtcCompiler`] and [`ptxas`] still check
//! kernels down to machine code.

use super::{io_err, keep_source, short_hash, Allocator, Compiled, Compiler, Device, FreeCache, Program, RawBuffer};
use crate::error::{Error, Result};
use crate::renderer::LinearKernel;
use crate::renderer::Renderer;
use libloading::Library;
use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};
use std::path::{Path, PathBuf};
use std::ptr::{null, null_mut, NonNull};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// An [`Error::Device`] on `CUDA` with `msg`.
fn device_err(msg: String) -> Error {
    Error::Device { device: "CUDA".into(), msg }
}

/// The file a loaded shared library whose name starts with `prefix` was mapped from (`/proc/self/maps`: Linux only),
/// to find what lies beside a library that `dlopen` found by name.
fn loaded_file(prefix: &str) -> Option<PathBuf> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    let path = maps
        .lines()
        .filter_map(|l| l.find('/').map(|i| Path::new(&l[i..])))
        .find(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(prefix)))?;
    Some(path.to_path_buf())
}

// **************** NVRTC ****************

type NvrtcResult = c_int;
type NvrtcProgram = *mut c_void;
/// `const char* const*`: options, header names.
type CStrs = *const *const c_char;
/// `NVRTC_SUCCESS`.
const NVRTC_SUCCESS: NvrtcResult = 0;

/// libnvrtc's entry points (prototypes from `nvrtc.h`), resolved once when the library loads, and the directory it
/// was loaded from.
#[derive(Debug)]
struct Nvrtc {
    create_program: unsafe extern "C" fn(*mut NvrtcProgram, *const c_char, *const c_char, c_int, CStrs, CStrs) -> NvrtcResult,
    compile_program: unsafe extern "C" fn(NvrtcProgram, c_int, CStrs) -> NvrtcResult,
    get_program_log_size: unsafe extern "C" fn(NvrtcProgram, *mut usize) -> NvrtcResult,
    get_program_log: unsafe extern "C" fn(NvrtcProgram, *mut c_char) -> NvrtcResult,
    get_ptx_size: unsafe extern "C" fn(NvrtcProgram, *mut usize) -> NvrtcResult,
    get_ptx: unsafe extern "C" fn(NvrtcProgram, *mut c_char) -> NvrtcResult,
    destroy_program: unsafe extern "C" fn(*mut NvrtcProgram) -> NvrtcResult,
    get_error_string: unsafe extern "C" fn(NvrtcResult) -> *const c_char,
    /// The directory of the library file, when known (the PyPI wheels keep the CUDA headers and ptxas relative
    /// to it).
    dir: Option<PathBuf>,
    /// Keeps the entry points above valid.
    _lib: Library,
}

impl Nvrtc {
    /// Loads NVRTC: the file `NVRTC_PATH` names when set, else `libnvrtc.so.13`, `libnvrtc.so.12`, `libnvrtc.so`. Errors with the
    /// message of [`NvrtcCompiler::new`]'s error.
    fn open() -> std::result::Result<Nvrtc, String> {
        let env = std::env::var_os("NVRTC_PATH").filter(|p| !p.is_empty()).map(PathBuf::from);
        let mut why = Vec::new();
        for path in env.into_iter().chain(["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"].map(PathBuf::from)) {
            // SAFETY: loading NVRTC runs its initializers, which need nothing from us.
            match unsafe { Library::new(&path) } {
                Ok(lib) => {
                    let file = if path.components().count() > 1 { Some(path) } else { loaded_file("libnvrtc.so") };
                    let dir = file.and_then(|f| std::fs::canonicalize(f).ok()).and_then(|f| Some(f.parent()?.to_path_buf()));
                    return Self::resolve(lib, dir).map_err(|e| format!("NVRTC lacks an entry point ({e}); install CUDA 11.2 or later"));
                }
                Err(e) => why.push(e.to_string()),
            }
        }
        Err(format!(
            "NVRTC not found ({}); install the CUDA toolkit or `pip install nvidia-cuda-nvrtc-cu12` and set NVRTC_PATH",
            why.join("; ")
        ))
    }

    fn resolve(lib: Library, dir: Option<PathBuf>) -> std::result::Result<Nvrtc, libloading::Error> {
        /// The entry point `name` as a `T`.
        ///
        /// # Safety
        /// `T` is the function pointer type of `name`'s C prototype, used only while `lib` is loaded.
        unsafe fn sym<T: Copy>(lib: &Library, name: &str) -> std::result::Result<T, libloading::Error> {
            // SAFETY: the function's contract.
            unsafe { lib.get::<T>(name.as_bytes()).map(|s| *s) }
        }
        // SAFETY: each field's type is the prototype in `nvrtc.h` of the function it names; `_lib` keeps them loaded.
        unsafe {
            Ok(Nvrtc {
                create_program: sym(&lib, "nvrtcCreateProgram")?,
                compile_program: sym(&lib, "nvrtcCompileProgram")?,
                get_program_log_size: sym(&lib, "nvrtcGetProgramLogSize")?,
                get_program_log: sym(&lib, "nvrtcGetProgramLog")?,
                get_ptx_size: sym(&lib, "nvrtcGetPTXSize")?,
                get_ptx: sym(&lib, "nvrtcGetPTX")?,
                destroy_program: sym(&lib, "nvrtcDestroyProgram")?,
                get_error_string: sym(&lib, "nvrtcGetErrorString")?,
                dir,
                _lib: lib,
            })
        }
    }

    /// `call` failed with `code`: the call and the code's name (`NVRTC_ERROR_COMPILATION (6)`).
    fn fail(&self, call: &str, code: NvrtcResult) -> String {
        // SAFETY: nvrtcGetErrorString takes any code and returns a static NUL-terminated string.
        let name = unsafe { CStr::from_ptr((self.get_error_string)(code)) };
        format!("{call} failed with {} ({code})", name.to_string_lossy())
    }

    /// `Ok` when `code` is `NVRTC_SUCCESS`, else [`Error::Device`] naming `call`.
    fn check(&self, call: &str, code: NvrtcResult) -> Result<()> {
        if code == NVRTC_SUCCESS {
            Ok(())
        } else {
            Err(device_err(self.fail(call, code)))
        }
    }
}

/// An `nvrtcProgram`, destroyed when dropped.
struct NvrtcProgramGuard<'a>(&'a Nvrtc, NvrtcProgram);

impl Drop for NvrtcProgramGuard<'_> {
    fn drop(&mut self) {
        // SAFETY: the program came from nvrtcCreateProgram and is destroyed once, here. A failure cannot be reported.
        let _ = unsafe { (self.0.destroy_program)(&mut self.1) };
    }
}

impl NvrtcProgramGuard<'_> {
    /// A string NVRTC has for the program: `size` gives its length with the NUL, `get` writes it.
    fn read(
        &self,
        what: &str,
        size: unsafe extern "C" fn(NvrtcProgram, *mut usize) -> NvrtcResult,
        get: unsafe extern "C" fn(NvrtcProgram, *mut c_char) -> NvrtcResult,
    ) -> Result<Vec<u8>> {
        let mut n = 0usize;
        // SAFETY: a live program and a place for the size.
        self.0.check(&format!("nvrtcGet{what}Size"), unsafe { size(self.1, &mut n) })?;
        let mut buf = vec![0u8; n.max(1)];
        // SAFETY: `buf` holds the `n` bytes (NUL included) NVRTC just said it writes.
        self.0.check(&format!("nvrtcGet{what}"), unsafe { get(self.1, buf.as_mut_ptr().cast()) })?;
        while buf.last() == Some(&0) {
            buf.pop();
        }
        Ok(buf)
    }
}

/// Compiles CUDA C with NVRTC to PTX for one `compute_XY` (tinygrad `NVRTCCompiler`/`CUDACompiler`): the object is
/// the PTX text (no NUL), the entry the kernel's name (kernels are `extern "C"`). The CUDA headers (`cuda_fp16.h`)
/// are found at `CUDA_INCLUDE_PATH` when set, else beside NVRTC (the PyPI wheels' `nvidia/cuda_runtime/include`, or
/// a toolkit's `lib/../include`), else at `/usr/local/cuda/include`. No disk cache: NVRTC takes milliseconds.
#[derive(Debug)]
pub struct NvrtcCompiler {
    nvrtc: Nvrtc,
    /// `--gpu-architecture=compute_XY`, `-I<headers>` and `--fmad=false`.
    options: Vec<CString>,
}

impl NvrtcCompiler {
    /// A compiler for GPUs of architecture `arch` (`sm_80`: PTX for `compute_80`). Errors with [`Error::Device`]
    /// when NVRTC does not load (see [`Nvrtc::open`]'s search: `NVRTC_PATH`, `libnvrtc.so.13`, `.12`, `libnvrtc.so`).
    pub fn new(arch: &str) -> Result<NvrtcCompiler> {
        Nvrtc::open().map(|nvrtc| Self::with(nvrtc, arch)).map_err(device_err)
    }

    fn with(nvrtc: Nvrtc, arch: &str) -> NvrtcCompiler {
        let headers = |d: PathBuf| std::fs::canonicalize(d).ok().filter(|d| d.join("cuda_fp16.h").is_file());
        let beside =
            nvrtc.dir.as_ref().and_then(|d| headers(d.join("../../cuda_runtime/include")).or_else(|| headers(d.join("../include"))));
        let include = std::env::var_os("CUDA_INCLUDE_PATH")
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
            .or(beside)
            .unwrap_or_else(|| PathBuf::from("/usr/local/cuda/include"));
        let arch = format!("--gpu-architecture=compute_{}", arch.strip_prefix("sm_").unwrap_or(arch));
        let include = format!("-I{}", include.display());
        // (`--fmad=false`: multiply-adds fuse only where the kernel says, MULACC as `fmaf`; see Renderer::mulacc)
        let options =
            [arch, include, "--fmad=false".into()].map(|o| CString::new(o).expect("no NUL in a path from the environment")).into();
        NvrtcCompiler { nvrtc, options }
    }

    /// The options, as a command line for messages.
    fn command(&self) -> String {
        let opts: Vec<_> = self.options.iter().map(|o| o.to_string_lossy()).collect();
        format!("NVRTC {}", opts.join(" "))
    }
}

impl Compiler for NvrtcCompiler {
    /// Errors with [`Error::Compile`] holding NVRTC's log when the source does not compile (the source is written to
    /// `cache_dir()/kernels/<name>-<hash>.cu`), [`Error::Io`] when that write fails, [`Error::Device`] when NVRTC
    /// fails otherwise.
    fn compile(&self, name: &str, src: &str) -> Result<Compiled> {
        let nv = &self.nvrtc;
        let csrc = CString::new(src).map_err(|_| device_err(format!("the source of kernel `{name}` holds a NUL byte")))?;
        let file = CString::new(format!("{name}.cu")).map_err(|_| device_err(format!("kernel name {name:?} holds a NUL byte")))?;
        let mut prog: NvrtcProgram = null_mut();
        // SAFETY: both strings are NUL-terminated and read during the call; no headers are passed (0, null, null).
        nv.check("nvrtcCreateProgram", unsafe { (nv.create_program)(&mut prog, csrc.as_ptr(), file.as_ptr(), 0, null(), null()) })?;
        let prog = NvrtcProgramGuard(nv, prog);
        let opts: Vec<*const c_char> = self.options.iter().map(|o| o.as_ptr()).collect();
        // SAFETY: a live program and `opts.len()` NUL-terminated options, which outlive the call.
        let code = unsafe { (nv.compile_program)(prog.1, opts.len() as c_int, opts.as_ptr()) };
        if code != NVRTC_SUCCESS {
            let log = prog.read("ProgramLog", nv.get_program_log_size, nv.get_program_log);
            let log = log.map_or_else(|e| format!("(no log: {e})"), |l| String::from_utf8_lossy(&l).into_owned());
            let source_path = keep_source(format!("{name}-{}.cu", short_hash(src.as_bytes())), src.as_bytes())?;
            let stderr = format!("{}\n{log}", nv.fail("nvrtcCompileProgram", code));
            return Err(Error::Compile { name: name.to_string(), compiler: self.command(), source_path, stderr });
        }
        let ptx = prog.read("PTX", nv.get_ptx_size, nv.get_ptx)?;
        Ok(Compiled { object: ptx.into(), entry: name.to_string() })
    }
}

/// Assembles `ptx` for `arch` (`sm_80`) with `ptxas`, discarding the machine code: the check that PTX is valid for a
/// GPU, without one. `ptxas` is `PTXAS` when set, else the first on `PATH`, else the one beside NVRTC in the PyPI
/// layout (`nvidia/cuda_nvcc/bin`). Errors with [`Error::Device`] when no ptxas runs, [`Error::Compile`] with its
/// output when it rejects the PTX (kept at `cache_dir()/kernels/<entry>-<hash>.ptx`), [`Error::Io`] when a file
/// cannot be written.
pub fn ptxas(ptx: &[u8], arch: &str) -> Result<()> {
    static N: AtomicUsize = AtomicUsize::new(0);
    let exe = ptxas_path().map_err(device_err)?;
    let stem = std::env::temp_dir().join(format!("tinygrad-ptxas-{}-{}", std::process::id(), N.fetch_add(1, Relaxed)));
    let (input, output) = (stem.with_extension("ptx"), stem.with_extension("cubin"));
    /// Removes the files when dropped.
    struct Scratch<'a>(&'a Path, &'a Path);
    impl Drop for Scratch<'_> {
        fn drop(&mut self) {
            let _ = (std::fs::remove_file(self.0), std::fs::remove_file(self.1));
        }
    }
    let _scratch = Scratch(&input, &output);
    std::fs::write(&input, ptx).map_err(io_err(&input))?;
    let arch_flag = format!("-arch={arch}");
    let out = std::process::Command::new(&exe)
        .arg(&arch_flag)
        .arg(&input)
        .arg("-o")
        .arg(&output)
        .output()
        .map_err(|e| device_err(format!("running {}: {e}; {PTXAS_HELP}", exe.display())))?;
    if out.status.success() {
        return Ok(());
    }
    let text = String::from_utf8_lossy(ptx);
    let entry = text.split(".entry ").nth(1).and_then(|s| s.split(|c: char| c == '(' || c.is_whitespace()).next()).unwrap_or("ptx");
    let source_path = keep_source(format!("{entry}-{}.ptx", short_hash(ptx)), ptx)?;
    let stderr = format!("{}{}", String::from_utf8_lossy(&out.stderr), String::from_utf8_lossy(&out.stdout));
    Err(Error::Compile { name: entry.to_string(), compiler: format!("{} {arch_flag}", exe.display()), source_path, stderr })
}

/// How to get ptxas.
const PTXAS_HELP: &str = "install the CUDA toolkit or `pip install nvidia-cuda-nvcc-cu12`, or set PTXAS to a ptxas binary";

/// The ptxas [`ptxas`] runs, or why there is none.
fn ptxas_path() -> std::result::Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("PTXAS").filter(|p| !p.is_empty()) {
        return Ok(p.into());
    }
    let on_path = std::env::var_os("PATH").and_then(|p| std::env::split_paths(&p).map(|d| d.join("ptxas")).find(|f| f.is_file()));
    let beside_nvrtc = || Nvrtc::open().ok()?.dir.map(|d| d.join("../../cuda_nvcc/bin/ptxas")).filter(|f| f.is_file());
    on_path.or_else(beside_nvrtc).ok_or_else(|| format!("ptxas not found (PTXAS unset, none on PATH or beside NVRTC); {PTXAS_HELP}"))
}

// **************** driver ****************

type CuResult = c_int;
type CuDevice = c_int;
type CuDevicePtr = u64;
type CuContext = *mut c_void;
type CuModule = *mut c_void;
type CuFunction = *mut c_void;
type CuStream = *mut c_void;
/// `void**`: kernel parameters.
type Ptrs = *mut *mut c_void;
/// `CUDA_SUCCESS`.
const CUDA_SUCCESS: CuResult = 0;
/// `CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR` and `_MINOR`.
const CC_MAJOR: c_int = 75;
const CC_MINOR: c_int = 76;

/// libcuda's entry points (prototypes from `cuda.h`, the `_v2` ABI where one exists), resolved once when the driver
/// loads, and the device's primary context, which every call makes current on its thread first.
#[derive(Debug)]
struct Driver {
    ctx: CuContext,
    init: unsafe extern "C" fn(c_uint) -> CuResult,
    device_get: unsafe extern "C" fn(*mut CuDevice, c_int) -> CuResult,
    device_get_attribute: unsafe extern "C" fn(*mut c_int, c_int, CuDevice) -> CuResult,
    primary_ctx_retain: unsafe extern "C" fn(*mut CuContext, CuDevice) -> CuResult,
    ctx_set_current: unsafe extern "C" fn(CuContext) -> CuResult,
    ctx_synchronize: unsafe extern "C" fn() -> CuResult,
    mem_alloc: unsafe extern "C" fn(*mut CuDevicePtr, usize) -> CuResult,
    mem_free: unsafe extern "C" fn(CuDevicePtr) -> CuResult,
    memcpy_htod: unsafe extern "C" fn(CuDevicePtr, *const c_void, usize) -> CuResult,
    memcpy_dtoh: unsafe extern "C" fn(*mut c_void, CuDevicePtr, usize) -> CuResult,
    module_load_data: unsafe extern "C" fn(*mut CuModule, *const c_void) -> CuResult,
    module_unload: unsafe extern "C" fn(CuModule) -> CuResult,
    module_get_function: unsafe extern "C" fn(*mut CuFunction, CuModule, *const c_char) -> CuResult,
    launch_kernel:
        unsafe extern "C" fn(CuFunction, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, CuStream, Ptrs, Ptrs) -> CuResult,
    get_error_name: unsafe extern "C" fn(CuResult, *mut *const c_char) -> CuResult,
    get_error_string: unsafe extern "C" fn(CuResult, *mut *const c_char) -> CuResult,
    /// Keeps the entry points above valid.
    _lib: Library,
}

// SAFETY: the driver API is thread-safe, and a context may be made current on (and used from) any thread, which
// every use does first (`Driver::current`); the rest are function pointers.
unsafe impl Send for Driver {}
// SAFETY: as for Send; nothing is mutated through `&Driver`.
unsafe impl Sync for Driver {}

impl Driver {
    /// Loads `libcuda.so.1` and resolves its entry points (the context is still null). Errors with why, as text.
    fn load() -> std::result::Result<Driver, String> {
        // SAFETY: loading the driver runs its initializers, which need nothing from us.
        let lib = unsafe { Library::new("libcuda.so.1") }.map_err(|e| e.to_string())?;
        /// The entry point `name` as a `T`.
        ///
        /// # Safety
        /// `T` is the function pointer type of `name`'s C prototype, used only while `lib` is loaded.
        unsafe fn sym<T: Copy>(lib: &Library, name: &str) -> std::result::Result<T, String> {
            // SAFETY: the function's contract.
            unsafe { lib.get::<T>(name.as_bytes()).map(|s| *s).map_err(|e| e.to_string()) }
        }
        // SAFETY: each field's type is the prototype in `cuda.h` of the function it names (`CUdeviceptr` is
        // `unsigned long long`, `CUdevice` an `int`, enums `int`s, handles pointers); `_lib` keeps them loaded.
        unsafe {
            Ok(Driver {
                ctx: null_mut(),
                init: sym(&lib, "cuInit")?,
                device_get: sym(&lib, "cuDeviceGet")?,
                device_get_attribute: sym(&lib, "cuDeviceGetAttribute")?,
                primary_ctx_retain: sym(&lib, "cuDevicePrimaryCtxRetain")?,
                ctx_set_current: sym(&lib, "cuCtxSetCurrent")?,
                ctx_synchronize: sym(&lib, "cuCtxSynchronize")?,
                mem_alloc: sym(&lib, "cuMemAlloc_v2")?,
                mem_free: sym(&lib, "cuMemFree_v2")?,
                memcpy_htod: sym(&lib, "cuMemcpyHtoD_v2")?,
                memcpy_dtoh: sym(&lib, "cuMemcpyDtoH_v2")?,
                module_load_data: sym(&lib, "cuModuleLoadData")?,
                module_unload: sym(&lib, "cuModuleUnload")?,
                module_get_function: sym(&lib, "cuModuleGetFunction")?,
                launch_kernel: sym(&lib, "cuLaunchKernel")?,
                get_error_name: sym(&lib, "cuGetErrorName")?,
                get_error_string: sym(&lib, "cuGetErrorString")?,
                _lib: lib,
            })
        }
    }

    /// `Ok` when `code` is `CUDA_SUCCESS`, else `call` and the error's name, number and description
    /// (`cuMemAlloc_v2 failed with CUDA_ERROR_OUT_OF_MEMORY (2): out of memory`).
    fn check(&self, call: &str, code: CuResult) -> std::result::Result<(), String> {
        if code == CUDA_SUCCESS {
            return Ok(());
        }
        let text = |f: unsafe extern "C" fn(CuResult, *mut *const c_char) -> CuResult| {
            let mut s: *const c_char = null();
            // SAFETY: the driver writes a static NUL-terminated string for a known code, or errs leaving `s` null.
            unsafe { (f(code, &mut s) == CUDA_SUCCESS && !s.is_null()).then(|| CStr::from_ptr(s).to_string_lossy().into_owned()) }
        };
        let name = text(self.get_error_name).unwrap_or_else(|| "an unknown CUresult".into());
        let desc = text(self.get_error_string).map(|d| format!(": {d}")).unwrap_or_default();
        Err(format!("{call} failed with {name} ({code}){desc}"))
    }

    /// Makes the device's context current on this thread, as every use of the driver must first.
    fn current(&self) -> std::result::Result<(), String> {
        // SAFETY: a context retained at open, never released.
        self.check("cuCtxSetCurrent", unsafe { (self.ctx_set_current)(self.ctx) })
    }
}

/// The CUDA device: GPU 0's primary context, [`CudaAllocator`], [`NvrtcCompiler`] for its `sm_XY` (loaded at first
/// use), [`CudaProgram`]s, CUDA C from [`Renderer::cuda`].
#[derive(Debug)]
pub struct CudaDevice {
    drv: Arc<Driver>,
    /// The compute capability as `sm_XY`.
    arch: String,
    allocator: CudaAllocator,
    /// The compiler, or why NVRTC does not load.
    compiler: OnceLock<std::result::Result<NvrtcCompiler, String>>,
}

/// The process's CUDA device, opened at first use: GPU 0 of the driver (`libcuda.so.1`), through its primary
/// context. Errors with [`Error::Device`] (at every call, never panicking) when the driver does not load, finds no
/// GPU, or the context cannot be had.
pub fn device() -> Result<&'static CudaDevice> {
    static CUDA: OnceLock<std::result::Result<CudaDevice, String>> = OnceLock::new();
    CUDA.get_or_init(CudaDevice::open).as_ref().map_err(|msg| device_err(msg.clone()))
}

impl CudaDevice {
    /// Opens the device [`device`] returns. Errors with its message.
    fn open() -> std::result::Result<CudaDevice, String> {
        let (drv, arch) =
            Self::init().map_err(|why| format!("no CUDA device or driver found ({why}); DEV=CUDA needs an NVIDIA GPU with its driver"))?;
        let drv = Arc::new(drv);
        Ok(CudaDevice { allocator: CudaAllocator { drv: drv.clone(), cache: FreeCache::default() }, drv, arch, compiler: OnceLock::new() })
    }

    /// The driver with GPU 0's primary context current on this thread, and the GPU's `sm_XY`; why not, as text.
    fn init() -> std::result::Result<(Driver, String), String> {
        let mut drv = Driver::load()?;
        let (mut dev, mut major, mut minor, mut ctx): (CuDevice, c_int, c_int, CuContext) = (0, 0, 0, null_mut());
        // SAFETY: the entry points take these out-pointers to live locals; flags 0 is the only valid cuInit flag.
        unsafe {
            drv.check("cuInit", (drv.init)(0))?;
            drv.check("cuDeviceGet", (drv.device_get)(&mut dev, 0))?;
            drv.check("cuDeviceGetAttribute", (drv.device_get_attribute)(&mut major, CC_MAJOR, dev))?;
            drv.check("cuDeviceGetAttribute", (drv.device_get_attribute)(&mut minor, CC_MINOR, dev))?;
            drv.check("cuDevicePrimaryCtxRetain", (drv.primary_ctx_retain)(&mut ctx, dev))?;
        }
        drv.ctx = ctx;
        drv.current()?;
        Ok((drv, format!("sm_{major}{minor}")))
    }

    /// The GPU's architecture, `sm_XY` from its compute capability X.Y (`sm_80` for an A100).
    pub fn arch(&self) -> &str {
        &self.arch
    }
}

impl Device for CudaDevice {
    fn name(&self) -> &'static str {
        "CUDA"
    }
    fn launcher(&self) -> super::Launcher {
        super::Launcher::Grid
    }
    fn renderer(&self) -> Renderer {
        Renderer::cuda_for(self.arch.trim_start_matches("sm_").parse().unwrap_or(0))
    }
    fn allocator(&self) -> &dyn Allocator {
        &self.allocator
    }
    /// [`NvrtcCompiler`] for [`arch`](CudaDevice::arch). Errors with [`Error::Device`] when NVRTC does not load.
    fn compiler(&self) -> Result<&dyn Compiler> {
        let c = self.compiler.get_or_init(|| Nvrtc::open().map(|nvrtc| NvrtcCompiler::with(nvrtc, &self.arch)));
        c.as_ref().map(|c| c as &dyn Compiler).map_err(|msg| device_err(msg.clone()))
    }
    fn load(&self, k: &LinearKernel, compiled: &Compiled) -> Result<Box<dyn Program>> {
        let mut p = CudaProgram::load(self, compiled)?;
        p.slots = Some(super::global_slots(k));
        Ok(Box::new(p))
    }
    /// A `cuCtxSynchronize`.
    fn synchronize(&self) -> Result<()> {
        self.drv.current().map_err(device_err)?;
        // SAFETY: no arguments; the context is current.
        self.drv.check("cuCtxSynchronize", unsafe { (self.drv.ctx_synchronize)() }).map_err(device_err)
    }
}

// **************** allocator ****************

/// Device memory (tinygrad `CUDAAllocator`, an `LRUAllocator`): each [`RawBuffer`]'s handle is a `CUdeviceptr` made
/// by `cuMemAlloc_v2` (at least 1 byte: CUDA has no empty allocations) and released by `cuMemFree_v2`; freed
/// buffers (up to 1 GiB in all) are cached by size for reuse. Copies are synchronous `cuMemcpy` on the null stream,
/// ordered after every kernel launched before them.
#[derive(Debug)]
pub struct CudaAllocator {
    drv: Arc<Driver>,
    cache: FreeCache,
}

/// Frees a buffer's `CUdeviceptr`.
///
/// # Safety
/// `handle` is a `CUdeviceptr` from the [`device`]'s `cuMemAlloc_v2` that nothing uses any more, freed once.
unsafe fn release_buffer(handle: NonNull<u8>, _size: usize) {
    // A buffer exists only if the device opened. A failure cannot be reported from a drop.
    if let Ok(dev) = device() {
        let _ = dev.drv.current();
        // SAFETY: the function's contract.
        let _ = unsafe { (dev.drv.mem_free)(handle.as_ptr() as CuDevicePtr) };
    }
}

impl CudaAllocator {
    /// A new allocation of `size` bytes (1 when `size` is 0).
    fn create(&self, size: usize) -> Result<RawBuffer> {
        let oom = |e: String| device_err(format!("allocating {size} bytes: {e}; free buffers or shrink the model"));
        self.drv.current().map_err(oom)?;
        let mut ptr: CuDevicePtr = 0;
        // SAFETY: an out-pointer to a live local; the context is current.
        self.drv.check("cuMemAlloc_v2", unsafe { (self.drv.mem_alloc)(&mut ptr, size.max(1)) }).map_err(oom)?;
        let handle = NonNull::new(ptr as *mut u8).expect("cuMemAlloc_v2 succeeded with a null pointer");
        // SAFETY: `release_buffer` frees this new allocation once, when the RawBuffer drops.
        Ok(unsafe { RawBuffer::from_handle(handle, size, release_buffer, "CUDA") })
    }

    /// Runs `code`, an error naming `call` when it failed or the context could not be made current.
    fn run(&self, call: &str, code: impl FnOnce() -> CuResult) -> Result<()> {
        self.drv.current().and_then(|()| self.drv.check(call, code())).map_err(device_err)
    }
}

impl Allocator for CudaAllocator {
    fn alloc(&self, size: usize) -> Result<RawBuffer> {
        self.cache.alloc(size, |n| self.create(n))
    }

    fn free(&self, buf: RawBuffer) {
        buf.check_owner("CUDA");
        self.cache.free(buf);
    }

    fn free_cache(&self) {
        self.cache.clear();
    }

    /// A `cuMemcpyHtoD_v2`. Errors naming the call and error when CUDA fails; panics when the sizes differ.
    fn copyin(&self, dst: &RawBuffer, src: &[u8]) -> Result<()> {
        dst.check_copyin("CUDA", src);
        if src.is_empty() {
            return Ok(());
        }
        // SAFETY: dst's handle is a live allocation of at least src.len() bytes from this allocator
        // (`check_copyin`); src is read before the call returns (staged when pageable).
        self.run("cuMemcpyHtoD_v2", || unsafe { (self.drv.memcpy_htod)(dst.as_ptr() as CuDevicePtr, src.as_ptr().cast(), src.len()) })
    }

    /// A `cuMemcpyDtoH_v2`, which waits for the copy. Errors and panics as [`CudaAllocator::copyin`].
    fn copyout(&self, dst: &mut [u8], src: &RawBuffer) -> Result<()> {
        src.check_copyout("CUDA", dst);
        if dst.is_empty() {
            return Ok(());
        }
        // SAFETY: as in copyin; dst is an exclusive slice of the copy's size, written before the call returns.
        self.run("cuMemcpyDtoH_v2", || unsafe { (self.drv.memcpy_dtoh)(dst.as_mut_ptr().cast(), src.as_ptr() as CuDevicePtr, dst.len()) })
    }
}

// **************** program ****************

/// A kernel loaded from PTX (tinygrad `CUDAProgram`), launchable from any thread (each launch passes its own
/// parameters to the thread-safe `cuLaunchKernel`). The module is unloaded when the program drops.
#[derive(Debug)]
pub struct CudaProgram {
    name: String,
    /// The buffer slots the kernel's parameters take, in order (a kernel need not use every buffer of its
    /// launch); `None`: every buffer.
    pub slots: Option<Vec<usize>>,
    module: CuModule,
    function: CuFunction,
    drv: Arc<Driver>,
}

// SAFETY: the module and function handles belong to the device's context, usable from any thread that makes it
// current (every use does); cuLaunchKernel is thread-safe and reads its parameters during the call.
unsafe impl Send for CudaProgram {}
// SAFETY: as for Send; nothing is mutated through `&CudaProgram`.
unsafe impl Sync for CudaProgram {}

impl CudaProgram {
    /// Loads kernel `c.entry` from the PTX `c.object` (what [`NvrtcCompiler`] made; the driver assembles it for
    /// `dev`'s GPU). Errors with [`Error::Load`] when the PTX does not load or lacks the kernel.
    pub fn load(dev: &CudaDevice, c: &Compiled) -> Result<CudaProgram> {
        let drv = &dev.drv;
        let load_err = |msg: String| Error::Load { name: c.entry.clone(), msg };
        let entry = CString::new(c.entry.as_str()).map_err(|_| load_err("the entry name holds a NUL byte".into()))?;
        // cuModuleLoadData reads PTX up to its NUL, which the object lacks
        let mut image = c.object.to_vec();
        image.push(0);
        drv.current().map_err(load_err)?;
        let mut module: CuModule = null_mut();
        // SAFETY: an out-pointer to a live local and a NUL-terminated PTX image, read during the call; the context is
        // current.
        drv.check("cuModuleLoadData", unsafe { (drv.module_load_data)(&mut module, image.as_ptr().cast()) }).map_err(load_err)?;
        let mut p = CudaProgram { name: c.entry.clone(), slots: None, module, function: null_mut(), drv: drv.clone() };
        // SAFETY: a live module, a NUL-terminated name and an out-pointer to a live field.
        drv.check("cuModuleGetFunction", unsafe { (drv.module_get_function)(&mut p.function, module, entry.as_ptr()) })
            .map_err(load_err)?; // dropping `p` unloads the module
        Ok(p)
    }
}

impl Drop for CudaProgram {
    fn drop(&mut self) {
        let _ = self.drv.current();
        // SAFETY: the module came from cuModuleLoadData and is unloaded once, here, after every launch (launches
        // borrow the program and synchronize). A failure cannot be reported from a drop.
        let _ = unsafe { (self.drv.module_unload)(self.module) };
    }
}

impl Program for CudaProgram {
    /// Launches a grid of `global` blocks of `local` threads each with parameters: a pointer to each buffer's
    /// `CUdeviceptr` of `bufs` (for the kernel's slots), then a pointer to each `int` of `vals`; then waits for the
    /// context (`cuCtxSynchronize`). Returns the wall time from the launch to the kernel's end. Errors with
    /// [`Error::Device`] naming the CUDA call and error (an earlier queued kernel's too), or a size past `u32`.
    fn launch(&self, bufs: &[*mut u8], vals: &[i32], global: [usize; 3], local: [usize; 3]) -> Result<Duration> {
        let st = Instant::now();
        self.enqueue(bufs, vals, global, local)?;
        // SAFETY: no arguments; the context is current (enqueue made it so on this thread).
        self.drv
            .check("cuCtxSynchronize", unsafe { (self.drv.ctx_synchronize)() })
            .map_err(|e| device_err(format!("kernel `{}`: {e}", self.name)))?;
        Ok(st.elapsed())
    }

    /// Queues the launch on the null stream (the legacy default stream: every later launch and `cuMemcpy` of the
    /// context waits for it) and returns.
    fn enqueue(&self, bufs: &[*mut u8], vals: &[i32], global: [usize; 3], local: [usize; 3]) -> Result<()> {
        let fail = |msg: String| device_err(format!("kernel `{}`: {msg}", self.name));
        let slots: Vec<usize> = self.slots.clone().unwrap_or_else(|| (0..bufs.len()).collect());
        let ptrs = slots
            .iter()
            .map(|&slot| bufs.get(slot).map(|&b| b as CuDevicePtr).ok_or_else(|| fail(format!("no buffer for argument {slot}"))))
            .collect::<Result<Vec<CuDevicePtr>>>()?;
        let mut params: Vec<*mut c_void> = ptrs
            .iter()
            .map(|p| std::ptr::from_ref(p).cast_mut().cast())
            .chain(vals.iter().map(|v| std::ptr::from_ref(v).cast_mut().cast()))
            .collect();
        let dims = |d: [usize; 3], what| d.map(|x| c_uint::try_from(x).map_err(|_| fail(format!("{what} size {d:?} is past u32"))));
        let [gx, gy, gz] = dims(global, "grid");
        let [lx, ly, lz] = dims(local, "block");
        let ([gx, gy, gz], [lx, ly, lz]) = ([gx?, gy?, gz?], [lx?, ly?, lz?]);
        self.drv.current().map_err(fail)?;
        // SAFETY: a function of a loaded module; `params` holds one pointer per kernel parameter, each to a live
        // value of the parameter's type (`CUdeviceptr` for a pointer, i32 for an int), read during the call; the
        // buffers are live (launch's contract); shared memory 0, the null stream, no extra.
        let code =
            unsafe { (self.drv.launch_kernel)(self.function, gx, gy, gz, lx, ly, lz, 0, null_mut(), params.as_mut_ptr(), null_mut()) };
        self.drv.check("cuLaunchKernel", code).map_err(fail)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::testing;

    /// NVRTC for `arch`, or `None` (printing why) when this machine has none.
    fn nvrtc(arch: &str) -> Option<NvrtcCompiler> {
        NvrtcCompiler::new(arch).map_err(|e| eprintln!("skipping: {e}")).ok()
    }

    /// Checks that ptxas accepts `ptx` for `arch` (skipped, printing why, when there is no ptxas).
    #[track_caller]
    fn assembles(ptx: &[u8], arch: &str) {
        match ptxas(ptx, arch) {
            Err(e @ Error::Device { .. }) => eprintln!("skipping ptxas: {e}"),
            r => r.unwrap_or_else(|e| panic!("ptxas -arch={arch}: {e}")),
        }
    }

    const AXPB: &str = "extern \"C\" __global__ void axpb(float* out, const float* a, int b) {
  int i = blockIdx.x*blockDim.x+threadIdx.x; out[i] = a[i]*2.0f+(float)b;
}";

    #[test]
    fn axpb_compiles_to_ptx_that_ptxas_accepts() {
        for arch in ["sm_80", "sm_90"] {
            let Some(cc) = nvrtc(arch) else { return };
            let c = cc.compile("axpb", AXPB).unwrap();
            assert_eq!(c.entry, "axpb");
            let ptx = std::str::from_utf8(&c.object).unwrap();
            assert!(ptx.contains(".entry axpb") && ptx.contains(&format!(".target {arch}")), "{ptx}");
            assert!(!ptx.ends_with('\0'));
            assembles(&c.object, arch);
        }
    }

    #[test]
    fn halves_find_cuda_fp16_h() {
        let Some(cc) = nvrtc("sm_80") else { return };
        let src = "#include <cuda_fp16.h>\nextern \"C\" __global__ void h(half* out) { half x = (half)1.5f; out[0] = x*x; }";
        let c = cc.compile("h", src).unwrap_or_else(|e| panic!("{e}"));
        assembles(&c.object, "sm_80");
    }

    #[test]
    fn a_syntax_error_is_a_compile_error_with_the_nvrtc_log() {
        let Some(cc) = nvrtc("sm_80") else { return };
        let err = cc.compile("bad", "extern \"C\" __global__ void bad(float* out) { out[0] = 1.0f }").unwrap_err();
        let Error::Compile { name, stderr, source_path, compiler } = &err else { panic!("not a compile error: {err}") };
        std::fs::remove_file(source_path).unwrap(); // tests leave no sources behind
        assert_eq!(name, "bad");
        assert!(compiler.contains("--gpu-architecture=compute_80"), "{compiler}");
        assert!(stderr.contains("NVRTC_ERROR_COMPILATION") && stderr.contains("bad.cu") && stderr.contains("error"), "{stderr}");
        assert!(err.to_string().contains(stderr.as_str()), "{err}");
    }

    #[test]
    fn ptxas_rejects_bad_ptx() {
        let Some(cc) = nvrtc("sm_80") else { return };
        let ptx = String::from_utf8(cc.compile("axpb", AXPB).unwrap().object.to_vec()).unwrap();
        let bad = ptx.replace("ret;", "ret_not_an_instruction;");
        let err = match ptxas(bad.as_bytes(), "sm_80") {
            Err(e @ Error::Device { .. }) => return eprintln!("skipping: {e}"),
            r => r.unwrap_err(),
        };
        let Error::Compile { name, source_path, .. } = &err else { panic!("not a compile error: {err}") };
        std::fs::remove_file(source_path).unwrap();
        assert_eq!(name, "axpb");
    }

    /// The device, or `None` (printing why) when this machine has no GPU.
    fn gpu() -> Option<&'static CudaDevice> {
        device().map_err(|e| eprintln!("skipping: {e}")).ok()
    }

    #[test]
    fn copy_round_trip() {
        let Some(dev) = gpu() else { return };
        testing::copy_round_trip(dev.allocator());
    }

    #[test]
    fn compile_load_launch() {
        let Some(dev) = gpu() else { return };
        let compiled = match dev.compiler() {
            Ok(cc) => cc.compile("axpb", AXPB).unwrap(),
            Err(e) => return eprintln!("skipping: {e}"),
        };
        let prog = CudaProgram::load(dev, &compiled).unwrap();
        testing::launch_axpb(dev.allocator(), &prog);
        let missing = Compiled { entry: "nope".into(), ..compiled };
        assert!(matches!(CudaProgram::load(dev, &missing), Err(Error::Load { .. })));
    }

    #[test]
    fn no_gpu_is_a_device_error() {
        match device() {
            Ok(dev) => eprintln!("skipping: this machine has a CUDA device ({})", dev.arch()),
            Err(e) => {
                let msg = e.to_string();
                assert!(msg.contains("no CUDA device or driver found") && msg.contains("DEV=CUDA needs an NVIDIA GPU"), "{msg}");
                assert_eq!(device().unwrap_err().to_string(), msg, "the error is cached");
            }
        }
    }
}
