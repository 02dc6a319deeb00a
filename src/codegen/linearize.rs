//! Linearize: orders a lowered kernel's UOps for printing. Output loops open first, in axis order (THREAD outermost); every node is placed in
//! the innermost loop it needs, as early as possible (loop-invariant work stays outside reduction loops);
//! reduction loops open when their body needs them and close at their END (tinygrad `codegen/linearize.py`); an INNER
//! loop opens with the reduction loops it nests in, so what ignores it is placed inside it too (the C compiler hoists it).

use crate::dtype::dtypes;
use crate::uop::{Arg, AxisType, Ops, UOp};
use rustc_hash::FxHashMap;

/// The UOps of `sink` in print order: RANGE opens a loop, END closes the loops among its sources.
pub fn linearize(sink: &UOp) -> Vec<UOp> {
    order(&sink.toposort())
}

/// Whether loop `r` opens outside the THREAD loop: an output loop of symbolic size (a decode step's blocks of keys),
/// so that each core's part of each of its iterations is one contiguous block, where a THREAD loop outside it would
/// stride each core across all of them.
pub fn outside_thread(r: &UOp) -> bool {
    r.axis().1 == AxisType::Loop && r.src[0].const_int().is_none()
}

fn order<'a>(topo: &'a [UOp]) -> Vec<UOp> {
    let mut ranges: Vec<&UOp> = topo.iter().filter(|u| u.op == Ops::RANGE).collect();
    ranges.sort_by_key(|r| (!outside_thread(r), r.axis().1.order(), r.axis().0));
    assert!(ranges.len() <= 64, "linearize: more than 64 loops");
    let bit = |r: &UOp| 1u64 << ranges.iter().position(|x| *x == r).unwrap();
    // nodes by position in `topo`: the tables below are indexed by it
    let at: FxHashMap<&UOp, usize> = topo.iter().enumerate().map(|(i, u)| (u, i)).collect();
    // the loops each node must sit in
    let mut need: Vec<u64> = vec![0; topo.len()];
    let mut closed_somewhere = 0u64;
    // the sets of loops each END closes
    let mut ends: Vec<u64> = Vec::new();
    // the loops whose ENDs each node comes after, and, per loop, those that must close before it opens (a grouped
    // reduction's second stage reads what the first one's END finished)
    let (mut after, mut before): (Vec<u64>, [u64; 64]) = (vec![0; topo.len()], [0; 64]);
    // the loops each END closes, by node
    let mut closes: Vec<u64> = vec![0; topo.len()];
    // each node's users, and how many distinct sources each still waits for
    let (mut users, mut waiting): (Vec<Vec<usize>>, Vec<usize>) = (vec![Vec::new(); topo.len()], vec![0; topo.len()]);
    for (i, u) in topo.iter().enumerate() {
        let mut srcs: Vec<usize> = u.src.iter().map(|s| at[s]).collect();
        let mut m = srcs.iter().fold(0, |m, &s| m | need[s]);
        after[i] = srcs.iter().fold(0, |m, &s| m | after[s]);
        if u.op == Ops::RANGE {
            m |= bit(u);
        }
        if u.op == Ops::END {
            let c = u.src.iter().filter(|s| s.op == Ops::RANGE).fold(0, |a, r| a | bit(r));
            closed_somewhere |= c;
            closes[i] = c;
            m &= !c;
            // (an END among the sources is a loop nested in these: an INNER axis's, inside its reduction's loops,
            // which open together)
            let nested = u.src.iter().filter(|s| s.op == Ops::END).fold(0, |a, s| a | closes[at[s]]);
            ends.push(c | nested);
            (0..64).filter(|b| c >> b & 1 != 0).for_each(|b| before[b] |= after[i] & !c & !nested);
            after[i] |= c;
        }
        need[i] = m;
        srcs.dedup();
        waiting[i] = srcs.len();
        srcs.iter().for_each(|&s| users[s].push(i));
    }
    let need = |u: &UOp| need[at[u]];
    let mut closed = 0u64;
    let (mut out, mut open): (Vec<UOp>, Vec<&UOp>) = (Vec::with_capacity(topo.len()), Vec::new());
    let mut ready: Vec<&UOp> = topo.iter().filter(|u| u.src.is_empty()).collect();
    let mut emit = |u: &'a UOp, out: &mut Vec<UOp>, ready: &mut Vec<&'a UOp>| {
        if let Some(i) = ready.iter().position(|x| *x == u) {
            ready.remove(i);
        }
        out.push(u.clone());
        for &c in &users[at[u]] {
            waiting[c] -= 1;
            if waiting[c] == 0 {
                ready.push(&topo[c]);
            }
        }
    };
    let open_mask = |open: &Vec<&UOp>| open.iter().fold(0, |m, r| m | bit(r));
    // output loops (those no END closes) open first, outermost first, after their bounds (constants, or
    // expressions over variables)
    for &r in ranges.iter().filter(|r| bit(r) & closed_somewhere == 0) {
        for s in r.src[0].toposort() {
            assert!(s.op != Ops::RANGE, "linearize: output loop bound depends on a loop");
            if !out.contains(&s) {
                emit(&topo[at[&s]], &mut out, &mut ready);
            }
        }
        emit(r, &mut out, &mut ready);
        open.push(r);
    }
    loop {
        let om = open_mask(&open);
        // 1. anything that fits in the open loops (RANGEs open only explicitly)
        if let Some(i) = ready.iter().position(|u| u.op != Ops::RANGE && u.op != Ops::END && need(u) & !om == 0) {
            emit(ready[i], &mut out, &mut ready);
            continue;
        }
        // 2. an END whose loops are the innermost open ones
        if let Some(i) = ready.iter().position(|u| u.op == Ops::END) {
            let u = ready[i];
            let n = u.src.iter().filter(|s| s.op == Ops::RANGE).count();
            let closing: Vec<&UOp> = open.split_off(open.len() - n);
            assert!(closing.iter().all(|r| u.src.contains(r)), "linearize: END closes loops that are not innermost");
            closing.iter().for_each(|r| closed |= bit(r));
            emit(u, &mut out, &mut ready);
            continue;
        }
        // 3. open a reduction's loops, all of them together (those its END closes), and only when no other
        //    reduction's loops are open: reductions in one kernel run one after another, never nested
        if open.iter().any(|r| bit(r) & closed_somewhere != 0) {
            break;
        }
        let group = |m: u64| ends.iter().filter(|g| *g & m != 0).fold(m, |a, g| a | g);
        let missing = |u: &UOp| group(if u.op == Ops::RANGE { bit(u) } else { need(u) & !om });
        let unblocked = |u: &&&UOp| {
            let m = missing(u);
            (0..64).filter(|b| m >> b & 1 != 0).all(|b| before[b] & !closed == 0)
        };
        let key = |u: &&&UOp| ((group(need(u) & !om)).count_ones(), u.op != Ops::RANGE);
        let Some(u) = ready.iter().filter(unblocked).min_by_key(key).or_else(|| ready.iter().min_by_key(key)).copied() else { break };
        let missing = missing(u);
        for r in ranges.iter().copied().filter(|r| missing & bit(r) != 0).collect::<Vec<_>>() {
            assert!(ready.contains(&r), "linearize: loop bound not ready");
            emit(r, &mut out, &mut ready);
            open.push(r);
        }
    }
    assert!(ready.is_empty(), "linearize: {} nodes left unplaced: {:?}", ready.len(), ready.iter().map(|u| u.op).collect::<Vec<_>>());
    // close the output loops
    while let Some(r) = open.pop() {
        out.push(UOp::new(Ops::END, dtypes::VOID, [r.clone()], Arg::None));
    }
    out
}
