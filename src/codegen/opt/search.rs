//! BEAM search (tinygrad `codegen/opt/search.py`). In: a [`Kernel`] with no opts, and two closures from the engine:
//! one compiles a candidate kernel, one times a compiled candidate on the device. Out: the opts of the fastest
//! kernel found ([`beam_search`]), kept on disk between runs ([`beam_cache_get`], [`beam_cache_put`]). The space:
//! the kernels one more legal opt away ([`get_kernel_actions`]), from a fixed list of candidate opts
//! ([`actions`]); the random opts test draws from the same list.

use super::{heuristic::hand_coded_optimizations, Kernel, Opt, OptOps};
use crate::helpers::{cache_dir, ContextVar, CACHELEVEL, DEBUG, IGNORE_BEAM_CACHE, PARALLEL};
use rayon::prelude::*;
use rustc_hash::FxHashSet;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::LazyLock;
use std::time::Instant;

/// Every opt BEAM may try, in a fixed order (tinygrad `actions`, with THREAD amounts for CPUs).
pub fn actions() -> &'static [Opt] {
    static ACTIONS: LazyLock<Vec<Opt>> = LazyLock::new(|| {
        // (tensor cores: reduce axis, then which of the renderer's cores; legal only as the first opt)
        let mut a: Vec<Opt> = (0..2).flat_map(|axis| (0..2).map(move |tc| Opt::new(OptOps::Tc, axis, tc))).collect();
        for axis in 0..8 {
            a.extend([0, 2, 3, 4, 5, 6, 7, 8, 16].map(|amt| Opt::new(OptOps::Upcast, axis, amt)));
        }
        for axis in 0..5 {
            a.extend([0, 2, 4, 7, 8, 16].map(|amt| Opt::new(OptOps::Unroll, axis, amt)));
        }
        for axis in 0..6 {
            a.extend([2, 3, 4, 8, 13, 16, 29].map(|amt| Opt::new(OptOps::Local, axis, amt)));
            a.extend([0, 2, 4, 8, 16, 32, 64].map(|amt| Opt::new(OptOps::Thread, axis, amt)));
            a.extend([16, 32].map(|amt| Opt::new(OptOps::Padto, axis, amt)));
        }
        for axis in 0..3 {
            a.extend([0, 4, 8, 16].map(|amt| Opt::new(OptOps::GroupTop, axis, amt)));
        }
        for axis in 0..5 {
            a.extend((axis + 1..5).map(|other| Opt::new(OptOps::Swap, axis, other)));
        }
        a.push(Opt { op: OptOps::NoLocals, axis: None, arg: 0 });
        a
    });
    &ACTIONS
}

/// The kernels `k` becomes with one more legal action applied, each with the action (tinygrad
/// `get_kernel_actions`); an action that only repeats what the axis already is (a whole-axis UPCAST of an
/// axis of 1) never appears, since `apply_opt` refuses it.
pub fn get_kernel_actions(k: &Kernel) -> Vec<(Opt, Kernel)> {
    actions()
        .iter()
        .filter_map(|&o| {
            let mut k2 = k.clone();
            k2.apply_opt(o).ok().map(|_| (o, k2))
        })
        .collect()
}

/// The kernels BEAM expands `k` into: [`get_kernel_actions`] without the THREAD opts that split off part of an
/// axis, nor PADTOs that add more than a quarter to an axis. The CPU launcher already hands each core a contiguous
/// chunk of a whole-axis THREAD, so a partial one only adds a loop (and its few outer iterations leave no small
/// sample of the work to time); heavy padding is rarely worth a compile.
fn beam_actions(k: &Kernel) -> Vec<Kernel> {
    let shape = k.full_shape();
    let wanted = |o: &Opt| match o.op {
        OptOps::Thread => o.arg == 0,
        OptOps::Padto => o.axis.and_then(|a| shape.get(a)).is_some_and(|&n| 4 * n.next_multiple_of(o.arg.max(1)) <= 5 * n),
        _ => true,
    };
    actions()
        .iter()
        .filter(|o| wanted(o))
        .filter_map(|&o| {
            let mut k2 = k.clone();
            k2.apply_opt(o).ok().map(|_| k2)
        })
        .collect()
}

/// 1 prints every candidate BEAM times, with its time and opts (tinygrad `BEAM_DEBUG`). Default 0.
pub static BEAM_DEBUG: ContextVar = ContextVar::new("BEAM_DEBUG", 0);
/// The seconds BEAM may search one kernel: no further round starts once they are spent, and the best so far wins
/// (0: no limit; tinygrad has none). Keeps a cold BEAM run over many kernels (CI's) to minutes. Default 0.
pub static BEAM_MAX_SEC: ContextVar = ContextVar::new("BEAM_MAX_SEC", 0);

static SEARCHES: AtomicU64 = AtomicU64::new(0);

/// How many BEAM searches this process has run ([`beam_search`] calls; cache hits are not searches).
pub fn beam_searches() -> u64 {
    SEARCHES.load(Relaxed)
}

/// Timed runs of a candidate at most; its time is the fastest.
const RUNS: usize = 3;
/// A candidate with a run over this many times the best time so far is not run again.
const EARLY_STOP: f64 = 3.0;
/// Runs of each finalist of a round (its best candidates and the best kernel so far), taken in turn.
const FINAL_RUNS: usize = 10;
/// The fraction by which a round must beat the best time for another round to follow (CPU timings of one kernel
/// vary by a few percent from run to run; smaller gains are taken but end the search).
const MIN_PROGRESS: f64 = 0.05;

/// `s` seconds as a fixed-width string in us, ms or s.
fn time_str(s: f64) -> String {
    match s {
        s if s < 1e-3 => format!("{:9.2}us", s * 1e6),
        s if s < 1.0 => format!("{:9.2}ms", s * 1e3),
        s => format!("{s:9.2}s "),
    }
}

/// `k`'s name (colored) and opts, for DEBUG output.
fn describe(k: &Kernel) -> String {
    let opts: Vec<String> = k.applied_opts.iter().map(|o| o.to_string()).collect();
    format!("{} [{}]", k.names().1, opts.join(", "))
}

/// A compiled candidate and its time in seconds.
struct Timed<C> {
    k: Kernel,
    prog: C,
    tm: f64,
}

/// The opts of the fastest kernel BEAM finds for `k` (which has no opts applied) with a beam of width `amt`
/// (tinygrad `beam_search`).
///
/// Each round expands every beam entry by one more action, drops candidates whose optimized AST was already seen,
/// compiles the rest in batches on `PARALLEL` threads (`compile` takes a batch, so that one compiler run can build
/// many, and returns one entry per kernel: `None` for one that fails, or that it finds duplicates a program compiled
/// before), then times them one at a time: `time` runs a compiled candidate once and returns seconds (`None`: it
/// failed). A candidate's time is its fastest of up to 3 runs, fewer once a run is over 3 times the best so far.
/// The `amt` fastest (the next beam) and the best kernel so far are then timed again, 10 runs each taken in turn,
/// so that they compare under the same conditions on a busy machine; the search stops after a round whose best
/// does not beat the best so far by 5%. The hand-coded opts are compiled and timed first; the winner then runs
/// against them 10 times in turn and must be 5% faster, else the hand-coded opts are kept (timings of
/// sub-millisecond kernels on a busy machine otherwise pick among near-equal candidates at random); they are also
/// the result when nothing could be timed.
///
/// Shows a progress bar on stderr when it is a terminal or DEBUG>=1; DEBUG>=2 prints each round's best, and
/// BEAM_DEBUG>=1 every candidate. Counts in [`beam_searches`]. The disk cache is the caller's: [`beam_cache_get`],
/// [`beam_cache_put`].
pub fn beam_search<C: Send>(
    k: &Kernel,
    amt: usize,
    compile: impl Fn(&[Kernel]) -> Vec<Option<C>> + Sync,
    mut time: impl FnMut(&C) -> Option<f64>,
) -> Vec<Opt> {
    SEARCHES.fetch_add(1, Relaxed);
    let st = Instant::now();
    let threads = usize::try_from(PARALLEL.value()).unwrap_or(0).max(1);
    let pool = if threads > 1 { rayon::ThreadPoolBuilder::new().num_threads(threads).build().ok() } else { None };
    let show = std::io::stderr().is_terminal() || DEBUG.value() >= 1;
    let mut heuristic = k.clone();
    for o in hand_coded_optimizations(k) {
        heuristic.apply_opt(o).expect("hand-coded opts apply");
    }
    let (mut beam, mut best): (Vec<Kernel>, Option<Timed<C>>) = (vec![k.clone()], None);
    let (mut seen, mut fastest) = (FxHashSet::default(), f64::INFINITY);
    // the hand-coded opts, compiled and timed first: the incumbent the winner must beat at the end
    seen.insert(heuristic.ast.key());
    let heur = compile(std::slice::from_ref(&heuristic)).into_iter().next().flatten().map(|prog| {
        let tm = (0..RUNS).filter_map(|_| time(&prog)).fold(f64::INFINITY, f64::min);
        Timed { k: heuristic.clone(), prog, tm }
    });
    fastest = heur.as_ref().map_or(fastest, |h| h.tm);
    let limit = BEAM_MAX_SEC.value();
    for round in 0.. {
        if limit > 0 && st.elapsed().as_secs_f64() >= limit as f64 {
            if DEBUG.value() >= 2 {
                println!("{:7.2}s: BEAM_MAX_SEC={limit} spent, the search stops at round {round}", st.elapsed().as_secs_f64());
            }
            break;
        }
        let mut cands: Vec<Kernel> = beam.iter().flat_map(beam_actions).collect();
        cands.retain(|c| seen.insert(c.ast.key()));
        let n = cands.len();
        // a batch a thread, each with every `threads`-th candidate (kinds of actions, so compile costs, spread evenly)
        let cands: Vec<Kernel> = (0..threads).flat_map(|i| cands.iter().skip(i).step_by(threads)).cloned().collect();
        let bar = if show { indicatif::ProgressBar::new(2 * n as u64) } else { indicatif::ProgressBar::hidden() };
        bar.set_style(indicatif::ProgressStyle::with_template("BEAM {msg} {bar:30} {pos}/{len} {elapsed}").expect("valid template"));
        bar.set_message(format!("{} round {round}", k.names().0));
        let compile_batch = |b: &[Kernel]| {
            let p = compile(b);
            assert_eq!(p.len(), b.len(), "beam_search: compile returns one entry per kernel");
            bar.inc(b.len() as u64);
            p
        };
        let batch = n.div_ceil(threads).max(1);
        let progs: Vec<Option<C>> = match &pool {
            Some(p) => p.install(|| cands.par_chunks(batch).flat_map_iter(compile_batch).collect()),
            None => cands.chunks(batch).flat_map(compile_batch).collect(),
        };
        let mut timed: Vec<Timed<C>> = Vec::new();
        for (c, p) in cands.into_iter().zip(progs) {
            bar.inc(1);
            let Some(prog) = p else {
                if BEAM_DEBUG.value() >= 1 {
                    println!("{:7.2}s: not compiled (failed, too big, or a duplicate) {}", st.elapsed().as_secs_f64(), describe(&c));
                }
                continue;
            };
            let mut tm = f64::INFINITY;
            for _ in 0..RUNS {
                tm = time(&prog).map_or(f64::NAN, |t| tm.min(t));
                if tm.is_nan() || tm > EARLY_STOP * fastest {
                    break;
                }
            }
            if BEAM_DEBUG.value() >= 1 {
                println!("{:7.2}s: {} {}", st.elapsed().as_secs_f64(), time_str(tm), describe(&c));
            }
            if tm.is_finite() {
                fastest = fastest.min(tm);
                timed.push(Timed { k: c, prog, tm });
            }
        }
        bar.finish_and_clear();
        let ntimed = timed.len();
        timed.sort_by(|a, b| a.tm.total_cmp(&b.tm));
        timed.truncate(amt.max(1));
        // the finalists again, in turn
        let mut finalists: Vec<&mut Timed<C>> = timed.iter_mut().chain(best.as_mut()).collect();
        finalists.iter_mut().for_each(|f| f.tm = f64::INFINITY);
        for _ in 0..FINAL_RUNS {
            for f in finalists.iter_mut() {
                f.tm = time(&f.prog).map_or(f.tm, |t| f.tm.min(t));
            }
        }
        timed.sort_by(|a, b| a.tm.total_cmp(&b.tm));
        let to_beat = best.as_ref().map_or(f64::INFINITY, |b| b.tm);
        let improved = timed.first().is_some_and(|t| t.tm.is_finite() && t.tm < to_beat * (1.0 - MIN_PROGRESS));
        beam = timed.iter().map(|t| t.k.clone()).collect();
        if let Some(t) = timed.into_iter().next().filter(|t| t.tm < to_beat) {
            best = Some(t);
        }
        if DEBUG.value() >= 2 {
            let (tm, desc) = best.as_ref().map_or((f64::INFINITY, String::new()), |b| (b.tm, describe(&b.k)));
            println!("{:7.2}s: {} from {n:3} -> {ntimed:3} actions {desc}", st.elapsed().as_secs_f64(), time_str(tm));
        }
        if !improved {
            break;
        }
    }
    // the winner against the hand-coded opts, in turn: it must beat them by MIN_PROGRESS (timings of sub-millisecond
    // kernels on a busy machine pick among near-equal candidates at random)
    match (best, heur) {
        (Some(b), Some(h)) => {
            let (mut tb, mut th) = (f64::INFINITY, f64::INFINITY);
            for _ in 0..FINAL_RUNS {
                tb = time(&b.prog).map_or(tb, |t| tb.min(t));
                th = time(&h.prog).map_or(th, |t| th.min(t));
            }
            if th.is_finite() && tb >= th * (1.0 - MIN_PROGRESS) {
                h.k.applied_opts
            } else {
                b.k.applied_opts
            }
        }
        (Some(b), None) => b.k.applied_opts,
        (None, _) => heuristic.applied_opts,
    }
}

/// First line of a BEAM cache entry (a version: entries in another format are ignored).
const CACHE_HEADER: &str = "tinygrad-rs beam 1";

/// The file holding BEAM's winner for `k` (no opts applied) with beam width `amt`: in `cache_dir()/beam/`, named
/// by the AST's structural key ([`crate::uop::UOp::key`]), the target's device, vector bytes and threads, and `amt`.
pub fn beam_cache_path(k: &Kernel, amt: usize) -> PathBuf {
    let r = &k.ren;
    cache_dir().join("beam").join(format!("{:016x}-{}-v{}-t{}-b{amt}", k.ast.key(), r.device, r.vector_bytes, r.threads))
}

/// One `OP AXIS ARG` line of a cache entry (`-` for no axis), or `None` when it is not one.
fn parse_opt(line: &str) -> Option<Opt> {
    const OPS: [OptOps; 10] = [
        OptOps::Upcast,
        OptOps::Unroll,
        OptOps::Local,
        OptOps::Group,
        OptOps::GroupTop,
        OptOps::Thread,
        OptOps::Padto,
        OptOps::Swap,
        OptOps::NoLocals,
        OptOps::Inner,
    ];
    let w: Vec<&str> = line.split_whitespace().collect();
    let [op, axis, arg] = w[..] else { return None };
    let op = OPS.into_iter().find(|o| o.to_string() == op)?;
    let axis = if axis == "-" { None } else { Some(axis.parse().ok()?) };
    Some(Opt { op, axis, arg: arg.parse().ok()? })
}

/// The cached BEAM winner for `k` (no opts applied) with beam width `amt`. `None` under CACHELEVEL=0 or
/// IGNORE_BEAM_CACHE=1, and when there is no entry or it can't be read, doesn't parse, or no longer applies (one of
/// its opts is illegal on `k`): such an entry is searched again and overwritten.
pub fn beam_cache_get(k: &Kernel, amt: usize) -> Option<Vec<Opt>> {
    if CACHELEVEL.value() < 1 || IGNORE_BEAM_CACHE.value() != 0 {
        return None;
    }
    let text = std::fs::read_to_string(beam_cache_path(k, amt)).ok()?;
    let mut lines = text.lines();
    if lines.next()? != CACHE_HEADER {
        return None;
    }
    let opts = lines.map(parse_opt).collect::<Option<Vec<Opt>>>()?;
    let mut k2 = k.clone();
    opts.iter().try_for_each(|&o| k2.apply_opt(o).ok())?;
    Some(opts)
}

/// Stores `opts` as the BEAM winner for `k` with beam width `amt` (unless CACHELEVEL=0): a header line, then
/// `OP AXIS ARG` per opt (e.g. `UPCAST 1 16`), written to a temporary file and renamed into place, so a reader
/// never sees part of an entry. A failed write is reported at DEBUG>=1 and otherwise ignored (the cache only
/// saves time).
pub fn beam_cache_put(k: &Kernel, amt: usize, opts: &[Opt]) {
    if CACHELEVEL.value() < 1 {
        return;
    }
    static TMP_ID: AtomicU64 = AtomicU64::new(0);
    let path = beam_cache_path(k, amt);
    let tmp = path.with_extension(format!("{}.{}.tmp", std::process::id(), TMP_ID.fetch_add(1, Relaxed)));
    let mut text = format!("{CACHE_HEADER}\n");
    for o in opts {
        text += &format!("{} {} {}\n", o.op, o.axis.map_or("-".to_string(), |a| a.to_string()), o.arg);
    }
    let dir = path.parent().expect("cache entries live in a directory");
    let written = std::fs::create_dir_all(dir).and_then(|()| std::fs::write(&tmp, text)).and_then(|()| std::fs::rename(&tmp, &path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        if DEBUG.value() >= 1 {
            eprintln!("BEAM cache: can't write {}: {e}", path.display());
        }
    }
}
