//! Hand-coded optimizations for CPU targets (tinygrad `codegen/opt/heuristic.py` `hand_coded_optimizations`,
//! rewritten for CPUs). In: a [`Kernel`] with no opts. Out: the opts to apply, in order. Reductions get a 2-D
//! register tile: the output axis the store and the reduction's loads walk with unit stride becomes vector lanes
//! (one or two registers wide; where it would waste over an eighth of them, a whole-vector axis a load walks with
//! unit stride: a convolution's output channels), an output axis that the vectors' operand does not depend on (so each vector load is
//! reused across the tile's rows) is unrolled into rows, and, where that does more multiply-adds per load, one the
//! broadcast operand does not depend on into columns (an image's next rows), as many as the registers allow.
//! Reductions with no such output axis accumulate vectors along their unit-stride reduce axis. Elementwise kernels
//! get vector loads and stores. Then the outermost output loop with enough iterations is split over the cores, or,
//! on a target with workgroups, the grid's axes into workgroups. A target with shared memory (GPUs) first splits
//! reductions into few outputs and matrix-vector products over a workgroup (GROUP: tinygrad's rules). tinygrad's
//! other rules for GPUs (small register tiles along reused axes, locals of up to 128 threads) measured slower here
//! on an H100 (beautiful_mnist's step 50 ms against 42, a decode step 0.63 ms against 0.56: docs/PERFORMANCE.md).

use super::{range_size, stride, Kernel, Opt, OptOps};
use crate::uop::{AxisType, Ops, UOp};

/// The opts the hand-written rules choose for `k` (tinygrad `hand_coded_optimizations`): one step per kind of opt,
/// each applying what it finds legal on the kernel the steps before it left.
pub fn hand_coded_optimizations(k: &Kernel) -> Vec<Opt> {
    let mut k = k.clone();
    if let Some(opts) = tensor_cores(&k) {
        return opts;
    }
    // (the reductions before GROUPTOP splits them: the steps after it read their loads)
    let reduces: Vec<UOp> = k.ast.toposort().into_iter().filter(|u| u.op == Ops::REDUCE).collect();
    group_reductions(&mut k, &reduces);
    let Some(a) = Analysis::new(&k, &reduces) else { return vec![] };
    if matvec_rows_inner(&mut k, &a, reduces.first().map_or(a.item, |r| r.dtype.itemsize())) {
        return k.applied_opts;
    }
    let mut vaxis = pad_vector_axis(&mut k, &a, a.vector_axis());
    if a.reduces {
        vaxis = register_tile(&mut k, &a, vaxis);
    } else {
        upcast_elementwise(&mut k, &a, vaxis.as_ref());
    }
    upcast_stack_axes(&mut k, &a);
    threads(&mut k, &a, vaxis.as_ref());
    locals(&mut k);
    k.applied_opts
}

/// UPCAST: the stack axes ([`Analysis::stacked`]) whole: each lane then reads its own buffer with no gate. Left to
/// THREAD, its gates stay in the reduction loop, and clang compiles a gated float16 vector load 7x slower than gcc (a
/// 2-row decode step's values kernel over a symbolic span: 267 us a layer).
fn upcast_stack_axes(k: &mut Kernel, a: &Analysis) {
    for r in a.outs.iter().filter(|r| a.stacked(r)) {
        try_apply(k, OptOps::Upcast, r.axis().0, range_size(r));
    }
}

/// TC: a sum of products a tensor core takes goes on the first core and reduce axis it fits, the rows' and columns'
/// tiles unrolled two by two where the target has no vectors (each load feeds two WMMAs). `None`: no tensor core.
fn tensor_cores(k: &Kernel) -> Option<Vec<Opt>> {
    if crate::helpers::TC.value() == 0 {
        return None;
    }
    let mut t = (0..k.ren.tensor_cores.len()).find_map(|i| {
        (0..k.unrollable_dims().len()).find_map(|a| {
            let mut t = k.clone();
            t.apply_opt(Opt::new(OptOps::Tc, a, i)).ok().map(|_| t)
        })
    })?;
    let grid: Vec<i64> = t.rngs().iter().filter(|r| r.axis().1 == AxisType::Global).map(|r| r.axis().0).collect();
    for &id in grid.iter().rev().take(2) {
        if axis_of(&t, id).is_some_and(|a| t.full_shape()[a] % 2 == 0) {
            try_apply(&mut t, OptOps::Upcast, id, 2);
        }
    }
    Some(t.applied_opts)
}

/// GROUP: on a target with shared memory, a reduction is split over a workgroup of 16 threads along the first reduce
/// axis of 64 or more that takes it (else, for a reduction of 256 or more, 16, 8 or 4 along any), before any lanes,
/// when it sums into at most 2,048 outputs (GROUPTOP, tinygrad's rule) or is a matrix-vector product, one of whose
/// loads moves along no output axis (GROUP, its neighbouring threads reading neighbouring weights: tinygrad's MV
/// rule): a decode step's products or a BatchNorm's statistics then spread over the GPU instead of running a long
/// loop in each of a few threads.
fn group_reductions(k: &mut Kernel, reduces: &[UOp]) {
    let (outs, reds, rngs) = (k.upcastable_dims(), k.unrollable_dims(), k.rngs());
    if !k.ren.has_shared || reds.is_empty() {
        return;
    }
    let loads = reduce_loads(reduces);
    let vector = |l: &UOp| outs.iter().all(|&i| ignores(l, &rngs[i])) && reds.iter().any(|&i| !ignores(l, &rngs[i]));
    let matvec = !outs.is_empty() && loads.iter().any(vector);
    let op = if matvec { OptOps::Group } else { OptOps::GroupTop };
    if !matvec && outs.iter().map(|&i| k.full_shape()[i]).product::<usize>() > 2048 {
        return;
    }
    for (r, &axis) in reds.iter().enumerate().take(3) {
        if k.full_shape()[axis] >= 64 && k.apply_opt(Opt::new(op, r, 16)).is_ok() {
            return;
        }
    }
    // a long reduction made of short axes (a split reduction's first half over the batch: 8 x 20 x 10 x 2) takes
    // the widest of 16, 8 and 4 threads that one of them divides
    if reds.iter().map(|&i| k.full_shape()[i]).product::<usize>() >= 256 {
        for sz in [16, 8, 4] {
            for (r, &axis) in reds.iter().enumerate().take(3) {
                if k.full_shape()[axis].is_multiple_of(sz) && k.apply_opt(Opt::new(op, r, sz)).is_ok() {
                    return;
                }
            }
        }
    }
}

/// The loads `reduces` read through an INDEX.
fn reduce_loads(reduces: &[UOp]) -> Vec<UOp> {
    let through_index = |u: &UOp| u.op == Ops::LOAD && u.src[0].op == Ops::INDEX && u.src[0].src.len() >= 2;
    reduces.iter().flat_map(|r| r.src[0].toposort()).filter(through_index).collect()
}

/// What the steps after GROUPTOP read off the kernel: its store, the loads its reductions read, its axes (their
/// RANGEs as they are before any lanes), and the target's vectors and registers.
struct Analysis {
    /// The kernel's first STORE.
    store: UOp,
    /// Bytes of the stored element.
    item: usize,
    /// Stored elements a vector register holds (1: no vectors).
    lanes: usize,
    /// Whether the kernel reduces.
    reduces: bool,
    /// The loads the reductions read through an INDEX.
    loads: Vec<UOp>,
    /// The output axes.
    outs: Vec<UOp>,
    /// The reduce axes.
    reds: Vec<UOp>,
    /// Vector registers a register tile may fill before the stack axes multiply it (four are left for the operands).
    budget: usize,
    /// The stack axes' ids ([`Analysis::stacked`]), found once.
    stacks: Vec<i64>,
    /// The product of the stack axes' sizes (1 without any).
    stack: usize,
    /// The target's vector registers.
    regs: usize,
}

impl Analysis {
    /// The analysis of `k`, whose REDUCEs were `reduces`; `None` without a STORE.
    fn new(k: &Kernel, reduces: &[UOp]) -> Option<Analysis> {
        let store = k.ast.src.iter().find(|s| s.op == Ops::STORE)?.clone();
        let item = store.src[0].dtype.base().itemsize().max(1);
        let loads = reduce_loads(reduces);
        let rngs = k.rngs();
        let mut a = Analysis {
            store,
            item,
            lanes: (k.ren.vector_bytes / item).max(1),
            reduces: !reduces.is_empty(),
            loads,
            outs: k.upcastable_dims().into_iter().map(|i| rngs[i].clone()).collect(),
            reds: k.unrollable_dims().into_iter().map(|i| rngs[i].clone()).collect(),
            budget: 0,
            stacks: vec![],
            stack: 1,
            regs: k.ren.vector_registers.max(1),
        };
        let stacks: Vec<&UOp> = a.outs.iter().filter(|r| a.picks_buffers(r)).collect();
        a.stack = stacks.iter().map(|r| range_size(r)).product();
        a.stacks = stacks.iter().map(|r| r.axis().0).collect();
        a.budget = (k.ren.vector_registers.saturating_sub(4) / a.stack).max(1);
        Some(a)
    }
    /// Whether output axis `r` is a stack: short (2 to 4) and picking among buffers, as a batch of separate KV caches
    /// does (loads of two or more buffers gated by it, their addresses not moving along it). Its loads look reused
    /// along it and are not (each step reads another buffer), so it takes no part in a register tile's rows or
    /// columns; it is upcast whole after them ([`upcast_stack_axes`]), multiplying the tile, so the tile's budget is
    /// divided by its size. Taking the rows, it left a batched decode step's scores and values kernels loading and
    /// converting each float16 key and value row once per query head of its group (SmolLM2, 4 rows, `DEBUG=2`
    /// medians a step: values 711 -> 575-595 us, scores 589 -> 521).
    fn stacked(&self, r: &UOp) -> bool {
        self.stacks.contains(&r.axis().0)
    }
    /// [`Analysis::stacked`]'s test, made once per axis by [`Analysis::new`].
    fn picks_buffers(&self, r: &UOp) -> bool {
        let picks = |l: &&UOp| l.src[0].src.get(2).is_some_and(|g| g.toposort().contains(r)) && ignores(l, r);
        let bufs: Vec<&UOp> = self.loads.iter().filter(picks).map(|l| &l.src[0].src[0]).collect();
        (2..=4).contains(&range_size(r)) && bufs.iter().any(|b| *b != bufs[0])
    }
    /// Whether a load moving along output axis `t` reads, within `n` steps of `t`, what it reads at another step of a
    /// reduce axis the compiler unrolls (8 or fewer): a convolution's window, `x[2*ox + kx]`. The compiler then keeps
    /// each of the tile's `n` loaded values in a register for the unrolled steps, beside the accumulators (where
    /// otherwise it folds a broadcast into its multiply-add).
    fn window(&self, t: &UOp, n: usize) -> bool {
        let recurs = |st: i128, sr: i128, m: usize| (1..n as i128).any(|a| (1..m as i128).any(|b| a * st == b * sr));
        self.loads.iter().any(|l| {
            let Some(st) = along(l, t).filter(|&s| s != 0) else { return false };
            self.reds
                .iter()
                .any(|r| range_size(r) <= 8 && along(l, r).is_some_and(|sr| sr != 0 && recurs(st.abs(), sr.abs(), range_size(r))))
        })
    }
    /// Whether a load in a reduction is known to stride along `r` (a gather).
    fn gathers(&self, r: &UOp) -> bool {
        self.loads.iter().any(|l| along(l, r).is_some_and(|s| s != 0 && s != 1))
    }
    /// The widest vector of at most `most` lanes (and 128 bytes) that divides an axis of `n`.
    fn width(&self, n: usize, most: usize) -> Option<usize> {
        [32, 16, 8, 4, 2].into_iter().find(|&w| w <= most && n.is_multiple_of(w) && w * self.item <= 128)
    }
    /// Whether padding an axis of `n` to whole vectors pays: it spans two vectors or, in a reduction (whose stores
    /// are few), that wastes at most 3/8 of the lanes (a convolution's 20-wide rows as 32 lanes, two 16-lane vectors
    /// where 4-lane ones divided them: beautiful_mnist's conv2 forward 170-255 -> 112 ms, its step 840-990 -> 700-750).
    fn pad_pays(&self, n: usize) -> bool {
        n >= 2 * self.lanes || (self.reduces && 8 * (n.next_multiple_of(self.lanes) - n) <= 3 * n.next_multiple_of(self.lanes))
    }
    /// The most lanes the vector axis `v` may take: two registers, or one where a load moves along `v` in no fixed
    /// step (a matrix stored in tiles of a register's rows, `QuantMatrix`: a second register would be another tile,
    /// another stream).
    fn vector_span(&self, v: &UOp) -> usize {
        if self.tiled(v) {
            self.lanes
        } else {
            2 * self.lanes
        }
    }
    /// Whether a load moves along `v` in no fixed step and breaks its run within two registers' lanes (see
    /// [`Analysis::vector_span`]; a matmul's operand packed in panels of two registers is not tiled).
    fn tiled(&self, v: &UOp) -> bool {
        self.loads.iter().any(|l| along(l, v).is_none() && !contiguous_run(l, v, 2 * self.lanes))
    }
    /// Whether output axis `r` can be vector lanes.
    fn vectorizable(&self, r: &UOp) -> bool {
        range_size(r) >= 2 * self.lanes || self.width(range_size(r), 2 * self.lanes).is_some() || self.pad_pays(range_size(r))
    }
    /// Whether one load ignores output axis `r` (so it is reused along it) and another moves along it, `r` no stack.
    fn reuse(&self, r: &UOp) -> bool {
        !self.stacked(r) && self.loads.iter().any(|l| along(l, r) == Some(0)) && self.loads.iter().any(|l| along(l, r) != Some(0))
    }
    /// The vector axis: an output axis the store walks with unit stride and no load gathers along, unless in a
    /// reduction that axis wastes over an eighth of its vectors' lanes and one a load walks with unit stride is
    /// whole vectors (a convolution's output channels, its weight stored channel innermost: no lanes wasted on a 20-
    /// or 6-wide image row; conv2 forward in beautiful_mnist 86 -> 160 GFLOP/s on AVX-512, conv4 27 -> 72; on AVX2,
    /// where 20 pads to 24, 330 -> 272 ms on one Zen core), else (in a reduction) one a load walks with unit stride.
    /// A vector not along the store's unit-stride axis is stored lane by lane.
    fn vector_axis(&self) -> Option<UOp> {
        let unit_load = |r: &UOp| self.loads.iter().any(|l| along(l, r) == Some(1));
        let ok = |r: &&UOp| !self.gathers(r) && self.vectorizable(r);
        let unit_store = self.outs.iter().find(|r| step(&self.store.src[0], r) == Some(1) && ok(r));
        let whole = |r: &&UOp| range_size(r).is_multiple_of(self.lanes);
        let loaded = self.outs.iter().find(|r| self.reduces && unit_load(r) && ok(r));
        // (more than an eighth of the lanes wasted, where padding to whole vectors pays up to 3/8)
        let wasteful =
            |r: &UOp| 8 * (range_size(r).next_multiple_of(self.lanes) - range_size(r)) > range_size(r).next_multiple_of(self.lanes);
        match (unit_store, self.outs.iter().find(|r| self.reduces && unit_load(r) && ok(r) && whole(r))) {
            (Some(s), Some(w)) if wasteful(s) => Some(w),
            (s, _) => s.or(loaded),
        }
        .cloned()
    }
}

/// A vector-matrix product `x @ W` (one output axis `n`, one reduce axis `k`, `W` a row-major `(K, N)`, `x` read
/// along `k` only) on a CPU, where [`Renderer::matvec_chunks`](crate::renderer::Renderer::matvec_chunks) fits it: the
/// cores split the columns in chunks, and each reads its chunk of 8 rows at a time as 8 streams, the chunk's register
/// tiles in an INNER loop adding to accumulators in memory (OpenBLAS's `gemv_n`). Kept as register tiles, a tile reads
/// a few vectors from every row, a page apart, and the prefetchers lose track (15-26 GB/s on 2 Zen 4 cores, bench's
/// `matvec_4096`); split into row blocks whose partial sums a second kernel adds, 22-30 GB/s; this way 36-43.
/// Returns whether it applied.
fn matvec_rows_inner(k: &mut Kernel, a: &Analysis, acc: usize) -> bool {
    let ([n], [r]) = (&a.outs[..], &a.reds[..]) else { return false };
    let (cols, rows) = (range_size(n), range_size(r));
    let matrix = a.loads.iter().any(|l| along(l, n) == Some(1) && along(l, r).is_some_and(|s| s >= cols as i128));
    let Some((tile, chunks)) = k.ren.matvec_chunks(rows, cols, acc) else { return false };
    if !a.reduces || !matrix || !a.loads.iter().any(|l| ignores(l, n)) {
        return false;
    }
    // (the lanes of the accumulators' dtype, as `matvec_chunks` counts them; the chunk's tiles INNER, the chunks a loop
    // over the cores, or a plain loop on one)
    let (nid, rid, lanes) = (n.axis().0, r.axis().0, k.ren.vector_bytes / acc.max(1));
    let mut t = k.clone();
    let at = |t: &Kernel| axis_of(t, nid).unwrap_or(usize::MAX);
    let reduce_axis = |t: &Kernel| t.unrollable_dims().iter().position(|&i| t.rngs()[i].axis().0 == rid);
    let ok = t.apply_opt(Opt::new(OptOps::Upcast, at(&t), lanes)).is_ok()
        && (tile == lanes || t.apply_opt(Opt::new(OptOps::Upcast, at(&t), tile / lanes)).is_ok())
        && reduce_axis(&t).is_some_and(|i| t.apply_opt(Opt::new(OptOps::Unroll, i, 8)).is_ok())
        && t.apply_opt(Opt::new(OptOps::Inner, at(&t), cols / (chunks * tile))).is_ok()
        && (chunks == 1 || t.ren.threads <= 1 || t.apply_opt(Opt::new(OptOps::Thread, at(&t), 0)).is_ok());
    if ok {
        *k = t;
    }
    ok
}

/// PADTO (masked lanes): a vector axis no vector width divides is padded to one, its last vector's extra lanes
/// masked, where that pays ([`Analysis::pad_pays`]). Returns the vector axis, padded or not.
fn pad_vector_axis(k: &mut Kernel, a: &Analysis, vaxis: Option<UOp>) -> Option<UOp> {
    let v = vaxis?;
    if a.pad_pays(range_size(&v)) && a.width(range_size(&v), a.lanes).is_none_or(|w| w < a.lanes) {
        if let Some(i) = axis_of(k, v.axis().0) {
            if k.apply_opt(Opt::new(OptOps::Padto, i, a.lanes)).is_ok() {
                return Some(k.rngs()[i].clone());
            }
        }
    }
    Some(v)
}

/// UPCAST and UNROLL for a reduction: a register tile. The vector axis one or two registers wide, with rows and
/// columns around it ([`tile`]); without one, vectors of full registers in an outer product
/// ([`vector_outer_product`]), else vector partial sums along a reduce axis the loads walk with unit stride, one per
/// tile row, else (a short reduction gathering its operands, col2im) vector stores along the store's unit-stride
/// axis with the innermost reduce loop unrolled, so the lanes share the index math. Returns the vector axis.
fn register_tile(k: &mut Kernel, a: &Analysis, vaxis: Option<UOp>) -> Option<UOp> {
    if let Some((w, v)) = vaxis.and_then(|v| Some((a.width(range_size(&v), a.vector_span(&v))?, v))) {
        try_apply(k, OptOps::Upcast, v.axis().0, w);
        tile(k, a, Some(&v), w.div_ceil(a.lanes));
        return Some(v);
    }
    let red = a.reds.iter().rev().find(|r| a.loads.iter().any(|l| along(l, r) == Some(1)));
    let red = red.and_then(|r| Some((r.clone(), a.width(range_size(r), 2 * a.lanes)?)));
    if let Some((b, rows)) = vector_outer_product(a, red.as_ref()) {
        try_apply(k, OptOps::Upcast, b.axis().0, a.lanes);
        try_apply(k, OptOps::Upcast, rows.axis().0, [16, 8].into_iter().find(|r| range_size(&rows).is_multiple_of(*r)).unwrap_or(8));
        return Some(b);
    }
    if let Some((r, w)) = red {
        if let Some(i) = k.unrollable_dims().iter().position(|&i| k.rngs()[i] == r) {
            if k.apply_opt(Opt::new(OptOps::Unroll, i, w)).is_ok() {
                tile(k, a, None, w.div_ceil(a.lanes));
            }
        }
    } else if let Some((v, w)) =
        a.outs.iter().find_map(|r| Some((r, a.width(range_size(r), a.lanes)?)).filter(|_| step(&a.store.src[0], r) == Some(1)))
    {
        try_apply(k, OptOps::Upcast, v.axis().0, w);
        let dims = k.unrollable_dims();
        if let Some(n) = dims.last().map(|&i| range_size(&k.rngs()[i])).filter(|&n| n <= 8) {
            let _ = k.apply_opt(Opt::new(OptOps::Unroll, dims.len() - 1, n));
        }
    } else {
        // (no axis vectorizes: an NCHW convolution over a 7-wide image. A scalar register tile still reuses each
        // load: rows along an axis the image ignores, output channels)
        tile(k, a, None, 1);
    }
    None
}

/// `(vector axis, row axis)` of an outer-product tile of full vectors, where the reduce axis's vectors (`red`) would
/// be a quarter register or less over a long reduction (a conv weight gradient summing 20-wide rows): vectors
/// gathered along an output axis that a small load walks with unit stride, rows along one the other operand
/// ignores (what BEAM finds for beautiful_mnist's conv weight gradients: 3x faster).
fn vector_outer_product(a: &Analysis, red: Option<&(UOp, usize)>) -> Option<(UOp, UOp)> {
    let long = a.reds.iter().map(range_size).product::<usize>() >= 1024;
    let narrow = a.lanes >= 8 && red.is_none_or(|(_, w)| 4 * w <= a.lanes);
    if !(long && narrow) {
        return None;
    }
    // (the operands: loads that move with the reduction, not a bias broadcast over it)
    let big: Vec<&UOp> = a.loads.iter().filter(|l| a.reds.iter().any(|r| !ignores(l, r))).collect();
    // (an operand ignores `x` but moves along `y`)
    let one_ignores = |x: &UOp, y: &UOp| big.iter().any(|l| ignores(l, x) && !ignores(l, y));
    let mut vectors = a.outs.iter().filter(|b| range_size(b).is_multiple_of(a.lanes) && a.loads.iter().any(|l| along(l, b) == Some(1)));
    vectors.find_map(|b| {
        let rows = a.outs.iter().find(|r| *r != b && range_size(r).is_multiple_of(8) && one_ignores(r, b) && one_ignores(b, r))?;
        Some((b.clone(), rows.clone()))
    })
}

/// UPCAST into a register tile around the vector axis `skip` (if any), `vregs` vector registers a row: with one,
/// [`vector_tile`]; without, an outer product of scalars, rows along an output axis one operand ignores and columns
/// along one the other ignores, so each load feeds a row or a column of multiply-adds; else [`rows`] only.
fn tile(k: &mut Kernel, a: &Analysis, skip: Option<&UOp>, vregs: usize) {
    if let Some(v) = skip {
        return vector_tile(k, a, v, vregs);
    }
    let splits = |x: &UOp, y: &UOp| {
        let (nx, ny) = (range_size(x), range_size(y));
        let opts = [6, 4, 3, 2].into_iter().flat_map(|m| [6, 4, 3, 2].into_iter().map(move |n| (m, n)));
        opts.filter(|&(m, n)| nx.is_multiple_of(m) && ny.is_multiple_of(n) && m * n * vregs <= a.budget).max_by_key(|&(m, n)| (m * n, m))
    };
    let cands = || a.outs.iter().filter(|r| a.reuse(r));
    let pair = cands().flat_map(|x| cands().map(move |y| (x, y))).find_map(|(x, y)| {
        let complementary =
            x != y && a.loads.iter().any(|l| ignores(l, x) && !ignores(l, y)) && a.loads.iter().any(|l| ignores(l, y) && !ignores(l, x));
        complementary.then(|| splits(x, y).map(|s| (x, y, s))).flatten()
    });
    match pair {
        Some((x, y, (m, n))) if m * n > 4 => {
            try_apply(k, OptOps::Upcast, x.axis().0, m);
            try_apply(k, OptOps::Upcast, y.axis().0, n);
        }
        _ => {
            rows(k, a, None, vregs, a.budget);
        }
    }
}

/// UPCAST around vector axis `v`, `vregs` registers a row: rows along an axis the vectors' operand ignores (each
/// vector load feeds a row of multiply-adds: [`row_axis`]) and columns along one the broadcast operand ignores and
/// the vectors' operand walks in the shortest steps (an image's next row, not the next image: each broadcast feeds
/// a column), split to do the most multiply-adds per load; without columns, [`rows`].
fn vector_tile(k: &mut Kernel, a: &Analysis, v: &UOp, vregs: usize) {
    // (the analysis's own range of the vector axis: padding it made a new one)
    let Some(v) = a.outs.iter().find(|r| r.axis().0 == v.axis().0) else { return };
    let Some(row) = row_axis(a, Some(v)) else { return stream_columns(k, a, v, vregs) };
    let (vecs, bcast): (Vec<&UOp>, Vec<&UOp>) = a.loads.iter().partition(|l| along(l, v) == Some(1));
    let step = |c: &UOp| vecs.iter().filter_map(|l| along(l, c)).map(i128::abs).max().unwrap_or(i128::MAX);
    let cols = a.outs.iter().filter(|c| c.axis().0 != v.axis().0 && *c != row);
    let col = cols.filter(|c| bcast.iter().all(|l| ignores(l, c)) && vecs.iter().any(|l| !ignores(l, c))).min_by_key(|c| step(c));
    let (nr, nc) = (range_size(row), col.map_or(1, range_size));
    let splits = [1, 2, 3, 4, 6, 7, 8].into_iter().flat_map(|m| [1, 2, 3, 4, 5, 6, 7, 8, 12, 16].into_iter().map(move |n| (m, n)));
    let lanes = k.lanes();
    let fits = splits
        .filter(|&(m, n)| nc.is_multiple_of(m) && nr.is_multiple_of(n) && m * n * vregs <= a.budget && lanes * m * n <= super::MAX_LANES)
        // (the compiler loads a step's vectors and broadcasts before its multiply-adds: with columns they must fit
        // beside the accumulators, or it spills them every step: 4x7 tiles over 14x14 images, 28 accumulators + 11
        // loads of 32 AVX-512 registers; a tile of rows only folds each broadcast into its multiply-adds, [`rows`])
        .filter(|&(m, n)| m == 1 || m * n * vregs + m * vregs + n <= a.regs);
    // (multiply-adds per load, in thousandths: m*n*vregs of them for m*vregs vector loads and n broadcasts)
    let best = fits.max_by_key(|&(m, n)| (m * n * vregs * 1000 / (m * vregs + n), n));
    match (best, col) {
        (Some((m, n)), Some(c)) if m > 1 => {
            try_apply(k, OptOps::Upcast, row.axis().0, n);
            try_apply(k, OptOps::Upcast, c.axis().0, m);
            order_tile_loops(k, a, (row, n, &vecs), (c, m, &bcast));
        }
        _ => {
            let (vregs, budget) = widen_narrow_vectors(k, a, v, vregs);
            let n = rows(k, a, Some(v), vregs, budget);
            if a.reds.len() == 1 {
                more_rows(k, a, (v, row, n), vregs, &vecs);
            }
        }
    }
}

/// UPCAST: a tile of rows only, over a long reduction into a vector axis of 4 registers (64x8192 @ 8192x64),
/// takes the whole axis as vectors, so each broadcast feeds twice the multiply-adds; with 16-lane vectors its rows
/// may fill every register, the broadcasts being the multiply-adds' memory operands (8 rows: what BEAM finds, 66 ->
/// 100-110 GFLOP/s). Returns the registers a row takes and the registers the rows may fill.
fn widen_narrow_vectors(k: &mut Kernel, a: &Analysis, v: &UOp, vregs: usize) -> (usize, usize) {
    let long = a.reds.iter().map(range_size).product::<usize>() >= 1024;
    if !(long && vregs == 2 && axis_of(k, v.axis().0).is_some_and(|i| k.full_shape()[i] == 2)) {
        return (vregs, a.budget);
    }
    try_apply(k, OptOps::Upcast, v.axis().0, 2);
    (4, if a.lanes >= 16 { (k.ren.vector_registers / a.stack).max(1) } else { a.budget })
}

/// UPCAST and UNROLL where no output axis reuses the vector loads (a matrix-vector product, a column sum): each
/// vector load feeds one multiply-add, so the kernel streams memory. More vectors along the vector axis (`vregs`
/// registers so far, up to 8: 512 contiguous bytes of each row) and the reduce loop unrolled by 4 keep more loads in
/// flight (what BEAM finds for 1x4096 @ 4096x4096: 10 -> 26 GB/s).
fn stream_columns(k: &mut Kernel, a: &Analysis, v: &UOp, vregs: usize) {
    // (the vector axis may be all lanes already: a matrix stored in tiles of a register's rows)
    if let Some(i) = axis_of(k, v.axis().0) {
        let (n, lanes) = (k.full_shape()[i], k.lanes());
        let more = !a.tiled(v);
        if let Some(m) = [4, 2].into_iter().find(|&m| more && n.is_multiple_of(m) && m * vregs <= 8 && lanes * m <= super::MAX_LANES) {
            try_apply(k, OptOps::Upcast, v.axis().0, m);
        }
    }
    let dims = k.unrollable_dims();
    let last = a.reds.last().and_then(|r| dims.iter().position(|&d| k.rngs()[d].axis().0 == r.axis().0));
    if let Some(d) = last.filter(|&d| k.full_shape()[dims[d]].is_multiple_of(4)) {
        let _ = k.apply_opt(Opt::new(OptOps::Unroll, d, 4));
    }
}

/// SWAP: the row and column loops of a register tile ([`vector_tile`]: `(row axis, its tile size, the vectors'
/// loads)` and `(column axis, its tile size, the broadcast loads)`) ordered for the fewest bytes re-read. The loads
/// moving along the inner of the two loops are read again at each step of the outer one (rows outside: the whole image once per row group; columns outside:
/// the whole filter once per group of an image's rows), so the loop whose steps cost less goes outside. A 1x1
/// convolution over a 56x56 image with 256 channels re-reads 3 MB per row group in output-channel order, 128 KB
/// per image-row group swapped: 50 -> 90 GFLOP/s.
fn order_tile_loops(k: &mut Kernel, a: &Analysis, (row, n, vecs): (&UOp, usize, &[&UOp]), (col, m, bcast): (&UOp, usize, &[&UOp])) {
    let outer = row.axis().0.min(col.axis().0);
    // (elements a load spans over the loops inside the outer of the two: its steps along each, summed)
    let span = |l: &UOp| {
        let inner = a.outs.iter().filter(|r| r.axis().0 >= outer).chain(&a.reds);
        inner.map(|r| along(l, r).map(|s| s.unsigned_abs() * (range_size(r) as u128 - 1))).sum::<Option<u128>>().map(|s| s + 1)
    };
    let spans = |ls: &[&UOp]| ls.iter().map(|l| span(l)).sum::<Option<u128>>();
    let (Some(vb), Some(bb)) = (spans(vecs), spans(bcast)) else { return };
    let (rows_outside, cols_outside) = ((range_size(row) / n) as u128 * vb, (range_size(col) / m) as u128 * bb);
    let swap = if row.axis().0 < col.axis().0 { cols_outside < rows_outside } else { rows_outside < cols_outside };
    if let (true, Some(x), Some(y)) = (swap, axis_of(k, row.axis().0), axis_of(k, col.axis().0)) {
        let _ = k.apply_opt(Opt::new(OptOps::Swap, x, y));
    }
}

/// The row axis of a register tile beside vector axis `skip`: the largest output axis that one operand does not
/// move along and another does, rows whose moving loads are consecutive (sharing cache lines) first, then rows that
/// reuse a half-precision load (converted once for all of them: a batched decode step's scores kernel, each float16
/// key row for its group's query heads), rows that re-load a narrow integer (which loads lane by lane) last. Beside
/// a vector axis, only an axis some load moving with the vectors ignores: rows that re-load every vector (a
/// matrix-vector product's next tile of rows, `QuantMatrix`) share only broadcasts, and each row is another stream
/// from memory.
fn row_axis<'a>(a: &'a Analysis, skip: Option<&UOp>) -> Option<&'a UOp> {
    row_axes(a, skip).into_iter().next()
}

/// The candidates for [`row_axis`], best first.
fn row_axes<'a>(a: &'a Analysis, skip: Option<&UOp>) -> Vec<&'a UOp> {
    let cheap = |r: &UOp| a.loads.iter().filter(|l| along(l, r) != Some(0)).all(|l| l.dtype.is_float());
    let near = |r: &UOp| a.loads.iter().filter(|l| along(l, r) != Some(0)).all(|l| along(l, r).is_some_and(|s| s.abs() <= 2));
    let reuses_vectors = |r: &UOp| skip.is_none_or(|v| a.loads.iter().any(|l| along(l, v) != Some(0) && ignores(l, r)));
    // (the vector axis by id: padding it made a new range)
    let other = |r: &&UOp| skip.is_none_or(|s| s.axis().0 != r.axis().0);
    // (a half-precision load reused along `r` is converted once for all its rows)
    let widens = |r: &UOp| a.loads.iter().any(|l| ignores(l, r) && l.dtype.is_float() && l.dtype.base().itemsize() < 4);
    let mut axes: Vec<&UOp> = a.outs.iter().filter(other).filter(|r| a.reuse(r) && reuses_vectors(r)).collect();
    axes.sort_by_key(|r| std::cmp::Reverse((cheap(r), near(r), widens(r), range_size(r))));
    axes
}

/// UPCAST into the rows of a register tile along [`row_axis`], as many rows of `vregs` registers as fit `budget`; an axis
/// no tile height divides (a prime) is padded to 8 rows where that fits and wastes at most an eighth (509 rows as 64
/// tiles of 8: 16 accumulators, not 8), else to 4.
fn rows(k: &mut Kernel, a: &Analysis, skip: Option<&UOp>, vregs: usize, budget: usize) -> usize {
    let axes = row_axes(a, skip);
    let Some(&row) = axes.first() else { return 1 };
    let m = range_size(row);
    // (8 or more rows over a window each hold a register beside the accumulators and the row's vectors,
    // [`Analysis::window`]: AVX-512's 14 rows of 2 registers over a stride-2 3x3 window spilled 202 registers a step,
    // 7 rows none (r_8_8_14_32_14_256_3_3 42 -> 17 ms); fewer rows fit as they are: AVX2's 5 rows of a 5x5 window cut
    // to 4 spilled where 5 did not, 235 -> 1,141 ms)
    let held = |r: &UOp, x: usize| x < 8 || !a.window(r, x) || x * vregs + vregs + x <= a.regs;
    let fit = |r: &UOp| {
        [16, 14, 12, 10, 8, 7, 6, 5, 4, 3, 2].into_iter().find(|&x| range_size(r).is_multiple_of(x) && x * vregs <= budget && held(r, x))
    };
    // (where no tile height divides the best axis and it is short, the next one a height divides: a convolution weight
    // gradient's 5 window columns beside 4 registers of output channels, 2 input channels instead)
    let next = || axes[1..].iter().find_map(|r| Some((*r, fit(r)?)));
    match fit(row).map(|x| (row, x)).or_else(|| if m < 8 { next() } else { None }) {
        Some((row, rows)) => {
            try_apply(k, OptOps::Upcast, row.axis().0, rows);
            rows
        }
        None if m >= 8 => {
            let fit = |x: usize| x * vregs <= budget && held(row, x) && (x == 4 || 8 * (m.next_multiple_of(x) - m) <= m);
            let Some((x, i)) = [8, 4].into_iter().find(|&x| fit(x)).zip(axis_of(k, row.axis().0)) else { return 1 };
            if k.apply_opt(Opt::new(OptOps::Padto, i, x)).is_ok() {
                try_apply(k, OptOps::Upcast, row.axis().0, x);
                return x;
            }
            1
        }
        None => 1,
    }
}

/// UPCAST: where the rows along `row` (`n` of them) leave registers over (a 7-wide image), rows along a second axis
/// that the vectors' operand (`vecs`) ignores too, the one the other loads step along in the shortest steps (the
/// next image of the batch), so each vector load, which comes from further away than the broadcasts, feeds more
/// multiply-adds. For reductions over one axis: a 1x1 convolution over 7x7 images, 512 -> 2048 channels, 66 -> 108
/// GFLOP/s, 2048 -> 512 61 -> 74; a 3x3 window's (three reduce axes) measured slower with it, 64 -> 57.
fn more_rows(k: &mut Kernel, a: &Analysis, (v, row, n): (&UOp, &UOp, usize), vregs: usize, vecs: &[&UOp]) {
    let left = a.budget / (n * vregs).max(1);
    let step = |r: &UOp| a.loads.iter().filter_map(|l| along(l, r)).map(i128::abs).max().unwrap_or(i128::MAX);
    let others = a.outs.iter().filter(|r| r.axis().0 != v.axis().0 && r.axis().0 != row.axis().0 && vecs.iter().all(|l| ignores(l, r)));
    let fits = |r: &UOp| [4, 3, 2].into_iter().find(|&x| x <= left && range_size(r).is_multiple_of(x) && k.lanes() * x <= super::MAX_LANES);
    if let Some((r, x)) = others.filter(|r| a.reuse(r)).filter_map(|r| Some((r, fits(r)?))).min_by_key(|(r, _)| step(r)) {
        try_apply(k, OptOps::Upcast, r.axis().0, x);
    }
}

/// UPCAST for an elementwise kernel: vector loads and stores along the vector axis, up to 16 lanes (a tiny kernel
/// runs as fast either way, and is cheaper to generate and compile scalar; a symbolic axis counts at its largest: a
/// decode step's softmax exponentials over 9 heads x `blocks` x 32 keys, scalar, took 7 us a layer instead of 1).
fn upcast_elementwise(k: &mut Kernel, a: &Analysis, vaxis: Option<&UOp>) {
    let most = |r: &UOp| usize::try_from(r.src[0].bounds().1).unwrap_or(usize::MAX).max(1);
    if let Some(v) = vaxis.filter(|_| k.rngs().iter().map(most).fold(1usize, usize::saturating_mul) >= 1024) {
        if let Some(w) = a.width(range_size(v), 16) {
            try_apply(k, OptOps::Upcast, v.axis().0, w);
        }
    }
}

/// THREAD: the outermost output loop that splits evenly over the cores (or is long enough not to care) and that a
/// dominant load moves along; in a register-tiled reduction whose vectors are column panels ([`panels`]) the vector
/// axis first, so each core keeps its own panels in cache.
fn threads(k: &mut Kernel, a: &Analysis, vaxis: Option<&UOp>) {
    let t = k.ren.threads;
    if t <= 1 {
        return;
    }
    let rngs = k.rngs();
    let mut dims = k.upcastable_dims();
    if let Some(v) = vaxis.filter(|v| a.reduces && k.lanes() > 1 && panels(a, v) && !shared_operand(a, v)) {
        dims.sort_by_key(|&i| rngs[i].axis().0 != v.axis().0);
    }
    // (the load of a buffer four times the size of any other's: along an axis it ignores, each core reads it whole,
    // as attention's keys threaded by query token, its values by query head)
    let bytes = |l: &UOp| l.src[0].src[0].dtype.size.max(0) as usize * l.dtype.base().itemsize();
    let dominant = a
        .loads
        .iter()
        .max_by_key(|l| bytes(l))
        .filter(|m| bytes(m) > 0 && a.loads.iter().all(|l| l.src[0].src[0] == m.src[0].src[0] || 4 * bytes(l) <= bytes(m)));
    // (its load as the opts left it, split axes and all: the kernel walked again only where there is one)
    let loads: Vec<UOp> = match dominant {
        Some(m) => reduce_loads(&k.ast.toposort().into_iter().filter(|u| u.op == Ops::REDUCE).collect::<Vec<_>>())
            .into_iter()
            .filter(|l| l.src[0].src[0] == m.src[0].src[0])
            .collect(),
        None => vec![],
    };
    let largest = loads.first();
    let moves = |i: usize| largest.is_none_or(|l| !ignores(l, &rngs[i]));
    let even = |i: &usize| {
        let n = range_size(&rngs[*i]);
        n >= t && (n.is_multiple_of(t) || n >= 8 * t)
    };
    let pick = dims.iter().copied().filter(even).find(|&i| moves(i)).or_else(|| dims.iter().copied().find(even));
    // (else the longest along which that load moves, the last of equals)
    let pick = pick.or_else(|| {
        k.upcastable_dims().into_iter().filter(|&i| range_size(&rngs[i]) >= t).max_by_key(|&i| (moves(i), range_size(&rngs[i])))
    });
    if let Some(i) = pick {
        let _ = k.apply_opt(Opt::new(OptOps::Thread, i, range_size(&rngs[i])));
    }
}

/// Bytes of a core's cache the vector operand may take and still be read by every core whole ([`threads`]).
const SHARED_OPERAND_BYTES: u128 = 256 << 10;

/// Whether the loads moving along vector axis `v` span at most [`SHARED_OPERAND_BYTES`] in all: a convolution's
/// filter (100-150 KB in beautiful_mnist), which each core then reads whole while the cores split the images, each
/// image's pixels staying in cache across the filter's panels (threaded by panels, every core read every image:
/// conv4's forward 50 -> 47 ms on one Zen core), unlike a matmul's second operand, split by panels across the cores.
fn shared_operand(a: &Analysis, v: &UOp) -> bool {
    let axes: Vec<&UOp> = a.outs.iter().chain(&a.reds).collect();
    let span = |l: &UOp| axes.iter().map(|r| along(l, r).map(|s| s.unsigned_abs() * (range_size(r) as u128 - 1))).sum::<Option<u128>>();
    // (a load in no fixed steps, as a matmul operand packed in panels, has no span: it does not fit)
    let vecs = a.loads.iter().filter(|l| along(l, v) != Some(0));
    vecs.map(|l| span(l).map(|n| (n + 1) * l.dtype.base().itemsize() as u128))
        .sum::<Option<u128>>()
        .is_some_and(|b| b <= SHARED_OPERAND_BYTES)
}

/// Whether the loads along vector axis `v` are column panels: some row axis reuses them, or none walks them in longer
/// steps than `v`. Not so for a split matrix-vector product's blocks of rows, read once and a block apart: threading
/// those blocks gives each core its own rows to stream, threading the columns a few vectors from every row.
fn panels(a: &Analysis, v: &UOp) -> bool {
    let vecs: Vec<&UOp> = a.loads.iter().filter(|l| along(l, v).is_some_and(|s| s != 0)).collect();
    let reused = vecs.iter().any(|l| a.outs.iter().any(|r| r != v && ignores(l, r)));
    let longer = |l: &UOp, r: &UOp| along(l, r).zip(along(l, v)).is_some_and(|(sr, sv)| sr.abs() > sv.abs());
    reused || !vecs.iter().any(|l| a.outs.iter().any(|r| r != v && longer(l, r)))
}

/// LOCAL: on a target with workgroups, the grid's axes from the innermost split into workgroups of up to 64
/// threads (tinygrad's local sizes), so neighbouring threads touch neighbouring elements.
fn locals(k: &mut Kernel) {
    if !k.ren.has_local {
        return;
    }
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

/// How far INDEX `index` moves when `r` steps by one, when that is a constant.
fn step(index: &UOp, r: &UOp) -> Option<i128> {
    if index.src.len() >= 2 {
        stride(&index.src[1], r)
    } else {
        None
    }
}

/// How far load `l` moves along `r` (see [`step`]).
fn along(l: &UOp, r: &UOp) -> Option<i128> {
    step(&l.src[0], r)
}

/// Whether load `l` reads `n` consecutive elements as `r` steps from 0 (every other axis at 0): its index at `r = k`
/// is its index at 0 plus `k` for each `k < n` (`false` where the index does not fold to constants).
fn contiguous_run(l: &UOp, r: &UOp, n: usize) -> bool {
    let Some(index) = l.src[0].src.get(1) else { return false };
    let ranges: Vec<UOp> = index.toposort().into_iter().filter(|u| u.op == Ops::RANGE && u != r).collect();
    let at = |k: usize| {
        let map: rustc_hash::FxHashMap<UOp, UOp> =
            ranges.iter().map(|x| (x.clone(), x.const_like(0))).chain([(r.clone(), r.const_like(k as i64))]).collect();
        index.substitute(&map).simplify().const_int()
    };
    let Some(base) = at(0) else { return false };
    (1..n.min(range_size(r))).all(|k| at(k) == Some(base + k as i128))
}

/// Whether load `l` reads the same element at every step of `r`.
fn ignores(l: &UOp, r: &UOp) -> bool {
    along(l, r) == Some(0)
}

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
