//! Scheduling. In: the tensor-level UOp graphs of the tensors to realize, and the target's `Renderer` (for the
//! [`target`] rewrites and the buffers' device). Out: kernels in dependency order
//! ([`ScheduleItem`]: a kernel AST and the buffers it reads and writes), and the buffer view each tensor
//! becomes. Follows tinygrad's `schedule/` (kernel boundaries) and rangeify (movement ops become indexing).

pub mod multi;
mod rangeify;
mod target;

use crate::renderer::Renderer;
use crate::uop::{spec, Arg, BufferInfo, GroupOp, OpSet, Ops, Sint, UOp};
use parking_lot::Mutex;
use rustc_hash::{FxHashMap, FxHashSet};
use std::sync::{Arc, LazyLock};

/// One kernel to run: `ast` is a SINK of STOREs over DEFINE_GLOBALs `0..bufs.len()`; `bufs[i]` is the BUFFER
/// node of DEFINE_GLOBAL `i` (`bufs[0]` is written, the rest read). Or a copy between devices: `ast` is a COPY with
/// no sources (arg the destination device), `bufs` the destination and the source; or a sum over processes, an
/// ALLREDUCE with no sources (`bufs` likewise).
pub struct ScheduleItem {
    /// The kernel, before optimization and lowering.
    pub ast: UOp,
    /// The buffers, by DEFINE_GLOBAL slot.
    pub bufs: Vec<UOp>,
}

/// The result of scheduling: kernels in order, and what each root becomes once they ran.
pub struct Schedule {
    /// Kernels, each after those it reads from.
    pub items: Vec<ScheduleItem>,
    /// For each root: a view of the buffer that holds it (a BUFFER, or a RESHAPE of one).
    pub outputs: Vec<UOp>,
    /// The value of each symbolic variable the roots bound (BIND), sorted by name: the kernels hold the unbound
    /// variables (DEFINE_VAR), so one kernel serves every value (tinygrad's `var_vals`).
    pub var_vals: VarVals,
}

/// Symbolic variables' values: `(name, value)` sorted by name.
pub type VarVals = Vec<(Arc<str>, i64)>;

/// A view of `buf` (a BUFFER node) in `shape`.
pub fn buffer_view(buf: &UOp, shape: &[usize]) -> UOp {
    if buf.shape() == Some(shape) {
        return buf.clone();
    }
    UOp::new(Ops::RESHAPE, buf.dtype, [buf.clone()], Arg::Ints(shape.iter().map(|&d| d as i64).collect()))
}

/// A view of `buf` (a BUFFER node) in `shape`: where that is symbolic, its front (the buffer holds the variables'
/// maxima).
pub fn buffer_view_sym(buf: &UOp, shape: &[Sint]) -> UOp {
    match shape.iter().all(|d| d.int().is_some()) {
        true => buffer_view(buf, &shape.iter().map(Sint::value).collect::<Vec<_>>()),
        false => UOp::new(Ops::RESHAPE, buf.dtype, [buf.clone()], Arg::Sints(shape.into())),
    }
}

/// A view of `buf` in the shape of tensor node `root`.
fn view_of(buf: &UOp, root: &UOp) -> UOp {
    buffer_view_sym(buf, &root.sym_shape().expect("a tensor"))
}

/// The BUFFER under a contiguous view (a BUFFER, or a RESHAPE of one), if `u` is such a view.
pub fn contiguous_buffer(u: &UOp) -> Option<&UOp> {
    match u.op {
        Ops::BUFFER => Some(u),
        Ops::RESHAPE if u.src[0].op == Ops::BUFFER => Some(&u.src[0]),
        _ => None,
    }
}

/// Where a kernel's buffer comes from, in a cached schedule.
#[derive(Clone, Copy)]
enum Src {
    /// The n-th distinct input BUFFER of the graph (in toposort order).
    Input(usize),
    /// The output of the n-th kernel.
    Kernel(usize),
}

/// A schedule with the buffers abstracted away: what the cache keeps. Each kernel: its AST, its buffers, and
/// its output: a new buffer of `size` elements on a device, or (an assign) an input buffer.
struct Template {
    kernels: Vec<(UOp, Vec<Src>, Output)>,
    outputs: Vec<Option<usize>>,
}

/// A cached kernel's output: a new buffer (elements, device), or the input buffer an assign writes.
type Output = Result<(usize, Arc<str>), usize>;

/// A schedule's cache key: the graph with its buffers abstracted, and what the target rewrites read (device, vector
/// width, workgroups, `SPLIT_REDUCEOP`).
type CacheKey = (UOp, &'static str, usize, bool, i64);

/// Schedules by graph structure and target: a training step schedules once.
static CACHE: LazyLock<Mutex<FxHashMap<CacheKey, Arc<Template>>>> = LazyLock::new(Mutex::default);

fn info_size(buf: &UOp) -> usize {
    match &buf.arg {
        Arg::Buffer(b) => b.size,
        a => panic!("not a BUFFER: {a:?}"),
    }
}

/// `roots` with every BUFFER replaced by a placeholder numbered by first appearance (same dtype, size and device) and
/// every BIND by its variable (and each CUSTOM_GRADIENT by its value); the BUFFERs in that order; the variables'
/// values, sorted by name; whether any dim is symbolic.
///
/// # Panics
/// If a variable is bound to two values.
fn normalize(roots: &[UOp]) -> (UOp, Vec<UOp>, VarVals, bool) {
    let sink = UOp::sink(roots.to_vec());
    let topo = sink.toposort();
    let mut map: FxHashMap<UOp, UOp> = FxHashMap::with_capacity_and_hasher(topo.len(), Default::default());
    let (mut inputs, mut vals, mut symbolic) = (Vec::new(), Vec::new(), false);
    for u in topo {
        let new = match &u.arg {
            Arg::Buffer(b) => {
                inputs.push(u.clone());
                let device = UOp::new(Ops::DEVICE, crate::dtype::dtypes::VOID, [], Arg::Str(b.device.clone()));
                UOp::new(Ops::BUFFER, u.dtype, [device], Arg::Ints(vec![inputs.len() as i64 - 1, b.size as i64].into()))
            }
            _ if u.op == Ops::CUSTOM_GRADIENT => map[&u.src[0]].clone(),
            _ if u.op == Ops::BIND => {
                let Arg::Var { name, .. } = &u.src[0].arg else { unreachable!("the spec checks BIND's variable") };
                vals.push((name.clone(), u.src[1].const_int().expect("the spec checks BIND's value") as i64));
                u.src[0].clone()
            }
            Arg::Sints(dims) => {
                symbolic = true;
                let src: Vec<UOp> = u.src.iter().map(|s| map[s].clone()).collect();
                u.replace(u.op, u.dtype, src, Arg::Sints(unbind_dims(dims, &mut vals)), u.tag)
            }
            _ => u.with_src(u.src.iter().map(|s| map[s].clone()).collect::<Vec<_>>()),
        };
        map.insert(u, new);
    }
    vals.sort();
    vals.dedup();
    if let Some(w) = vals.windows(2).find(|w| w[0].0 == w[1].0) {
        panic!("schedule: variable {} is bound to {} and to {}", w[0].0, w[0].1, w[1].1);
    }
    (map[&sink].clone(), inputs, vals, symbolic)
}

/// `roots` with each CUSTOM_GRADIENT replaced by its value: what is computed, once gradients are built.
pub fn strip_custom_gradients(roots: &[UOp]) -> Vec<UOp> {
    let mut new: FxHashMap<UOp, UOp> = FxHashMap::default();
    for u in UOp::sink(roots.to_vec()).toposort() {
        let n = match u.op {
            Ops::CUSTOM_GRADIENT => new[&u.src[0]].clone(),
            _ if u.src.iter().any(|s| new[s] != *s) => u.with_src(u.src.iter().map(|s| new[s].clone()).collect::<Vec<_>>()),
            _ => u.clone(),
        };
        new.insert(u, n);
    }
    roots.iter().map(|r| new[r].clone()).collect()
}

/// Whether the kernels of `roots` can loop to its symbolic dims and be exact at the bound values: rangeify tells a
/// broadcast dim by its being 1, so an EXPAND may not repeat a symbolic dim (one tensor code broadcast because its
/// bound value is 1). Other mixes of symbolic and concrete dims index exactly at the bound values.
fn sym_indexable(roots: &[UOp]) -> bool {
    let topo = UOp::sink(roots.to_vec()).toposort();
    topo.iter().filter(|u| u.op == Ops::EXPAND && u.is_symbolic()).all(|u| {
        let (src, dst) = (u.src[0].sym_shape().expect("a tensor"), u.sym_shape().expect("a tensor"));
        src.iter().zip(dst).all(|(s, d)| *s == d || s.int().is_some())
    })
}

/// The names of the variables in `roots`' symbolic dims.
fn dim_vars(roots: &[UOp]) -> Vec<Arc<str>> {
    let mut names: Vec<Arc<str>> = Vec::new();
    for u in UOp::sink(roots.to_vec()).toposort() {
        let Arg::Sints(dims) = &u.arg else { continue };
        for d in dims.iter().filter_map(|d| if let Sint::Sym(s) = d { Some(s) } else { None }) {
            for b in d.toposort().into_iter().filter(|b| b.op == Ops::BIND) {
                if !names.iter().any(|n| **n == *b.var_name()) {
                    names.push(b.var_name().into());
                }
            }
        }
    }
    names
}

/// `roots` with every symbolic dim at its bound value.
fn concretize(roots: &[UOp]) -> Vec<UOp> {
    let mut new: FxHashMap<UOp, UOp> = FxHashMap::default();
    for u in UOp::sink(roots.to_vec()).toposort() {
        let src: Vec<UOp> = u.src.iter().map(|s| new[s].clone()).collect();
        let n = match &u.arg {
            Arg::Sints(dims) => u.replace(u.op, u.dtype, src, Arg::Ints(dims.iter().map(|d| d.value() as i64).collect()), u.tag),
            _ => u.with_src(src),
        };
        new.insert(u, n);
    }
    roots.iter().map(|r| new[r].clone()).collect()
}

/// Symbolic dims with each BIND replaced by its variable, the values appended to `vals`.
fn unbind_dims(dims: &[Sint], vals: &mut VarVals) -> Arc<[Sint]> {
    let mut one = |u: &UOp| {
        let binds: FxHashMap<UOp, UOp> =
            u.toposort().into_iter().filter(|b| b.op == Ops::BIND).map(|b| (b.clone(), b.src[0].clone())).collect();
        vals.extend(binds.keys().map(|b| (Arc::from(b.var_name()), b.src[1].const_int().expect("BIND of a constant") as i64)));
        Sint::Sym(u.substitute(&binds))
    };
    dims.iter().map(|d| if let Sint::Sym(u) = d { one(u) } else { d.clone() }).collect()
}

/// `roots` with each BIND replaced by its variable (in symbolic dims too).
fn unbind(roots: &[UOp]) -> Vec<UOp> {
    let mut new: FxHashMap<UOp, UOp> = FxHashMap::default();
    for u in UOp::sink(roots.to_vec()).toposort() {
        let src: Vec<UOp> = u.src.iter().map(|s| new[s].clone()).collect();
        let n = match &u.arg {
            _ if u.op == Ops::BIND => u.src[0].clone(),
            Arg::Sints(dims) => u.replace(u.op, u.dtype, src, Arg::Sints(unbind_dims(dims, &mut Vec::new())), u.tag),
            _ => u.with_src(src),
        };
        new.insert(u, n);
    }
    roots.iter().map(|r| new[r].clone()).collect()
}

thread_local! {
    static SCHEDULES: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    static BAKED: std::cell::RefCell<Vec<Arc<str>>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The variables of symbolic dims that this thread's schedules since the last call baked in at their bound values
/// (their kernels fixed to those values: a GPU's launch grid, or a broadcast rangeify could not tell), cleared. What
/// tells a TinyJit that its capture serves only those values.
pub fn take_baked_vars() -> Vec<Arc<str>> {
    BAKED.with(|b| std::mem::take(&mut *b.borrow_mut()))
}

/// Adds `names` to this thread's baked variables (each once: a nested capture's, for the capture around it).
pub fn restore_baked_vars(names: impl IntoIterator<Item = Arc<str>>) {
    BAKED.with(|b| {
        let mut b = b.borrow_mut();
        for n in names {
            if !b.contains(&n) {
                b.push(n);
            }
        }
    });
}

/// How many schedules this thread has made ([`create_schedule`] calls, cache hits included): a TinyJit replay
/// makes none.
pub fn schedule_count() -> u64 {
    SCHEDULES.with(std::cell::Cell::get)
}

/// Kernels for `roots` on the device `ren` renders for, from the schedule cache when the graph's structure was seen
/// before.
pub fn create_schedule(roots: &[UOp], ren: &Renderer) -> Schedule {
    let device = ren.device;
    SCHEDULES.with(|n| n.set(n.get() + 1));
    spec::verify(&UOp::sink(roots.to_vec()), &spec::TENSOR_SPEC, "schedule input");
    let (mut key, mut inputs, mut var_vals, symbolic) = normalize(roots);
    let concrete;
    // (a GPU launch grid is sized before the kernel runs: symbolic axes there wait for launch-time sizes)
    let roots = if symbolic && (ren.has_local || !sym_indexable(roots)) {
        restore_baked_vars(dim_vars(roots));
        concrete = concretize(roots);
        (key, inputs, var_vals, _) = normalize(&concrete);
        &concrete[..]
    } else {
        roots
    };
    let key = (key, device, ren.vector_bytes, ren.has_local, crate::helpers::SPLIT_REDUCEOP.value());
    let hit = CACHE.lock().get(&key).cloned();
    if let Some(t) = hit {
        let mut outs: Vec<UOp> = Vec::with_capacity(t.kernels.len());
        let mut items = Vec::with_capacity(t.kernels.len());
        for (ast, srcs, out) in &t.kernels {
            let buf = |s: &Src| match *s {
                Src::Input(i) => inputs[i].clone(),
                Src::Kernel(k) => outs[k].clone(),
            };
            let reads: Vec<UOp> = srcs[1..].iter().map(buf).collect();
            outs.push(match out {
                Ok((size, on)) => {
                    let dtype =
                        if matches!(ast.op, Ops::COPY | Ops::ALLREDUCE) { ast.dtype } else { ast.src[0].src[0].src[0].dtype.base() };
                    UOp::new(Ops::BUFFER, dtype, [], Arg::Buffer(BufferInfo::new(*size, on)))
                }
                Err(input) => inputs[*input].clone(),
            });
            items.push(ScheduleItem {
                ast: ast.clone(),
                bufs: std::iter::once(outs.last().expect("pushed").clone()).chain(reads).collect(),
            });
        }
        let outputs = roots.iter().zip(&t.outputs).map(|(r, k)| k.map_or_else(|| r.clone(), |k| view_of(&outs[k], r))).collect();
        return Schedule { items, outputs, var_vals };
    }
    let unbound = if var_vals.is_empty() { roots.to_vec() } else { unbind(roots) };
    let unbound = strip_custom_gradients(&unbound);
    let mut sched = schedule_uncached(&unbound, ren);
    sched.var_vals = var_vals.clone();
    let index: FxHashMap<&UOp, Src> = inputs.iter().enumerate().map(|(i, b)| (b, Src::Input(i))).collect();
    let mut index: FxHashMap<UOp, Src> = index.into_iter().map(|(b, s)| (b.clone(), s)).collect();
    let mut kernels = Vec::with_capacity(sched.items.len());
    for (k, it) in sched.items.iter().enumerate() {
        let out = match index.get(&it.bufs[0]) {
            Some(Src::Input(i)) => Err(*i),
            _ => {
                index.insert(it.bufs[0].clone(), Src::Kernel(k));
                let Arg::Buffer(b) = &it.bufs[0].arg else { unreachable!("a BUFFER") };
                Ok((b.size, b.device.clone()))
            }
        };
        kernels.push((it.ast.clone(), it.bufs.iter().map(|b| index[b]).collect(), out));
    }
    let outputs: Vec<Option<usize>> = sched
        .outputs
        .iter()
        .zip(&unbound)
        .map(|(o, r)| {
            let b = contiguous_buffer(o)?;
            // the kernel that wrote this root's buffer (for an assign: the kernel whose output it is)
            (o != r).then(|| sched.items.iter().rposition(|it| &it.bufs[0] == b)).flatten()
        })
        .collect();
    if !var_vals.is_empty() {
        // the roots' views in their bound shapes (the schedule's are at the variables' maxima)
        sched.outputs = roots
            .iter()
            .zip(&outputs)
            .map(|(r, k)| k.map_or_else(|| r.clone(), |k| view_of(&sched.items[k].bufs[0], r)))
            .collect::<Vec<_>>();
    }
    let mut cache = CACHE.lock();
    if cache.len() > 4096 {
        cache.clear();
    }
    cache.insert(key, Arc::new(Template { kernels, outputs }));
    sched
}

/// Kernels for `roots` on `ren`'s device (no cache), after the rewrites for the target ([`target`]).
///
/// Kernel boundaries: each root that is not already a buffer view, each CONTIGUOUS, and each reduction that
/// a kernel would otherwise recompute per element: one reached through an EXPAND (a broadcast) or through
/// another reduction. A reduction reached only through elementwise and injective movement ops fuses with
/// its elementwise prologue and epilogue into its consumer's kernel.
fn schedule_uncached(roots: &[UOp], ren: &Renderer) -> Schedule {
    let rewritten = target::rewrite_for_target(roots, ren);
    let (roots, device) = (&rewritten[..], ren.device);
    spec::verify(&UOp::sink(roots.to_vec()), &spec::TENSOR_SPEC, "target rewrites");
    // the nodes that become buffers
    let mut realized: FxHashSet<UOp> = roots.iter().filter(|r| contiguous_buffer(r).is_none()).cloned().collect();
    realized.extend(deep_cuts(roots));
    let mut work: Vec<UOp> = realized.iter().cloned().collect();
    let mut seen: FxHashSet<(UOp, bool)> = FxHashSet::default();
    loop {
        while let Some(k) = work.pop() {
            // a copy between devices (or processes) reads its source from a buffer of its own
            if matches!(k.op, Ops::COPY | Ops::ALLREDUCE) && contiguous_buffer(&k.src[0]).is_none() && realized.insert(k.src[0].clone()) {
                work.push(k.src[0].clone());
            }
            // (node, reached through a broadcast or reduce) from this kernel's root
            let mut stack: Vec<(UOp, bool)> = k.src.iter().map(|s| (s.clone(), k.op == Ops::REDUCE_AXIS)).collect();
            while let Some((u, dirty)) = stack.pop() {
                if u.op == Ops::BUFFER || realized.contains(&u) || !seen.insert((u.clone(), dirty)) {
                    continue;
                }
                if matches!(u.op, Ops::CONTIGUOUS | Ops::ASSIGN | Ops::COPY | Ops::ALLREDUCE) || (u.op == Ops::REDUCE_AXIS && dirty) {
                    realized.insert(u.clone());
                    work.push(u);
                    continue;
                }
                // a reduction is not padded in its kernel (it would compute the border, each load gated): the value
                // under the pad's movement ops is realized and the padding read from it (what computes it, an epilogue
                // included, runs once; the movement ops stay index math: a convolution's window gradient pads twice
                // around reshapes, and realizing the outer pad's source had written the inner pad's 1.6x larger copy
                // of the window gradients, 1 GB a step in beautiful_mnist, before the sum read it)
                if u.op == Ops::PAD {
                    let mut base = &u.src[0];
                    while GroupOp::MOVEMENT.contains(base.op) {
                        base = &base.src[0];
                    }
                    if !realized.contains(base) && reduces(base, &realized) {
                        realized.insert(base.clone());
                        work.push(base.clone());
                    }
                }
                if let Some(small) = (u.op == Ops::EXPAND).then(|| costly_broadcast(&u, &realized)).flatten() {
                    realized.insert(small.clone());
                    work.push(small);
                }
                let dirty = dirty || matches!(u.op, Ops::EXPAND | Ops::REDUCE_AXIS);
                stack.extend(u.src.iter().map(|s| (s.clone(), dirty)));
            }
        }
        // a reduction fused into several kernels would run once per kernel: realize it once instead. And big
        // reductions side by side in one kernel (a residual join of two convolutions) would share its loops and
        // opts, which suit one of them: all but the biggest are realized, each tiled for itself
        let mut users: FxHashMap<UOp, usize> = FxHashMap::default();
        let mut beside: Vec<UOp> = Vec::new();
        for k in &realized {
            let mut visited: FxHashSet<&UOp> = FxHashSet::default();
            let mut stack: Vec<&UOp> = k.src.iter().collect();
            let mut big: Vec<&UOp> = Vec::new();
            while let Some(u) = stack.pop() {
                if u.op == Ops::BUFFER || realized.contains(u) || !visited.insert(u) {
                    continue;
                }
                if u.op == Ops::REDUCE_AXIS {
                    *users.entry(u.clone()).or_default() += 1;
                    big.extend(Some(u).filter(|u| reduce_work(u) >= BIG_REDUCE));
                }
                stack.extend(u.src.iter());
            }
            big.sort_by_key(|u| reduce_work(u));
            beside.extend(big.iter().rev().skip(1).map(|u| (*u).clone()));
        }
        beside.retain(|u| users[u] == 1);
        let shared: Vec<UOp> = users.into_iter().filter(|(_, n)| *n > 1).map(|(u, _)| u).chain(beside).collect();
        if shared.is_empty() {
            break;
        }
        for u in shared {
            realized.insert(u.clone());
            work.push(u);
        }
    }
    let order: Vec<UOp> = UOp::sink(roots.to_vec()).toposort().into_iter().filter(|u| realized.contains(u)).collect();
    let on = devices(&order, &realized, device);
    // an output buffer per realized node (an ASSIGN writes its target's); roots keep their own
    let mut bufs: FxHashMap<UOp, UOp> = FxHashMap::default();
    let mut items = Vec::with_capacity(order.len());
    for k in &order {
        let numel = k.shape().expect("realized nodes have shapes").iter().product();
        let new_buffer = || UOp::new(Ops::BUFFER, k.dtype, [], Arg::Buffer(BufferInfo::new(numel, &on[k])));
        let (ast, out, inputs) = if matches!(k.op, Ops::COPY | Ops::ALLREDUCE) {
            let src = contiguous_buffer(&k.src[0]).unwrap_or_else(|| &bufs[&k.src[0]]).clone();
            (UOp::new(k.op, k.dtype, [], k.arg.clone()), new_buffer(), vec![src])
        } else if k.op == Ops::ASSIGN {
            let out = contiguous_buffer(&k.src[0])
                .unwrap_or_else(|| panic!("assign: the target must be a realized buffer, got {}", k.src[0].op))
                .clone();
            let (ast, inputs) = rangeify::build_kernel(k, &out, &bufs);
            (ast, out, inputs)
        } else {
            // (a kernel never reads its new output buffer: the one it gets, on its inputs' device, comes after)
            let (ast, inputs) = rangeify::build_kernel(k, &UOp::new(Ops::NOOP, k.dtype, [], Arg::None), &bufs);
            (ast, new_buffer(), inputs)
        };
        if !matches!(ast.op, Ops::COPY | Ops::ALLREDUCE) {
            spec::verify(&ast, &spec::KERNEL_SPEC, "rangeify");
        }
        items.push(ScheduleItem { ast, bufs: std::iter::once(out.clone()).chain(inputs).collect() });
        bufs.insert(k.clone(), out);
    }
    let items = order_reads_before_assigns(&order, items, &bufs, device);
    let outputs = roots.iter().map(|r| bufs.get(r).map_or_else(|| r.clone(), |b| buffer_view(b, r.shape().unwrap()))).collect();
    Schedule { items, outputs, var_vals: Vec::new() }
}

/// Orders the kernels of the realized nodes `order` (in toposort order, `items[i]` computing `order[i]` with
/// `bufs` its realized nodes' buffers): each runs after the kernels of the realized nodes it reads, and a kernel
/// that reads a BUFFER's old value (the BUFFER itself, not the ASSIGN to it) runs before the kernel assigning it
/// (tinygrad orders a buffer's reads before its assign). Where the two conflict (assigns that read each other's
/// old values, as an optimizer's updates can), the old value is first copied to a buffer of its own, which the
/// reader reads instead.
fn order_reads_before_assigns(order: &[UOp], mut items: Vec<ScheduleItem>, bufs: &FxHashMap<UOp, UOp>, device: &str) -> Vec<ScheduleItem> {
    let n = order.len();
    let index: FxHashMap<&UOp, usize> = order.iter().enumerate().map(|(i, k)| (k, i)).collect();
    let assigner: FxHashMap<&UOp, usize> = (0..n)
        .filter(|&i| order[i].op == Ops::ASSIGN)
        .map(|i| (contiguous_buffer(&order[i].src[0]).expect("an assign's target is a buffer"), i))
        .collect();
    // per kernel: the kernels whose outputs it reads, and the assigned buffers whose old values it reads
    let (mut deps, mut olds) = (vec![FxHashSet::default(); n], vec![Vec::new(); n]);
    for (i, k) in order.iter().enumerate() {
        let mut stack: Vec<&UOp> = k.src[usize::from(k.op == Ops::ASSIGN)..].iter().collect();
        let mut seen: FxHashSet<&UOp> = FxHashSet::default();
        while let Some(u) = stack.pop() {
            if !seen.insert(u) {
                continue;
            }
            match (index.get(u), assigner.get(u)) {
                (Some(&d), _) => _ = deps[i].insert(d),
                (_, Some(&w)) if w != i => olds[i].push(u.clone()),
                _ if u.op != Ops::BUFFER => stack.extend(u.src.iter()),
                _ => {}
            }
        }
    }
    let preds = |deps: &[FxHashSet<usize>], olds: &[Vec<UOp>]| {
        let mut p = deps.to_vec();
        (0..n).for_each(|r| olds[r].iter().for_each(|b| _ = p[assigner[b]].insert(r)));
        p
    };
    let mut p = preds(&deps, &olds);
    let (mut done, mut out, mut copies) = (vec![false; n], Vec::with_capacity(n), Vec::new());
    let mut redirected: FxHashMap<usize, FxHashMap<UOp, UOp>> = FxHashMap::default();
    while out.len() < n {
        if let Some(i) = (0..n).find(|&i| !done[i] && p[i].iter().all(|&d| done[d])) {
            done[i] = true;
            out.push(i);
            continue;
        }
        // a cycle: the first waiting kernel that reads an old value still to be assigned reads a copy instead
        let (i, b) = (0..n)
            .filter(|&i| !done[i])
            .find_map(|i| olds[i].iter().position(|b| !done[assigner[b]]).map(|j| (i, olds[i].remove(j))))
            .expect("schedule: a cycle of kernels with no assign in it");
        let on = match &b.arg {
            Arg::Buffer(info) => info.device.clone(),
            _ => device.into(),
        };
        let copy = UOp::new(Ops::BUFFER, b.dtype, [], Arg::Buffer(BufferInfo::new(info_size(&b), &on)));
        let (ast, inputs) = rangeify::build_kernel(&UOp::new(Ops::CONTIGUOUS, b.dtype, [b.clone()], Arg::None), &copy, bufs);
        copies.push(ScheduleItem { ast, bufs: [vec![copy.clone()], inputs].concat() });
        let reads = redirected.entry(i).or_insert_with(|| bufs.clone());
        reads.insert(b, copy);
        let (ast, inputs) = rangeify::build_kernel(&order[i], &items[i].bufs[0], reads);
        items[i] = ScheduleItem { ast, bufs: [vec![items[i].bufs[0].clone()], inputs].concat() };
        p = preds(&deps, &olds);
    }
    let mut slots: Vec<Option<ScheduleItem>> = items.into_iter().map(Some).collect();
    copies.into_iter().chain(out.into_iter().map(|i| slots[i].take().expect("each kernel once"))).collect()
}

/// The device each realized node (`order`, in toposort order) computes on and its buffer lives on: a copy's
/// destination, else the device of the first buffer its kernel reads (a BUFFER, or a realized node's), else (a kernel
/// of constants) the device of the first kernel that reads it (not a copy), else `default`.
fn devices(order: &[UOp], realized: &FxHashSet<UOp>, default: &str) -> FxHashMap<UOp, Arc<str>> {
    let mut on: FxHashMap<UOp, Arc<str>> = FxHashMap::default();
    let mut reads: FxHashMap<&UOp, Vec<&UOp>> = FxHashMap::default();
    for k in order {
        let (mut stack, mut seen, mut found) = (k.src.iter().collect::<Vec<_>>(), FxHashSet::default(), None);
        if let (Ops::COPY, Arg::Str(to)) = (k.op, &k.arg) {
            found = Some(to.clone());
        }
        while let Some(u) = stack.pop() {
            if !seen.insert(u) {
                continue;
            }
            match &u.arg {
                Arg::Buffer(b) => _ = found.get_or_insert_with(|| b.device.clone()),
                _ if realized.contains(u) => {
                    // (a copy's source is on some other device)
                    if k.op != Ops::COPY {
                        reads.entry(k).or_default().push(u);
                    }
                    if let Some(d) = on.get(u) {
                        found.get_or_insert_with(|| d.clone());
                    }
                }
                _ => stack.extend(u.src.iter()),
            }
        }
        if let Some(d) = found {
            on.insert(k.clone(), d);
        }
    }
    for k in order.iter().rev() {
        let d: Arc<str> = on.get(k).cloned().unwrap_or_else(|| default.into());
        on.insert(k.clone(), d.clone());
        for r in reads.get(k).into_iter().flatten() {
            on.entry((*r).clone()).or_insert_with(|| d.clone());
        }
    }
    on
}

/// Elements a reduction reads (its source's), from which two side by side in one kernel get kernels of their own.
const BIG_REDUCE: usize = 1 << 24;

/// Elements reduction `u` reads: its source's.
fn reduce_work(u: &UOp) -> usize {
    u.src[0].shape().map_or(0, |s| s.iter().product())
}

/// Whether `u` computes a reduction in its kernel (one not behind a buffer or a realized node).
fn reduces(u: &UOp, realized: &FxHashSet<UOp>) -> bool {
    let (mut stack, mut seen) = (vec![u], FxHashSet::default());
    while let Some(u) = stack.pop() {
        if u.op == Ops::REDUCE_AXIS {
            return true;
        }
        if !matches!(u.op, Ops::BUFFER | Ops::CONTIGUOUS | Ops::ASSIGN) && !realized.contains(u) && seen.insert(u) {
            stack.extend(u.src.iter());
        }
    }
    false
}

/// The most ALU ops on one path through a fused kernel. C compilers slow down superlinearly on long expression
/// chains; a chain cut every `MAX_FUSED_DEPTH` ops becomes kernels that are alike, so they compile once.
const MAX_FUSED_DEPTH: usize = 1024;

/// The nodes at which a chain of more than [`MAX_FUSED_DEPTH`] ALU ops is cut into a buffer (a departure: tinygrad
/// fuses the whole chain).
fn deep_cuts(roots: &[UOp]) -> Vec<UOp> {
    let mut depth: FxHashMap<UOp, usize> = FxHashMap::default();
    let mut cuts = Vec::new();
    for u in UOp::sink(roots.to_vec()).toposort() {
        let d = u.src.iter().map(|s| depth.get(s).copied().unwrap_or(0)).max().unwrap_or(0);
        let d = match u.op {
            Ops::BUFFER | Ops::CONTIGUOUS | Ops::ASSIGN => 0,
            op if GroupOp::ALU.contains(op) && d + 1 >= MAX_FUSED_DEPTH => {
                cuts.push(u.clone());
                0
            }
            op if GroupOp::ALU.contains(op) => d + 1,
            _ => d,
        };
        depth.insert(u, d);
    }
    cuts
}

/// For an EXPAND that broadcasts a small tensor computed with transcendental ops (sqrt, exp, log, sin,
/// reciprocal: BatchNorm's `invstd`, say) at least 16 times, or the elementwise epilogue of a reduction of 65,536+
/// elements (a convolution's `relu(x + bias)` input, read per window and output channel: a scalar in the
/// multiply-adds where a load would be their memory operand; conv2 forward in beautiful_mnist 125 -> 65 ms): that
/// computation, which is then worth its own kernel rather than being redone for every element it is broadcast to. The search stops at reductions: one
/// reached through a broadcast gets its own kernel anyway, so what it reads is never redone per element (and
/// the answer must not depend on whether the scheduler has marked that reduction yet).
fn costly_broadcast(expand: &UOp, realized: &FxHashSet<UOp>) -> Option<UOp> {
    let mut base = &expand.src[0];
    while GroupOp::MOVEMENT.contains(base.op) || base.op == Ops::DETACH {
        base = &base.src[0];
    }
    let (small, big): (usize, usize) = (base.shape()?.iter().product(), expand.shape()?.iter().product());
    if !GroupOp::ALU.contains(base.op) || realized.contains(base) || small.saturating_mul(16) > big {
        return None;
    }
    let costly = OpSet::of(&[Ops::SQRT, Ops::EXP2, Ops::LOG2, Ops::SIN, Ops::RECIPROCAL, Ops::FDIV, Ops::POW]);
    let (mut stack, mut seen) = (vec![base], FxHashSet::default());
    while let Some(u) = stack.pop() {
        if costly.contains(u.op) || (u.op == Ops::REDUCE_AXIS && small >= 1 << 16) {
            return Some(base.clone());
        }
        if !matches!(u.op, Ops::BUFFER | Ops::REDUCE_AXIS) && !realized.contains(u) && seen.insert(u) {
            stack.extend(u.src.iter());
        }
    }
    None
}
