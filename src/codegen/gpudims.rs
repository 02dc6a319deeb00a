//! GPU dimensions (tinygrad `codegen/gpudims.py`, `add_gpudims`). In: a kernel AST after opts whose output axes
//! are GLOBAL and LOCAL RANGEs. Out: the AST with each of them replaced by its index in the launch grid, a
//! SPECIAL (`gidx0` is `get_group_id(0)`, `lidx0` `get_local_id(0)`), and the grid: workgroups per dimension and
//! threads per workgroup. A grid has three dimensions: the innermost axis is dimension 0 (neighbouring threads
//! touch neighbouring elements), and axes past the third are folded into dimension 2, recovered by division. A grid
//! whose second or third dimension would pass 65535 workgroups (CUDA's limit there) is folded into dimension 0.

use super::opt::range_size;
use crate::dtype::dtypes;
use crate::uop::{Arg, AxisType, Ops, UOp};
use rustc_hash::FxHashMap;

/// `sink` with its GLOBAL and LOCAL RANGEs replaced by SPECIALs, and the launch's `(global, local)` sizes:
/// workgroups and threads per workgroup in each of the three dimensions.
pub fn add_gpudims(sink: &UOp) -> (UOp, [usize; 3], [usize; 3]) {
    let mut rngs: Vec<UOp> = sink.toposort().into_iter().filter(|u| u.op == Ops::RANGE).collect();
    rngs.sort_by_key(|r| r.axis().0);
    let mut map: FxHashMap<UOp, UOp> = FxHashMap::default();
    let global = dims(&rngs, AxisType::Global, "gidx", &mut map);
    let local = dims(&rngs, AxisType::Local, "lidx", &mut map);
    let sink = if map.is_empty() { sink.clone() } else { sink.substitute(&map) };
    (sink, global, local)
}

/// Maps the RANGEs of `kind` (in axis order, outermost first) to SPECIALs named `{prefix}0..2` in `map`; returns
/// the size of each dimension.
fn dims(rngs: &[UOp], kind: AxisType, prefix: &str, map: &mut FxHashMap<UOp, UOp>) -> [usize; 3] {
    let axes: Vec<&UOp> = rngs.iter().filter(|r| r.axis().1 == kind).rev().collect();
    let special = |d: usize, n: usize| {
        UOp::new(Ops::SPECIAL, dtypes::WEAKINT, [UOp::const_(dtypes::WEAKINT, n as i64)], Arg::Str(format!("{prefix}{d}").into()))
    };
    let outer: usize = axes.iter().skip(1).map(|r| range_size(r)).product();
    // (an output of no elements has an axis of size 0: its kernel compiles but never launches)
    let fold = axes.len() > 1 && (range_size(axes[1]) > 65535 || outer / range_size(axes[1]).max(1) > 65535);
    let mut size = [1usize; 3];
    for (d, r) in axes.iter().take(if fold { 0 } else { 2 }).enumerate() {
        size[d] = range_size(r);
        map.insert((*r).clone(), special(d, size[d]));
    }
    // the axes past the first two (or, folding everything, all of them) walk one dimension, the innermost fastest
    let (d, rest) = if fold { (0, &axes[..]) } else { (2, axes.get(2..).unwrap_or(&[])) };
    if !rest.is_empty() {
        size[d] = rest.iter().map(|r| range_size(r)).product();
        let s = special(d, size[d]);
        let mut stride = 1i64;
        for r in rest {
            let n = range_size(r) as i64;
            let idx = if stride == 1 { s.clone() } else { &s / stride };
            map.insert((*r).clone(), if stride * n == size[d] as i64 { idx } else { &idx % n });
            stride *= n;
        }
    }
    size
}
