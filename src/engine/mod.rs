//! The engine. In: the tensor-level graphs to realize. Out: the buffer views they now are, after scheduling,
//! compiling (cached by kernel; a schedule's new kernels in parallel) and launching every kernel in order; it also owns device memory for BUFFER
//! nodes. DEBUG=1 prints each schedule, DEBUG=2 each launch, DEBUG=3 the opts, DEBUG=4 the source.
//! Follows tinygrad `engine/realize.py` and `engine/schedule.py`.

use crate::codegen::{full_rewrite, LinearKernel, Opt};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::helpers::{BEAM, DEBUG, GLOBAL_COUNTERS, NOOPT};
use crate::profile;
use crate::runtime::{self, canonicalize_device, Compiled, Program, RawBuffer};
use crate::schedule::{contiguous_buffer, create_schedule};
use crate::uop::{track, Arg, BufferInfo, Ops, UOp};
mod capture;
mod graph;
mod queue;
mod search;

pub(crate) use capture::jit_check_read;
pub use capture::{capture, new_buffer_like, Kernels};
use parking_lot::Mutex;
use rustc_hash::FxHashMap;
pub use search::beam_search;
use smallvec::SmallVec;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

/// A device as realize uses it (tinygrad `Device[name]`): the runtime's [`runtime::Device`] and the kernels compiled
/// for it so far, shared by its instances (`CPU` and `CPU:1` compile once).
struct Device {
    /// The canonical name (`CPU`, `CPU:1`).
    name: &'static str,
    rt: &'static dyn runtime::Device,
    runners: &'static Runners,
}

/// Compiled kernels by AST.
type Runners = Mutex<FxHashMap<UOp, Arc<Runner>>>;

/// The device named `name` (any case, `:0` optional: see [`runtime::canonicalize_device`]), opened on first use,
/// one per canonical name: `CPU:1` is a device of its own on the CPU's runtime device.
///
/// # Errors
/// [`Error::Device`] for a name the registry does not have or a device that does not open.
fn device(name: &str) -> Result<&'static Device> {
    static RUNNERS: [OnceLock<Runners>; runtime::DEVICES.len()] = [const { OnceLock::new() }; runtime::DEVICES.len()];
    static OPENED: OnceLock<Mutex<FxHashMap<String, &'static Device>>> = OnceLock::new();
    let canon = canonicalize_device(name);
    if let Some(d) = OPENED.get_or_init(Default::default).lock().get(&canon) {
        return Ok(d);
    }
    let rt = runtime::open_device(name)?;
    let slot = runtime::DEVICES.iter().position(|d| d.name == rt.name()).expect("an open device is in the registry");
    let mut opened = OPENED.get_or_init(Default::default).lock();
    Ok(*opened.entry(canon.clone()).or_insert_with(|| {
        // (under VIZ or PROFILE in the environment the trace or profile is written, and the viewer served, when the
        // process exits; a Context that sets them records only)
        if crate::helpers::getenv("VIZ", 0) != 0 || crate::helpers::getenv("PROFILE", 0) != 0 {
            crate::viz::register_exit();
        }
        let runners = RUNNERS[slot].get_or_init(Default::default);
        Box::leak(Box::new(Device { name: Box::leak(canon.into_boxed_str()), rt, runners }))
    }))
}

/// Device memory held by a BUFFER node's [`BufferInfo`]; returned to its device's allocator cache on drop.
struct Mem {
    raw: Option<RawBuffer>,
    dev: &'static Device,
    /// Held shared by kernels reading the memory and by copyout, exclusive by the kernel writing it, so
    /// realizes on several threads never race on a buffer.
    lock: parking_lot::RwLock<()>,
}
impl Drop for Mem {
    fn drop(&mut self) {
        if let Some(raw) = self.raw.take() {
            GLOBAL_COUNTERS.add_mem_used(-(allocated(&raw) as i64));
            profile::mark(self.dev.name, "free", allocated(&raw) as u64);
            self.dev.rt.allocator().free(raw);
        }
    }
}

/// The bytes `raw` holds of the device's memory: its size, or 0 for borrowed host memory.
fn allocated(raw: &RawBuffer) -> usize {
    if raw.is_borrowed() {
        0
    } else {
        raw.size()
    }
}

fn info(buf: &UOp) -> &Arc<BufferInfo> {
    match &buf.arg {
        Arg::Buffer(b) => b,
        a => panic!("not a BUFFER: {} {a:?}", buf.op),
    }
}

/// The memory of BUFFER node `buf`, made on first use: its [`BufferInfo::init`] bytes themselves where the device
/// borrows them ([`runtime::Allocator::borrow`]), else an allocation they are copied into.
fn mem_of(buf: &UOp) -> Result<&Mem> {
    let b = info(buf);
    if b.mem.get().is_none() {
        let mut init = b.init.lock();
        if b.mem.get().is_none() {
            let dev = device(&b.device)?;
            let alloc = dev.rt.allocator();
            let size = b.size * buf.dtype.itemsize();
            let borrowed = init.as_ref().filter(|_| b.borrow).and_then(|bytes| alloc.borrow(bytes, size, buf.dtype.itemsize()));
            let raw = match (borrowed, init.take()) {
                (Some(raw), _) => raw,
                (None, Some(bytes)) => {
                    let raw = alloc.alloc(size)?;
                    alloc.copyin(&raw, &bytes[..size])?;
                    raw
                }
                (None, None) => alloc.alloc(size)?,
            };
            GLOBAL_COUNTERS.add_mem_used(allocated(&raw) as i64);
            profile::mark(dev.name, "alloc", allocated(&raw) as u64);
            let _ = b.mem.set(Box::new(Mem { raw: Some(raw), dev, lock: Default::default() }));
        }
    }
    Ok(b.mem.get().and_then(|m| m.downcast_ref::<Mem>()).expect("BUFFER memory of this engine"))
}

/// The address of BUFFER node `buf`'s memory, made on first use ([`mem_of`]).
fn mem(buf: &UOp) -> Result<*mut u8> {
    Ok(mem_of(buf)?.raw.as_ref().expect("memory is held until drop").as_ptr())
}

/// Whether realized tensor graph `u`'s buffer is host memory borrowed from the bytes it was made from
/// ([`buffer_from_blob`]) rather than a copy. False for a graph that is not a realized contiguous buffer.
pub fn is_borrowed(u: &UOp) -> bool {
    contiguous_buffer(u).and_then(|b| info(b).mem.get()?.downcast_ref::<Mem>()?.raw.as_ref().map(RawBuffer::is_borrowed)).unwrap_or(false)
}

/// A new BUFFER node of `size` elements of `dtype` on `device`; memory comes on first use.
pub fn new_buffer(dtype: DType, size: usize, device: &str) -> UOp {
    UOp::new(Ops::BUFFER, dtype, [], Arg::Buffer(BufferInfo::new(size, device)))
}

/// A BUFFER of `size` elements of `dtype` on `device` holding `bytes`. Lazy, as tinygrad keeps host data on the
/// host until a kernel needs it: the device memory is allocated and filled on first use (a realize or copyout),
/// where an unknown device or a failed allocation is an error.
///
/// # Panics
/// If `bytes` is not `size` elements of `dtype`.
pub fn buffer_from_bytes(bytes: &[u8], dtype: DType, size: usize, device: &str) -> UOp {
    assert_eq!(bytes.len(), size * dtype.itemsize(), "buffer_from_bytes: {} bytes for {size} x {dtype}", bytes.len());
    buffer_from_host(bytes::Bytes::copy_from_slice(bytes), dtype, size, device)
}

/// As [`buffer_from_bytes`], holding `bytes` (whose first `size` elements are used) without copying them now: they
/// are copied to the device on first use, as tinygrad copies a numpy array's `NPY` buffer at realize. Memory that
/// changes before then (a numpy array written after `Tensor(array)`) is read as it is at that first use.
///
/// # Panics
/// If `bytes` holds fewer than `size` elements of `dtype`.
pub fn buffer_from_host(bytes: bytes::Bytes, dtype: DType, size: usize, device: &str) -> UOp {
    assert!(bytes.len() >= size * dtype.itemsize(), "buffer_from_host: {} bytes for {size} x {dtype}", bytes.len());
    UOp::new(Ops::BUFFER, dtype, [], Arg::Buffer(BufferInfo::with_init(size, device, Some(bytes), false)))
}

/// As [`buffer_from_bytes`], without copying `bytes` now (tinygrad `Tensor.from_blob`): on a device whose kernels
/// read host memory (CPU, PYTHON) the buffer is `bytes` itself, read-only (a kernel writing it panics), where they
/// are aligned to `dtype` and the renderer's overread past the elements is readable ([`RawBuffer::borrow_host`]:
/// `bytes` may run past the elements to say so); else the elements are copied once, on first use. A slice of a
/// memory-mapped file thus loads nothing until a kernel reads it.
///
/// # Panics
/// If `bytes` holds fewer than `size` elements of `dtype`.
pub fn buffer_from_blob(bytes: bytes::Bytes, dtype: DType, size: usize, device: &str) -> UOp {
    assert!(bytes.len() >= size * dtype.itemsize(), "buffer_from_blob: {} bytes for {size} x {dtype}", bytes.len());
    UOp::new(Ops::BUFFER, dtype, [], Arg::Buffer(BufferInfo::with_init(size, device, Some(bytes), true)))
}

/// The host bytes BUFFER node `buf` reads without owning them ([`buffer_from_blob`]): before first use, the bytes
/// it may borrow; after, the bytes it did borrow. None for a buffer with memory of its own (a copy).
pub fn borrowed_bytes(buf: &UOp) -> Option<bytes::Bytes> {
    let b = info(buf);
    if !b.borrow {
        return None;
    }
    // first use sets the memory while holding this lock: the two reads agree
    let init = b.init.lock();
    match b.mem.get() {
        Some(m) => m.downcast_ref::<Mem>()?.raw.as_ref()?.borrowed_bytes().cloned(),
        None => init.clone(),
    }
}

/// Whether `u` is a realized buffer in row-major order (a BUFFER, or a RESHAPE of one).
pub fn is_contiguous_buffer(u: &UOp) -> bool {
    contiguous_buffer(u).is_some()
}

/// The bytes of a realized contiguous tensor graph `u`.
///
/// # Errors
/// If the device fails.
///
/// # Panics
/// If `u` is not a contiguous buffer view (realize it first).
pub fn copyout(u: &UOp) -> Result<Vec<u8>> {
    let mut out = vec![0u8; buffer_size(u)?];
    copyout_into(u, &mut out)?;
    Ok(out)
}

/// The size in bytes of the memory behind the realized contiguous tensor graph `u` (a symbolic tensor's: for its
/// variables' maxima).
///
/// # Errors
/// If the device fails.
///
/// # Panics
/// If `u` is not a contiguous buffer view (realize it first).
fn buffer_size(u: &UOp) -> Result<usize> {
    let buf = contiguous_buffer(u).unwrap_or_else(|| panic!("buffer_size: {} is not a realized buffer", u.op));
    Ok(mem_of(buf)?.raw.as_ref().expect("memory is held until drop").size())
}

/// The first `out.len()` bytes of a realized contiguous tensor graph `u`, into `out`: [`copyout`] into memory the
/// caller reuses (a decode step's logits, read every token, then cost a copy into pages already mapped, not two into
/// fresh ones: 4 MB of Gemma 3's logits 0.3 ms against 2.4). A buffer larger than `out` (a symbolic tensor's)
/// is copied whole into a temporary first (the allocators copy whole buffers).
///
/// # Errors
/// If the device fails.
///
/// # Panics
/// If `u` is not a contiguous buffer view (realize it first), or `out` is longer than its memory.
pub fn copyout_into(u: &UOp, out: &mut [u8]) -> Result<()> {
    let buf = contiguous_buffer(u).unwrap_or_else(|| panic!("copyout: {} is not a realized buffer", u.op));
    let m = mem_of(buf)?;
    let raw = m.raw.as_ref().expect("memory is held until drop");
    assert!(out.len() <= raw.size(), "copyout_into: {} bytes asked of a buffer of {}", out.len(), raw.size());
    let _read = m.lock.read();
    let _p = profile::range(m.dev.name, "copy", || format!("copyout {} bytes", out.len())).map(|r| r.bytes(out.len() as u64));
    if out.len() == raw.size() {
        return m.dev.rt.allocator().copyout(out, raw);
    }
    let mut all = vec![0u8; raw.size()];
    m.dev.rt.allocator().copyout(&mut all, raw)?;
    out.copy_from_slice(&all[..out.len()]);
    Ok(())
}

/// Writes `bytes` (all of its elements) into the realized contiguous buffer `u`, allocating it on first use
/// (tinygrad `Buffer.copyin`).
///
/// # Errors
/// If the device fails.
///
/// # Panics
/// If `u` is not a contiguous buffer or `bytes` is not its size.
pub fn copyin(u: &UOp, bytes: &[u8]) -> Result<()> {
    let buf = contiguous_buffer(u).unwrap_or_else(|| panic!("copyin: {} is not a buffer", u.op));
    let m = mem_of(buf)?;
    let raw = m.raw.as_ref().expect("memory is held until drop");
    let _write = m.lock.write();
    let _p = profile::range(m.dev.name, "copy", || format!("copyin {} bytes", bytes.len())).map(|r| r.bytes(bytes.len() as u64));
    m.dev.rt.allocator().copyin(raw, bytes)
}

/// What an [`ExecItem`] runs.
#[derive(Clone)]
enum Work {
    /// A compiled kernel.
    Kernel(Arc<Runner>),
    /// A copy of `bufs[1]` into `bufs[0]`, another device's buffer of the same size (tinygrad `BufferCopy`), through
    /// the host.
    Copy,
    /// The sum of `bufs[1]` over the processes of this thread's [`Collective`], into `bufs[0]`.
    AllReduce,
}

/// A group of processes that sum buffers together (MPI ranks: `nn::mpi`), what an ALLREDUCE node runs. Each process
/// of the group must run the same ALLREDUCEs in the same order.
pub trait Collective {
    /// The number of processes.
    fn size(&self) -> usize;
    /// Writes into `dst` the element-wise sum over the processes of `src` (elements of `dtype`; same length).
    ///
    /// # Errors
    /// A dtype the group cannot sum, or the group failing (a process gone).
    fn allreduce_sum(&self, src: &[u8], dst: &mut [u8], dtype: DType) -> Result<()>;
}

thread_local! {
    /// This thread's process group: ALLREDUCE items run on the thread that realizes them.
    static COLLECTIVE: std::cell::RefCell<Option<Box<dyn Collective>>> = const { std::cell::RefCell::new(None) };
}

/// Makes `c` this thread's process group (`None`: none, so an ALLREDUCE sums over this process alone).
pub fn set_collective(c: Option<Box<dyn Collective>>) {
    COLLECTIVE.with(|g| *g.borrow_mut() = c);
}

/// The number of processes an ALLREDUCE realized on this thread sums over (1 without a group).
pub fn collective_size() -> usize {
    COLLECTIVE.with(|g| g.borrow().as_ref().map_or(1, |c| c.size()))
}

/// A kernel or a copy ready to launch on its buffers (tinygrad `ExecItem`): what realize runs and TinyJit replays.
#[derive(Clone)]
pub(crate) struct ExecItem {
    work: Work,
    /// BUFFER nodes by slot (slot 0 written).
    bufs: Vec<UOp>,
    /// The device that runs it: a kernel's, or a copy's destination.
    dev: &'static Device,
    /// The values of the kernel's variables, in [`LinearKernel::vars`](crate::codegen::LinearKernel) order.
    vals: Vec<i32>,
}

impl ExecItem {
    /// The item for `runner` on `bufs`, its variables' values taken from `var_vals` (name, value).
    ///
    /// # Panics
    /// If the kernel reads a variable `var_vals` does not bind, or a value does not fit an `int`.
    fn new(runner: Arc<Runner>, bufs: Vec<UOp>, dev: &'static Device, var_vals: &[(Arc<str>, i64)]) -> ExecItem {
        let vals = runner.kernel.vars.iter().map(|v| {
            let val = var_vals
                .iter()
                .find(|(n, _)| n == v)
                .unwrap_or_else(|| panic!("kernel {}: variable {v} is not bound to a value (Variable::bind)", runner.kernel.name))
                .1;
            i32::try_from(val).unwrap_or_else(|_| panic!("variable {v} = {val} does not fit a 32-bit int"))
        });
        ExecItem { vals: vals.collect(), work: Work::Kernel(runner), bufs, dev }
    }

    /// The copy of BUFFER `src` into BUFFER `dst` (same size and dtype) on `dst`'s device `dev`.
    fn copy(dst: UOp, src: UOp, dev: &'static Device) -> ExecItem {
        ExecItem { work: Work::Copy, bufs: vec![dst, src], dev, vals: vec![] }
    }

    /// The sum of BUFFER `src` over the processes into BUFFER `dst` (same size and dtype) on their device `dev`.
    fn allreduce(dst: UOp, src: UOp, dev: &'static Device) -> ExecItem {
        ExecItem { work: Work::AllReduce, bufs: vec![dst, src], dev, vals: vec![] }
    }

    /// Whether it is a copy between devices.
    fn is_copy(&self) -> bool {
        matches!(self.work, Work::Copy)
    }

    /// The kernel it launches (None for a copy or an allreduce).
    fn runner(&self) -> Option<&Arc<Runner>> {
        match &self.work {
            Work::Kernel(r) => Some(r),
            _ => None,
        }
    }

    /// Whether the kernel reads a variable (one that [`ExecItem::rebind`] may change).
    fn has_vars(&self) -> bool {
        self.runner().is_some_and(|r| !r.kernel.vars.is_empty())
    }

    /// The values of the kernel's variables among `var_vals` replaced (a TinyJit replay's bound inputs).
    ///
    /// # Panics
    /// If a value does not fit an `int`.
    fn rebind(&mut self, var_vals: &[(Arc<str>, i64)]) {
        let Work::Kernel(runner) = &self.work else { return };
        for (slot, v) in self.vals.iter_mut().zip(&runner.kernel.vars) {
            if let Some((_, val)) = var_vals.iter().find(|(n, _)| n == v) {
                *slot = i32::try_from(*val).unwrap_or_else(|_| panic!("variable {v} = {val} does not fit a 32-bit int"));
            }
        }
    }

    /// Launches the kernel or makes the copy (allocating buffers on first use), counting a kernel in
    /// GlobalCounters; DEBUG=2 prints it.
    fn run(&self) -> Result<std::time::Duration> {
        // (an output of no elements: nothing to compute, whatever the other axes' sizes)
        if info(&self.bufs[0]).size == 0 {
            return Ok(std::time::Duration::ZERO);
        }
        let runner = match &self.work {
            Work::Kernel(r) => r,
            Work::Copy => return self.run_copy(),
            Work::AllReduce => return self.run_allreduce(),
        };
        // a kernel may touch no more of a buffer than it holds (a scheduler bug otherwise, which a C kernel would
        // turn into a silent out-of-bounds access)
        for &(slot, bytes) in &runner.args {
            let holds = self.bufs.get(slot).map_or(0, |b| info(b).size * b.dtype.itemsize());
            assert!(holds >= bytes, "kernel {}: argument {slot} holds {holds} bytes, the kernel indexes {bytes}", runner.kernel.name);
        }
        // (on the stack: a TinyJit replay launches a thousand kernels a token, and allocations showed in its profile)
        let ptrs = self.bufs.iter().map(mem).collect::<Result<SmallVec<[*mut u8; 16]>>>()?;
        assert!(
            !is_borrowed(&self.bufs[0]),
            "kernel {}: writes a tensor made by Tensor::from_blob, whose memory is read-only host bytes; write a .contiguous() copy",
            runner.kernel.name
        );
        // each buffer locked once (written: exclusive), in address order so concurrent launches can't deadlock
        let mut order: SmallVec<[usize; 16]> = (0..ptrs.len()).filter(|&i| !ptrs[..i].contains(&ptrs[i])).collect();
        order.sort_unstable_by_key(|&i| ptrs[i]);
        let lock = |i: usize| &info(&self.bufs[i]).mem.get().unwrap().downcast_ref::<Mem>().unwrap().lock;
        let (mut _written, mut _read) = (None, SmallVec::<[_; 16]>::new());
        for i in order {
            if i == 0 {
                _written = Some(lock(i).write());
            } else {
                _read.push(lock(i).read());
            }
        }
        let k = &runner.kernel;
        let checked = runner.check.as_deref().map(|check| self.run_check(check, &ptrs, k)).transpose()?;
        let tm = if DEBUG.value() >= 2 || profile::enabled() {
            let _p = profile::range(self.dev.name, "launch", || k.display_name.clone());
            runner.program.launch(&ptrs, &self.vals, k.global_size, k.local_size)?
        } else {
            // (no time to report: a GPU queues the kernel, its copies out wait for it)
            runner.program.enqueue(&ptrs, &self.vals, k.global_size, k.local_size)?;
            std::time::Duration::ZERO
        };
        if let Some(want) = checked {
            let b = &self.bufs[0];
            compare_outputs(self.dev.name, &k.name, b.dtype, &self.dev.read(b)?, &want)?;
        }
        GLOBAL_COUNTERS.add_kernel(k.ops, k.mem, tm.as_nanos() as u64);
        if DEBUG.value() >= 2 {
            let s = tm.as_secs_f64();
            println!(
                "*** {:<6} {:4} {:<40} arg {:2} mem {:6.2} GB tm {:9.2}us/{:9.2}ms ({:9.2} GFLOPS {:6.1} GB/s)",
                self.dev.name,
                GLOBAL_COUNTERS.kernel_count(),
                k.display_name,
                self.bufs.len(),
                GLOBAL_COUNTERS.mem_used().max(0) as f64 / 1e9,
                s * 1e6,
                GLOBAL_COUNTERS.time_sum_ns() as f64 / 1e6,
                k.ops as f64 / s / 1e9,
                k.mem as f64 / s / 1e9
            );
        }
        Ok(tm)
    }

    /// Runs `check`, the check compiler's build of the kernel, on copies of the buffers at `ptrs` (as they are before
    /// the kernel runs), and returns the bytes of its output.
    fn run_check(&self, check: &dyn Program, ptrs: &[*mut u8], k: &LinearKernel) -> Result<Vec<u8>> {
        let alloc = self.dev.rt.allocator();
        let mut copies: Vec<(*mut u8, RawBuffer)> = Vec::new();
        for (b, p) in self.bufs.iter().zip(ptrs) {
            if copies.iter().all(|(q, _)| q != p) {
                let raw = alloc.alloc(info(b).size * b.dtype.itemsize())?;
                alloc.copyin(&raw, &self.dev.read(b)?)?;
                copies.push((*p, raw));
            }
        }
        let shadow: Vec<*mut u8> = ptrs.iter().map(|p| copies.iter().find(|(q, _)| q == p).expect("copied").1.as_ptr()).collect();
        check.launch(&shadow, &self.vals, k.global_size, k.local_size)?;
        let out = &copies.iter().find(|(q, _)| *q == ptrs[0]).expect("copied").1;
        let mut bytes = vec![0u8; out.size()];
        alloc.copyout(&mut bytes, out)?;
        copies.into_iter().for_each(|(_, raw)| alloc.free(raw));
        Ok(bytes)
    }
}

impl ExecItem {
    /// Copies `bufs[1]` into `bufs[0]` through the host (its source read-locked, then its destination write-locked).
    fn run_copy(&self) -> Result<std::time::Duration> {
        let (dst, src) = (mem_of(&self.bufs[0])?, mem_of(&self.bufs[1])?);
        let (draw, sraw) = (dst.raw.as_ref().expect("memory is held until drop"), src.raw.as_ref().expect("memory is held until drop"));
        let t0 = Instant::now();
        let _p = profile::range(self.dev.name, "copy", || format!("copy {} bytes from {}", sraw.size(), src.dev.name))
            .map(|r| r.bytes(sraw.size() as u64));
        let mut host = vec![0u8; sraw.size().min(draw.size())];
        {
            let _read = src.lock.read();
            src.dev.rt.allocator().copyout(&mut host, sraw)?;
        }
        {
            let _write = dst.lock.write();
            dst.dev.rt.allocator().copyin(draw, &host)?;
        }
        let tm = t0.elapsed();
        if DEBUG.value() >= 2 {
            println!("*** {:<6} copy {:>10} bytes from {:<6} tm {:9.2}us", self.dev.name, host.len(), src.dev.name, tm.as_secs_f64() * 1e6);
        }
        Ok(tm)
    }

    /// Sums `bufs[1]` over this thread's process group into `bufs[0]`: in place where the device's memory is host
    /// memory, else through host copies.
    fn run_allreduce(&self) -> Result<std::time::Duration> {
        let (dst, src) = (mem_of(&self.bufs[0])?, mem_of(&self.bufs[1])?);
        let (draw, sraw) = (dst.raw.as_ref().expect("memory is held until drop"), src.raw.as_ref().expect("memory is held until drop"));
        let t0 = Instant::now();
        let _p =
            profile::range(self.dev.name, "allreduce", || format!("allreduce {} bytes", sraw.size())).map(|r| r.bytes(sraw.size() as u64));
        let (n, dtype) = (info(&self.bufs[1]).size * self.bufs[1].dtype.itemsize(), self.bufs[1].dtype);
        let mut sum = |s: &[u8], d: &mut [u8]| {
            COLLECTIVE.with(|g| match g.borrow().as_ref() {
                Some(c) => c.allreduce_sum(&s[..n], &mut d[..n], dtype),
                None => {
                    d[..n].copy_from_slice(&s[..n]);
                    Ok(())
                }
            })
        };
        let alloc = self.dev.rt.allocator();
        // (locks in address order, as a kernel's launch takes them)
        let (_r, _w, _r2, _w2);
        if sraw.as_ptr() < draw.as_ptr() {
            (_r, _w) = (Some(src.lock.read()), Some(dst.lock.write()));
            (_r2, _w2) = (None, None);
        } else {
            (_w2, _r2) = (Some(dst.lock.write()), Some(src.lock.read()));
            (_r, _w) = (None, None);
        }
        // SAFETY: src and dst are distinct live buffers of this device (an allreduce writes a new buffer), and their
        // read and write locks are held while `sum` runs, which touches no other buffer.
        if unsafe { alloc.in_host(sraw, draw, &mut sum) }.transpose()?.is_none() {
            let (mut host, mut out) = (vec![0u8; sraw.size()], vec![0u8; draw.size()]);
            src.dev.rt.allocator().copyout(&mut host, sraw)?;
            sum(&host, &mut out)?;
            alloc.copyin(draw, &out)?;
        }
        let tm = t0.elapsed();
        if DEBUG.value() >= 2 {
            println!(
                "*** {:<6} allreduce {:>10} bytes over {} processes tm {:9.2}us",
                self.dev.name,
                n,
                collective_size(),
                tm.as_secs_f64() * 1e6
            );
        }
        Ok(tm)
    }
}

impl Device {
    /// The bytes of BUFFER `b`'s memory, read without taking its lock (the caller holds it).
    fn read(&self, b: &UOp) -> Result<Vec<u8>> {
        let raw = info(b).mem.get().and_then(|m| m.downcast_ref::<Mem>()).and_then(|m| m.raw.as_ref()).expect("allocated by run");
        let mut out = vec![0u8; raw.size()];
        self.rt.allocator().copyout(&mut out, raw)?;
        Ok(out)
    }
}

/// Compares kernel `name`'s output `got` (elements of `dtype`) with `want`, its check compiler's build's: floats within
/// the conformance suite's tightest tolerance (`|got - want| <= atol + rtol·|want|`: 1e-5 and 1e-4, 16-bit floats
/// 1e-2 and 1e-3; NaN matches NaN), everything else bit for bit. Errors with [`Error::Device`] naming the kernel and
/// the first element that differs.
fn compare_outputs(device: &str, name: &str, dtype: DType, got: &[u8], want: &[u8]) -> Result<()> {
    use crate::dtype::Scalar;
    let n = got.len() / dtype.itemsize().max(1);
    let float = |bytes: &[u8], i: usize| -> f64 {
        let at = |w: usize| &bytes[i * w..(i + 1) * w];
        match dtype.scalar {
            Scalar::Float64 => f64::from_ne_bytes(at(8).try_into().expect("8 bytes")),
            Scalar::Float32 => f32::from_ne_bytes(at(4).try_into().expect("4 bytes")) as f64,
            Scalar::Float16 => half::f16::from_ne_bytes(at(2).try_into().expect("2 bytes")).to_f64(),
            _ => half::bf16::from_ne_bytes(at(2).try_into().expect("2 bytes")).to_f64(),
        }
    };
    let (atol, rtol) = if dtype.itemsize() == 2 { (1e-2, 1e-3) } else { (1e-5, 1e-4) };
    let bad = (0..n).find(|&i| match dtype.is_float() {
        true => {
            let (g, w) = (float(got, i), float(want, i));
            !(g == w || (g.is_nan() && w.is_nan()) || (g - w).abs() <= atol + rtol * w.abs())
        }
        false => {
            let s = dtype.itemsize();
            got[i * s..(i + 1) * s] != want[i * s..(i + 1) * s]
        }
    });
    match bad {
        None => Ok(()),
        Some(i) => {
            let show = |b: &[u8]| {
                if dtype.is_float() {
                    float(b, i).to_string()
                } else {
                    format!("{:?}", &b[i * dtype.itemsize()..(i + 1) * dtype.itemsize()])
                }
            };
            Err(Error::Device {
                device: device.into(),
                msg: format!(
                    "kernel {name}: the compiler's build and the check compiler's (CC_CHECK) disagree at output element {i} of {n} ({dtype}): {} vs {}",
                    show(got),
                    show(want)
                ),
            })
        }
    }
}

/// A compiled kernel and what DEBUG prints about it.
struct Runner {
    kernel: LinearKernel,
    program: Box<dyn Program>,
    /// The check compiler's build of the kernel ([`runtime::Device::check_compiler`]), run beside `program`.
    check: Option<Box<dyn Program>>,
    /// The BEAM width its opts were searched with (0: not searched).
    beam: i64,
    /// Each argument slot the kernel indexes and the bytes it may touch there (its DEFINE_GLOBAL's size).
    args: Vec<(usize, usize)>,
    /// The VIZ group that recorded its compile, when recording ([`track`]).
    viz: Option<track::GroupRef>,
}

/// A kernel optimized and rendered, ready to compile.
struct Prepared {
    kernel: LinearKernel,
    src: String,
    /// The BEAM width its opts were searched with.
    beam: i64,
    /// Its VIZ group, when recording.
    viz: Option<track::GroupRef>,
}

/// The BEAM width kernels compile with now: `BEAM`, or -1 under NOOPT=1 (no opts: a kernel cached with the
/// default opts, width 0, is not reused).
fn beam_width() -> i64 {
    if NOOPT.value() != 0 {
        -1
    } else {
        BEAM.value().max(0)
    }
}

/// The runner of `ast` on `dev`, compiled on first use; `inputs` (its BUFFERs by slot) are the data BEAM times its
/// candidates on.
fn runner(dev: &'static Device, ast: &UOp, inputs: Option<&[UOp]>) -> Result<Arc<Runner>> {
    if let Some(r) = dev.runners.lock().get(ast).filter(|r| r.beam == beam_width()) {
        return Ok(r.clone());
    }
    let r = compile(dev, ast, None, inputs)?;
    dev.runners.lock().insert(ast.clone(), r.clone());
    Ok(r)
}

/// Optimizes (with `opts`, else BEAM's when BEAM>=1, else the default choice) and renders `ast` for `dev`: the
/// kernel, its source and the BEAM width it was searched with.
fn prepare(dev: &'static Device, ast: &UOp, opts: Option<&[Opt]>, inputs: Option<&[UOp]>) -> Result<Prepared> {
    let beam = if opts.is_none() { beam_width() } else { 0 };
    let ren = dev.rt.renderer();
    let searched = if beam >= 1 { Some(search::beam_opts_on(dev, ast, beam as usize, inputs)?) } else { None };
    // (VIZ: the kernel's rewrites, source and UOps in a group named by the kernel)
    let group = track::group(|| "kernel".into());
    let kernel = full_rewrite(ast, &ren, opts.or(searched.as_deref()))?;
    let src = ren.render(&kernel);
    group.rename(|| kernel.name.clone());
    group.kernel(|| {
        let uops = crate::renderer::python::render(&kernel).lines().skip(1).map(str::to_string).collect();
        track::Kernel { name: kernel.name.clone(), device: dev.name.into(), src: src.clone(), uops }
    });
    if DEBUG.value() >= 3 {
        println!("{}: opts [{}]", kernel.display_name, kernel.opts.iter().map(|o| o.to_string()).collect::<Vec<_>>().join(", "));
    }
    if DEBUG.value() >= 4 {
        println!("{src}");
    }
    Ok(Prepared { kernel, src, beam, viz: group.index() })
}

/// The runner of a prepared kernel, compiled for `dev` (and `check`, its check compiler's build, if any).
fn load(dev: &Device, Prepared { kernel, beam, viz, .. }: Prepared, compiled: &Compiled, check: Option<Compiled>) -> Result<Arc<Runner>> {
    let program = dev.rt.load(&kernel, compiled)?;
    let check = check.map(|c| dev.rt.load(&kernel, &c)).transpose()?;
    let args = kernel
        .uops
        .iter()
        .filter_map(|u| match u.arg {
            Arg::Int(slot) if u.op == Ops::DEFINE_GLOBAL => Some((slot as usize, u.dtype.size.max(0) as usize * u.dtype.base().itemsize())),
            _ => None,
        })
        .collect();
    Ok(Arc::new(Runner { kernel, program, check, beam, args, viz }))
}

/// Optimizes, renders, compiles and loads `ast` on `dev` (see [`prepare`]).
fn compile(dev: &'static Device, ast: &UOp, opts: Option<&[Opt]>, inputs: Option<&[UOp]>) -> Result<Arc<Runner>> {
    let mut p = profile::range(dev.name, "compile", String::new);
    let prepared = prepare(dev, ast, opts, inputs)?;
    if let Some(p) = &mut p {
        p.rename(prepared.kernel.display_name.clone());
    }
    let object = dev.rt.compiler()?.compile(&prepared.kernel.name, &prepared.src)?;
    let check = dev.rt.check_compiler()?.map(|cc| cc.compile(&prepared.kernel.name, &prepared.src)).transpose()?;
    load(dev, prepared, &object, check)
}

/// The kernel ASTs compiled for `device` in this process so far (its kernel cache's keys), in no order: what a
/// test renders for another target (the CUDA compile check takes every kernel the conformance suite made).
///
/// # Errors
/// [`Error::Device`] for an unknown or unavailable device.
pub fn compiled_asts(device: &str) -> Result<Vec<UOp>> {
    Ok(self::device(device)?.runners.lock().keys().cloned().collect())
}

/// Compiles kernel `ast` with exactly `opts` (bypassing the kernel cache) and runs it once on `bufs` (BUFFER nodes
/// by slot, as in a [`crate::schedule::ScheduleItem`]); returns the launch's wall time. For tests that compare
/// opts and for BEAM.
///
/// # Errors
/// [`Error::Opt`] for an illegal opt; compile and device errors.
///
/// # Panics
/// If `bufs` is empty or `bufs[0]` is not a BUFFER node.
pub fn run_with_opts(ast: &UOp, bufs: &[UOp], opts: &[Opt]) -> Result<std::time::Duration> {
    let dev = device(&info(&bufs[0]).device)?;
    let ei = ExecItem::new(compile(dev, ast, Some(opts), None)?, bufs.to_vec(), dev, &[]);
    ei.run()
}

/// The device `root` computes on: the target of the first COPY or the device of the first buffer found walking down
/// from it (canonical), else the default device.
fn root_device(root: &UOp) -> String {
    let (mut stack, mut seen) = (vec![root], rustc_hash::FxHashSet::default());
    while let Some(u) = stack.pop() {
        match &u.arg {
            Arg::Buffer(b) => return canonicalize_device(&b.device),
            Arg::Str(to) if u.op == Ops::COPY => return canonicalize_device(to),
            _ => {}
        }
        stack.extend(u.src.iter().filter(|s| seen.insert(*s)));
    }
    crate::runtime::default_device()
}

/// Compiles the kernels of `asts` that `dev` has not compiled yet, all at once: optimized and rendered in parallel,
/// compiled in one batch (tinygrad compiles them one by one). Not under BEAM: each search compiles its candidates in
/// parallel, and times them on an idle machine (realize compiles those one by one as it reaches them).
fn compile_missing(dev: &'static Device, asts: &[&UOp]) -> Result<()> {
    let missing: Vec<&UOp> = {
        let have = dev.runners.lock();
        let mut m: Vec<&UOp> = asts.iter().copied().filter(|a| have.get(*a).is_none_or(|r| r.beam != beam_width())).collect();
        m.sort_by_key(|a| a.key());
        m.dedup();
        m
    };
    // (VIZ records kernels one by one, in schedule order, so that a program records the same trace every run)
    if missing.len() <= 1 || beam_width() >= 1 || track::enabled() {
        return Ok(());
    }
    use rayon::prelude::*;
    // the workers see this thread's Context overrides (NOOPT, DEBUG, ...)
    let ctx = crate::helpers::Context::snapshot();
    let _p = profile::range(dev.name, "compile", || format!("{} kernels at once", missing.len()));
    let t_prep = Instant::now();
    let prepared = missing
        .par_iter()
        .map(|a| {
            let _g = ctx.enter();
            prepare(dev, a, None, None)
        })
        .collect::<Result<Vec<_>>>()?;
    let t1 = Instant::now();
    let sources: Vec<(&str, &str)> = prepared.iter().map(|p| (p.kernel.name.as_str(), p.src.as_str())).collect();
    let objects = dev.rt.compiler()?.compile_many(&sources);
    let mut checks: Vec<Option<Result<Compiled>>> = match dev.rt.check_compiler()? {
        Some(cc) => cc.compile_many(&sources).into_iter().map(Some).collect(),
        None => (0..sources.len()).map(|_| None).collect(),
    };
    if DEBUG.value() >= 1 {
        let ms = |a: Instant, b: Instant| (b - a).as_secs_f64() * 1e3;
        println!(
            "optimized and rendered {} kernels in {:.2} ms, compiled in {:.2} ms",
            prepared.len(),
            ms(t_prep, t1),
            ms(t1, Instant::now())
        );
    }
    for (((a, p), object), check) in missing.into_iter().zip(prepared).zip(objects).zip(checks.drain(..)) {
        let r = load(dev, p, &object?, check.transpose()?)?;
        dev.runners.lock().insert(a.clone(), r);
    }
    Ok(())
}

/// Runs the kernels that compute `roots` and returns, for each, the buffer view it now is (tinygrad
/// `realize`/`run_schedule`). Intermediate buffers are freed after their last use, so their memory is reused
/// by later kernels through the allocator's cache.
///
/// # Errors
/// If a kernel fails to compile or a device fails.
pub fn realize(roots: &[UOp]) -> Result<Vec<UOp>> {
    // (buffers already: nothing to schedule, but their devices must exist)
    let bufs: Option<Vec<&UOp>> = roots.iter().map(crate::schedule::contiguous_buffer).collect();
    if let Some(bufs) = bufs {
        bufs.iter().try_for_each(|b| device(&info(b).device).map(drop))?;
        return Ok(roots.to_vec());
    }
    let topo = UOp::sink(roots.to_vec()).toposort();
    if topo.iter().any(|u| u.op == Ops::CUSTOM_GRADIENT) {
        return realize(&crate::schedule::strip_custom_gradients(roots));
    }
    if topo.iter().any(|u| u.op == Ops::MULTI) {
        return realize_multi(&crate::schedule::multi::lower(roots, &crate::runtime::default_device()));
    }
    // roots on several devices with no copy between them: one schedule per device, for that device's target (with
    // copies, one schedule: its kernels run on their buffers' devices, its copies move data between them); the
    // schedules' items then run together, each device's on its own queue
    let copies = topo.iter().any(|u| u.op == Ops::COPY);
    drop(topo);
    let devs: Vec<String> = roots.iter().map(root_device).collect();
    let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
    for (i, d) in devs.iter().enumerate() {
        match groups.iter_mut().find(|(g, _)| copies || g == d) {
            Some((_, idx)) => idx.push(i),
            None => groups.push((d.clone(), vec![i])),
        }
    }
    let (mut items, mut out) = (Vec::new(), vec![None; roots.len()]);
    for (device_name, idx) in groups {
        let part: Vec<UOp> = idx.iter().map(|&i| roots[i].clone()).collect();
        let (its, outputs) = schedule_items(&part, &device_name, copies)?;
        items.extend(its);
        idx.into_iter().zip(outputs).for_each(|(i, u)| out[i] = Some(u));
    }
    run_items(items)?;
    Ok(out.into_iter().map(|u| u.expect("every root realized")).collect())
}

/// Schedules `roots` (on `device_name`; `copies`: their graph copies between devices) and compiles its kernels;
/// returns the items to run and the roots' buffer views. Under BEAM each kernel is searched on its real inputs and run
/// here (tinygrad passes the realized buffers to beam_search), so no items are left to run.
fn schedule_items(roots: &[UOp], device_name: &str, copies: bool) -> Result<(Vec<ExecItem>, Vec<UOp>)> {
    let t0 = Instant::now();
    let group = track::group(|| "Schedule".into());
    let sched = {
        let _p = profile::range("TINY", "schedule", || format!("schedule {} roots", roots.len()));
        let dev = device(device_name)?;
        // (a kernel of constants only, read by no other kernel, is on this device instance: the roots', else, when
        // copies join several devices, the default device, where Tensor::device says constants are)
        let consts = if copies { device(&crate::runtime::default_device())? } else { dev };
        create_schedule(roots, &crate::renderer::Renderer { device: consts.name, ..dev.rt.renderer() })
    };
    group.rename(|| format!("Schedule {} Kernel{}", sched.items.len(), if sched.items.len() == 1 { "" } else { "s" }));
    let viz_group = group.index();
    drop(group);
    if DEBUG.value() >= 1 && !sched.items.is_empty() {
        println!("scheduled {} kernels in {:.2} ms", sched.items.len(), t0.elapsed().as_secs_f64() * 1e3);
    }
    // each kernel runs on the device of the buffer it writes, which all the buffers it reads are on too
    for item in sched.items.iter().filter(|i| !matches!(i.ast.op, Ops::COPY | Ops::ALLREDUCE)) {
        let on = |b: &UOp| canonicalize_device(&info(b).device);
        if let Some(other) = item.bufs.iter().find(|b| on(b) != on(&item.bufs[0])) {
            let mut two = [on(&item.bufs[0]), on(other)];
            two.sort();
            panic!("realize: one kernel uses tensors on {} and on {}; move one with Tensor::to", two[0], two[1]);
        }
    }
    let devs = sched.items.iter().map(|i| device(&info(&i.bufs[0]).device)).collect::<Result<Vec<_>>>()?;
    let mut distinct: Vec<&'static Device> = devs.clone();
    distinct.sort_by_key(|d| d.name);
    distinct.dedup_by_key(|d| d.name);
    for dev in distinct {
        let asts: Vec<&UOp> = sched
            .items
            .iter()
            .zip(&devs)
            .filter(|(i, d)| d.name == dev.name && !matches!(i.ast.op, Ops::COPY | Ops::ALLREDUCE))
            .map(|(i, _)| &i.ast)
            .collect();
        compile_missing(dev, &asts)?;
    }
    // under BEAM each kernel is searched on its real inputs (tinygrad passes the realized buffers to beam_search): it
    // compiles once the kernels before it have run
    if beam_width() >= 1 {
        for (item, dev) in sched.items.into_iter().zip(devs) {
            let ei = match item.ast.op {
                Ops::COPY => ExecItem::copy(item.bufs[0].clone(), item.bufs[1].clone(), dev),
                Ops::ALLREDUCE => ExecItem::allreduce(item.bufs[0].clone(), item.bufs[1].clone(), dev),
                _ => ExecItem::new(runner(dev, &item.ast, Some(&item.bufs))?, item.bufs, dev, &sched.var_vals),
            };
            capture::record(&ei);
            track::call(viz_group, || (runner_name(&ei), ei.runner().and_then(|r| r.viz)));
            ei.run()?;
        }
        return Ok((Vec::new(), sched.outputs));
    }
    let items = sched
        .items
        .into_iter()
        .zip(devs)
        .map(|(item, dev)| {
            let ei = match item.ast.op {
                Ops::COPY => ExecItem::copy(item.bufs[0].clone(), item.bufs[1].clone(), dev),
                Ops::ALLREDUCE => ExecItem::allreduce(item.bufs[0].clone(), item.bufs[1].clone(), dev),
                _ => ExecItem::new(runner(dev, &item.ast, None)?, item.bufs, dev, &sched.var_vals),
            };
            capture::record(&ei);
            Ok(ei)
        })
        .collect::<Result<Vec<_>>>()?;
    for ei in &items {
        track::call(viz_group, || (runner_name(ei), ei.runner().and_then(|r| r.viz)));
    }
    Ok((items, sched.outputs))
}

/// Realizes lowered multi-device roots ([`crate::schedule::multi::lower`]): each shard of a MULTI root and every other
/// root, together; a MULTI root becomes the MULTI of its shards' buffer views.
fn realize_multi(roots: &[UOp]) -> Result<Vec<UOp>> {
    let flat: Vec<UOp> = roots.iter().flat_map(|r| if r.op == Ops::MULTI { r.src.to_vec() } else { vec![r.clone()] }).collect();
    let mut done = realize(&flat)?.into_iter();
    Ok(roots
        .iter()
        .map(|r| match r.op {
            Ops::MULTI => r.with_src(done.by_ref().take(r.src.len()).collect::<Vec<_>>()),
            _ => done.next().expect("one view per root"),
        })
        .collect())
}

/// What VIZ calls an item: its kernel's name, `copy` or `allreduce`.
fn runner_name(ei: &ExecItem) -> String {
    match &ei.work {
        Work::Kernel(r) => r.kernel.name.clone(),
        Work::Copy => "copy".into(),
        Work::AllReduce => "allreduce".into(),
    }
}

/// Launches `items` in order: items on several devices, or allreduces among them, on one queue per device at once
/// ([`queue::run_queues`]). A batch of CPU kernels runs with the cores' team held (see
/// [`crate::runtime::cpu::run_batch`]): each parallel kernel is split between this thread and the team's, which
/// spin between launches instead of sleeping and waking per kernel. Each item drops once it has run, so a buffer
/// no later kernel holds is freed at its last use.
fn run_items(items: Vec<ExecItem>) -> Result<()> {
    if queue::spans_queues(&items) {
        return queue::run_queues(items);
    }
    in_batch(batchable(&items), move || items.into_iter().try_for_each(|ei| ei.run().map(drop)))
}

/// Whether `items`, on one queue, run as one batch of the CPU's team: they all run on host threads and one of them
/// splits over the cores.
fn batchable(items: &[ExecItem]) -> bool {
    items.iter().all(|ei| ei.dev.rt.launcher() == runtime::Launcher::HostThreads)
        && items.iter().any(|ei| ei.runner().is_some_and(|r| crate::runtime::cpu::parallel_launch(&r.kernel)))
}

/// Runs `run` holding the CPU's team when `batch` ([`batchable`]).
fn in_batch<R>(batch: bool, run: impl FnOnce() -> R) -> R {
    if batch {
        crate::runtime::cpu::run_batch(run)
    } else {
        run()
    }
}
