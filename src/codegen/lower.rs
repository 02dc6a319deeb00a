//! Lowering reductions: each `REDUCE(op)(value, ranges)` becomes a register accumulator initialized to the op's
//! identity, updated inside the ranges, and read after they END. Reductions over the same ranges (the lanes of
//! an upcast) share one loop; a vector REDUCE gets a vector accumulator. (tinygrad `codegen/late/devectorizer.py` `reduce_to_acc`.)

use crate::dtype::{dtypes, AddrSpace};
use crate::uop::{symbolic::identity_element, Arg, Ops, UOp};
use rustc_hash::FxHashMap;

/// `sink` with every REDUCE lowered to an accumulator, inner reductions first (groups in order of their first
/// REDUCE in the graph); with `mulacc`, a float sum of products accumulates by MULACC.
pub fn lower_reduces(sink: &UOp, mulacc: bool) -> UOp {
    let mut groups: Vec<(Vec<UOp>, Vec<UOp>)> = Vec::new();
    for r in sink.toposort().into_iter().filter(|u| u.op == Ops::REDUCE) {
        let ranges = r.src[1..].to_vec();
        match groups.iter_mut().find(|g| g.0 == ranges) {
            Some(g) => g.1.push(r),
            None => groups.push((ranges, vec![r])),
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
            let zero = UOp::const_(r.dtype.scalar(), identity_element(op, r.dtype.scalar()));
            let zero =
                if r.dtype.count > 1 { UOp::new(Ops::VECTORIZE, r.dtype, vec![zero; r.dtype.count as usize], Arg::None) } else { zero };
            let init = UOp::new(Ops::STORE, dtypes::VOID, [idx.clone(), zero], Arg::None);
            // the running value is read inside the loops (its ranges among its sources), so the update is placed
            // there even when the reduced value does not depend on them (a count: a sum of ones)
            let cur =
                UOp::new(Ops::LOAD, r.dtype, [idx.clone(), init].into_iter().chain(ranges.iter().cloned()).collect::<Vec<_>>(), Arg::None);
            // (a reduction inside the value, lowered already: a grouped reduction's partial)
            let val = if map.is_empty() { r.src[0].clone() } else { r.src[0].substitute(&map) };
            let update = match op {
                Ops::ADD => chain_wmma(&cur, &val).or_else(|| mulacc.then(|| super::decompositions::mulacc_update(&cur, &val)).flatten()),
                _ => None,
            };
            let update = update.unwrap_or_else(|| cur.alu(op, &[&val]));
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
