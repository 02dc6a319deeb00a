//! Vectorize memory access: after an UPCAST, the lanes' scalar LOADs of consecutive elements of one buffer
//! become one vector LOAD (each lane a GEP of it), and their STOREs one vector STORE of a VECTORIZE. Gated loads
//! stay scalar. (tinygrad folds and splits vector access in `codegen/late/devectorizer.py`.)

use crate::dtype::dtypes;
use crate::uop::{Arg, Ops, UOp};
use rustc_hash::FxHashMap;

/// `(buffer, base index, offset)` of an ungated access `INDEX(buf, base + offset)` to a buffer of a dtype C
/// vectors can hold (not bool or 16-bit floats).
fn split_index(index: &UOp) -> Option<(UOp, UOp, i128)> {
    let dt = index.dtype.base();
    if index.src.len() != 2 || index.src[0].op != Ops::DEFINE_GLOBAL || dt.is_bool() || (dt.is_float() && dt.itemsize() < 4) {
        return None;
    }
    let (base, off) = index.src[1].pop_const(Ops::ADD);
    Some((index.src[0].clone(), base, off))
}

/// Groups of `w` nodes (by `(buffer, base)`) at consecutive offsets, each group in lane order.
fn groups(nodes: &[(UOp, UOp, UOp, i128)], w: usize) -> Vec<Vec<UOp>> {
    let mut by_key: FxHashMap<(UOp, UOp), Vec<(i128, UOp)>> = FxHashMap::default();
    for (n, buf, base, off) in nodes {
        by_key.entry((buf.clone(), base.clone())).or_default().push((*off, n.clone()));
    }
    let mut out = Vec::new();
    for (_, mut v) in by_key {
        v.sort_by_key(|x| x.0);
        v.dedup_by_key(|x| x.0);
        let mut i = 0;
        while i + w <= v.len() {
            if (1..w).all(|k| v[i + k].0 == v[i].0 + k as i128) {
                out.push(v[i..i + w].iter().map(|x| x.1.clone()).collect());
                i += w;
            } else {
                i += 1;
            }
        }
    }
    out
}

/// `sink` with `w`-lane runs of consecutive loads and stores turned into vector ones.
pub fn vectorize(sink: &UOp, w: usize) -> UOp {
    let topo = sink.toposort();
    let loads: Vec<(UOp, UOp, UOp, i128)> = topo
        .iter()
        .filter(|u| u.op == Ops::LOAD && u.src.len() == 1 && u.dtype.count == 1)
        .filter_map(|u| split_index(&u.src[0]).map(|(b, base, off)| (u.clone(), b, base, off)))
        .collect();
    let mut map: FxHashMap<UOp, UOp> = FxHashMap::default();
    for g in groups(&loads, w) {
        let first = &g[0];
        let vdt = first.dtype.vec(w as u16);
        let idx = &first.src[0];
        let vidx = UOp::new(Ops::INDEX, idx.dtype, idx.src.clone(), Arg::None);
        let vload = UOp::new(Ops::LOAD, vdt, [vidx], Arg::None);
        for (k, l) in g.iter().enumerate() {
            map.insert(l.clone(), UOp::new(Ops::GEP, l.dtype, [vload.clone()], Arg::Int(k as i64)));
        }
    }
    let sink = if map.is_empty() { sink.clone() } else { sink.substitute(&map) };
    let stores: Vec<(UOp, UOp, UOp, i128)> = sink
        .src
        .iter()
        .filter(|s| s.op == Ops::STORE)
        .filter_map(|s| split_index(&s.src[0]).map(|(b, base, off)| (s.clone(), b, base, off)))
        .collect();
    let grouped = groups(&stores, w);
    if grouped.is_empty() {
        return sink;
    }
    let mut keep: Vec<UOp> = sink.src.iter().filter(|s| !grouped.iter().any(|g| g.contains(s))).cloned().collect();
    for g in grouped {
        let vals: Vec<UOp> = g.iter().map(|s| s.src[1].clone()).collect();
        let vec = UOp::new(Ops::VECTORIZE, vals[0].dtype.vec(w as u16), vals, Arg::None);
        keep.push(UOp::new(Ops::STORE, dtypes::VOID, [g[0].src[0].clone(), vec], Arg::None));
    }
    UOp::sink(keep)
}
