//! The space BEAM searches (tinygrad `codegen/opt/search.py`). In: a [`Kernel`]. Out: the kernels one more legal
//! opt away ([`get_kernel_actions`]), from a fixed list of candidate opts ([`actions`]). The random opts test
//! draws from the same list.

use super::{Kernel, Opt, OptOps};
use std::sync::LazyLock;

/// Every opt BEAM may try, in a fixed order (tinygrad `actions`, with THREAD amounts for CPUs).
pub fn actions() -> &'static [Opt] {
    static ACTIONS: LazyLock<Vec<Opt>> = LazyLock::new(|| {
        let mut a = Vec::new();
        for axis in 0..8 {
            a.extend([0, 2, 3, 4, 5, 6, 7, 8, 16].map(|amt| Opt::new(OptOps::Upcast, axis, amt)));
        }
        for axis in 0..5 {
            a.extend([0, 2, 4, 7, 8, 16].map(|amt| Opt::new(OptOps::Unroll, axis, amt)));
        }
        for axis in 0..6 {
            a.extend([2, 3, 4, 8, 13, 16, 29].map(|amt| Opt::new(OptOps::Local, axis, amt)));
            a.extend([0, 2, 4, 8, 16, 32, 64].map(|amt| Opt::new(OptOps::Thread, axis, amt)));
            a.extend([16, 32].map(|amt| Opt::new(OptOps::Padto, axis, amt)));
        }
        for axis in 0..3 {
            a.extend([0, 4, 8, 16].map(|amt| Opt::new(OptOps::GroupTop, axis, amt)));
        }
        for axis in 0..5 {
            a.extend((axis + 1..5).map(|other| Opt::new(OptOps::Swap, axis, other)));
        }
        a.push(Opt { op: OptOps::NoLocals, axis: None, arg: 0 });
        a
    });
    &ACTIONS
}

/// The kernels `k` becomes with one more legal action applied, each with the action (tinygrad
/// `get_kernel_actions`); an action that only repeats what the axis already is (a whole-axis UPCAST of an
/// axis of 1) never appears, since `apply_opt` refuses it.
pub fn get_kernel_actions(k: &Kernel) -> Vec<(Opt, Kernel)> {
    actions()
        .iter()
        .filter_map(|&o| {
            let mut k2 = k.clone();
            k2.apply_opt(o).ok().map(|_| (o, k2))
        })
        .collect()
}
