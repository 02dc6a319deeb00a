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

/// Upcasts the innermost output axis of `sink` by the widest lane count (16, 8, 4 or 2) that divides it and
/// fits a 64-byte vector of the output dtype; returns the new sink and the opt applied.
pub fn upcast(sink: &UOp) -> (UOp, Option<Opt>) {
    if NOOPT.value() != 0 {
        return (sink.clone(), None);
    }
    let topo = sink.toposort();
    let reduce_ranges: Vec<&UOp> = topo.iter().filter(|u| u.op == Ops::REDUCE).flat_map(|u| u.src[1..].iter()).collect();
    let Some(r) = topo.iter().filter(|u| u.op == Ops::RANGE && !reduce_ranges.contains(u)).max_by_key(|r| axis(r)) else {
        return (sink.clone(), None);
    };
    let n = r.src[0].const_int().expect("RANGE with a constant size") as usize;
    let item = sink.src.iter().map(|s| s.src[0].dtype.base().itemsize()).max().unwrap_or(4).max(1);
    let Some(w) = [16usize, 8, 4, 2].into_iter().find(|&w| n.is_multiple_of(w) && n > w && w * item <= 64) else {
        return (sink.clone(), None);
    };
    let r2 = r.with_src([r.src[0].const_like((n / w) as i64)]);
    let stores: Vec<UOp> = (0..w as i64)
        .flat_map(|k| {
            let map: FxHashMap<UOp, UOp> = [(r.clone(), &(&r2 * (w as i64)) + k)].into_iter().collect();
            sink.src.iter().map(move |s| s.substitute(&map)).collect::<Vec<_>>()
        })
        .collect();
    (UOp::sink(stores), Some(Opt::Upcast { axis: axis(r), amount: w }))
}
