//! Grouped reductions (tinygrad's GROUP/GROUPTOP lowering, `fix_group_for_reduce`). In: a kernel AST after opts in
//! which some REDUCEs run over GROUP_REDUCE axes. Out: each such REDUCE split in two through workgroup memory:
//! every thread of the group reduces its share (the REDUCE over the other axes), stores the partial result into a
//! DEFINE_LOCAL at its place in the workgroup, waits at a BARRIER, then reduces the group's partials in a new
//! loop; the GROUP_REDUCE axes become LOCAL axes (thread indices), and the kernel's stores are made by the group's
//! first thread only.

use super::opt::range_size;
use crate::dtype::{dtypes, AddrSpace};
use crate::uop::{Arg, AxisType, Ops, UOp};
use rustc_hash::FxHashMap;

/// `sink` with its grouped reductions lowered (unchanged when it has none).
pub fn lower_groups(sink: &UOp) -> UOp {
    let topo = sink.toposort();
    let is_group = |r: &UOp| r.op == Ops::RANGE && r.axis().1 == AxisType::GroupReduce;
    let groups: Vec<UOp> = topo.iter().filter(|u| is_group(u)).cloned().collect();
    if groups.is_empty() {
        return sink.clone();
    }
    let mut next_id = topo.iter().filter(|u| u.op == Ops::RANGE).map(|r| r.axis().0).max().unwrap_or(0) + 1;
    let mut map: FxHashMap<UOp, UOp> = FxHashMap::default();
    for (n, red) in topo.iter().filter(|u| u.op == Ops::REDUCE && u.src[1..].iter().any(is_group)).enumerate() {
        let Arg::Op(op) = red.arg else { unreachable!("REDUCE without an op") };
        let (grouped, other): (Vec<UOp>, Vec<UOp>) = red.src[1..].iter().cloned().partition(is_group);
        let partial = if other.is_empty() {
            red.src[0].clone()
        } else {
            UOp::new(Ops::REDUCE, red.dtype, std::iter::once(red.src[0].clone()).chain(other).collect::<Vec<_>>(), red.arg.clone())
        };
        // the partial's place in the workgroup's memory: its thread (LOCAL and GROUP axes) and lane (UPCAST axes)
        let mut place: Vec<UOp> = partial
            .toposort()
            .into_iter()
            .filter(|u| u.op == Ops::RANGE && matches!(u.axis().1, AxisType::Local | AxisType::Upcast | AxisType::GroupReduce))
            .filter(|r| partial.op != Ops::REDUCE || !partial.src[1..].contains(r))
            .collect();
        grouped.iter().for_each(|g| {
            if !place.contains(g) {
                place.push(g.clone());
            }
        });
        place.sort_by_key(|r| r.axis().0);
        let size: usize = place.iter().map(range_size).product();
        let index = |rs: &[UOp]| {
            rs.iter().zip(&place).fold(UOp::const_(dtypes::WEAKINT, 0), |acc, (r, p)| &(&acc * range_size(p) as i64) + r).simplify()
        };
        let local = UOp::new(Ops::DEFINE_LOCAL, red.dtype.ptr(size as i64, AddrSpace::Local), [], Arg::Int(n as i64));
        let store = UOp::new(
            Ops::STORE,
            dtypes::VOID,
            [UOp::new(Ops::INDEX, local.dtype, [local.clone(), index(&place)], Arg::None), partial],
            Arg::None,
        );
        let barrier = UOp::new(Ops::BARRIER, dtypes::VOID, [store], Arg::None);
        // the second stage: the group's partials summed in loops of their own
        let again: Vec<UOp> = place
            .iter()
            .map(|r| {
                if grouped.contains(r) {
                    next_id += 1;
                    UOp::range(r.src[0].clone(), next_id, AxisType::Reduce)
                } else {
                    r.clone()
                }
            })
            .collect();
        let load = UOp::new(
            Ops::LOAD,
            red.dtype,
            [UOp::new(Ops::INDEX, local.dtype, [local.clone(), index(&again)], Arg::None), barrier],
            Arg::None,
        );
        let ranges = again.iter().filter(|r| !place.contains(r)).cloned();
        map.insert(red.clone(), UOp::new(Ops::REDUCE, red.dtype, std::iter::once(load).chain(ranges).collect::<Vec<_>>(), Arg::Op(op)));
    }
    // the GROUP axes are thread indices now, and only the group's first thread stores
    let first = groups.iter().map(|g| g.cmplt(1)).reduce(|a, b| &a & &b).expect("a group axis");
    let sink = sink.substitute(&map);
    let locals: FxHashMap<UOp, UOp> =
        groups.iter().map(|g| (g.clone(), UOp::range(g.src[0].clone(), g.axis().0, AxisType::Local))).collect();
    let first = first.substitute(&locals);
    let stores: Vec<UOp> = sink
        .src
        .iter()
        .map(|st| {
            let st = st.substitute(&locals);
            if st.op != Ops::STORE {
                return st;
            }
            let idx = &st.src[0];
            let gate = idx.src.get(2).map_or(first.clone(), |g| g & &first);
            let idx = idx.with_src([idx.src[0].clone(), idx.src[1].clone(), gate]);
            st.with_src(std::iter::once(idx).chain(st.src[1..].iter().cloned()).collect::<Vec<_>>())
        })
        .collect();
    sink.with_src(stores)
}
