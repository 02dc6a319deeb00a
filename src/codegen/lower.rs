//! Lowering reductions: each `REDUCE(op)(value, ranges)` becomes a register accumulator initialized to the op's
//! identity, updated inside the ranges, and read after they END. Reductions over the same ranges (the lanes of
//! an upcast) share one loop; a vector REDUCE gets a vector accumulator. (tinygrad `codegen/late/devectorizer.py` `reduce_to_acc`.)
//! An INNER axis (a loop run inside the reduction's loops) makes the accumulators an array in memory instead.
//! On CPU targets a reduction loop directly inside the THREAD loop also prefetches the next THREAD iteration's rows,
//! and one under output loops the block of a buffer a THREAD iteration reads ([`add_prefetches`]; tinygrad has no
//! counterpart).

use super::opt::range_size;
use crate::dtype::{dtypes, AddrSpace};
use crate::uop::{symbolic::identity_element, Arg, AxisType, Ops, UOp};
use rustc_hash::FxHashMap;

/// `sink` with every REDUCE lowered to an accumulator, inner reductions first (groups in order of their first
/// REDUCE in the graph); with `mulacc`, a float sum of products accumulates by MULACC.
pub fn lower_reduces(sink: &UOp, mulacc: bool) -> UOp {
    let topo = sink.toposort();
    let inner: Vec<UOp> = topo.iter().filter(|u| u.op == Ops::RANGE && u.axis().1 == AxisType::Inner).cloned().collect();
    if !inner.is_empty() {
        return lower_inner(sink, &topo, &inner, mulacc);
    }
    let mut groups: Vec<(Vec<UOp>, Vec<UOp>)> = Vec::new();
    for r in topo.iter().filter(|u| u.op == Ops::REDUCE) {
        let ranges = r.reduce_parts().1.to_vec();
        match groups.iter_mut().find(|g| g.0 == ranges) {
            Some(g) => g.1.push(r.clone()),
            None => groups.push((ranges, vec![r.clone()])),
        }
    }
    let mut map: FxHashMap<UOp, UOp> = FxHashMap::default();
    for (n, (ranges, reduces)) in groups.into_iter().enumerate() {
        let mut updates = Vec::with_capacity(reduces.len());
        let mut accs = Vec::with_capacity(reduces.len());
        for (i, r) in reduces.iter().enumerate() {
            let Arg::Op(op) = r.arg else { panic!("REDUCE without an op: {:?}", r.arg) };
            let acc = UOp::new(Ops::DEFINE_REG, r.dtype.ptr(1, AddrSpace::Reg), [], Arg::Int((n * 1000 + i) as i64));
            let idx = UOp::new(Ops::INDEX, acc.dtype, [acc, UOp::const_(dtypes::WEAKINT, 0)], Arg::None);
            let init = UOp::new(Ops::STORE, dtypes::VOID, [idx.clone(), identity(op, r)], Arg::None);
            // the running value is read inside the loops (its ranges among its sources), so the update is placed
            // there even when the reduced value does not depend on them (a count: a sum of ones)
            let cur =
                UOp::new(Ops::LOAD, r.dtype, [idx.clone(), init].into_iter().chain(ranges.iter().cloned()).collect::<Vec<_>>(), Arg::None);
            // (a reduction inside the value, lowered already: a grouped reduction's partial)
            let vals = r.reduce_parts().0.iter().map(|v| if map.is_empty() { v.clone() } else { v.substitute(&map) });
            let update = accumulate(op, cur, vals, mulacc);
            let src: Vec<UOp> = [idx.clone(), update].into_iter().chain(ranges.iter().cloned()).collect();
            updates.push(UOp::new(Ops::STORE, dtypes::VOID, src, Arg::None));
            accs.push(idx);
        }
        let end = UOp::new(Ops::END, dtypes::VOID, updates.into_iter().chain(ranges.iter().cloned()).collect::<Vec<_>>(), Arg::None);
        for (r, idx) in reduces.iter().zip(accs) {
            map.insert(r.clone(), UOp::new(Ops::LOAD, r.dtype, [idx, end.clone()], Arg::None));
        }
    }
    if map.is_empty() {
        sink.clone()
    } else {
        sink.substitute(&map)
    }
}

/// The value reduction `r` by `op` starts from, a vector of it for a vector REDUCE.
fn identity(op: Ops, r: &UOp) -> UOp {
    let zero = UOp::const_(r.dtype.scalar(), identity_element(op, r.dtype.scalar()));
    if r.dtype.count > 1 {
        UOp::new(Ops::VECTORIZE, r.dtype, vec![zero; r.dtype.count as usize], Arg::None)
    } else {
        zero
    }
}

/// `cur` with each of `vals` added (by `op`) in turn; with `mulacc`, a float product by MULACC.
fn accumulate(op: Ops, cur: UOp, vals: impl Iterator<Item = UOp>, mulacc: bool) -> UOp {
    vals.fold(cur, |cur, val| {
        let update = match op {
            Ops::ADD => chain_wmma(&cur, &val).or_else(|| mulacc.then(|| super::decompositions::mulacc_update(&cur, &val)).flatten()),
            _ => None,
        };
        update.unwrap_or_else(|| cur.alu(op, &[&val]))
    })
}

/// [`lower_reduces`] for a kernel with INNER axes `inner` (whose REDUCEs share their ranges, as the opt checks): each
/// REDUCE's accumulators are an array in memory (a DEFINE_LOCAL: on a CPU, the kernel's stack), one per iteration of
/// the INNER loops, which run three times: zeroing the array, inside the reduction's loops adding to it, and after
/// them storing it. Each is a copy of the INNER ranges, closed by its own END.
fn lower_inner(sink: &UOp, topo: &[UOp], inner: &[UOp], mulacc: bool) -> UOp {
    let reduces: Vec<&UOp> = topo.iter().filter(|u| u.op == Ops::REDUCE).collect();
    let ranges = reduces[0].reduce_parts().1.to_vec();
    let mut next_id = topo.iter().filter(|u| u.op == Ops::RANGE).map(|r| r.axis().0).max().unwrap_or(0) + 1;
    let mut copy = || -> (Vec<UOp>, FxHashMap<UOp, UOp>) {
        let rs: Vec<UOp> = inner
            .iter()
            .map(|r| {
                next_id += 1;
                UOp::range(r.src[0].clone(), next_id, AxisType::Inner)
            })
            .collect();
        let map = inner.iter().cloned().zip(rs.iter().cloned()).collect();
        (rs, map)
    };
    let place = |rs: &[UOp]| rs.iter().fold(UOp::const_(dtypes::WEAKINT, 0), |a, r| &(&a * range_size(r) as i64) + r).simplify();
    let at = |mem: &UOp, rs: &[UOp]| UOp::new(Ops::INDEX, mem.dtype, [mem.clone(), place(rs)], Arg::None);
    let size = inner.iter().map(range_size).product::<usize>() as i64;
    let ((zero_rs, _), (add_rs, add_map), (out_rs, out_map)) = (copy(), copy(), copy());
    let (mut inits, mut updates, mut mems) = (Vec::new(), Vec::new(), Vec::new());
    for (i, r) in reduces.iter().enumerate() {
        let Arg::Op(op) = r.arg else { panic!("REDUCE without an op: {:?}", r.arg) };
        let mem = UOp::new(Ops::DEFINE_LOCAL, r.dtype.ptr(size, AddrSpace::Local), [], Arg::Int(i as i64));
        inits.push(UOp::new(Ops::STORE, dtypes::VOID, [at(&mem, &zero_rs), identity(op, r)], Arg::None));
        mems.push(((*r).clone(), mem));
    }
    let zeroed = UOp::new(Ops::END, dtypes::VOID, inits.into_iter().chain(zero_rs.iter().cloned()).collect::<Vec<_>>(), Arg::None);
    for (r, mem) in &mems {
        let Arg::Op(op) = r.arg else { unreachable!() };
        let idx = at(mem, &add_rs);
        let loops: Vec<UOp> = ranges.iter().chain(&add_rs).cloned().collect();
        let cur = UOp::new(
            Ops::LOAD,
            r.dtype,
            [idx.clone(), zeroed.clone()].into_iter().chain(loops.iter().cloned()).collect::<Vec<_>>(),
            Arg::None,
        );
        let vals = r.reduce_parts().0.iter().map(|v| v.substitute(&add_map));
        let src: Vec<UOp> = [idx.clone(), accumulate(op, cur, vals, mulacc)].into_iter().chain(loops).collect();
        updates.push(UOp::new(Ops::STORE, dtypes::VOID, src, Arg::None));
    }
    let added = UOp::new(Ops::END, dtypes::VOID, updates.into_iter().chain(add_rs.iter().cloned()).collect::<Vec<_>>(), Arg::None);
    let done = UOp::new(Ops::END, dtypes::VOID, std::iter::once(added).chain(ranges.iter().cloned()).collect::<Vec<_>>(), Arg::None);
    let map: FxHashMap<UOp, UOp> = mems
        .into_iter()
        .map(|(r, mem)| {
            let load = UOp::new(Ops::LOAD, r.dtype, [at(&mem, inner), done.clone()], Arg::None);
            (r, load)
        })
        .collect();
    // the stores in the third copy of the INNER loops
    let stores = sink.substitute(&map).substitute(&out_map);
    UOp::sink([UOp::new(Ops::END, dtypes::VOID, stores.src.iter().cloned().chain(out_rs).collect::<Vec<_>>(), Arg::None)])
}

/// `acc + val` where `val` is a sum of WMMAs that each add to zero: the WMMAs chained, each adding to the one
/// before and the first to `acc` (tensor cores accumulate in place; vectors of CUDA have no `+`).
fn chain_wmma(acc: &UOp, val: &UOp) -> Option<UOp> {
    let zero = |c: &UOp| c.src.iter().all(|x| x.const_value().is_some_and(|v| v.as_f64() == 0.0)) && c.op == Ops::VECTORIZE;
    let (mut stack, mut leaves) = (vec![val], Vec::new());
    while let Some(u) = stack.pop() {
        match u.op {
            Ops::ADD => stack.extend([&u.src[1], &u.src[0]]),
            Ops::WMMA if zero(&u.src[2]) => leaves.push(u),
            _ => return None,
        }
    }
    Some(leaves.into_iter().fold(acc.clone(), |c, w| w.with_src([w.src[0].clone(), w.src[1].clone(), c])))
}

/// The fewest bytes a loop step must read of a sequential stream for [`add_prefetches`] to prefetch it: a stream read
/// a line or two a step (a sum's, a `QuantMatrix`'s scales) is one the hardware follows, and a prefetch a line costs
/// (`sum_16M` 18-24 -> 17-21 GB/s; Gemma 3's output projection alone 14.2-14.7 -> 13.2-13.7 ms without its scales'
/// prefetches); the interleaved loads of a `QuantMatrix`'s words, 256 bytes a step and up, are not (a Q4_1 tile of 16
/// rows, 256 bytes a step: SmolLM2's gate and up projection 48.9 -> 34.6 us a launch with them on a Xeon).
pub const SEQUENTIAL_MIN_STEP: usize = 256;

/// How far ahead [`add_prefetches`] prefetches a THREAD iteration's block, in bytes, rounded up to whole blocks:
/// SmolLM2's attention scores (`r_256_3_3_4_2_32`, 1,024 float16 keys of 3 heads, 1,536-byte blocks), rendered C alone
/// on 2 Zen 4 cores over 96 caches from DRAM, best of 20: 24.8-29.9 us a cache without, 19.8-20.3 one block ahead,
/// 15.3-17.9 two, 16.3-20.3 three.
pub const BLOCK_AHEAD: usize = 3072;

/// The largest block of a buffer one THREAD iteration may read for [`add_prefetches`] to prefetch it whole.
const BLOCK_MAX: usize = 4096;

/// A software prefetch (a CUSTOM `__builtin_prefetch`) of `buf` at element `at`.
fn prefetch(buf: &UOp, at: UOp) -> UOp {
    let index = UOp::new(Ops::INDEX, buf.dtype, [buf.clone(), at], Arg::None);
    UOp::new(Ops::CUSTOM, dtypes::VOID, [index], Arg::Str("__builtin_prefetch(&{0});".into()))
}

/// An index as a base and the constant it adds (0 where it adds none).
fn base_and_offset(idx: &UOp) -> (UOp, i64) {
    match (idx.op, idx.src.get(1).and_then(UOp::const_int)) {
        (Ops::ADD, Some(c)) => (idx.src[0].clone(), c as i64),
        _ => (idx.clone(), 0),
    }
}

/// How far ahead [`add_prefetches`] prefetches a strided stream ([`stride_prefetches`]), in bytes, rounded up to whole
/// loop steps: SmolLM2's attention values over 1,024 float16 keys (`r_2_3_32_3_1_128`, 384-byte keys), rendered C
/// alone on a Sapphire Rapids Xeon's 2 cores over 30 caches: 22.4-24.4 us a cache without, 21.6-21.9 four keys
/// ahead (1.5 KB), 17.9-19.3 eight, 15.4-18.1 sixteen, 16.4-31.2 thirty-two. In the process (`llm --benchmark 32
/// --depth 1000`, `DEBUG=2` medians, alternated twice), 8 KB against 4 KB: one row's values kernel 19.0-20.4 ->
/// 17.1-17.6 us, two rows' 34.3-35.6 -> 30.1-31.2, four rows' the same; under `x86-64-v3` one row's 23.2-24.7 ->
/// 20.8-21.1.
pub const STRIDE_AHEAD: usize = 8192;

/// The fewest bytes a reduction loop's step must move a load for [`stride_prefetches`]: a line or more a step, each
/// step a new line at a distance the hardware prefetchers do not follow.
const STRIDE_MIN_STEP: i64 = 256;

/// The most bytes a reduction loop's step may move a load for [`stride_prefetches`]: half of `STRIDE_AHEAD` as it was
/// (4 KB) when the rule was measured; wider strides are kernels nobody timed it on.
const STRIDE_MAX_STEP: i64 = 2048;

/// Prefetches, [`STRIDE_AHEAD`] bytes on, of the loads in a reduction (`body`, closed by `end`, directly in the THREAD
/// loop or under other loops in it) that no other rule of [`add_prefetches`] serves and that walk a buffer by strides
/// of [`STRIDE_MIN_STEP`] to [`STRIDE_MAX_STEP`] bytes a step of the reduction, wider than the THREAD axis's
/// step (THREAD iterations interleave in the stream: a loop within its own tile is a sequential stream, left to
/// `sequential`), and move with the THREAD axis (a tile other THREAD iterations share, as a matrix product's columns,
/// stays in cache): attention's values, each key's part of a head after the last key's. One prefetch per line a
/// step's loads touch.
fn stride_prefetches(body: &[UOp], end: &UOp, thread: &UOp, large: &dyn Fn(&UOp) -> bool) -> Vec<UOp> {
    let mut seen: Vec<(UOp, UOp, i64)> = Vec::new();
    let mut out = Vec::new();
    for l in body.iter().filter(|u| u.op == Ops::LOAD && u.src[0].op == Ops::INDEX && large(&u.src[0].src[0]) && u.src[0].src.len() == 2) {
        let (buf, idx) = (&l.src[0].src[0], &l.src[0].src[1]);
        let item = buf.dtype.base().itemsize() as i64;
        let deps = idx.toposort();
        if !deps.contains(thread) {
            continue;
        }
        // (the innermost of the reduction's loops the load walks: its smallest step)
        let step = |r: &UOp| {
            let on: FxHashMap<UOp, UOp> = [(r.clone(), r + 1i64)].into_iter().collect();
            (&idx.substitute(&on) - idx).simplify().const_int().map(|c| c.abs() as i64).filter(|&c| c > 0)
        };
        let Some((r, s)) =
            end.src.iter().filter(|r| r.op == Ops::RANGE && deps.contains(r)).filter_map(|r| Some((r, step(r)?))).min_by_key(|(_, s)| *s)
        else {
            continue;
        };
        if s * item < STRIDE_MIN_STEP || s * item > STRIDE_MAX_STEP || step(thread).is_none_or(|t| s <= t) {
            continue;
        }
        let (base, off) = base_and_offset(idx);
        let line = (off * item) >> 6;
        if seen.iter().any(|(b, b2, l2)| b == buf && *b2 == base && *l2 == line) {
            continue;
        }
        seen.push((buf.clone(), base, line));
        let ahead: FxHashMap<UOp, UOp> = [(r.clone(), r + (STRIDE_AHEAD as i64 + s * item - 1) / (s * item))].into_iter().collect();
        out.push(prefetch(buf, idx.substitute(&ahead).simplify()));
    }
    out
}

/// Prefetches of the blocks that one THREAD iteration of a reduction (its `body`, under the output loops `outer`
/// inside the THREAD loop) reads: a load of a buffer whose addresses within one THREAD iteration stay inside that
/// iteration's own block of at most [`BLOCK_MAX`] bytes (`thread * tile + o`, `0 <= o < tile`: attention's scores
/// over a few keys a THREAD iteration, one head's part of each key after another, a walk by 384-byte strides that
/// the hardware prefetchers do not follow) has the block [`BLOCK_AHEAD`] bytes on prefetched, one prefetch per line,
/// the lines shared out among the output loops' iterations. Output loops of symbolic size open outside the THREAD
/// loop ([`super::linearize::outside_thread`]): a block is then one THREAD iteration's within one of their iterations.
fn block_prefetches(body: &[UOp], thread: &UOp, outer: &[&UOp], large: &dyn Fn(&UOp) -> bool) -> Vec<UOp> {
    let mut blocks: Vec<(UOp, i64, i64, UOp)> = Vec::new();
    let zero = |r: &UOp| (r.clone(), UOp::const_(r.dtype, 0));
    let (outside, outer): (Vec<&UOp>, Vec<&UOp>) = outer.iter().partition(|r| super::linearize::outside_thread(r));
    let at0: FxHashMap<UOp, UOp> = outside.iter().copied().chain([thread]).map(zero).collect();
    // (where the outside loops' iteration puts a base: the base with every other range at 0, less its value at 0)
    let inner0: FxHashMap<UOp, UOp> =
        body.iter().filter(|u| u.op == Ops::RANGE && !outside.contains(u)).chain([thread]).map(zero).collect();
    // (the tile and the bounds within it of each base an index adds a constant to, in elements: simplified once each)
    let mut bases: FxHashMap<UOp, Option<(i64, i128, i128, UOp)>> = FxHashMap::default();
    for l in body.iter().filter(|u| u.op == Ops::LOAD && u.src[0].op == Ops::INDEX && large(&u.src[0].src[0]) && u.src[0].src.len() == 2) {
        let (buf, idx) = (&l.src[0].src[0], &l.src[0].src[1]);
        if blocks.iter().any(|(b, ..)| b == buf) {
            continue;
        }
        let (base, off) = base_and_offset(idx);
        let off = i128::from(off);
        let span = bases.entry(base.clone()).or_insert_with(|| {
            let tile = super::opt::stride(&base, thread)? as i64;
            let (lo, hi) = base.substitute(&at0).simplify().bounds();
            let origin = match outside.is_empty() {
                true => UOp::const_(dtypes::WEAKINT, 0),
                false => (&base.substitute(&inner0) - &base.substitute(&at0).substitute(&inner0)).simplify(),
            };
            Some((tile, lo, hi, origin))
        });
        let Some((tile, lo, hi, origin)) = span.clone() else { continue };
        let item = buf.dtype.base().itemsize() as i64;
        if tile > 0 && tile * item <= BLOCK_MAX as i64 && lo + off >= 0 && hi + off + i128::from(l.dtype.count) <= i128::from(tile) {
            blocks.push((buf.clone(), tile, item, origin));
        }
    }
    // (the output loops' iterations numbered 0..m, each prefetching its share of the lines)
    let (at, m) = outer.iter().fold((UOp::const_(dtypes::WEAKINT, 0), 1i64), |(at, m), r| {
        let n = range_size(r) as i64;
        (&(&at * n) + *r, m * n)
    });
    blocks
        .into_iter()
        .flat_map(|(buf, tile, item, origin)| {
            // (a block not a whole number of lines may straddle one more; past the last line an iteration wraps)
            let bytes = tile * item;
            let lines = (bytes + 63) / 64 + i64::from(bytes % 64 != 0);
            let (ahead, per) = ((BLOCK_AHEAD as i64 + bytes - 1) / bytes * tile, (lines + m - 1) / m);
            let at = at.clone();
            (0..per).map(move |j| {
                let line = (&(&at * per) + j).floormod(lines);
                prefetch(&buf, (&(&(thread * tile + ahead) + &origin) + &(&line * (64 / item))).simplify())
            })
        })
        .collect()
}

/// `sink` with a software prefetch (a CUSTOM `__builtin_prefetch`) in each reduction loop for every global (of 64 KB up)
/// buffer it reads at an address that moves with the THREAD axis: of that address one THREAD iteration on, once per
/// 64-byte line that loads differing only by a constant offset touch. A matrix-vector product's row tiles are streams
/// too many and too far apart for the hardware prefetchers, so each tile's rows otherwise come from DRAM on demand
/// (bench/prefetch_probe.c: 4.6 -> 10.6-12.9 GB/s a core; unchanged from L2). Not where the one reduction loop walks
/// exactly one THREAD iteration's span (a weight repacked tile by tile, `QuantMatrix`): that is one sequential stream,
/// which the hardware prefetchers follow and prefetches one THREAD iteration on halved on Intel's cores (Gemma 3's
/// output projection 10 -> 6.7 ms without them); where `sequential` is not 0 (Intel's cores and AMD's Zen 1 and 2:
/// [`CpuFeatures::sequential_ahead`](crate::renderer::CpuFeatures::sequential_ahead)) that stream is prefetched
/// `sequential` bytes ahead in its own loop instead, where a loop step reads at least [`SEQUENTIAL_MIN_STEP`] bytes
/// of it. A reduction under output loops inside the THREAD loop prefetches the blocks a THREAD iteration reads
/// instead ([`block_prefetches`]); a reduction none of these rules serves, its strided streams
/// ([`stride_prefetches`]).
/// In: a lowered kernel (accumulators, ENDs); out: the same with CUSTOM statements among its reduction ENDs'
/// sources. Prefetches never fault, so an address one tile past a buffer's end is harmless. tinygrad has no
/// counterpart.
pub fn add_prefetches(sink: &UOp, sequential: usize) -> UOp {
    use crate::uop::AxisType;
    const MIN_BYTES: i64 = 1 << 16;
    let large = |b: &UOp| b.op == Ops::DEFINE_GLOBAL && b.dtype.size.max(0) * b.dtype.base().itemsize() as i64 >= MIN_BYTES;
    let topo = sink.toposort();
    let Some(thread) = topo.iter().find(|u| u.op == Ops::RANGE && u.axis().1 == AxisType::Thread) else { return sink.clone() };
    // (an INNER axis's rows are streams the hardware follows)
    if topo.iter().any(|u| u.op == Ops::RANGE && u.axis().1 == AxisType::Inner) {
        return sink.clone();
    }
    let next: FxHashMap<UOp, UOp> = [(thread.clone(), thread + 1i64)].into_iter().collect();
    let mut ends: FxHashMap<UOp, UOp> = FxHashMap::default();
    for end in topo.iter().filter(|u| u.op == Ops::END && u.src.iter().any(|s| s.op == Ops::RANGE && s != thread)) {
        let body = UOp::sink(end.src.iter().filter(|s| s.op != Ops::RANGE).cloned().collect::<Vec<_>>()).toposort();
        // (a reduction under another loop inside the THREAD loop: the next THREAD iteration's rows are needed only
        // after all of that loop's iterations, too late for a prefetch made now; under output loops only, the block a
        // THREAD iteration reads is prefetched further on instead, `block_prefetches`)
        let outer: Vec<&UOp> = body.iter().filter(|u| u.op == Ops::RANGE && *u != thread && !end.src.contains(u)).collect();
        if !outer.is_empty() {
            let outputs = outer.iter().all(|r| r.axis().1 == AxisType::Loop);
            let mut blocks = if outputs { block_prefetches(&body, thread, &outer, &large) } else { vec![] };
            if blocks.is_empty() {
                blocks = stride_prefetches(&body, end, thread, &large);
            }
            if !blocks.is_empty() {
                let (vals, ranges): (Vec<UOp>, Vec<UOp>) = end.src.iter().cloned().partition(|s| s.op != Ops::RANGE);
                ends.insert(end.clone(), end.with_src(vals.into_iter().chain(blocks).chain(ranges).collect::<Vec<_>>()));
            }
            continue;
        }
        // (buffer, base, offset) of each index: one per line the constant offsets reach
        let mut rows: Vec<(UOp, UOp, i64, FxHashMap<UOp, UOp>)> = Vec::new();
        for l in
            body.iter().filter(|u| u.op == Ops::LOAD && u.src[0].op == Ops::INDEX && large(&u.src[0].src[0]) && u.src[0].src.len() == 2)
        {
            let idx = &l.src[0].src[1];
            let item = l.src[0].src[0].dtype.base().itemsize() as i64;
            // (each loop step moves at least 16 bytes, else a row walked element by element prefetches each line once
            // per element; and the next THREAD iteration's rows start past this one's: a matrix-vector product over a
            // weight's columns moves a few columns a THREAD iteration but whole rows a loop step)
            let step = |r: &UOp| {
                let on: FxHashMap<UOp, UOp> = [(r.clone(), r + 1i64)].into_iter().collect();
                (&idx.substitute(&on) - idx).simplify().const_value().map(|c| c.as_f64().abs() as i64)
            };
            let deps = idx.toposort();
            let Some(tile) = deps.contains(thread).then(|| step(thread)).flatten() else { continue };
            let loops: Vec<(Option<i64>, i64)> = end
                .src
                .iter()
                .filter(|r| r.op == Ops::RANGE && deps.contains(r))
                .map(|r| (step(r), super::opt::range_size(r) as i64))
                .collect();
            if !loops.iter().all(|&(s, n)| s.is_some_and(|s| s * item >= 16 && s * (n - 1) < tile)) {
                continue;
            }
            // (a loop that walks exactly the THREAD iteration's span, as a weight repacked tile by tile, reads the
            // buffer as one sequential stream: prefetched `sequential` bytes ahead where that is not 0 and a step
            // reads `SEQUENTIAL_MIN_STEP` bytes of it, else left to the hardware prefetchers)
            let ahead = match loops[..] {
                [(Some(s), n)] if s * n == tile && (sequential == 0 || s * item < SEQUENTIAL_MIN_STEP as i64) => continue,
                [(Some(s), n)] if s * n == tile => {
                    let r = end.src.iter().find(|r| r.op == Ops::RANGE && deps.contains(r)).expect("the loop");
                    [(r.clone(), r + (sequential as i64 + s * item - 1) / (s * item))].into_iter().collect()
                }
                _ => next.clone(),
            };
            let (base, off) = base_and_offset(idx);
            let line = |o: i64| (o * item) >> 6;
            if !rows.iter().any(|(b, base2, o, _)| *b == l.src[0].src[0] && *base2 == base && line(*o) == line(off)) {
                rows.push((l.src[0].src[0].clone(), base, off, ahead));
            }
        }
        let prefetches: Vec<UOp> =
            rows.into_iter().map(|(buf, base, off, ahead)| prefetch(&buf, (&base.substitute(&ahead) + off).simplify())).collect();
        // (none of the next THREAD iteration's rows: a strided stream, if any, ahead in this loop)
        let prefetches = if prefetches.is_empty() { stride_prefetches(&body, end, thread, &large) } else { prefetches };
        if prefetches.is_empty() {
            continue;
        }
        let (vals, ranges): (Vec<UOp>, Vec<UOp>) = end.src.iter().cloned().partition(|s| s.op != Ops::RANGE);
        ends.insert(end.clone(), end.with_src(vals.into_iter().chain(prefetches).chain(ranges).collect::<Vec<_>>()));
    }
    if ends.is_empty() {
        sink.clone()
    } else {
        sink.substitute(&ends)
    }
}
