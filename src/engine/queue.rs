//! Launch queues: the items of one schedule (or one TinyJit replay) that span several devices, run at the same time.
//! In: [`ExecItem`]s in schedule order. Out: each run, in order on its queue (a device's kernels and the copies into
//! it; the process group's allreduces on the calling thread), after the items of other queues it depends on: the last
//! writer of each buffer it reads, and the last writer and readers since of the buffer it writes. So a GPU's kernels
//! overlap the CPU's, and an allreduce of gradients overlaps the backward kernels that follow it (tinygrad gets both
//! from each device's own command queue and its timeline signals, `HCQ`). Devices whose kernels already use all the
//! host's cores (CPU instances, an OpenCL CPU device) share one queue: at once they would only split the same cores.

use super::{ExecItem, Work};
use crate::error::{Error, Result};
use parking_lot::{Condvar, Mutex};
use rustc_hash::FxHashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::*};

/// A queue: a device's canonical name, `host cores` for the devices whose kernels spread over all the host's cores
/// (`runtime::Device::on_host_cores`: CPU instances run one after another), or `None` for the calling thread
/// (allreduces, which sum over its process group).
type Queue = Option<&'static str>;

fn queue(ei: &ExecItem) -> Queue {
    match ei.work {
        Work::AllReduce => None,
        _ if ei.dev.rt.on_host_cores() => Some("host cores"),
        _ => Some(ei.dev.name),
    }
}

/// Whether `items` use more than one queue (else they run in order on one thread).
pub(super) fn spans_queues(items: &[ExecItem]) -> bool {
    items.first().is_some_and(|first| items.iter().any(|ei| queue(ei) != queue(first)))
}

/// What the queues share: which items are done, and whether one failed (the others then stop at their next wait).
struct Progress {
    done: Vec<AtomicBool>,
    /// Items done so far: a queue that found nothing to run waits for it to change.
    finished: AtomicUsize,
    abort: AtomicBool,
    error: Mutex<Option<Error>>,
    cv: Condvar,
}

impl Progress {
    /// Waits until some item other than those done when `seen` was read is done; false when a queue failed.
    fn wait_change(&self, seen: usize) -> bool {
        let mut g = self.error.lock();
        while self.finished.load(Acquire) == seen && !self.abort.load(Acquire) {
            self.cv.wait(&mut g);
        }
        !self.abort.load(Acquire)
    }
    fn finish(&self, i: usize) {
        self.done[i].store(true, Release);
        let _g = self.error.lock();
        self.finished.fetch_add(1, Release);
        self.cv.notify_all();
    }
    fn fail(&self, e: Error) {
        let mut g = self.error.lock();
        g.get_or_insert(e);
        self.abort.store(true, Release);
        self.cv.notify_all();
    }
}

/// Ends the queues' waits when a queue's thread unwinds (a panicking kernel), so the others don't wait forever.
struct AbortOnPanic<'a>(&'a Progress);
impl Drop for AbortOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let _g = self.0.error.lock();
            self.0.abort.store(true, Release);
            self.0.cv.notify_all();
        }
    }
}

/// For each item, the items it must follow: the last writer of each buffer it reads, and the last writer and the
/// readers since of the buffer it writes.
fn dependencies(items: &[ExecItem]) -> Vec<Vec<usize>> {
    let mut last: FxHashMap<*const super::BufferInfo, (Option<usize>, Vec<usize>)> = FxHashMap::default();
    let key = |b: &crate::uop::UOp| std::sync::Arc::as_ptr(super::info(b));
    items
        .iter()
        .enumerate()
        .map(|(i, ei)| {
            let mut on: Vec<usize> = ei.bufs[1..].iter().filter_map(|b| last.get(&key(b)).and_then(|l| l.0)).collect();
            if let Some((w, readers)) = last.get(&key(&ei.bufs[0])) {
                on.extend(w.iter().chain(readers).copied());
            }
            ei.bufs[1..].iter().for_each(|b| last.entry(key(b)).or_default().1.push(i));
            last.insert(key(&ei.bufs[0]), (Some(i), Vec::new()));
            on.sort_unstable();
            on.dedup();
            on
        })
        .collect()
}

/// One queue's items: (index in the schedule, item, the items it follows); taken as they run.
type Lane = Vec<Option<(usize, ExecItem, Vec<usize>)>>;

/// Runs `items` on their queues at once: each device's on a thread of its own, allreduces on this thread. A queue runs its items in order, but when the next one waits
/// on another queue it runs a later one that is ready (so the kernels after an allreduce that do not need its sum go
/// on while it runs); the allreduces run strictly in order. Each item drops once it has run.
///
/// # Errors
/// The first item's error; the other queues stop before their next item.
pub(super) fn run_queues(items: Vec<ExecItem>) -> Result<()> {
    let deps = dependencies(&items);
    let progress = Progress {
        done: items.iter().map(|_| AtomicBool::new(false)).collect(),
        finished: AtomicUsize::new(0),
        abort: false.into(),
        error: Mutex::new(None),
        cv: Condvar::new(),
    };
    let mut lanes: Vec<(Queue, Lane)> = Vec::new();
    for ((i, ei), on) in items.into_iter().enumerate().zip(deps) {
        let q = queue(&ei);
        match lanes.iter_mut().find(|(l, _)| *l == q) {
            Some((_, lane)) => lane.push(Some((i, ei, on))),
            None => lanes.push((q, vec![Some((i, ei, on))])),
        }
    }
    // (the allreduces keep their order: every process of the group must make the same sums in the same order)
    let run_lane = |(q, mut lane): (Queue, Lane)| {
        let _guard = AbortOnPanic(&progress);
        let n = lane.len();
        let reach = |head: usize| if q.is_none() { head + 1 } else { n };
        let ready = |slot: &Option<(usize, ExecItem, Vec<usize>)>| {
            slot.as_ref().is_some_and(|(_, _, on)| on.iter().all(|&d| progress.done[d].load(Acquire)))
        };
        let mut head = 0;
        while head < lane.len() {
            let seen = progress.finished.load(Acquire);
            if progress.abort.load(Acquire) {
                return;
            }
            let Some(j) = (head..reach(head)).find(|&j| ready(&lane[j])) else {
                if !progress.wait_change(seen) {
                    return;
                }
                continue;
            };
            let (i, ei, _) = lane[j].take().expect("a ready item");
            match ei.run() {
                Ok(_) => progress.finish(i),
                Err(e) => return progress.fail(e),
            }
            drop(ei);
            while head < lane.len() && lane[head].is_none() {
                head += 1;
            }
        }
    };
    // this thread takes the allreduces, else the first queue
    let here = lanes.iter().position(|(q, _)| q.is_none()).unwrap_or(0);
    let mine = lanes.swap_remove(here);
    let ctx = crate::helpers::Context::snapshot();
    std::thread::scope(|s| {
        for lane in lanes {
            let (ctx, run_lane) = (&ctx, &run_lane);
            // (not on the CPU pool as one device's batch runs: a pool thread waiting on another queue could hold
            // up the parallel kernels that queue waits on)
            s.spawn(move || {
                let _g = ctx.enter();
                run_lane(lane)
            });
        }
        run_lane(mine);
    });
    match progress.error.into_inner() {
        Some(e) => Err(e),
        None => Ok(()),
    }
}
