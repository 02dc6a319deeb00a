//! The hash-consing table: every live UOp once, keyed by structure. Thread-safe (sharded locks); an entry is a
//! weak reference removed when its node drops, and dropping is iterative so deep graphs free without recursion.

use super::{Arg, Ops, UOp, UOpInner};
use crate::dtype::DType;
use hashbrown::HashTable;
use parking_lot::Mutex;
use std::cell::RefCell;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, LazyLock, OnceLock, Weak};

const SHARDS: usize = 16;
/// One lock's part of the table: (structural hash, node) entries.
type Shard = Mutex<HashTable<(u64, Weak<UOpInner>)>>;
static TABLE: LazyLock<[Shard; SHARDS]> = LazyLock::new(|| std::array::from_fn(|_| Mutex::default()));

fn structural_hash(op: Ops, dtype: DType, src: &[UOp], arg: &Arg, tag: Option<u32>) -> u64 {
    let mut h = rustc_hash::FxHasher::default();
    (op, dtype, arg, tag).hash(&mut h);
    src.iter().for_each(|s| h.write_u64(s.0.hash));
    h.finish()
}

fn shard(hash: u64) -> &'static Shard {
    &TABLE[(hash >> 59) as usize % SHARDS]
}

/// The live node equal to `(op, dtype, src, arg, tag)`, or a new one.
pub(super) fn intern(op: Ops, dtype: DType, src: Box<[UOp]>, arg: Arg, tag: Option<u32>) -> UOp {
    let hash = structural_hash(op, dtype, &src, &arg, tag);
    let mut table = shard(hash).lock();
    // a dying node (strong count 0, its drop waiting for this lock) fails to upgrade and is skipped
    let same = |(h, w): &(u64, Weak<UOpInner>)| {
        (*h == hash)
            .then(|| w.upgrade())
            .flatten()
            .filter(|n| n.op == op && n.dtype == dtype && n.tag == tag && n.arg == arg && n.src == src)
    };
    if let Some(n) = table.iter_hash(hash).find_map(same) {
        return UOp(n);
    }
    if op == Ops::MULTI {
        MULTI_MADE.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    let node =
        Arc::new(UOpInner { op, dtype, src, arg, tag, hash, minmax: OnceLock::new(), shape: OnceLock::new(), fixed: Default::default() });
    table.insert_unique(hash, (hash, Arc::downgrade(&node)), |e| e.0);
    UOp(node)
}

/// Set when the first MULTI node is made: until then no graph is sharded.
static MULTI_MADE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether this process has made a MULTI node (a sharded tensor): until it has, no graph needs walking to find one.
pub fn multi_made() -> bool {
    MULTI_MADE.load(std::sync::atomic::Ordering::Relaxed)
}

/// Number of nodes alive in the interner (for leak tests).
pub fn interned_count() -> usize {
    TABLE.iter().map(|s| s.lock().iter().filter(|(_, w)| w.strong_count() > 0).count()).sum()
}

thread_local! {
    /// Sources of nodes being dropped on this thread, freed by a loop instead of recursion.
    static PENDING: RefCell<(bool, Vec<Box<[UOp]>>)> = const { RefCell::new((false, Vec::new())) };
}

impl Drop for UOpInner {
    fn drop(&mut self) {
        let me: *const UOpInner = self;
        shard(self.hash).lock().find_entry(self.hash, |(_, w)| std::ptr::eq(w.as_ptr(), me)).map(|e| e.remove()).ok();
        let src = std::mem::take(&mut self.src);
        if src.is_empty() {
            return;
        }
        // the outermost drop on this thread frees sources in a loop; drops it triggers only queue theirs
        let _ = PENDING.try_with(|p| {
            let mut st = p.borrow_mut();
            if st.0 {
                return st.1.push(src);
            }
            st.0 = true;
            drop(st);
            let mut next = Some(src);
            while let Some(s) = next {
                drop(s);
                next = p.borrow_mut().1.pop();
            }
            p.borrow_mut().0 = false;
        });
    }
}
