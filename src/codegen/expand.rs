//! Expand: UPCAST and UNROLL axes become lanes of one iteration. In: an AST with `Upcast`/`Unroll` RANGEs. Out:
//! an AST without them. One lane axis, the vector axis, becomes vector dtypes: loads and stores of consecutive
//! elements become vector loads and stores, arithmetic vector arithmetic, a reduction a vector accumulator (summed
//! across lanes at the end when it reduces over them); what can't be a vector is computed lane by lane. The other
//! lane axes are unrolled: copies of the stores (UPCAST) or of a reduction's value (UNROLL: the copies become the
//! REDUCE's values, which lowering adds to the accumulator in turn). Follows tinygrad `codegen/late/expander.py`
//! (UNROLL/CONTRACT) and `devectorizer.py`, folded into one pass.

use crate::dtype::{dtypes, DType, Scalar};
use crate::uop::{graph_rewrite, symbolic::SYMBOLIC, Arg, AxisType, Ops, UOp};
use rustc_hash::{FxHashMap, FxHashSet};

use super::opt::{range_size, stride};

fn is_lane(r: &UOp) -> bool {
    matches!(r.axis().1, AxisType::Upcast | AxisType::Unroll)
}

fn sub(u: &UOp, r: &UOp, k: usize) -> UOp {
    u.substitute(&[(r.clone(), r.const_like(k as i64))].into_iter().collect())
}

/// `u` with range `r` replaced by each of `0..n`, in one walk: the nodes above `r` are copied `n` times, the
/// rest shared.
fn sub_all(u: &UOp, r: &UOp, n: usize) -> Vec<UOp> {
    let mut copies: FxHashMap<UOp, Vec<UOp>> = FxHashMap::default();
    copies.insert(r.clone(), (0..n).map(|k| r.const_like(k as i64)).collect());
    for x in u.toposort() {
        if !copies.contains_key(&x) && x.src.iter().any(|s| copies.contains_key(s)) {
            let c = (0..n).map(|k| x.with_src(x.src.iter().map(|s| copies.get(s).map_or(s, |c| &c[k]).clone()).collect::<Vec<_>>()));
            copies.insert(x.clone(), c.collect());
        }
    }
    copies.remove(u).unwrap_or_else(|| vec![u.clone(); n])
}

/// `red`'s reduction of `vals` (added to the accumulator in turn) over `ranges`; with no ranges, `vals` combined.
fn reduce_of(red: &UOp, vals: Vec<UOp>, ranges: Vec<UOp>) -> UOp {
    let Arg::Op(op) = red.arg else { unreachable!("REDUCE without an op") };
    match (vals.len(), ranges.is_empty()) {
        (_, true) => vals.into_iter().reduce(|acc, x| acc.alu(op, &[&x])).expect("a range of 0 lanes"),
        (k, false) => red.replace(Ops::REDUCE, vals[0].dtype, [vals, ranges].concat(), red.arg.clone(), (k > 1).then_some(k as u32)),
    }
}

/// Whether C vector types hold `dt` and C vector arithmetic works on it.
fn vector_dtype(dt: DType) -> bool {
    dt.count == 1
        && matches!(
            dt.scalar,
            Scalar::Float32
                | Scalar::Float64
                | Scalar::Int32
                | Scalar::UInt32
                | Scalar::Int64
                | Scalar::UInt64
                | Scalar::Int8
                | Scalar::UInt8
        )
}

/// Whether a comparison of `dt`s vectorizes to lane masks a select of 4-byte lanes takes (C's vector comparisons give
/// integer lanes as wide as their operands').
fn mask_lanes(dt: DType) -> bool {
    vector_dtype(dt) && dt.itemsize() == 4
}

/// Whether vectorized node `x` is a vector computed whole or one value in every lane, not lanes gathered one by one.
fn whole(x: &UOp) -> bool {
    x.op != Ops::VECTORIZE || x.src.iter().all(|s| *s == x.src[0])
}

/// Whether vectorized node `x` is a vector of loaded lanes (gathered one by one).
fn loaded(x: &UOp) -> bool {
    x.op == Ops::VECTORIZE && x.src.iter().all(|s| s.op == Ops::LOAD)
}

/// Whether vectorized node `x` is a vector of lane masks (a comparison's, or masks' AND, OR or XOR), not bools built
/// lane by lane.
fn is_mask(x: &UOp) -> bool {
    x.dtype.is_bool() && x.dtype.count > 1 && x.op != Ops::VECTORIZE
}

/// Whether loads and stores of `dt` may be vectors, and conversions between it and float32 vector conversions: the
/// C vector types, and with `half` float16 (the CPU's, where `vcvtph2ps`/`vcvtps2ph` convert 8 or 16 at once; its
/// arithmetic stays lane by lane, in float).
fn vector_storage(dt: DType, half: bool) -> bool {
    vector_dtype(dt) || (half && dt.count == 1 && dt.scalar == Scalar::Float16)
}

/// Ops C vector types compute lane-wise (with the scalar operators; MAX as a bit select on a comparison mask;
/// shifts of integers).
fn vector_op(op: Ops) -> bool {
    matches!(
        op,
        Ops::ADD
            | Ops::SUB
            | Ops::MUL
            | Ops::FDIV
            | Ops::NEG
            | Ops::MULACC
            | Ops::DP4A
            | Ops::DP4AS
            | Ops::RECIPROCAL
            | Ops::MAX
            | Ops::SHL
            | Ops::SHR
            | Ops::AND
            | Ops::OR
            | Ops::XOR
    )
}

/// `sink` with its lane axes expanded; vectors are at most `max_vector_bytes` wide; with `mulacc`, the float
/// multiply-adds expansion makes are MULACCs (see [`super::decompositions::fuse_mulacc`]); with `half`, float16
/// loads, stores and conversions are vectors too (see [`vector_storage`]); `overread` bytes past a global buffer's end
/// are readable (see [`masked_load`]).
pub fn expand(sink: &UOp, max_vector_bytes: usize, mulacc: bool, half: bool, overread: usize) -> UOp {
    let sink = split_wide_lanes(sink, max_vector_bytes);
    let sink = &sink;
    let topo = sink.toposort();
    let lanes: Vec<UOp> = topo.iter().filter(|u| u.op == Ops::RANGE && is_lane(u)).cloned().collect();
    if lanes.is_empty() {
        return sink.clone();
    }
    let v = vector_axis(sink, &topo, &lanes, max_vector_bytes);
    // UNROLL axes other than the vector axis: a reduction's value becomes the combination of its copies
    let mut map: FxHashMap<UOp, UOp> = FxHashMap::default();
    for u in &topo {
        // (only reductions and what is above them change)
        if u.op != Ops::REDUCE && !u.src.iter().any(|s| map.contains_key(s)) {
            continue;
        }
        let mut nu = u.with_src(u.src.iter().map(|s| map.get(s).unwrap_or(s).clone()).collect::<Vec<_>>());
        if u.op == Ops::REDUCE {
            // (the copies in loop order, each its own value of the REDUCE: the accumulator adds them in turn)
            let (mut vals, mut ranges) = (vec![nu.src[0].clone()], Vec::new());
            for r in nu.src[1..].iter() {
                if is_lane(r) && Some(r) != v.as_ref() {
                    vals = vals.iter().flat_map(|x| sub_all(x, r, range_size(r))).collect();
                } else {
                    ranges.push(r.clone());
                }
            }
            nu = reduce_of(u, vals, ranges);
        }
        map.insert(u.clone(), nu);
    }
    // UPCAST axes other than the vector axis: copies of the stores
    let mut stores: Vec<UOp> = map.get(sink).unwrap_or(sink).src.to_vec();
    for r in lanes.iter().filter(|r| r.axis().1 == AxisType::Upcast && Some(*r) != v.as_ref()) {
        let copies = sub_all(&UOp::sink(stores.clone()), r, range_size(r));
        stores = (0..stores.len()).flat_map(|i| copies.iter().map(move |c| c.src[i].clone())).collect();
    }
    let pm = if mulacc { &*super::decompositions::SYMBOLIC_MULACC } else { &*SYMBOLIC };
    let sink = graph_rewrite(&UOp::sink(stores), pm, &mut (), "expand");
    let sink = match v {
        Some(v) => vectorize(&sink, &v, half, overread),
        None => sink,
    };
    UOp::sink(sink.src.iter().filter_map(live_store).collect::<Vec<_>>())
}

/// Bytes a vector lane takes: the widest element loaded, stored, or converted from a half (halves compute as
/// float32); 4 when there is none.
fn lane_bytes(topo: &[UOp]) -> usize {
    let widths = topo.iter().filter_map(|u| match u.op {
        Ops::LOAD | Ops::STORE => Some(u.src[0].dtype.base().itemsize()),
        Ops::CAST if u.src[0].dtype.scalar == Scalar::Float16 => Some(u.dtype.itemsize()),
        _ => None,
    });
    widths.max().unwrap_or(4)
}

/// `sink` with each lane axis wider than one vector register split into an outer lane axis of register-wide
/// chunks and an inner one of a register's lanes: compilers spill GNU vectors wider than the machine's registers
/// through memory (gcc does), while register-wide vectors side by side stay in registers.
fn split_wide_lanes(sink: &UOp, max_bytes: usize) -> UOp {
    if max_bytes == 0 {
        return sink.clone();
    }
    let topo = sink.toposort();
    let item = lane_bytes(&topo);
    let w = (max_bytes / item.max(1)).max(1);
    let mut next_id = topo.iter().filter(|u| u.op == Ops::RANGE).map(|r| r.axis().0).max().unwrap_or(0) + 1;
    let mut split: FxHashMap<UOp, [UOp; 2]> = FxHashMap::default();
    for r in topo.iter().filter(|u| u.op == Ops::RANGE && is_lane(u) && range_size(u) > w && range_size(u).is_multiple_of(w)) {
        let kind = r.axis().1;
        let outer = UOp::range(r.src[0].const_like((range_size(r) / w) as i64), next_id, kind);
        let inner = UOp::range(r.src[0].const_like(w as i64), next_id + 1, kind);
        next_id += 2;
        split.insert(r.clone(), [outer, inner]);
    }
    if split.is_empty() {
        return sink.clone();
    }
    // the range becomes `outer * w + inner` in expressions, and both ranges where a REDUCE lists it
    let mut map: FxHashMap<UOp, UOp> = FxHashMap::default();
    for u in &topo {
        let nu = match (u.op, split.get(u)) {
            (Ops::RANGE, Some([outer, inner])) => &(outer * w as i64) + inner,
            (Ops::REDUCE, _) => {
                let ranges = u.src[1..].iter().flat_map(|r| split.get(r).cloned().map_or_else(|| vec![map[r].clone()], Vec::from));
                u.with_src(std::iter::once(map[&u.src[0]].clone()).chain(ranges).collect::<Vec<_>>())
            }
            _ => u.with_src(u.src.iter().map(|s| map[s].clone()).collect::<Vec<_>>()),
        };
        map.insert(u.clone(), nu);
    }
    graph_rewrite(&map[sink], &SYMBOLIC, &mut (), "split lanes")
}

/// A store whose gate became a constant in its lane (a padded lane, a full vector): dropped, or ungated.
fn live_store(s: &UOp) -> Option<UOp> {
    use crate::dtype::ConstValue::Bool;
    match s.src[0].src.get(2).and_then(UOp::const_value) {
        Some(Bool(false)) => None,
        Some(Bool(true)) => Some(s.with_src([s.src[0].with_src(s.src[0].src[..2].to_vec()), s.src[1].clone()])),
        _ => Some(s.clone()),
    }
}

/// The lane axis to compute as vectors: an UPCAST the first store walks with unit stride, else an UNROLL, else an
/// UPCAST, that a load walks with unit stride; its lanes are a power of two that fits `max_bytes`.
fn vector_axis(sink: &UOp, topo: &[UOp], lanes: &[UOp], max_bytes: usize) -> Option<UOp> {
    let item = lane_bytes(topo);
    // C vector types are a power of two wide
    let fits = |r: &&UOp| range_size(r).is_power_of_two() && range_size(r) * item <= max_bytes;
    // consecutive in the lanes, under a gate (if any) that is the same for every lane
    let unit = |index: &UOp, r: &UOp| stride(&index.src[1], r) == Some(1) && index.src.get(2).is_none_or(|g| !g.toposort().contains(r));
    let store = sink.src.iter().find(|s| s.op == Ops::STORE)?;
    let loads: Vec<&UOp> = topo.iter().filter(|u| u.op == Ops::LOAD).collect();
    let loaded = |r: &&UOp| loads.iter().any(|l| unit(&l.src[0], r));
    // (a store may be masked per lane, as in a padded axis: it is then written lane by lane, once per tile)
    if let Some(r) = lanes.iter().filter(fits).find(|r| r.axis().1 == AxisType::Upcast && stride(&store.src[0].src[1], r) == Some(1)) {
        // (a reduction's loads, where it has any: an epilogue's per-channel scale is not worth turning the lanes for)
        let reduced: FxHashSet<UOp> = topo.iter().filter(|u| u.op == Ops::REDUCE).flat_map(|u| u.src[0].toposort()).collect();
        let unit_loads = |r: &UOp| loads.iter().filter(|l| (reduced.is_empty() || reduced.contains(*l)) && unit(&l.src[0], r)).count();
        // unless another lane axis has more unit-stride loads, where this axis would gather them (a matrix-vector
        // product over rows of a weight: its lanes are the rows, the weight's bytes run along the reduction; a strided
        // convolution over output channels: its weight's bytes run along them)
        let better = lanes.iter().filter(fits).filter(|u| *u != r).max_by_key(|u| unit_loads(u));
        // or than a vector narrower than a register, where an UPCAST whose loads are whole registers is there (a
        // convolution's 24-wide rows in vectors of 8 on AVX-512, beside its 32 output channels in two registers: a
        // load and a broadcast a multiply-add, where whole registers of channels share each broadcast pixel)
        let full = |u: &UOp| range_size(u) * item == max_bytes;
        let whole = lanes.iter().filter(fits).find(|u| u.axis().1 == AxisType::Upcast && full(u) && unit_loads(u) > 0);
        if let Some(w) = whole.filter(|w| !full(r) && unit_loads(w) >= unit_loads(r)) {
            return Some(w.clone());
        }
        return Some(better.filter(|u| unit_loads(u) > unit_loads(r) && unit_loads(r) == 0).unwrap_or(r).clone());
    }
    let unroll = lanes.iter().filter(fits).find(|r| r.axis().1 == AxisType::Unroll && loaded(r));
    // else an UPCAST a load walks with unit stride (stored lane by lane)
    unroll.or_else(|| lanes.iter().filter(fits).find(|r| r.axis().1 == AxisType::Upcast && loaded(r))).cloned()
}

/// The terms of `gate` (an access's along lane axis `v`) split into those the same in every lane (`kept`, joined) and,
/// from each bound `a < c` on an index `a` that steps by one a lane, the lanes `c - a` (at lane 0) it lets through
/// (`counts`, int32, at least one); `None` where another term depends on the lane or a count may not fit an int32.
fn lane_bounds(gate: &UOp, v: &UOp, dep: &FxHashSet<UOp>) -> Option<(Option<UOp>, Vec<UOp>)> {
    let (mut kept, mut counts) = (Vec::new(), Vec::new());
    for t in gate.split_uop(Ops::AND) {
        match t.op {
            _ if !dep.contains(&t) => kept.push(t),
            Ops::CMPLT if t.src[0].dtype.is_int() && stride(&t.src[0], v) == Some(1) && !dep.contains(&t.src[1]) => {
                let c = (&t.src[1] - &sub(&t.src[0], v, 0)).simplify();
                let (lo, hi) = c.bounds();
                (lo >= i128::from(i32::MIN) && hi <= i128::from(i32::MAX)).then_some(())?;
                counts.push(c.cast(dtypes::INT32));
            }
            _ => return None,
        }
    }
    (!counts.is_empty()).then(|| (kept.into_iter().reduce(|a, b| &a & &b), counts))
}

/// A load of 4-byte lanes (`u`) at consecutive addresses along lane axis `v` under a gate with bounds on the lane
/// ([`lane_bounds`]; a padded row's last vector: `col < 257`), as one vector load of all `w` lanes and a select of the
/// lanes where `iota < count` (int32 lane masks) - where every lane's address, gate or not, lies in the buffer or the
/// `overread` bytes after it. Lane by lane it was a compare, a branch and an insert a lane (a matmul operand's padded
/// panel copy: 64-77 -> 51-57 us). The terms the same in every lane stay the load's gate.
fn masked_load(u: &UOp, v: &UOp, dep: &FxHashSet<UOp>, overread: usize) -> Option<UOp> {
    let (w, idx) = (range_size(v), &u.src[0]);
    let buf = &idx.src[0];
    if buf.op != Ops::DEFINE_GLOBAL || !mask_lanes(u.dtype) || stride(&idx.src[1], v) != Some(1) {
        return None;
    }
    let (kept, counts) = lane_bounds(idx.src.get(2)?, v, dep)?;
    let (base, item) = (sub(&idx.src[1], v, 0).simplify(), u.dtype.itemsize() as i128);
    let (lo, hi) = base.bounds();
    if lo < 0 || (hi + w as i128) * item > i128::from(buf.dtype.size.max(0)) * item + overread as i128 {
        return None;
    }
    let ints = dtypes::INT32.vec(w as u16);
    let iota = UOp::new(Ops::VECTORIZE, ints, (0..w).map(|k| UOp::const_(dtypes::INT32, k as i64)).collect::<Vec<_>>(), Arg::None);
    let below = |c: UOp| {
        UOp::new(Ops::CMPLT, dtypes::BOOL.vec(w as u16), [iota.clone(), UOp::new(Ops::VECTORIZE, ints, vec![c; w], Arg::None)], Arg::None)
    };
    let mask = counts.into_iter().map(below).reduce(|a, b| &a & &b)?;
    let load = UOp::new(
        Ops::LOAD,
        u.dtype.vec(w as u16),
        [idx.with_src([buf.clone(), base].into_iter().chain(kept).collect::<Vec<_>>())],
        Arg::None,
    );
    let zero = UOp::new(Ops::VECTORIZE, load.dtype, vec![u.const_like(0i64); w], Arg::None);
    Some(UOp::new(Ops::WHERE, load.dtype, [mask, load, zero], Arg::None))
}

/// The gate under which a store at consecutive addresses along lane axis `v` (`w` lanes) with bounds on the lane in
/// its gate ([`lane_bounds`]) writes every lane: all its counts at least `w`, and its terms the same in every lane.
fn whole_store(index: &UOp, v: &UOp, dep: &FxHashSet<UOp>) -> Option<UOp> {
    let gate = index.src.get(2).filter(|g| dep.contains(*g))?;
    if index.src[0].op != Ops::DEFINE_GLOBAL || stride(&index.src[1], v) != Some(1) {
        return None;
    }
    let (kept, counts) = lane_bounds(gate, v, dep)?;
    let w = range_size(v) as i64 - 1;
    counts.into_iter().map(|c| UOp::const_(dtypes::INT32, w).cmplt(&c)).chain(kept).reduce(|a, b| &a & &b)
}

/// The lanes of vector `x` (a power of two of them) combined by `op` as a tree of halves, `lo op hi` (shuffles in C),
/// until two lanes are left: log2(lanes) vector ops where lane by lane took lanes - 1 scalar ones, each extracting a
/// lane (an attention scores kernel's 16-lane sums over a 64-wide head took 3x its multiply-adds' time).
fn horizontal(mut x: UOp, op: Ops) -> UOp {
    assert!(x.dtype.count.is_power_of_two(), "horizontal: {} lanes, not a power of two", x.dtype.count);
    while x.dtype.count > 2 {
        let h = x.dtype.count / 2;
        let half =
            |from: u16| UOp::new(Ops::GEP, x.dtype.scalar().vec(h), [x.clone()], Arg::Ints((from..from + h).map(i64::from).collect()));
        x = half(0).alu(op, &[&half(h)]);
    }
    let lane = |k: i64| UOp::new(Ops::GEP, x.dtype.scalar(), [x.clone()], Arg::Int(k));
    lane(0).alu(op, &[&lane(1)])
}

/// `sink` with axis `v` (of `w` lanes) computed as vectors of `w` (float16 loads, stores and conversions too with
/// `half`; `overread` as in [`expand`]).
fn vectorize(sink: &UOp, v: &UOp, half: bool, overread: usize) -> UOp {
    let w = range_size(v);
    let topo = sink.toposort();
    let mut dep: FxHashSet<UOp> = FxHashSet::default();
    let mut vec: FxHashMap<UOp, UOp> = FxHashMap::default();
    // lane k of a vectorized node
    let lane = |vec: &FxHashMap<UOp, UOp>, x: &UOp, k: usize| -> UOp {
        let x = &vec[x];
        match x.op {
            _ if x.dtype.count == 1 => x.clone(),
            Ops::VECTORIZE => x.src[k].clone(),
            _ => UOp::new(Ops::GEP, x.dtype.scalar(), [x.clone()], Arg::Int(k as i64)),
        }
    };
    let lanes_of = |vec: &FxHashMap<UOp, UOp>, u: &UOp| -> UOp {
        let ls: Vec<UOp> = (0..w)
            .map(|k| u.replace(u.op, u.dtype, u.src.iter().map(|s| lane(vec, s, k)).collect::<Vec<_>>(), u.arg.clone(), u.tag))
            .collect();
        UOp::new(Ops::VECTORIZE, u.dtype.vec(w as u16), ls, Arg::None)
    };
    let broadcast = |x: &UOp| {
        if x.dtype.count > 1 {
            x.clone()
        } else {
            UOp::new(Ops::VECTORIZE, x.dtype.vec(w as u16), vec![x.clone(); w], Arg::None)
        }
    };
    // a global access at `index` whose lanes are consecutive, under a gate the same for every lane: the INDEX of lane 0
    // an index at lane 0
    let base = |index: &UOp| sub(index, v, 0).simplify();
    let unit_base = |index: &UOp, dt: DType, dep: &FxHashSet<UOp>| -> Option<UOp> {
        let ok = index.src[0].op == Ops::DEFINE_GLOBAL && vector_storage(dt, half) && index.src.get(2).is_none_or(|g| !dep.contains(g));
        (ok && stride(&index.src[1], v) == Some(1)).then(|| {
            index.with_src(
                std::iter::once(index.src[0].clone()).chain([base(&index.src[1])]).chain(index.src.get(2).cloned()).collect::<Vec<_>>(),
            )
        })
    };
    // lane k of an access: at `base + k * stride` when the stride is known, else substituted
    let lane_indexes = |index: &UOp| -> Vec<UOp> {
        let st = stride(&index.src[1], v);
        let b = st.map(|_| base(&index.src[1]));
        (0..w)
            .map(|k| {
                let at = match (st, &b) {
                    (Some(st), Some(b)) => b + (k as i128 * st) as i64,
                    _ => sub(&index.src[1], v, k).simplify(),
                };
                let src: Vec<UOp> =
                    [index.src[0].clone(), at].into_iter().chain(index.src.get(2).map(|g| sub(g, v, k).simplify())).collect();
                index.with_src(src)
            })
            .collect()
    };
    let mut out: Vec<UOp> = Vec::new();
    let mut sums: Vec<HorizontalSum> = Vec::new();
    for u in &topo {
        // a node whose value is the same in every lane stays scalar (its sources may have been rebuilt)
        if u != v && !u.src.iter().any(|s| dep.contains(s)) {
            let nu = u.with_src(u.src.iter().map(|s| vec[s].clone()).collect::<Vec<_>>());
            if u.op == Ops::STORE {
                out.push(nu.clone());
            }
            vec.insert(u.clone(), nu);
            continue;
        }
        // a reduction over the lanes is the same in every lane
        if !(u.op == Ops::REDUCE && u.src[1..].contains(v)) {
            dep.insert(u.clone());
        }
        let nu = match u.op {
            Ops::RANGE => {
                UOp::new(Ops::VECTORIZE, u.dtype.vec(w as u16), (0..w).map(|k| u.const_like(k as i64)).collect::<Vec<_>>(), Arg::None)
            }
            Ops::INDEX | Ops::SINK => u.clone(),
            Ops::LOAD => match unit_base(&u.src[0], u.dtype, &dep) {
                Some(index) => UOp::new(Ops::LOAD, u.dtype.vec(w as u16), [index], Arg::None),
                None => masked_load(u, v, &dep, overread).unwrap_or_else(|| {
                    let ls: Vec<UOp> = lane_indexes(&u.src[0]).into_iter().map(|i| u.with_src([i])).collect();
                    UOp::new(Ops::VECTORIZE, u.dtype.vec(w as u16), ls, Arg::None)
                }),
            },
            Ops::STORE => {
                let val = &u.src[1];
                let idx = &u.src[0];
                // (a store masked by a bound on the lane, a padded row's: one vector store where every lane is written,
                // lane by lane only where not)
                let whole = || vector_storage(val.dtype, half).then(|| whole_store(idx, v, &dep)).flatten();
                match (unit_base(idx, val.dtype, &dep), whole()) {
                    (Some(index), _) => out.push(u.with_src([index, broadcast(&vec[val])])),
                    (None, Some(full)) => {
                        out.push(u.with_src([idx.with_src([idx.src[0].clone(), base(&idx.src[1]), full.clone()]), broadcast(&vec[val])]));
                        let part = |i: UOp| i.with_src([i.src[0].clone(), i.src[1].clone(), (&i.src[2] & &full.logical_not()).simplify()]);
                        out.extend(lane_indexes(idx).into_iter().enumerate().map(|(k, i)| u.with_src([part(i), lane(&vec, val, k)])));
                    }
                    (None, None) => out.extend(lane_indexes(idx).into_iter().enumerate().map(|(k, i)| u.with_src([i, lane(&vec, val, k)]))),
                }
                continue;
            }
            Ops::REDUCE => {
                let Arg::Op(op) = u.arg else { unreachable!() };
                let (vals, ranges) = u.reduce_parts();
                let over_lanes = ranges.contains(v);
                let ranges: Vec<UOp> = ranges.iter().filter(|r| *r != v).cloned().collect();
                let vectorized = matches!(op, Ops::ADD | Ops::MUL | Ops::MAX) && vector_dtype(u.dtype);
                match (over_lanes, vectorized) {
                    (false, true) => reduce_of(u, vals.iter().map(|x| broadcast(&vec[x])).collect(), ranges),
                    (false, false) => {
                        let ls: Vec<UOp> =
                            (0..w).map(|k| reduce_of(u, vals.iter().map(|x| lane(&vec, x, k)).collect(), ranges.clone())).collect();
                        UOp::new(Ops::VECTORIZE, u.dtype.vec(w as u16), ls, Arg::None)
                    }
                    (true, true) if vals.iter().any(|x| vec[x].dtype.count > 1) => {
                        let acc = reduce_of(u, vals.iter().map(|x| broadcast(&vec[x])).collect(), ranges);
                        let sum = horizontal(acc.clone(), op);
                        sums.push((acc, op, sum.clone()));
                        sum
                    }
                    (true, _) => {
                        reduce_of(u, vals.iter().flat_map(|x| (0..w).map(|k| lane(&vec, x, k)).collect::<Vec<_>>()).collect(), ranges)
                    }
                }
            }
            // a cast of lane masks to 4-byte lanes selects 1 or 0 by their bits (lane by lane it was an extract, a
            // compare and a conversion each: a max pool's backward, which counts the window's maxima, ran at 1 GB/s)
            Ops::CAST if mask_lanes(u.dtype) && is_mask(&vec[&u.src[0]]) => {
                let (one, zero) = (broadcast(&u.const_like(1i64)), broadcast(&u.const_like(0i64)));
                UOp::new(Ops::WHERE, u.dtype.vec(w as u16), [vec[&u.src[0]].clone(), one, zero], Arg::None)
            }
            // (a CAST may widen or narrow: bytes to floats, as dequantization does; halves to and from float32)
            Ops::CAST | Ops::BITCAST
                if vector_dtype(u.dtype)
                    && vector_dtype(u.src[0].dtype)
                    && (u.op == Ops::CAST || u.dtype.itemsize() == u.src[0].dtype.itemsize()) =>
            {
                UOp::new(u.op, u.dtype.vec(w as u16), [broadcast(&vec[&u.src[0]])], Arg::None)
            }
            // (halves loaded as a vector: one built from computed lanes stays lane by lane, where clang keeps each
            // lane's float product unrounded, as a scalar half's arithmetic does)
            Ops::CAST
                if [u.dtype, u.src[0].dtype].iter().all(|&d| vector_storage(d, half))
                    && [u.dtype, u.src[0].dtype].iter().any(|d| d.scalar == Scalar::Float32)
                    && (u.src[0].dtype.scalar != Scalar::Float16 || vec[&u.src[0]].op == Ops::LOAD) =>
            {
                UOp::new(u.op, u.dtype.vec(w as u16), [broadcast(&vec[&u.src[0]])], Arg::None)
            }
            // a comparison of 4-byte vectors is a vector of lane masks (C's and OpenCL's vector `<`: all bits set where
            // true), which a select and the masks' AND, OR and XOR take whole; other users take its lanes. (Not of
            // lanes gathered one by one, as a padded concatenation's: per lane, the C compiler folds each unrolled
            // copy's known conditions, 3.5x faster in a quantized activation's packing kernel; loaded lanes fold to
            // nothing, so a vector of loads is compared whole: a max pool's window maxima, one per pair of lanes)
            Ops::CMPLT | Ops::CMPNE | Ops::CMPEQ
                if mask_lanes(u.src[0].dtype)
                    && u.src[0].dtype == u.src[1].dtype
                    && u.src.iter().all(|s| whole(&vec[s]) || loaded(&vec[s])) =>
            {
                UOp::new(u.op, u.dtype.vec(w as u16), [broadcast(&vec[&u.src[0]]), broadcast(&vec[&u.src[1]])], Arg::None)
            }
            Ops::AND | Ops::OR | Ops::XOR if u.dtype.is_bool() && u.src.iter().all(|s| is_mask(&vec[s])) => {
                u.replace(u.op, u.dtype.vec(w as u16), u.src.iter().map(|s| vec[s].clone()).collect::<Vec<_>>(), Arg::None, u.tag)
            }
            // a select of 4-byte lanes on lane masks picks bits (each lane alone cost a compare, a branchless select
            // and an insert: a softmax's causal mask ran lane by lane)
            Ops::WHERE if mask_lanes(u.dtype) && is_mask(&vec[&u.src[0]]) && u.src[1..].iter().all(|s| s.dtype == u.dtype) => {
                let src = [vec[&u.src[0]].clone(), broadcast(&vec[&u.src[1]]), broadcast(&vec[&u.src[2]])];
                u.replace(Ops::WHERE, u.dtype.vec(w as u16), src, u.arg.clone(), u.tag)
            }
            // a select on a condition the same in every lane picks whole vectors (C's `?:` on vector operands); per
            // lane, gcc 12's SLP vectorizer miscompiles it on AVX-512 (all lanes but the first come out 0)
            Ops::WHERE if vector_dtype(u.dtype) && !dep.contains(&u.src[0]) && u.src[1..].iter().all(|s| s.dtype == u.dtype) => {
                let src = [vec[&u.src[0]].clone(), broadcast(&vec[&u.src[1]]), broadcast(&vec[&u.src[2]])];
                u.replace(Ops::WHERE, u.dtype.vec(w as u16), src, u.arg.clone(), u.tag)
            }
            op if vector_op(op) && vector_dtype(u.dtype) && u.src.iter().all(|s| s.dtype == u.dtype) => {
                // C broadcasts a scalar operand of arithmetic; MAX's bit select and shifts need both as vectors
                let both = matches!(op, Ops::MAX | Ops::DP4A | Ops::DP4AS | Ops::SHL | Ops::SHR | Ops::AND | Ops::OR | Ops::XOR);
                let src: Vec<UOp> = u.src.iter().map(|s| if both { broadcast(&vec[s]) } else { vec[s].clone() }).collect();
                u.replace(op, u.dtype.vec(w as u16), src, u.arg.clone(), u.tag)
            }
            _ => lanes_of(&vec, u),
        };
        vec.insert(u.clone(), nu);
    }
    transpose_sums(&UOp::sink(out), &sums)
}

/// A vector accumulator, its reduction's op, and [`horizontal`] of it.
type HorizontalSum = (UOp, Ops, UOp);

/// `sink` with the horizontal sums of `sums` (each a vector accumulator, its op and [`horizontal`] of it) of 8 lanes
/// or more taken four (or two) at a time where their accumulators read the same ranges, as one tree: each level pairs
/// the vectors, a vector of both's low halves (of each of its segments) combined with one of their high halves, until
/// one vector holds a segment of each; then each segment is halved as [`horizontal`] does, leaving one lane per
/// accumulator. The same lanes meet in the same order, so the sums are bit for bit those of separate trees, in a
/// third as many vector ops (SmolLM2's attention scores, 12 sums of 16 lanes each 4 keys, on one Zen 4 core from L2:
/// 21.7 -> 17.5-17.8 us under gcc; clang, which had merged the separate trees, 19.0 -> 19.2-19.3).
fn transpose_sums(sink: &UOp, sums: &[HorizontalSum]) -> UOp {
    const GROUP: usize = 4;
    let ranges = |acc: &UOp| {
        let mut r: Vec<UOp> = acc.toposort().into_iter().filter(|u| u.op == Ops::RANGE).collect();
        r.sort_by_key(|r| r.axis().0);
        r
    };
    let mut groups: Vec<(Vec<UOp>, Vec<&HorizontalSum>)> = Vec::new();
    for s in sums.iter().filter(|(acc, ..)| acc.dtype.count >= 8) {
        let key = ranges(&s.0);
        match groups.iter_mut().find(|(k, g)| *k == key && g.len() < GROUP && g[0].0.dtype == s.0.dtype && g[0].1 == s.1) {
            Some((_, g)) => g.push(s),
            None => groups.push((key, vec![s])),
        }
    }
    let mut map: FxHashMap<UOp, UOp> = FxHashMap::default();
    // (in order: an accumulator that reads an earlier group's sum reads its combined tree's lane)
    for (_, g) in groups.iter().filter(|(_, g)| g.len().is_power_of_two() && g.len() > 1) {
        let (op, sc, lanes) = (g[0].1, g[0].0.dtype.scalar(), g[0].0.dtype.count as usize);
        let gep = |x: &UOp, i: usize| UOp::new(Ops::GEP, sc, [x.clone()], Arg::Int(i as i64));
        // lanes of `x` (of segments `seg` long): each segment's low or high half
        let half = |x: &UOp, seg: usize, hi: bool| -> Vec<UOp> {
            let n = x.dtype.count as usize / seg;
            (0..n).flat_map(|s| (0..seg / 2).map(move |i| s * seg + i + if hi { seg / 2 } else { 0 })).map(|i| gep(x, i)).collect()
        };
        let shuffle = |ls: Vec<UOp>| UOp::new(Ops::VECTORIZE, sc.vec(ls.len() as u16), ls, Arg::None);
        let (mut vs, mut seg): (Vec<UOp>, usize) = (g.iter().map(|s| s.0.substitute(&map)).collect(), lanes);
        while vs.len() > 1 {
            vs = vs
                .chunks(2)
                .map(|p| {
                    let lo = shuffle([half(&p[0], seg, false), half(&p[1], seg, false)].concat());
                    lo.alu(op, &[&shuffle([half(&p[0], seg, true), half(&p[1], seg, true)].concat())])
                })
                .collect();
            seg /= 2;
        }
        let mut x = vs.pop().expect("a group of sums");
        while seg > 1 {
            x = shuffle(half(&x, seg, false)).alu(op, &[&shuffle(half(&x, seg, true))]);
            seg /= 2;
        }
        map.extend(g.iter().enumerate().map(|(k, s)| (s.2.clone(), gep(&x, k))));
    }
    if map.is_empty() {
        sink.clone()
    } else {
        sink.substitute(&map)
    }
}
