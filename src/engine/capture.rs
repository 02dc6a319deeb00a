//! Capturing launched kernels and copies for replay (tinygrad `capturing` in `engine/realize.py`). In: a closure that
//! realizes tensors. Out: the [`Kernels`] it launched on this thread, which [`Kernels::replay`] runs again on
//! other buffers and variable values, skipping scheduling and codegen. TinyJit (`tensor::jit`) is built on it.

use super::{info, new_buffer, run_items, ExecItem};
use crate::error::{Error, Result};
use crate::uop::UOp;
use rustc_hash::{FxHashMap, FxHashSet};
use std::cell::RefCell;
use std::sync::Arc;

thread_local! {
    /// The kernels launched on this thread, one list per capture open (nested ones inside outer ones), and for
    /// each whether its output buffer was new (no memory before it ran).
    static CAPTURING: RefCell<Vec<Vec<(ExecItem, bool)>>> = const { RefCell::new(Vec::new()) };
}

/// The kernels one [`capture`] launched, in order.
pub struct Kernels {
    items: Vec<ExecItem>,
    /// Output buffers that had no memory before their kernel ran (made by the captured function).
    created: FxHashSet<UOp>,
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
    CAPTURING.with(|c| c.borrow_mut().push(Vec::new()));
    let open = Open;
    let out = f();
    let items = CAPTURING.with(|c| c.borrow_mut().last_mut().map(std::mem::take)).unwrap_or_default();
    drop(open);
    let created = items.iter().filter(|(_, new)| *new).map(|(ei, _)| ei.bufs[0].clone()).collect();
    (out, Kernels { items: items.into_iter().map(|(ei, _)| ei).collect(), created })
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
    /// Whether `buf` is an output the captured function created (not one it was given).
    pub fn created(&self, buf: &UOp) -> bool {
        self.created.contains(buf)
    }
    /// Runs the kernels again with each buffer in `swap` replaced by its value and the variables in `vars`
    /// (name, value) rebound; recorded in any capture open now.
    ///
    /// # Errors
    /// Allocation and launch errors.
    ///
    /// # Panics
    /// If a variable's value does not fit an `int`.
    pub fn replay(&self, swap: &FxHashMap<&UOp, UOp>, vars: &[(Arc<str>, i64)]) -> Result<()> {
        let items = self.items.iter().map(|ei| {
            let mut ei = ei.clone();
            ei.bufs.iter_mut().filter_map(|b| swap.get(&*b).map(|n| (b, n))).for_each(|(b, n)| *b = n.clone());
            ei.rebind(vars);
            record(&ei);
            ei
        });
        run_items(items.collect())
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
            c.iter_mut().for_each(|v| v.push((ei.clone(), fresh)));
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
