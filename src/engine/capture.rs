//! Capturing launched kernels and copies for replay (tinygrad `capturing` in `engine/realize.py`). In: a closure that
//! realizes tensors. Out: the [`Kernels`] it launched on this thread, which [`Kernels::replay`] runs again on
//! other buffers and variable values, skipping scheduling and codegen. TinyJit (`tensor::jit`) is built on it.

use super::graph::Graph;
use super::{batchable, in_batch, info, new_buffer, queue, run_items, ExecItem};
use crate::error::{Error, Result};
use crate::uop::UOp;
use rustc_hash::{FxHashMap, FxHashSet};
use std::borrow::Cow;
use std::cell::RefCell;
use std::sync::{Arc, OnceLock};

thread_local! {
    /// The captures open on this thread (nested ones inside outer ones).
    static CAPTURING: RefCell<Vec<Recording>> = const { RefCell::new(Vec::new()) };
}

/// One open capture: the kernels launched so far, each buffer one of them made (it had no memory before) recorded as
/// its twin, a BUFFER without memory, so the run frees the buffer after its last use as it would uncaptured.
#[derive(Default)]
struct Recording {
    items: Vec<ExecItem>,
    twins: FxHashMap<u64, UOp>,
}

/// The kernels one [`capture`] launched, in order.
pub struct Kernels {
    items: Vec<ExecItem>,
    /// The buffers the captured function made (twins, or the function's outputs once [`Kernels::adopt`]ed).
    created: FxHashSet<UOp>,
    /// The twin of each buffer made, by the buffer's id.
    twins: FxHashMap<u64, UOp>,
    /// The launches made ready at the first replay that can use them ([`Graph`]; None: replays launch item by item).
    graph: OnceLock<Option<Graph>>,
}

/// Runs `f`, recording every kernel launched on this thread meanwhile (a capture open inside `f` records its
/// kernels in both).
pub fn capture<T>(f: impl FnOnce() -> T) -> (T, Kernels) {
    /// Closes this thread's innermost capture when dropped, so a panic in `f` leaves no capture open.
    struct Open;
    impl Drop for Open {
        fn drop(&mut self) {
            CAPTURING.with(|c| c.borrow_mut().pop());
        }
    }
    CAPTURING.with(|c| c.borrow_mut().push(Recording::default()));
    let open = Open;
    let out = f();
    let rec = CAPTURING.with(|c| c.borrow_mut().last_mut().map(std::mem::take)).unwrap_or_default();
    drop(open);
    (out, Kernels { items: rec.items, created: rec.twins.values().cloned().collect(), twins: rec.twins, graph: OnceLock::new() })
}

impl Kernels {
    /// Whether no kernel ran.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
    /// The BUFFERs the kernels read and write.
    pub fn buffers(&self) -> impl Iterator<Item = &UOp> {
        self.items.iter().flat_map(|ei| &ei.bufs)
    }
    /// The number of kernels among them (not counting copies).
    pub fn kernel_count(&self) -> usize {
        self.items.iter().filter(|ei| ei.runner().is_some()).count()
    }
    /// Each copy between devices among them, in order: (from, to), canonical device names.
    pub fn copies(&self) -> Vec<(String, String)> {
        let dev = |b: &UOp| crate::runtime::canonicalize_device(&info(b).device);
        self.items.iter().filter(|ei| ei.is_copy()).map(|ei| (dev(&ei.bufs[1]), dev(&ei.bufs[0]))).collect()
    }
    /// Whether these kernels are `other`'s run again: the same programs and copies in order, on buffers in the same
    /// roles (the same input by position among `inputs` / `other_inputs`, the same buffer the function holds, or
    /// the n-th buffer the run made), whatever the variables' values. What tells a TinyJit that a capture made at
    /// one value of a symbolic dim serves every value.
    pub fn same_as(&self, inputs: &[UOp], other: &Kernels, other_inputs: &[UOp]) -> bool {
        let roles = |k: &Kernels, inputs: &[UOp]| {
            let mut made: Vec<&UOp> = Vec::new();
            let mut out = Vec::new();
            for b in k.items.iter().flat_map(|ei| &ei.bufs) {
                out.push(match inputs.iter().position(|x| x == b) {
                    Some(i) => (0, i, None),
                    None if k.created.contains(b) => (
                        1,
                        made.iter().position(|x| *x == b).unwrap_or_else(|| {
                            made.push(b);
                            made.len() - 1
                        }),
                        None,
                    ),
                    None => (2, 0, Some(b.clone())),
                });
            }
            out
        };
        let same_work = |a: &ExecItem, b: &ExecItem| match (a.runner(), b.runner()) {
            (Some(x), Some(y)) => Arc::ptr_eq(x, y),
            (None, None) => a.is_copy() == b.is_copy(),
            _ => false,
        };
        self.items.len() == other.items.len()
            && self.items.iter().zip(&other.items).all(|(a, b)| same_work(a, b))
            && roles(self, inputs) == roles(other, other_inputs)
    }
    /// Makes the kernels write `outputs` (the captured function's outputs, buffers it made) rather than their twins,
    /// so the capture's outputs are the buffers the function returned.
    pub fn adopt(&mut self, outputs: &[UOp]) {
        self.graph = OnceLock::new();
        for o in outputs {
            let Some(t) = self.twins.remove(&info(o).id) else { continue };
            self.items.iter_mut().flat_map(|ei| ei.bufs.iter_mut()).filter(|b| **b == t).for_each(|b| *b = o.clone());
            self.created.remove(&t);
            self.created.insert(o.clone());
        }
    }
    /// Gives the buffers the kernels made for themselves (twins not in `keep`: the function's inputs and outputs)
    /// memory shared among those whose uses don't overlap, as tinygrad's JIT memory planner
    /// does: each takes a free buffer of its dtype, size and device at its first use and frees it after its last, so
    /// replays hold about a plain run's peak rather than every intermediate at once.
    pub fn plan_memory(&mut self, keep: &[UOp]) {
        self.graph = OnceLock::new();
        let planned = |b: &UOp| self.created.contains(b) && !keep.contains(b);
        let mut last: FxHashMap<UOp, usize> = FxHashMap::default();
        for (i, ei) in self.items.iter().enumerate() {
            last.extend(ei.bufs.iter().filter(|b| planned(b)).map(|b| (b.clone(), i)));
        }
        let key = |b: &UOp| (b.dtype, info(b).size, info(b).device.clone());
        let (mut free, mut to): (FxHashMap<_, Vec<UOp>>, FxHashMap<UOp, UOp>) = Default::default();
        for (i, ei) in self.items.iter().enumerate() {
            for b in ei.bufs.iter().filter(|b| last.contains_key(*b)) {
                if !to.contains_key(b) {
                    let slot = free.get_mut(&key(b)).and_then(Vec::pop).unwrap_or_else(|| b.clone());
                    to.insert(b.clone(), slot);
                }
            }
            for b in ei.bufs.iter().filter(|b| last.get(*b) == Some(&i)) {
                if let Some(slot) = to.get(b).filter(|s| !free.get(&key(b)).is_some_and(|f| f.contains(s))) {
                    free.entry(key(b)).or_default().push(slot.clone());
                }
            }
        }
        for ei in &mut self.items {
            ei.bufs.iter_mut().filter_map(|b| to.get(&*b).map(|n| (b, n))).for_each(|(b, n)| *b = n.clone());
        }
    }
    /// Whether `buf` is an output the captured function created (not one it was given).
    pub fn created(&self, buf: &UOp) -> bool {
        self.created.contains(buf)
    }
    /// Runs the kernels again with each buffer swapped for its pair in `swap` (captured, new) and the variables in
    /// `vars` (name, value) rebound; recorded in any capture open now. A replay of kernels on one queue, not
    /// recorded nor printed (DEBUG=2, PROFILE), launches them as a [`Graph`], made at the first such replay for
    /// the order of `swap`'s keys and `vars`' names it sees (replays in another order launch item by item).
    ///
    /// # Errors
    /// Allocation and launch errors.
    ///
    /// # Panics
    /// If a variable's value does not fit an `int`.
    pub fn replay(&self, swap: &[(UOp, UOp)], vars: &[(Arc<str>, i64)]) -> Result<()> {
        let recording = CAPTURING.with(|c| !c.borrow().is_empty());
        if !recording && crate::helpers::DEBUG.value() < 2 && !crate::profile::enabled() {
            if self.graph.get().is_none() {
                let g = Graph::new(&self.items, swap, vars)?;
                let _ = self.graph.set(g);
            }
            if let Some(g) = self.graph.get().and_then(Option::as_ref).filter(|g| g.fits(swap, vars)) {
                return g.run(swap, vars);
            }
        }
        let swap: FxHashMap<&UOp, &UOp> = swap.iter().map(|(k, v)| (k, v)).collect();
        let mut items = self.items.iter().map(|ei| {
            // (an item on the captured buffers and variables runs as it is: a decode step's thousand kernels
            // are mostly those, and copying each showed in its profile)
            if !recording && !ei.has_vars() && !ei.bufs.iter().any(|b| swap.contains_key(b)) {
                return Cow::Borrowed(ei);
            }
            let mut ei = ei.clone();
            ei.bufs.iter_mut().filter_map(|b| swap.get(&*b).map(|n| (b, *n))).for_each(|(b, n)| *b = n.clone());
            ei.rebind(vars);
            record(&ei);
            Cow::Owned(ei)
        });
        if queue::spans_queues(&self.items) {
            return run_items(items.map(Cow::into_owned).collect());
        }
        in_batch(batchable(&self.items), || items.try_for_each(|ei| ei.run().map(drop)))
    }
}

/// A new BUFFER of `buf`'s dtype, size and device.
pub fn new_buffer_like(buf: &UOp) -> UOp {
    let b = info(buf);
    new_buffer(buf.dtype, b.size, &b.device)
}

/// Records `ei`, about to run, in every capture open on this thread.
pub(super) fn record(ei: &ExecItem) {
    CAPTURING.with(|c| {
        let mut c = c.borrow_mut();
        if !c.is_empty() {
            let fresh = info(&ei.bufs[0]).mem.get().is_none();
            for rec in c.iter_mut() {
                if fresh {
                    rec.twins.entry(info(&ei.bufs[0]).id).or_insert_with(|| new_buffer_like(&ei.bufs[0]));
                }
                let mut ei = ei.clone();
                ei.bufs.iter_mut().for_each(|b| *b = rec.twins.get(&info(b).id).unwrap_or(b).clone());
                rec.items.push(ei);
            }
        }
    })
}

/// An error if a capture (a TinyJit) is open on this thread: data read now would be baked into the replays.
///
/// # Errors
/// [`Error::Jit`] while capturing.
pub(crate) fn jit_check_read() -> Result<()> {
    if CAPTURING.with(|c| c.borrow().is_empty()) {
        return Ok(());
    }
    Err(Error::Jit(
        "a tensor's data was read while capturing: the value would be baked into every replay; compute it with tensor ops, or pass it as an argument (TinyJit::call_with)"
            .into(),
    ))
}
