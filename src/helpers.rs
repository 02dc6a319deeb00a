//! Settings and counters. In: the environment. Out: tinygrad's `ContextVar` knobs (integers read once,
//! overridable per scope and per thread with [`Context`]), `getenv` and checked readers for a program's own
//! settings, the `DEV`, `CC` and `EMULATE` strings, [`GlobalCounters`], `colored` and the cache directory. Imports
//! nothing of the crate but its error type. Follows tinygrad 0.14 `helpers.py`.

use std::cell::RefCell;
use std::cmp::Ordering;
use std::ffi::OsString;
use std::marker::PhantomData;
use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{LazyLock, OnceLock, PoisonError, RwLock};

use crate::error::{Error, Result};

// **************** environment ****************

/// Integer environment variable `key`, or `default` when unset, empty or not unicode (tinygrad `getenv(key, 0)`).
/// Panics when it is set to something that is not an integer, as tinygrad's `int(...)` raises: programs call
/// `runtime::check_env` (tinygrad's knobs) and [`getenv_int`] (their own) at start, so this is only reached by a bug.
pub fn getenv(key: &str, default: i64) -> i64 {
    match std::env::var(key) {
        Ok(v) if !v.trim().is_empty() => v
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("environment variable {key}={v:?} is not an integer (not checked by runtime::check_env at start)")),
        _ => default,
    }
}

/// String environment variable `key` (set but empty gives ""), or `default` when unset (tinygrad `getenv(key, "")`).
pub fn getenv_str(key: &str, default: &str) -> String {
    std::env::var(key).unwrap_or_else(|_| default.to_string())
}

/// Integer environment variable `key` in `lo..=hi`, or `default` when unset or empty: for a program's own settings
/// (`STEPS`, `BS`, ...), read once at start (tinygrad `getenv`, checked).
///
/// # Errors
/// [`Error::Env`] naming `key`, its value and the allowed range when it is not an integer in `lo..=hi`.
pub fn getenv_int(key: &str, default: i64, lo: i64, hi: i64) -> Result<i64> {
    let Ok(raw) = std::env::var(key) else { return Ok(default) };
    if raw.trim().is_empty() {
        return Ok(default);
    }
    match raw.trim().parse::<i64>() {
        Ok(v) if (lo..=hi).contains(&v) => Ok(v),
        _ => Err(env_err(key, &raw, range_text(lo, hi))),
    }
}

/// The path in environment variable `key` (else `default`), checked to be writable now: a file is created next
/// to it and removed again, so a bad output path fails before hours of work rather than after.
///
/// # Errors
/// [`Error::Env`] naming `key`, the path and why it cannot be written there.
pub fn getenv_output_path(key: &str, default: &str) -> Result<PathBuf> {
    let path = PathBuf::from(std::env::var(key).ok().filter(|v| !v.is_empty()).unwrap_or_else(|| default.to_string()));
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let probe = dir.join(format!(".tinygrad-write-probe-{}", std::process::id()));
    let created = std::fs::OpenOptions::new().write(true).create_new(true).open(&probe);
    match created {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(path)
        }
        Err(e) => {
            Err(env_err(key, &path.to_string_lossy(), format!("cannot write to {} ({e}); point it at a writable directory", dir.display())))
        }
    }
}

fn env_err(var: &str, value: &str, allowed: String) -> Error {
    Error::Env { var: var.to_string(), value: value.to_string(), allowed }
}

fn range_text(lo: i64, hi: i64) -> String {
    match (lo, hi) {
        (i64::MIN, i64::MAX) => "expected an integer".into(),
        (lo, i64::MAX) => format!("expected an integer >= {lo}"),
        (lo, hi) => format!("expected an integer from {lo} to {hi}"),
    }
}

/// Checks tinygrad's integer settings once, at program start, so a typo is one clear error instead of a panic
/// deep in a run: every [`ContextVar`] (`DEBUG`, `BEAM`, `NOOPT`, `JIT`, `CACHELEVEL`, ...) must be an integer in its
/// range. `runtime::check_env` checks these, then the devices and compilers they name.
///
/// # Errors
/// [`Error::Env`] naming the variable, its value and what is allowed.
pub fn check_settings() -> Result<()> {
    for &(var, lo, hi) in &CONTEXT_VARS {
        getenv_int(var.key, lo, lo, hi)?;
    }
    Ok(())
}

/// `CC`: the C compiler the CPU device runs (a program name or path), when set and not empty (else clang, cc or
/// gcc, the first that runs).
pub fn cc() -> Option<String> {
    std::env::var("CC").ok().filter(|cc| !cc.is_empty())
}

/// `CC_CHECK`: a second C compiler whose build of every CPU kernel is run and compared with `CC`'s.
pub fn cc_check() -> Option<String> {
    std::env::var("CC_CHECK").ok().filter(|cc| !cc.is_empty())
}

/// The x86-64 levels `CPU_TARGET` may name.
pub const CPU_TARGETS: [&str; 4] = ["x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4"];

/// `CPU_TARGET`: the x86-64 level CPU kernels are built for, in place of this machine's own features (one of
/// [`CPU_TARGETS`]; `x86-64-v3` is AVX2 and FMA, so an AVX-512 machine runs the AVX2 code path); "" when unset.
pub fn cpu_target() -> String {
    getenv_str("CPU_TARGET", "")
}

/// `EMULATE` (tinygrad's): the device whose codegen the interpreter emulates, upper-cased (`CUDA`); "" when unset.
pub fn emulate() -> String {
    getenv_str("EMULATE", "").to_uppercase()
}

// **************** ContextVar / Context ****************

enum Init {
    Const(i64),
    Lazy(fn() -> i64),
}

/// A named integer knob (tinygrad `ContextVar`): the environment variable `key` parsed with [`getenv`] on first
/// read (falling back to the default), then cached in a process-global atomic. [`Context`] overrides it for the
/// current thread. Compare directly against integers: `if DEBUG >= 2 { ... }`.
pub struct ContextVar {
    key: &'static str,
    init: Init,
    global: OnceLock<AtomicI64>,
}

impl ContextVar {
    /// A knob reading env var `key`, `default` when unset.
    pub const fn new(key: &'static str, default: i64) -> Self {
        ContextVar { key, init: Init::Const(default), global: OnceLock::new() }
    }

    /// A knob whose default is computed (once, on first read, only when `key` is unset) by `default`.
    pub const fn new_lazy(key: &'static str, default: fn() -> i64) -> Self {
        ContextVar { key, init: Init::Lazy(default), global: OnceLock::new() }
    }

    /// The environment variable name.
    pub fn key(&self) -> &'static str {
        self.key
    }

    /// The current value: this thread's innermost [`Context`] override, else the global value. When no `Context`
    /// is alive anywhere this is two relaxed atomic loads.
    pub fn value(&self) -> i64 {
        if LIVE_CONTEXTS.load(Relaxed) != 0 {
            let found = OVERRIDES.try_with(|o| {
                o.borrow().iter().rev().find_map(|(_, ov)| match ov {
                    Override::Int(var, v) if std::ptr::eq(*var, self) => Some(*v),
                    _ => None,
                })
            });
            if let Ok(Some(v)) = found {
                return v;
            }
        }
        self.global()
    }

    /// Sets the process-global value (all threads; not undone by [`Context`] guards), like tinygrad's `VAR.value = v`.
    pub fn set(&self, v: i64) {
        self.cell().store(v, Relaxed);
    }

    fn cell(&self) -> &AtomicI64 {
        self.global.get_or_init(|| {
            let default = match self.init {
                Init::Const(d) => d,
                Init::Lazy(f) => f(),
            };
            AtomicI64::new(getenv(self.key, default))
        })
    }

    fn global(&self) -> i64 {
        self.cell().load(Relaxed)
    }
}

impl PartialEq<i64> for ContextVar {
    fn eq(&self, other: &i64) -> bool {
        self.value() == *other
    }
}

impl PartialOrd<i64> for ContextVar {
    fn partial_cmp(&self, other: &i64) -> Option<Ordering> {
        Some(self.value().cmp(other))
    }
}

fn cpu_count() -> i64 {
    std::thread::available_parallelism().map_or(1, |n| n.get() as i64)
}

/// Debug printing level, 0-7: realizes, kernel timings, kernel opts, generated source, `UOp` graphs, ... Default 0.
pub static DEBUG: ContextVar = ContextVar::new("DEBUG", 0);
/// Beam width of the kernel-optimization search; 0 uses the hand-coded heuristics. Default 0.
pub static BEAM: ContextVar = ContextVar::new("BEAM", 0);
/// 1 disables kernel optimizations (no upcasts, locals or heuristics). Default 0.
pub static NOOPT: ContextVar = ContextVar::new("NOOPT", 0);
/// 0 makes `TinyJit` run the function eagerly every call instead of capturing and replaying kernels. Default 1.
pub static JIT: ContextVar = ContextVar::new("JIT", 1);
/// On-disk cache level (compiled kernels, BEAM results); 0 disables the cache. Default 2.
pub static CACHELEVEL: ContextVar = ContextVar::new("CACHELEVEL", 2);
/// 1 reruns BEAM search even when a cached result exists. Default 0.
pub static IGNORE_BEAM_CACHE: ContextVar = ContextVar::new("IGNORE_BEAM_CACHE", 0);
/// Training mode (dropout active), set by `Tensor.train`. Default 0.
pub static TRAINING: ContextVar = ContextVar::new("TRAINING", 0);
/// 1 checks `UOp` graphs against the spec ([`crate::uop::spec`]) after each scheduling and codegen pass, panicking
/// with the pass name on a malformed graph. Default 0 here (tinygrad 0.14 defaults to 1).
pub static SPEC: ContextVar = ContextVar::new("SPEC", 0);
/// Threads the CPU backend runs a kernel on. Default: `std::thread::available_parallelism()`.
pub static NUM_CPU_THREADS: ContextVar = ContextVar::new_lazy("NUM_CPU_THREADS", cpu_count);
/// Worker threads for BEAM search and compilation. Default [`NUM_CPU_THREADS`].
pub static PARALLEL: ContextVar = ContextVar::new_lazy("PARALLEL", || NUM_CPU_THREADS.global());
/// Pattern-matcher statistics: nonzero counts each rule's matches (`Rule::hits`); 2 also records every rewrite as
/// VIZ does. Default 0.
pub static TRACK_MATCH_STATS: ContextVar = ContextVar::new("TRACK_MATCH_STATS", 0);
/// The graph viewer (tinygrad `VIZ`): 1 records every graph rewrite, kernel and launch and, at exit, writes the trace
/// and serves the viewer on 127.0.0.1 when stdout is a terminal; -1 only writes the trace and prints its path; 0 off.
/// Default 0.
pub static VIZ: ContextVar = ContextVar::new("VIZ", 0);
/// 1 records the profiler's timeline (compiles, launches, copies, schedules, allocations; on with VIZ). Default 0.
pub static PROFILE: ContextVar = ContextVar::new("PROFILE", 0);
/// When the ONNX runner binds inputs' named dims (`batch`, `sequence`) as variables, so one TinyJit capture replays
/// every size up to a bucket: from the n-th distinct size run in a bucket on (1: always; 0: never, each size is its
/// own capture). Default 3: a model run at one or two sizes keeps captures at those sizes, whose kernels are about
/// twice as fast (no opt splits a symbolic axis); one run at many sizes compiles once more, not once per size.
pub static SYMBOLIC_DIMS: ContextVar = ContextVar::new("SYMBOLIC_DIMS", 3);
/// 1 splits a large reduction into two kernels. Default 1.
pub static SPLIT_REDUCEOP: ContextVar = ContextVar::new("SPLIT_REDUCEOP", 1);
/// 1 lets the hand-coded opts use tensor cores (the TC opt) where the target has them (tinygrad `TC`). Default 1.
pub static TC: ContextVar = ContextVar::new("TC", 1);
/// The allreduce of a sharded reduction (tinygrad `RING`): 0 naive (every device copies every shard), 1 ring
/// (reduce-scatter, then all-gather) for more than 2 devices and more than [`RING_ALLREDUCE_THRESHOLD`] elements,
/// 2 ring always. Default 1.
pub static RING: ContextVar = ContextVar::new("RING", 1);
/// The element count above which `RING=1` takes the ring (tinygrad's, found empirically). Default 256,000.
pub static RING_ALLREDUCE_THRESHOLD: ContextVar = ContextVar::new("RING_ALLREDUCE_THRESHOLD", 256_000);
/// 1 lets an LLM's passes (prefill and decode) multiply Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K and Q6_K weights by
/// int8-quantized activations with DP4A (llama.cpp's way, `nn::gguf::QuantMatrix`) on the CPU; 0 dequantizes them to
/// float32 in the kernels. Default 1.
pub static QUANT_DOT: ContextVar = ContextVar::new("QUANT_DOT", 1);
/// 1 stores an LLM's KV cache as float16 (llama.cpp's default `--cache-type-k/v f16`: half the bytes attention
/// reads), 0 as float32 (the numpy reference's). Read when a model loads. Default 1.
pub static HALF_KV: ContextVar = ContextVar::new("HALF_KV", 1);
/// 1 appends each CPU kernel's address and name to `/tmp/perf-<pid>.map` as the in-process linker loads it, so `perf
/// report` names the kernels of any run (perf's convention for JIT code). Default 0.
pub static PERF_MAP: ContextVar = ContextVar::new("PERF_MAP", 0);

/// Every [`ContextVar`] above with the values it accepts, for [`check_settings`].
static CONTEXT_VARS: [(&ContextVar, i64, i64); 20] = [
    (&DEBUG, 0, 7),
    (&BEAM, 0, 1024),
    (&NOOPT, 0, 1),
    (&JIT, 0, 1),
    (&CACHELEVEL, 0, 2),
    (&IGNORE_BEAM_CACHE, 0, 1),
    (&TRAINING, 0, 1),
    (&SPEC, 0, 1),
    (&NUM_CPU_THREADS, 1, 4096),
    (&PARALLEL, 0, 4096),
    (&TRACK_MATCH_STATS, 0, 2),
    (&SPLIT_REDUCEOP, 0, 1),
    (&TC, 0, 1),
    (&VIZ, -1, 1),
    (&PROFILE, 0, 1),
    (&RING, 0, 2),
    (&RING_ALLREDUCE_THRESHOLD, 0, i64::MAX),
    (&QUANT_DOT, 0, 1),
    (&HALF_KV, 0, 1),
    (&PERF_MAP, 0, 1),
];

static DEV_GLOBAL: LazyLock<RwLock<String>> = LazyLock::new(|| RwLock::new(getenv_str("DEV", "")));

/// The `DEV` device string (tinygrad `DEV`, e.g. "CPU", "PYTHON"; "" means the default, CPU): this thread's
/// innermost [`Context::dev`] override, else the environment value read on first use.
pub fn dev() -> String {
    if LIVE_CONTEXTS.load(Relaxed) != 0 {
        let found = OVERRIDES.try_with(|o| {
            o.borrow().iter().rev().find_map(|(_, ov)| match ov {
                Override::Dev(d) => Some(d.clone()),
                Override::Int(..) => None,
            })
        });
        if let Ok(Some(d)) = found {
            return d;
        }
    }
    DEV_GLOBAL.read().unwrap_or_else(PoisonError::into_inner).clone()
}

/// Sets the process-global `DEV` string (all threads; not undone by [`Context`] guards).
pub fn set_dev(dev: &str) {
    *DEV_GLOBAL.write().unwrap_or_else(PoisonError::into_inner) = dev.to_string();
}

enum Override {
    Int(&'static ContextVar, i64),
    Dev(String),
}

thread_local! {
    /// This thread's overrides, tagged with the id of the guard that set them; the last match wins.
    static OVERRIDES: RefCell<Vec<(u64, Override)>> = const { RefCell::new(Vec::new()) };
}
/// Guards alive in any thread: while 0, reads skip the thread-local lookup.
static LIVE_CONTEXTS: AtomicUsize = AtomicUsize::new(0);
static NEXT_CONTEXT_ID: AtomicU64 = AtomicU64::new(0);

/// Scoped override of [`ContextVar`]s and `DEV` (tinygrad `with Context(DEBUG=2): ...`), undone when dropped.
///
/// Unlike tinygrad's (process-global) `Context`, overrides are **thread-local**: parallel tests may each override
/// the same knob without seeing one another, and other threads keep reading the global value. Threads spawned
/// inside a `Context` therefore do not inherit it; enter a `Context` in the worker if it needs one. Guards nest,
/// and each drop removes exactly its own overrides, whatever the order. The guard cannot leave its thread.
///
/// ```ignore
/// let _g = Context::new(&[(&DEBUG, 2), (&NOOPT, 1)]).dev("PYTHON");
/// let n = Context::with(&[(&BEAM, 2)], || BEAM.value());
/// ```
#[must_use = "the overrides end when the guard is dropped"]
pub struct Context {
    id: u64,
    _thread_bound: PhantomData<*const ()>,
}

impl Context {
    /// Overrides each `(var, value)` on this thread until the guard drops.
    pub fn new(vars: &[(&'static ContextVar, i64)]) -> Self {
        let id = NEXT_CONTEXT_ID.fetch_add(1, Relaxed);
        LIVE_CONTEXTS.fetch_add(1, Relaxed);
        OVERRIDES.with_borrow_mut(|o| o.extend(vars.iter().map(|&(var, v)| (id, Override::Int(var, v)))));
        Context { id, _thread_bound: PhantomData }
    }

    /// Also overrides [`dev()`] with `dev` for the life of this guard.
    pub fn dev(self, dev: &str) -> Self {
        OVERRIDES.with_borrow_mut(|o| o.push((self.id, Override::Dev(dev.to_string()))));
        self
    }

    /// Runs `f` with the overrides in place (tinygrad's `Context` as a decorator).
    pub fn with<R>(vars: &[(&'static ContextVar, i64)], f: impl FnOnce() -> R) -> R {
        let _guard = Context::new(vars);
        f()
    }
}

/// The overrides in force on one thread ([`Context::snapshot`]), to enter on another (a worker thread compiling
/// for a caller that set `NOOPT` or `BEAM` in a `Context`).
#[derive(Clone, Default)]
pub struct ContextSnapshot {
    vars: Vec<(&'static ContextVar, i64)>,
    dev: Option<String>,
}

impl ContextSnapshot {
    /// Applies the snapshot's overrides on this thread until the guard drops.
    pub fn enter(&self) -> Context {
        let g = Context::new(&self.vars);
        match &self.dev {
            Some(d) => g.dev(d),
            None => g,
        }
    }
}

impl Context {
    /// This thread's overrides, in the order they were set.
    pub fn snapshot() -> ContextSnapshot {
        OVERRIDES.with_borrow(|o| {
            let mut snap = ContextSnapshot::default();
            for (_, ov) in o {
                match ov {
                    Override::Int(var, v) => snap.vars.push((*var, *v)),
                    Override::Dev(d) => snap.dev = Some(d.clone()),
                }
            }
            snap
        })
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // try_with: the thread-local may already be gone when a guard is dropped during thread teardown
        let _ = OVERRIDES.try_with(|o| o.borrow_mut().retain(|(id, _)| *id != self.id));
        LIVE_CONTEXTS.fetch_sub(1, Relaxed);
    }
}

// **************** counters and timing ****************

/// Statistics of executed kernels (tinygrad `GlobalCounters`); the process-wide instance is [`GLOBAL_COUNTERS`].
/// Counters are shared by all threads, so tests asserting exact global counts must not run concurrently with
/// other kernel-running tests; the same methods on a local `GlobalCounters::new()` are always exact.
#[derive(Debug, Default)]
pub struct GlobalCounters {
    kernel_count: AtomicU64,
    global_ops: AtomicU64,
    global_mem: AtomicU64,
    time_sum_ns: AtomicU64,
    mem_used: AtomicI64,
}

/// The process-wide kernel counters.
pub static GLOBAL_COUNTERS: GlobalCounters = GlobalCounters::new();

impl GlobalCounters {
    /// All counters at zero.
    pub const fn new() -> Self {
        GlobalCounters {
            kernel_count: AtomicU64::new(0),
            global_ops: AtomicU64::new(0),
            global_mem: AtomicU64::new(0),
            time_sum_ns: AtomicU64::new(0),
            mem_used: AtomicI64::new(0),
        }
    }

    /// Zeroes the kernel statistics; [`mem_used`](Self::mem_used) is kept, as in tinygrad.
    pub fn reset(&self) {
        for c in [&self.kernel_count, &self.global_ops, &self.global_mem, &self.time_sum_ns] {
            c.store(0, Relaxed);
        }
    }

    /// Records one kernel run: its estimated FLOPs, bytes moved, and measured time (0 when not timed).
    pub fn add_kernel(&self, ops: u64, mem: u64, time_ns: u64) {
        self.kernel_count.fetch_add(1, Relaxed);
        self.global_ops.fetch_add(ops, Relaxed);
        self.global_mem.fetch_add(mem, Relaxed);
        self.time_sum_ns.fetch_add(time_ns, Relaxed);
    }

    /// Records `n` kernel runs, untimed, of `ops` FLOPs and `mem` bytes moved in all (a TinyJit replay's).
    pub fn add_kernels(&self, n: u64, ops: u64, mem: u64) {
        self.kernel_count.fetch_add(n, Relaxed);
        self.global_ops.fetch_add(ops, Relaxed);
        self.global_mem.fetch_add(mem, Relaxed);
    }

    /// Adds `delta` bytes (negative on free) to the allocated device memory.
    pub fn add_mem_used(&self, delta: i64) {
        self.mem_used.fetch_add(delta, Relaxed);
    }

    /// Kernels run since the last reset.
    pub fn kernel_count(&self) -> u64 {
        self.kernel_count.load(Relaxed)
    }

    /// Estimated FLOPs since the last reset.
    pub fn global_ops(&self) -> u64 {
        self.global_ops.load(Relaxed)
    }

    /// Estimated bytes read and written since the last reset.
    pub fn global_mem(&self) -> u64 {
        self.global_mem.load(Relaxed)
    }

    /// Measured kernel time since the last reset, in nanoseconds (tinygrad keeps seconds in `time_sum_s`).
    pub fn time_sum_ns(&self) -> u64 {
        self.time_sum_ns.load(Relaxed)
    }

    /// Bytes of device memory currently allocated (never reset).
    pub fn mem_used(&self) -> i64 {
        self.mem_used.load(Relaxed)
    }
}

// **************** numbers and lists ****************

/// `a / b` rounded toward +infinity, for any signs (tinygrad `ceildiv`, i.e. `-(a // -b)`).
pub fn ceildiv(a: i64, b: i64) -> i64 {
    let (q, r) = (a / b, a % b);
    if r != 0 && (r > 0) == (b > 0) {
        q + 1
    } else {
        q
    }
}

// **************** strings and paths ****************

/// Whether the `NO_COLOR` environment variable is set to something other than "" or "0" (read once).
static NO_COLOR: LazyLock<bool> = LazyLock::new(|| std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty() && v != "0"));

/// `text` in ANSI color `color` (black, red, green, yellow, blue, magenta, cyan, white; UPPERCASE for the bright
/// variant), or unchanged when `NO_COLOR` is set (tinygrad `colored`). Panics on an unknown color name.
pub fn colored(text: &str, color: &str) -> String {
    const COLORS: [&str; 8] = ["black", "red", "green", "yellow", "blue", "magenta", "cyan", "white"];
    if *NO_COLOR {
        return text.to_string();
    }
    let idx = COLORS.iter().position(|c| c.eq_ignore_ascii_case(color)).unwrap_or_else(|| panic!("unknown color {color:?}"));
    let bright = color.to_ascii_uppercase() == color;
    format!("\x1b[{}m{text}\x1b[0m", 30 + 60 * usize::from(bright) + idx)
}

/// The per-user cache directory (tinygrad `cache_dir`): `$XDG_CACHE_HOME/tinygrad`, else `~/.cache/tinygrad`
/// (`~/Library/Caches/tinygrad` on macOS).
pub fn cache_dir() -> PathBuf {
    cache_dir_in(std::env::var_os("XDG_CACHE_HOME"), std::env::var_os("HOME"))
}

fn cache_dir_in(xdg_cache_home: Option<OsString>, home: Option<OsString>) -> PathBuf {
    let default_base =
        || home.map_or_else(std::env::temp_dir, PathBuf::from).join(if cfg!(target_os = "macos") { "Library/Caches" } else { ".cache" });
    let base = xdg_cache_home.filter(|v| !v.is_empty()).map_or_else(default_base, PathBuf::from);
    base.join("tinygrad")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn getenv_reads_ints_and_strings() {
        let key = "TG_HELPERS_TEST_GETENV";
        assert_eq!(getenv(key, 7), 7);
        assert_eq!(getenv_str(key, "dflt"), "dflt");
        std::env::set_var(key, " -42 ");
        assert_eq!(getenv(key, 7), -42);
        assert_eq!(getenv_str(key, "dflt"), " -42 ");
        std::env::set_var(key, "");
        assert_eq!(getenv(key, 7), 7);
        assert_eq!(getenv_str(key, "dflt"), "");
    }

    #[test]
    fn checked_getenv_names_the_variable_and_what_is_allowed() {
        let key = "TG_HELPERS_TEST_CHECKED";
        assert_eq!(getenv_int(key, 70, 1, i64::MAX).unwrap(), 70);
        std::env::set_var(key, " 12 ");
        assert_eq!(getenv_int(key, 70, 1, i64::MAX).unwrap(), 12);
        for (bad, lo, hi, want) in [("abc", 1, i64::MAX, "expected an integer >= 1"), ("-3", 0, 7, "expected an integer from 0 to 7")] {
            std::env::set_var(key, bad);
            let msg = getenv_int(key, 0, lo, hi).unwrap_err().to_string();
            assert_eq!(msg, format!("environment variable {key}={bad:?}: {want}"));
        }
    }

    #[test]
    fn output_path_is_probed_for_writing() {
        let key = "TG_HELPERS_TEST_OUT";
        let dir = std::env::temp_dir();
        std::env::set_var(key, dir.join("w.safetensors"));
        assert_eq!(getenv_output_path(key, "x").unwrap(), dir.join("w.safetensors"));
        assert!(!dir.join(format!(".tinygrad-write-probe-{}", std::process::id())).exists(), "probe removed");
        std::env::set_var(key, "/nonexistent/dir/w.safetensors");
        let msg = getenv_output_path(key, "x").unwrap_err().to_string();
        assert!(msg.starts_with(&format!("environment variable {key}=")) && msg.contains("cannot write to /nonexistent/dir"), "{msg}");
    }

    #[test]
    #[should_panic(expected = "not an integer")]
    fn getenv_rejects_garbage() {
        std::env::set_var("TG_HELPERS_TEST_GARBAGE", "two");
        getenv("TG_HELPERS_TEST_GARBAGE", 0);
    }

    #[test]
    fn context_var_reads_env_once_then_set_and_override() {
        static V: ContextVar = ContextVar::new("TG_HELPERS_TEST_ONCE", 5);
        std::env::set_var("TG_HELPERS_TEST_ONCE", "9");
        assert_eq!(V.value(), 9);
        std::env::set_var("TG_HELPERS_TEST_ONCE", "10");
        assert_eq!(V.value(), 9, "cached after the first read");
        V.set(11);
        assert_eq!(V.value(), 11);
        {
            let _g = Context::new(&[(&V, 12)]);
            assert_eq!(V.value(), 12);
        }
        assert_eq!(V.value(), 11);
        assert_eq!(V.key(), "TG_HELPERS_TEST_ONCE");
    }

    #[test]
    fn context_var_defaults() {
        static C: ContextVar = ContextVar::new("TG_HELPERS_TEST_UNSET_CONST", 32);
        static L: ContextVar = ContextVar::new_lazy("TG_HELPERS_TEST_UNSET_LAZY", || 40 + 2);
        assert_eq!((C.value(), L.value()), (32, 42));
        assert!(cpu_count() >= 1);
    }

    #[test]
    fn context_overrides_nest_and_restore() {
        let (debug, noopt) = (DEBUG.value(), NOOPT.value());
        {
            let _outer = Context::new(&[(&DEBUG, debug + 2), (&NOOPT, 1)]);
            assert_eq!((DEBUG.value(), NOOPT.value()), (debug + 2, 1));
            {
                let _inner = Context::new(&[(&DEBUG, 7)]);
                assert_eq!((DEBUG.value(), NOOPT.value()), (7, 1));
            }
            assert_eq!((DEBUG.value(), NOOPT.value()), (debug + 2, 1));
        }
        assert_eq!((DEBUG.value(), NOOPT.value()), (debug, noopt));
    }

    #[test]
    fn context_drop_out_of_order_removes_only_own_overrides() {
        static V: ContextVar = ContextVar::new("TG_HELPERS_TEST_ORDER", 0);
        let outer = Context::new(&[(&V, 1)]);
        let inner = Context::new(&[(&V, 2)]);
        drop(outer);
        assert_eq!(V.value(), 2);
        drop(inner);
        assert_eq!(V.value(), 0);
    }

    #[test]
    fn context_closure_form_and_comparisons() {
        let beam = BEAM.value();
        assert_eq!(Context::with(&[(&BEAM, beam + 3)], || BEAM.value()), beam + 3);
        assert_eq!(BEAM.value(), beam);
        Context::with(&[(&DEBUG, 3)], || {
            assert!(DEBUG >= 3);
            assert!(DEBUG > 2);
            assert!(DEBUG < 4);
            assert!(DEBUG == 3);
            assert!(DEBUG != 2);
        });
    }

    #[test]
    fn context_overrides_are_thread_local() {
        static V: ContextVar = ContextVar::new("TG_HELPERS_TEST_THREAD", 4);
        let _g = Context::new(&[(&V, 8)]).dev("TESTDEV");
        assert_eq!((V.value(), dev()), (8, "TESTDEV".to_string()));
        let (v, d) = std::thread::spawn(|| (V.value(), dev())).join().unwrap();
        assert_eq!(v, 4);
        assert_ne!(d, "TESTDEV");
        // a worker that enters the snapshot sees the overrides, until its guard drops
        let snap = Context::snapshot();
        let seen = std::thread::spawn(move || {
            let inside = {
                let _w = snap.enter();
                (V.value(), dev())
            };
            (inside, V.value())
        });
        assert_eq!(seen.join().unwrap(), ((8, "TESTDEV".to_string()), 4));
    }

    #[test]
    fn dev_override_nests() {
        let base = dev();
        {
            let _a = Context::new(&[]).dev("PYTHON");
            assert_eq!(dev(), "PYTHON");
            {
                let _b = Context::new(&[(&NOOPT, 1)]).dev("CPU");
                assert_eq!(dev(), "CPU");
            }
            assert_eq!(dev(), "PYTHON");
        }
        assert_eq!(dev(), base);
    }

    #[test]
    fn counters_accumulate_and_reset() {
        let c = GlobalCounters::new();
        c.add_kernel(100, 64, 1_000);
        c.add_kernel(50, 32, 0);
        c.add_mem_used(4096);
        c.add_mem_used(-1024);
        assert_eq!((c.kernel_count(), c.global_ops(), c.global_mem(), c.time_sum_ns(), c.mem_used()), (2, 150, 96, 1_000, 3072));
        c.reset();
        assert_eq!((c.kernel_count(), c.global_ops(), c.global_mem(), c.time_sum_ns(), c.mem_used()), (0, 0, 0, 0, 3072));
    }

    #[test]
    fn ceildiv_rounds_up() {
        let cases = [((7, 2), 4), ((-7, 2), -3), ((7, -2), -3), ((-7, -2), 4), ((8, 2), 4), ((0, 5), 0), ((1, 1), 1)];
        for ((a, b), want) in cases {
            assert_eq!(ceildiv(a, b), want, "ceildiv({a}, {b})");
        }
    }

    #[test]
    fn colored_wraps_in_ansi_codes() {
        if !*NO_COLOR {
            assert_eq!(colored("hi", "red"), "\x1b[31mhi\x1b[0m");
            assert_eq!(colored("hi", "GREEN"), "\x1b[92mhi\x1b[0m");
        }
    }

    #[test]
    fn cache_dir_prefers_xdg() {
        assert_eq!(cache_dir_in(Some("/x/cache".into()), Some("/home/u".into())), PathBuf::from("/x/cache/tinygrad"));
        let home = if cfg!(target_os = "macos") { "/home/u/Library/Caches/tinygrad" } else { "/home/u/.cache/tinygrad" };
        assert_eq!(cache_dir_in(Some("".into()), Some("/home/u".into())), PathBuf::from(home));
        assert_eq!(cache_dir_in(None, Some("/home/u".into())), PathBuf::from(home));
        assert!(cache_dir().ends_with("tinygrad"));
    }
}
