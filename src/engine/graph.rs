//! A TinyJit replay's launches made ready once (tinygrad `GraphRunner`, what its `CPUGraph` and `CUDAGraph` build on).
//! In: a capture's [`ExecItem`]s, the captured buffers a replay swaps for others and the variables it rebinds, each in
//! the replay's order. Out: a [`Graph`] whose [`Graph::run`] launches every kernel on argument addresses and variable
//! values patched where a replay changes them (tinygrad's `input_replace` and `var_vals_replace`), its buffers
//! locked once for the whole replay. Launching each item anew looked up, cloned and locked each of its buffers: a
//! fifth of the model thread's time in a 4-row batched decode step of a thousand kernels.

use super::{info, mem, mem_of, ExecItem, Runner, Work};
use crate::error::Result;
use crate::helpers::GLOBAL_COUNTERS;
use crate::uop::UOp;
use rustc_hash::FxHashMap;
use smallvec::SmallVec;
use std::sync::Arc;

/// One kernel launch: its argument addresses and variable values as captured, and where a replay patches them.
struct Launch {
    runner: Arc<Runner>,
    /// The captured buffers' addresses, by argument slot.
    ptrs: SmallVec<[usize; 8]>,
    /// The variables' values as captured, by variable slot.
    vals: SmallVec<[i32; 4]>,
    /// (argument slot, index of the swapped buffer among the replay's).
    swaps: SmallVec<[(u16, u32); 2]>,
    /// (variable slot, index of the variable among the replay's).
    vars: SmallVec<[(u16, u32); 2]>,
}

/// A capture's kernels ready to launch again; see the module doc.
pub(super) struct Graph {
    /// The captured buffers a replay swaps, and the variables it rebinds, in the order [`Graph::run`] takes them.
    keys: Vec<UOp>,
    names: Vec<Arc<str>>,
    launches: Vec<Launch>,
    /// The buffers no replay swaps, each with whether a kernel writes it.
    fixed: Vec<(UOp, bool)>,
    /// For each key: the most bytes a kernel reads of it, and writes (None: no kernel writes it).
    key_use: Vec<(usize, Option<usize>)>,
    /// The kernels' operations and bytes moved, summed, for GlobalCounters.
    ops: u64,
    moved: u64,
    /// Whether the launches run as one batch on the CPU's team ([`super::batchable`]).
    batch: bool,
}

impl Graph {
    /// The graph of `items` for replays that swap `swap`'s keys (captured buffers) and rebind `vars`' names, in
    /// that order; None where an item is not a kernel, a kernel runs beside a check compiler's build, or the items
    /// span several queues (all stay with [`ExecItem::run`]). Allocates the memory of the buffers no replay swaps.
    ///
    /// # Errors
    /// Allocation errors.
    ///
    /// # Panics
    /// As [`ExecItem::run`]: a kernel indexing more of a buffer than it holds, or writing borrowed host bytes.
    pub(super) fn new(items: &[ExecItem], swap: &[(UOp, UOp)], vars: &[(Arc<str>, i64)]) -> Result<Option<Graph>> {
        if super::queue::spans_queues(items) || items.iter().any(|ei| !matches!(&ei.work, Work::Kernel(r) if r.check.is_none())) {
            return Ok(None);
        }
        let (keys, names): (Vec<UOp>, Vec<Arc<str>>) =
            (swap.iter().map(|(k, _)| k.clone()).collect(), vars.iter().map(|(n, _)| n.clone()).collect());
        let key_at: FxHashMap<&UOp, u32> = keys.iter().enumerate().rev().map(|(i, k)| (k, i as u32)).collect();
        let mut fixed: FxHashMap<UOp, bool> = FxHashMap::default();
        let mut key_use = vec![(0, None); keys.len()];
        let (mut launches, mut ops, mut moved) = (Vec::with_capacity(items.len()), 0, 0);
        // (an empty output: nothing to compute; a swapped one's size is the replay's, checked there)
        for ei in items.iter().filter(|ei| key_at.contains_key(&ei.bufs[0]) || info(&ei.bufs[0]).size != 0) {
            let Work::Kernel(runner) = &ei.work else { unreachable!("kernels only") };
            let mut l = Launch {
                runner: runner.clone(),
                ptrs: SmallVec::new(),
                vals: ei.vals.iter().copied().collect(),
                swaps: SmallVec::new(),
                vars: SmallVec::new(),
            };
            for (slot, b) in ei.bufs.iter().enumerate() {
                let bytes = runner.args.iter().filter(|(s, _)| *s == slot).map(|(_, n)| *n).max().unwrap_or(0);
                match key_at.get(b) {
                    Some(&k) => {
                        let u = &mut key_use[k as usize];
                        *u = match slot {
                            0 => (u.0, Some(u.1.unwrap_or(0).max(bytes))),
                            _ => (u.0.max(bytes), u.1),
                        };
                        l.swaps.push((slot as u16, k));
                        l.ptrs.push(0);
                    }
                    None => {
                        check_fits(runner, slot, b, bytes);
                        // (the memory made first: a buffer is borrowed only once it has memory)
                        l.ptrs.push(mem(b)? as usize);
                        assert!(slot != 0 || !super::is_borrowed(b), "kernel {}: writes borrowed host bytes", runner.kernel.name);
                        *fixed.entry(b.clone()).or_default() |= slot == 0;
                    }
                }
            }
            for (slot, v) in runner.kernel.vars.iter().enumerate() {
                if let Some(i) = names.iter().position(|n| n == v) {
                    l.vars.push((slot as u16, i as u32));
                }
            }
            (ops, moved) = (ops + runner.kernel.ops, moved + runner.kernel.mem);
            launches.push(l);
        }
        let batch = super::batchable(items);
        Ok(Some(Graph { keys, names, launches, fixed: fixed.into_iter().collect(), key_use, ops, moved, batch }))
    }

    /// Whether this graph was made for replays that swap `swap`'s keys and rebind `vars`' names, in that order.
    pub(super) fn fits(&self, swap: &[(UOp, UOp)], vars: &[(Arc<str>, i64)]) -> bool {
        self.keys.len() == swap.len()
            && self.keys.iter().zip(swap).all(|(k, (s, _))| k == s)
            && self.names.len() == vars.len()
            && self.names.iter().zip(vars).all(|(n, (v, _))| n == v)
    }

    /// Launches every kernel with each key swapped for its buffer in `swap` and the variables at their values in
    /// `vars` (a replay [`Graph::fits`]), holding each buffer's lock for the whole replay (written: exclusive).
    ///
    /// # Errors
    /// Allocation and launch errors.
    ///
    /// # Panics
    /// As [`ExecItem::run`]; if a value does not fit an `int`.
    pub(super) fn run(&self, swap: &[(UOp, UOp)], vars: &[(Arc<str>, i64)]) -> Result<()> {
        super::in_batch(self.batch, || self.launch(swap, vars))
    }

    /// [`Graph::run`]'s work, in the batch it holds.
    fn launch(&self, swap: &[(UOp, UOp)], vars: &[(Arc<str>, i64)]) -> Result<()> {
        let mut locks: Vec<(usize, &parking_lot::RwLock<()>, bool)> = Vec::with_capacity(self.fixed.len() + swap.len());
        let (mut swapped, mut empty) = (Vec::with_capacity(swap.len()), Vec::with_capacity(swap.len()));
        for ((_, b), &(read, written)) in swap.iter().zip(&self.key_use) {
            let holds = info(b).size * b.dtype.itemsize();
            let bytes = read.max(if holds == 0 { 0 } else { written.unwrap_or(0) });
            assert!(holds >= bytes, "replay: a buffer of {holds} bytes swapped in where the kernels index {bytes}");
            empty.push(holds == 0);
            if holds == 0 {
                swapped.push(0);
                continue;
            }
            let p = mem(b)? as usize;
            assert!(written.is_none() || !super::is_borrowed(b), "replay: a kernel writes borrowed host bytes");
            swapped.push(p);
            locks.push((p, &mem_of(b)?.lock, written.is_some()));
        }
        for (b, written) in &self.fixed {
            locks.push((mem(b)? as usize, &mem_of(b)?.lock, *written));
        }
        // (in address order, as ExecItem::run takes them, so concurrent launches can't deadlock; a buffer once)
        locks.sort_unstable_by_key(|l| (l.0, !l.2));
        locks.dedup_by_key(|l| l.0);
        let (mut _written, mut _read) = (Vec::new(), Vec::new());
        for (_, lock, written) in locks {
            if written {
                _written.push(lock.write());
            } else {
                _read.push(lock.read());
            }
        }
        let mut n = 0;
        for l in &self.launches {
            // (an empty output swapped in: nothing to compute)
            if l.swaps.first().is_some_and(|&(slot, k)| slot == 0 && empty[k as usize]) {
                continue;
            }
            let mut ptrs: SmallVec<[*mut u8; 16]> = l.ptrs.iter().map(|&p| p as *mut u8).collect();
            l.swaps.iter().for_each(|&(slot, k)| ptrs[slot as usize] = swapped[k as usize] as *mut u8);
            let mut v = l.vals.clone();
            for &(slot, i) in &l.vars {
                let (name, val) = &vars[i as usize];
                v[slot as usize] = i32::try_from(*val).unwrap_or_else(|_| panic!("variable {name} = {val} does not fit a 32-bit int"));
            }
            n += 1;
            let k = &l.runner.kernel;
            l.runner.program.enqueue(&ptrs, &v, k.global_size, k.local_size)?;
        }
        GLOBAL_COUNTERS.add_kernels(n, self.ops, self.moved);
        Ok(())
    }
}

/// Panics as [`ExecItem::run`] when `runner` indexes more bytes of `buf` (its argument `slot`) than it holds.
fn check_fits(runner: &Runner, slot: usize, buf: &UOp, bytes: usize) {
    let holds = info(buf).size * buf.dtype.itemsize();
    assert!(holds >= bytes, "kernel {}: argument {slot} holds {holds} bytes, the kernel indexes {bytes}", runner.kernel.name);
}
