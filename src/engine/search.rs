//! BEAM search on a device (the device half of tinygrad `beam_search`: `_try_compile` and `_time_program`). In: a
//! kernel AST. Out: its opts, from the disk cache or from [`crate::codegen::opt::search::beam_search`], whose
//! candidates are compiled here by the device's compiler (many to a compiler run) and timed on scratch buffers of the
//! kernel's sizes, holding copies of the kernel's real inputs where the engine has them (zeros otherwise). Candidates
//! run in-process: none can fault (an integer division is defined for every input, see `renderer::cstyle`'s
//! `division_guard`; indexing is bounds-checked by construction), and a slow one runs once (`EARLY_STOP`).

use crate::codegen::opt::{heuristic::hand_coded_optimizations, search as opt};
use crate::codegen::{full_rewrite, kernel, Kernel, Opt, OptOps};
use crate::error::Result;
use crate::helpers::NUM_CPU_THREADS;
use crate::renderer::{cstyle, Renderer};
use crate::runtime::cpu::{self, parallel_launch};
use crate::runtime::{Allocator, ClangCompiler, Compiler, CpuProgram, Launcher};
use crate::uop::{Arg, AxisType, Ops, UOp};
use parking_lot::Mutex;
use rustc_hash::FxHashSet;

/// Candidates with more UOps than this are not compiled (tinygrad `BEAM_UOPS_MAX`).
const UOPS_MAX: usize = 3000;
/// The work (operations, or 4-byte words moved when more) a timing run aims at: a candidate runs only enough
/// iterations of its outermost loop for this much, and its time is scaled up to the whole kernel (tinygrad runs a
/// smaller global size on GPUs).
const SAMPLE_WORK: f64 = (1u64 << 25) as f64;

/// A compiled candidate, ready to time on a sample of its work.
struct Candidate {
    program: CpuProgram,
    /// Iterations of the program's THREAD axis (at least 1): the sample is some of them.
    outer: usize,
    /// Cores the real kernel runs on: 1 unless its launch is parallel.
    cores: usize,
    /// Operations, or 4-byte words moved when more, of a whole run.
    work: f64,
}

/// The name candidate sources are rendered with (their programs in a batch are renamed `c0`, `c1`, ...).
const NAME: &str = "beam_candidate";

/// Candidate `c` of kernel `ast` rendered for timing (as function [`NAME`]), with [`Candidate`]'s `outer`, `cores`
/// and `work`; `None` when it fails or is too big. A kernel without a THREAD axis is rendered with its outermost loop as one (which only
/// makes that loop's bounds the launch's), so that it too can run a sample of its iterations.
fn render_candidate(ast: &UOp, c: &Kernel, cores: usize) -> Option<(String, usize, usize, f64)> {
    let threaded = c.axis_types().contains(&AxisType::Thread);
    let mut t = c.clone();
    if !threaded {
        t.ren.threads = t.ren.threads.max(2);
        if let Some(a) = t.axis_types().iter().position(|&x| x == AxisType::Loop) {
            let _ = t.apply_opt(Opt::new(OptOps::Thread, a, 0));
        }
    }
    let mut lk = full_rewrite(ast, &t.ren, Some(&t.applied_opts)).ok()?;
    if lk.uops.len() > UOPS_MAX {
        return None;
    }
    lk.name = NAME.to_string();
    let cores = if threaded && parallel_launch(&lk) { cores } else { 1 };
    Some((cstyle::render(&lk), lk.outer.max(1), cores, lk.ops.max(lk.mem / 4) as f64))
}

/// One C file defining `srcs[i]` as `c{i}` (a kernel's includes and helpers are guarded, so they repeat safely).
fn combine(srcs: &[&String]) -> String {
    srcs.iter().enumerate().map(|(i, src)| src.replacen(&format!("void {NAME}("), &format!("void c{i}("), 1)).collect()
}

/// Compiles a batch of candidates of kernel `ast` for timing, with one compiler run (or one each, when that fails);
/// `None` for a candidate that fails, is too big, or renders to a program already in `seen` (with its cores).
fn compile_batch(
    cc: &ClangCompiler,
    ast: &UOp,
    batch: &[Kernel],
    seen: &Mutex<FxHashSet<(String, usize)>>,
    cores: usize,
) -> Vec<Option<Candidate>> {
    // (a kernel timed on one core and the same program on all are different candidates)
    let rendered: Vec<_> =
        batch.iter().map(|c| render_candidate(ast, c, cores).filter(|(src, _, n, _)| seen.lock().insert((src.clone(), *n)))).collect();
    let todo: Vec<(usize, &String)> = rendered.iter().enumerate().filter_map(|(i, r)| r.as_ref().map(|r| (i, &r.0))).collect();
    let load = |srcs: &[&String]| -> Option<Vec<CpuProgram>> {
        let object = cc.compile("beam", &combine(srcs)).ok()?.object;
        let names: Vec<String> = (0..srcs.len()).map(|i| format!("c{i}")).collect();
        CpuProgram::load_all(&object, &names.iter().map(String::as_str).collect::<Vec<_>>()).ok()
    };
    let srcs: Vec<&String> = todo.iter().map(|t| t.1).collect();
    let together = if srcs.is_empty() { Some(vec![]) } else { load(&srcs) };
    let programs: Vec<Option<CpuProgram>> = match together {
        Some(ps) => ps.into_iter().map(Some).collect(),
        None => srcs.iter().map(|s| load(&[s]).and_then(|mut p| p.pop())).collect(),
    };
    let mut out: Vec<Option<Candidate>> = batch.iter().map(|_| None).collect();
    for ((i, _), program) in todo.into_iter().zip(programs) {
        let (_, outer, cores, work) = rendered[i].as_ref().expect("rendered");
        out[i] = program.map(|program| Candidate { program, outer: *outer, cores: *cores, work: *work });
    }
    out
}

/// BEAM's opts for kernel `ast` (a [`crate::schedule::ScheduleItem`]'s) on the CPU with beam width `amt`: the
/// disk cache's entry, else a search (then cached). See [`opt::beam_search`] for the search and
/// [`opt::beam_searches`] for the count of searches run.
///
/// # Errors
/// [`crate::error::Error::NoCompiler`] without a C compiler; device errors allocating the scratch buffers.
pub fn beam_search(ast: &UOp, amt: usize) -> Result<Vec<Opt>> {
    beam_opts(&Renderer::cpu(), ast, amt, None)
}

/// BEAM's opts for kernel `ast` on `dev`: [`beam_search`]'s on the CPU; the hand-coded opts on the interpreter
/// (its timings say nothing); otherwise a search whose candidates are compiled by the device's compiler (batches in
/// parallel, one kernel a compile) and timed by launches on scratch buffers of the device (tinygrad's
/// `_time_program`), over the device's actions (LOCAL and GROUP among them), cached on disk as the CPU's.
pub(super) fn beam_opts_on(dev: &super::Device, ast: &UOp, amt: usize, inputs: Option<&[UOp]>) -> Result<Vec<Opt>> {
    let ren = dev.rt.renderer();
    match dev.rt.launcher() {
        Launcher::HostThreads => return beam_opts(&ren, ast, amt, inputs),
        Launcher::Interpreted => return Ok(hand_coded_optimizations(&kernel(ast, &ren))),
        Launcher::Grid => {}
    }
    let k = kernel(ast, &ren);
    if let Some(opts) = opt::beam_cache_get(&k, amt) {
        return Ok(opts);
    }
    let topo = k.ast.toposort();
    if topo.iter().any(|u| u.op == Ops::DEFINE_VAR) {
        return Ok(hand_coded_optimizations(&k));
    }
    let alloc = dev.rt.allocator();
    let bufs = scratch(alloc, &topo, inputs)?;
    let ptrs: Vec<*mut u8> = bufs.iter().map(|b| b.as_ptr()).collect();
    let compile = |batch: &[Kernel]| -> Vec<Option<Launchable>> {
        batch
            .iter()
            .map(|c| {
                let lk = full_rewrite(ast, &c.ren, Some(&c.applied_opts)).ok().filter(|lk| lk.uops.len() <= UOPS_MAX)?;
                let object = dev.rt.compiler().ok()?.compile(&lk.name, &ren.render(&lk)).ok()?;
                Some((dev.rt.load(&lk, &object).ok()?, lk.global_size, lk.local_size))
            })
            .collect()
    };
    let time =
        |(p, g, l): &(Box<dyn crate::runtime::Program>, [usize; 3], [usize; 3])| p.launch(&ptrs, &[], *g, *l).ok().map(|t| t.as_secs_f64());
    let opts = opt::beam_search(&k, amt, compile, time);
    bufs.into_iter().for_each(|b| alloc.free(b));
    opt::beam_cache_put(&k, amt, &opts);
    Ok(opts)
}

/// A compiled candidate and its launch's global and local sizes.
type Launchable = (Box<dyn crate::runtime::Program>, [usize; 3], [usize; 3]);

/// A scratch buffer from `alloc` for each argument slot of a kernel whose graph is `topo`, of the size the kernel
/// indexes, holding a copy of the start of `inputs[slot]` (the kernel's BUFFER there) where given, zeros past it or
/// without (read only here, after a cache miss: a search is the only reader).
fn scratch(alloc: &dyn Allocator, topo: &[UOp], inputs: Option<&[UOp]>) -> Result<Vec<crate::runtime::RawBuffer>> {
    let mut bufs = Vec::new();
    for (slot, size) in scratch_sizes(topo).into_iter().enumerate() {
        let mut bytes = vec![0; size];
        if let Some(data) = inputs.and_then(|i| i.get(slot)).map(super::copyout).transpose()? {
            let n = size.min(data.len());
            bytes[..n].copy_from_slice(&data[..n]);
        }
        let b = alloc.alloc(size)?;
        alloc.copyin(&b, &bytes)?;
        bufs.push(b);
    }
    Ok(bufs)
}

/// The byte size of each argument slot of a kernel whose graph is `topo` (0 for a slot it does not use).
fn scratch_sizes(topo: &[UOp]) -> Vec<usize> {
    let globals: Vec<(usize, usize)> = topo
        .iter()
        .filter(|u| u.op == Ops::DEFINE_GLOBAL)
        .map(|g| match g.arg {
            Arg::Int(slot) => (slot as usize, g.dtype.size.max(0) as usize * g.dtype.base().itemsize()),
            ref a => panic!("DEFINE_GLOBAL without a slot: {a:?}"),
        })
        .collect();
    let slots = globals.iter().map(|g| g.0 + 1).max().unwrap_or(0);
    (0..slots).map(|slot| globals.iter().find(|g| g.0 == slot).map_or(0, |g| g.1)).collect()
}

/// [`beam_search`] for a kernel rendered by `ren`: scratch buffers of each DEFINE_GLOBAL's size (zeros) from the
/// CPU's allocator; a candidate's time is one launch on a sample of its outermost loop (on all cores when the real
/// launch would be parallel), scaled to the whole kernel. A kernel with symbolic variables gets the hand-coded opts.
pub(super) fn beam_opts(ren: &Renderer, ast: &UOp, amt: usize, inputs: Option<&[UOp]>) -> Result<Vec<Opt>> {
    let k = kernel(ast, ren);
    if let Some(opts) = opt::beam_cache_get(&k, amt) {
        return Ok(opts);
    }
    let topo = k.ast.toposort();
    if topo.iter().any(|u| u.op == Ops::DEFINE_VAR) {
        return Ok(hand_coded_optimizations(&k));
    }
    let dev = cpu::device();
    let cc = dev.cc()?;
    let cores = usize::try_from(NUM_CPU_THREADS.value()).unwrap_or(1).max(1);
    let bufs = scratch(&dev.allocator, &topo, inputs)?;
    let ptrs: Vec<*mut u8> = bufs.iter().map(|b| b.as_ptr()).collect();
    let seen = Mutex::new(FxHashSet::default());
    let time = |c: &Candidate| {
        let n = ((SAMPLE_WORK * c.outer as f64 / c.work).ceil() as usize).clamp(c.cores.min(c.outer), c.outer);
        let st = std::time::Instant::now();
        c.program.run(&ptrs, &[], n, c.cores > 1);
        let tm = st.elapsed().as_secs_f64();
        Some(tm * c.outer.div_ceil(c.cores) as f64 / n.div_ceil(c.cores) as f64)
    };
    let opts = opt::beam_search(&k, amt, |b| compile_batch(cc, ast, b, &seen, cores), time);
    bufs.into_iter().for_each(|b| dev.allocator.free(b));
    opt::beam_cache_put(&k, amt, &opts);
    Ok(opts)
}
