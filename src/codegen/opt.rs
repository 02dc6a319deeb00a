//! Optimizations on kernel axes (tinygrad `codegen/opt/`): UPCAST of the innermost output axis, which unrolls it
//! into lanes; with `vectorize`, lanes that touch consecutive elements become vector loads and stores, and in
//! reduce kernels the lanes share each loaded operand (a register tile). NOOPT=1 applies nothing.

use crate::helpers::NOOPT;
use crate::uop::{Arg, Ops, UOp};
use rustc_hash::FxHashMap;

/// An applied optimization (tinygrad `Opt`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Opt {
    /// The outermost output axis runs split over cores.
    Thread { axis: i64, amount: usize },
    /// `amount` iterations of axis `axis` run as lanes of one iteration.
    Upcast { axis: i64, amount: usize },
}

impl std::fmt::Display for Opt {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self {
            Opt::Thread { axis, amount } => write!(f, "THREAD(axis={axis}, {amount})"),
            Opt::Upcast { axis, amount } => write!(f, "UPCAST(axis={axis}, {amount})"),
        }
    }
}

fn axis(r: &UOp) -> i64 {
    match r.arg {
        Arg::Int(i) => i,
        _ => panic!("RANGE without an axis id"),
    }
}

/// Upcasts the innermost output axis of `sink` that splits into 16, 8 or 4 lanes (the widest dividing it whose
/// vector of the output dtype fits 64 bytes); returns the new sink and the opt applied.
pub fn upcast(sink: &UOp) -> (UOp, Option<Opt>) {
    if NOOPT.value() != 0 {
        return (sink.clone(), None);
    }
    let topo = sink.toposort();
    let reduce_ranges: Vec<&UOp> = topo.iter().filter(|u| u.op == Ops::REDUCE).flat_map(|u| u.src[1..].iter()).collect();
    let item = sink.src.iter().map(|s| s.src[0].dtype.base().itemsize()).max().unwrap_or(4).max(1);
    // the innermost output axis that splits into 4, 8 or 16 lanes (the widest that fits a 64-byte vector)
    let mut outs: Vec<&UOp> = topo.iter().filter(|u| u.op == Ops::RANGE && !reduce_ranges.contains(u)).collect();
    outs.sort_by_key(|r| -axis(r));
    let size = |r: &UOp| r.src[0].const_int().expect("RANGE with a constant size") as usize;
    let pick =
        outs.iter().find_map(|r| [16usize, 8, 4].into_iter().find(|&w| size(r).is_multiple_of(w) && w * item <= 64).map(|w| (*r, w)));
    let Some((r, w)) = pick else { return (sink.clone(), None) };
    let n = size(r);
    let r2 = r.with_src([r.src[0].const_like((n / w) as i64)]);
    let stores: Vec<UOp> = (0..w as i64)
        .flat_map(|k| {
            let map: FxHashMap<UOp, UOp> = [(r.clone(), &(&r2 * (w as i64)) + k)].into_iter().collect();
            sink.src.iter().map(move |s| s.substitute(&map)).collect::<Vec<_>>()
        })
        .collect();
    (UOp::sink(stores), Some(Opt::Upcast { axis: axis(r), amount: w }))
}

/// How far `index` moves when `r` steps by one: `Some(|stride|)` when that is a constant.
fn stride(index: &UOp, r: &UOp) -> Option<i128> {
    let map: FxHashMap<UOp, UOp> = [(r.clone(), r + 1)].into_iter().collect();
    (&index.substitute(&map) - index).simplify().const_int().map(i128::abs)
}

/// Orders each reduction's loops so the loads move least in the innermost one (cache-friendly access):
/// loops are sorted by the summed stride they cause over the reduction's loads, largest outermost, by giving
/// them new axis ids in that order (the linearizer opens loops by id).
pub fn order_reduce_loops(sink: &UOp) -> UOp {
    let topo = sink.toposort();
    let mut map: FxHashMap<UOp, UOp> = FxHashMap::default();
    let mut next_id = topo.iter().filter(|u| u.op == Ops::RANGE).map(axis).max().unwrap_or(0) + 1;
    for red in topo.iter().filter(|u| u.op == Ops::REDUCE) {
        let ranges: Vec<&UOp> = red.src[1..].iter().collect();
        if ranges.len() < 2 || ranges.iter().any(|r| map.contains_key(*r)) {
            continue;
        }
        let loads: Vec<UOp> = red.src[0]
            .toposort()
            .into_iter()
            .filter(|u| u.op == Ops::LOAD && u.src[0].op == Ops::INDEX && u.src[0].src.len() >= 2)
            .collect();
        let cost = |r: &UOp| -> i128 { loads.iter().map(|l| stride(&l.src[0].src[1], r).unwrap_or(1 << 20).min(1 << 20)).sum() };
        let mut order: Vec<(i128, &UOp)> = ranges.iter().map(|r| (cost(r), *r)).collect();
        // stable: among equal costs keep the original nesting
        order.sort_by_key(|(c, _)| -c);
        for (_, r) in order {
            map.insert(r.clone(), r.replace(Ops::RANGE, r.dtype, r.src.clone(), Arg::Int(next_id), r.tag));
            next_id += 1;
        }
    }
    if map.is_empty() {
        sink.clone()
    } else {
        sink.substitute(&map)
    }
}
