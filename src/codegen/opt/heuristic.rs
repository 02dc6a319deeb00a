//! Hand-coded optimizations for CPU targets (tinygrad `codegen/opt/heuristic.py` `hand_coded_optimizations`,
//! rewritten for CPUs). In: a [`Kernel`] with no opts. Out: the opts to apply, in order. Reductions get a 2-D
//! register tile: the output axis the store and the reduction's loads walk with unit stride becomes vector lanes
//! (one or two registers wide), and an output axis that one operand does not depend on (so each of its loads is
//! reused across the tile's rows) is unrolled into rows, as many as the vector registers allow. Reductions with no
//! such output axis accumulate vectors along their unit-stride reduce axis. Elementwise kernels get vector loads
//! and stores. Then the outermost output loop with enough iterations is split over the cores, or, on a target with
//! workgroups, the grid's axes into workgroups.

use super::{range_size, stride, Kernel, Opt, OptOps};
use crate::uop::{Ops, UOp};

/// The position in [`Kernel::rngs`] of the axis with id `id`.
fn axis_of(k: &Kernel, id: i64) -> Option<usize> {
    k.rngs().iter().position(|r| r.axis().0 == id)
}

/// Applies `opt` to `k` when legal; the heuristics only propose opts they have checked, so a refusal just skips it.
fn try_apply(k: &mut Kernel, op: OptOps, id: i64, amt: usize) {
    if let Some(a) = axis_of(k, id) {
        let _ = k.apply_opt(Opt::new(op, a, amt));
    }
}

/// The opts the hand-written rules choose for `k` (tinygrad `hand_coded_optimizations`).
pub fn hand_coded_optimizations(k: &Kernel) -> Vec<Opt> {
    let mut k = k.clone();
    // a sum of products a tensor core takes: TC on the first reduce axis it fits, the rows' and columns' tiles
    // unrolled two by two where the target has no vectors (each load feeds two WMMAs)
    if crate::helpers::TC.value() != 0 {
        let tcs = (0..k.ren.tensor_cores.len()).filter_map(|i| {
            (0..k.unrollable_dims().len()).find_map(|a| {
                let mut t = k.clone();
                t.apply_opt(Opt::new(OptOps::Tc, a, i)).ok().map(|_| t)
            })
        });
        if let Some(mut t) = tcs.into_iter().next() {
            let grid: Vec<i64> = t.rngs().iter().filter(|r| r.axis().1 == crate::uop::AxisType::Global).map(|r| r.axis().0).collect();
            for &id in grid.iter().rev().take(2) {
                if axis_of(&t, id).is_some_and(|a| t.full_shape()[a] % 2 == 0) {
                    try_apply(&mut t, OptOps::Upcast, id, 2);
                }
            }
            return t.applied_opts;
        }
    }
    let topo = k.ast.toposort();
    // GROUPTOP: on a target with shared memory, a long reduction into few outputs is split over a workgroup of 16
    // (tinygrad's rule for small outputs), before any lanes
    if k.ren.has_shared && k.upcastable_dims().iter().map(|&i| k.full_shape()[i]).product::<usize>() <= 256 {
        if let Some(&r) = k.unrollable_dims().first() {
            if k.full_shape()[r] >= 256 && k.full_shape()[r].is_multiple_of(16) {
                let _ = k.apply_opt(Opt::new(OptOps::GroupTop, 0, 16));
            }
        }
    }
    let Some(store) = k.ast.src.iter().find(|s| s.op == Ops::STORE).cloned() else { return vec![] };
    let item = store.src[0].dtype.base().itemsize().max(1);
    let lanes = (k.ren.vector_bytes / item).max(1);
    let reduces: Vec<&UOp> = topo.iter().filter(|u| u.op == Ops::REDUCE).collect();
    let loads: Vec<UOp> = reduces
        .iter()
        .flat_map(|r| r.src[0].toposort())
        .filter(|u| u.op == Ops::LOAD && u.src[0].op == Ops::INDEX && u.src[0].src.len() >= 2)
        .collect();
    let st = |index: &UOp, r: &UOp| if index.src.len() >= 2 { stride(&index.src[1], r) } else { None };
    let rngs = k.rngs();
    let outs: Vec<UOp> = k.upcastable_dims().into_iter().map(|i| rngs[i].clone()).collect();
    // the vector axis: the store walks it with unit stride and no load in a reduction is known to stride along it
    let gathers = |r: &UOp| loads.iter().any(|l| st(&l.src[0], r).is_some_and(|s| s != 0 && s != 1));
    let widths = |n: usize, most: usize| [32, 16, 8, 4, 2].into_iter().find(move |&w| w <= most && n.is_multiple_of(w) && w * item <= 128);
    let pad_pays = |n: usize| n >= 2 * lanes || (!reduces.is_empty() && 4 * (n.next_multiple_of(lanes) - n) <= n.next_multiple_of(lanes));
    let vectorizable = |r: &UOp| range_size(r) >= 2 * lanes || widths(range_size(r), 2 * lanes).is_some() || pad_pays(range_size(r));
    // else (in a reduction) an output axis a load walks with unit stride: its vector is stored lane by lane
    let mut vaxis = outs.iter().find(|r| st(&store.src[0], r) == Some(1) && !gathers(r) && vectorizable(r)).cloned().or_else(|| {
        let unit_load = |r: &UOp| loads.iter().any(|l| st(&l.src[0], r) == Some(1));
        outs.iter().find(|r| !reduces.is_empty() && unit_load(r) && !gathers(r) && vectorizable(r)).cloned()
    });
    // an axis no vector width divides is padded to one (its last vector's extra lanes are masked), when the axis
    // spans two vectors or, in a reduction (whose stores are few), that wastes at most a quarter of the lanes
    if let Some(v) = vaxis.clone().filter(|v| pad_pays(range_size(v)) && widths(range_size(v), lanes).is_none_or(|w| w < lanes)) {
        if let Some(a) = axis_of(&k, v.axis().0) {
            if k.apply_opt(Opt::new(OptOps::Padto, a, lanes)).is_ok() {
                vaxis = Some(k.rngs()[a].clone());
            }
        }
    }
    if !reduces.is_empty() {
        let budget = k.ren.vector_registers.saturating_sub(4).max(1);
        let reuse = |r: &UOp| loads.iter().any(|l| st(&l.src[0], r) == Some(0)) && loads.iter().any(|l| st(&l.src[0], r) != Some(0));
        // rows of the tile: the largest output axis one operand does not move along, `vregs` registers per row
        let rows = |k: &mut Kernel, skip: Option<&UOp>, vregs: usize| {
            // (rows that re-load a narrow integer, which loads lane by lane, come last)
            let cheap = |r: &UOp| loads.iter().filter(|l| st(&l.src[0], r) != Some(0)).all(|l| l.dtype.is_float());
            let Some(row) = outs.iter().filter(|r| Some(*r) != skip && reuse(r)).max_by_key(|r| (cheap(r), range_size(r))).cloned() else {
                return;
            };
            let m = range_size(&row);
            let fit = |m: usize| [12, 8, 6, 5, 4, 3, 2].into_iter().find(|&x| m.is_multiple_of(x) && x * vregs <= budget);
            match fit(m) {
                Some(rows) => try_apply(k, OptOps::Upcast, row.axis().0, rows),
                // rows that divide no tile height (primes) are padded to 4
                None if m >= 8 => {
                    if let Some(a) = axis_of(k, row.axis().0) {
                        if k.apply_opt(Opt::new(OptOps::Padto, a, 4)).is_ok() {
                            try_apply(k, OptOps::Upcast, row.axis().0, 4);
                        }
                    }
                }
                None => {}
            }
        };
        // an outer-product tile: rows along an output axis one operand ignores and columns along one the other
        // ignores, so each load feeds a row or a column of multiply-adds; else rows only
        let ignores = |l: &UOp, r: &UOp| st(&l.src[0], r) == Some(0);
        let tile = |k: &mut Kernel, skip: Option<&UOp>, vregs: usize| {
            let splits = |a: &UOp, b: &UOp| {
                let (na, nb) = (range_size(a), range_size(b));
                let opts = [6, 4, 3, 2].into_iter().flat_map(|x| [6, 4, 3, 2].into_iter().map(move |y| (x, y)));
                opts.filter(|&(x, y)| na.is_multiple_of(x) && nb.is_multiple_of(y) && x * y * vregs <= budget)
                    .max_by_key(|&(x, y)| (x * y, x))
            };
            let cands = || outs.iter().filter(|r| Some(*r) != skip && reuse(r));
            let pair = cands().flat_map(|a| cands().map(move |b| (a, b))).find_map(|(a, b)| {
                let complementary = a != b
                    && loads.iter().any(|l| ignores(l, a) && !ignores(l, b))
                    && loads.iter().any(|l| ignores(l, b) && !ignores(l, a));
                complementary.then(|| splits(a, b).map(|s| (a.clone(), b.clone(), s))).flatten()
            });
            match pair {
                Some((a, b, (x, y))) if x * y > 4 => {
                    try_apply(k, OptOps::Upcast, a.axis().0, x);
                    try_apply(k, OptOps::Upcast, b.axis().0, y);
                }
                _ => rows(k, skip, vregs),
            }
        };
        match vaxis.clone().and_then(|v| Some((widths(range_size(&v), 2 * lanes)?, v))) {
            Some((vw, v)) => {
                try_apply(&mut k, OptOps::Upcast, v.axis().0, vw);
                tile(&mut k, Some(&v), vw.div_ceil(lanes));
            }
            None => {
                // vector partial sums along a reduce axis that the loads walk with unit stride, one per tile row
                vaxis = None;
                let red = k
                    .unrollable_dims()
                    .into_iter()
                    .map(|i| rngs[i].clone())
                    .rev()
                    .find(|r| loads.iter().any(|l| st(&l.src[0], r) == Some(1)));
                let red = red.and_then(|r| Some((widths(range_size(&r), 2 * lanes)?, r)).map(|(w, r)| (r, w)));
                // those vectors a quarter register or less, over a long reduction (a conv weight gradient summing
                // 20-wide rows): an outer-product tile of full vectors instead, gathered along an output axis that a
                // small load walks with unit stride (so it is the vector axis), rows along one the other operand
                // ignores (what BEAM finds for beautiful_mnist's conv weight gradients: 3x faster)
                let reduce_rngs: Vec<UOp> = k.unrollable_dims().iter().map(|&i| rngs[i].clone()).collect();
                let long = reduce_rngs.iter().map(range_size).product::<usize>() >= 1024;
                let narrow = lanes >= 8 && red.as_ref().is_none_or(|(_, w)| 4 * w <= lanes);
                // (the operands: loads that move with the reduction, not a bias broadcast over it)
                let big: Vec<&UOp> = loads.iter().filter(|l| reduce_rngs.iter().any(|r| !ignores(l, r))).collect();
                let vec_rows = outs
                    .iter()
                    .filter(|b| range_size(b).is_multiple_of(lanes) && loads.iter().any(|l| st(&l.src[0], b) == Some(1)))
                    .find_map(|b| {
                        let a = outs.iter().find(|a| {
                            *a != b
                                && range_size(a).is_multiple_of(8)
                                && big.iter().any(|l| ignores(l, a) && !ignores(l, b))
                                && big.iter().any(|l| ignores(l, b) && !ignores(l, a))
                        })?;
                        Some((b.clone(), a.clone()))
                    });
                if let Some((b, a)) = vec_rows.filter(|_| long && narrow) {
                    let rows = [16, 8].into_iter().find(|r| range_size(&a).is_multiple_of(*r)).unwrap_or(8);
                    try_apply(&mut k, OptOps::Upcast, b.axis().0, lanes);
                    try_apply(&mut k, OptOps::Upcast, a.axis().0, rows);
                    vaxis = Some(b);
                } else if let Some((r, w)) = red {
                    if let Some(a) = k.unrollable_dims().iter().position(|&i| k.rngs()[i] == r) {
                        if k.apply_opt(Opt::new(OptOps::Unroll, a, w)).is_ok() {
                            tile(&mut k, None, w.div_ceil(lanes));
                        }
                    }
                } else if let Some((v, w)) =
                    outs.iter().find_map(|r| Some((r, widths(range_size(r), lanes)?)).filter(|_| st(&store.src[0], r) == Some(1)))
                {
                    // a short reduction gathering its operands (col2im): vector stores along the store's unit-stride
                    // axis, its innermost reduce loop unrolled, so the lanes share the index math
                    try_apply(&mut k, OptOps::Upcast, v.axis().0, w);
                    let dims = k.unrollable_dims();
                    if let Some(n) = dims.last().map(|&i| range_size(&k.rngs()[i])).filter(|&n| n <= 8) {
                        let _ = k.apply_opt(Opt::new(OptOps::Unroll, dims.len() - 1, n));
                    }
                }
            }
        }
    } else if let Some(v) = vaxis.as_ref().filter(|_| k.full_shape().iter().product::<usize>() >= 1024) {
        // (a tiny elementwise kernel runs as fast either way, and is cheaper to generate and compile scalar)
        if let Some(w) = widths(range_size(v), 16) {
            try_apply(&mut k, OptOps::Upcast, v.axis().0, w);
        }
    }
    // THREAD: the outermost output loop that splits evenly over the cores (or is long enough not to care); in a
    // register-tiled reduction the vector axis first, so each core keeps its own column panels in cache
    let t = k.ren.threads;
    if t > 1 {
        let rngs = k.rngs();
        let mut dims = k.upcastable_dims();
        if let Some(v) = vaxis.as_ref().filter(|_| !reduces.is_empty() && k.lanes() > 1) {
            dims.sort_by_key(|&i| rngs[i].axis().0 != v.axis().0);
        }
        let pick = dims.iter().copied().find(|&i| {
            let n = range_size(&rngs[i]);
            n >= t && (n.is_multiple_of(t) || n >= 8 * t)
        });
        let pick =
            pick.or_else(|| k.upcastable_dims().into_iter().filter(|&i| range_size(&rngs[i]) >= t).max_by_key(|&i| range_size(&rngs[i])));
        if let Some(i) = pick {
            let _ = k.apply_opt(Opt::new(OptOps::Thread, i, range_size(&rngs[i])));
        }
    }
    // LOCAL: on a target with workgroups, the grid's axes from the innermost split into workgroups of up to 64
    // threads (tinygrad's local sizes), so neighbouring threads touch neighbouring elements
    if k.ren.has_local {
        let mut threads = k.workgroup();
        for i in k.upcastable_dims().into_iter().rev() {
            let n = range_size(&k.rngs()[i]);
            if let Some(l) = [16, 8, 4, 2].into_iter().find(|&l| n.is_multiple_of(l) && threads * l <= 64) {
                if k.apply_opt(Opt::new(OptOps::Local, i, l)).is_ok() {
                    threads *= l;
                }
            }
        }
    }
    k.applied_opts
}
