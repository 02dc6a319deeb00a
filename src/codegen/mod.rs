//! Codegen. In: a kernel AST from the scheduler. Out: a [`LinearKernel`]: the UOps in the order a renderer prints
//! them, with loops opened (RANGE) and closed (END). Passes: simplify index math, lower reductions to
//! accumulators, linearize. Follows tinygrad `codegen/__init__.py` (`full_rewrite_to_sink`, `linearize`).

mod linearize;
mod lower;
mod opt;
mod vectorize;

pub use opt::Opt;

use crate::uop::{graph_rewrite, symbolic::SYMBOLIC, Arg, GroupOp, Ops, UOp};

/// A kernel ready to render.
pub struct LinearKernel {
    /// tinygrad-style name: `E_` (elementwise) or `r_` (with reductions), then the loop sizes.
    pub name: String,
    /// The UOps in print order.
    pub uops: Vec<UOp>,
    /// Size of the outermost output loop, which the runtime splits over cores (0: no loop).
    pub outer: usize,
    /// Estimated floating-point (or integer ALU) operations of one run.
    pub ops: u64,
    /// Bytes of the buffers the kernel touches (each once).
    pub mem: u64,
    /// The optimizations applied.
    pub opts: Vec<Opt>,
}

fn range_size(r: &UOp) -> usize {
    r.src[0].const_int().expect("RANGE with a constant size") as usize
}

/// Simplifies, lowers and linearizes `ast` (a SINK of STOREs).
pub fn full_rewrite(ast: &UOp) -> LinearKernel {
    let sink = graph_rewrite(ast, &SYMBOLIC, &mut (), "simplify");
    let topo = sink.toposort();
    let ranges: Vec<&UOp> = topo.iter().filter(|u| u.op == Ops::RANGE).collect();
    let has_reduce = topo.iter().any(|u| u.op == Ops::REDUCE);
    let out_ranges: Vec<&UOp> = ranges.iter().copied().filter(|r| !is_reduce_range(&topo, r)).collect();
    let mut sizes: Vec<usize> = out_ranges.iter().map(|r| range_size(r)).collect();
    sizes.extend(ranges.iter().filter(|r| is_reduce_range(&topo, r)).map(|r| range_size(r)));
    let name = format!(
        "{}_{}",
        if has_reduce { "r" } else { "E" },
        if sizes.is_empty() { "1".into() } else { sizes.iter().map(|s| s.to_string()).collect::<Vec<_>>().join("_") }
    );
    let ops = count_ops(&topo);
    let mem =
        topo.iter().filter(|u| u.op == Ops::DEFINE_GLOBAL).map(|g| g.dtype.size.max(0) as u64 * g.dtype.base().itemsize() as u64).sum();
    let (sink, upcast) = opt::upcast(&sink);
    let mut opts: Vec<Opt> = upcast.into_iter().collect();
    let sink = match upcast {
        Some(Opt::Upcast { amount, .. }) => vectorize::vectorize(&graph_rewrite(&sink, &SYMBOLIC, &mut (), "simplify upcast"), amount),
        _ => sink,
    };
    let sink = opt::order_reduce_loops(&sink);
    let topo = sink.toposort();
    let outer =
        topo.iter().find(|r| r.op == Ops::RANGE && matches!(r.arg, Arg::Int(0)) && !is_reduce_range(&topo, r)).map_or(0, range_size);
    if outer > 1 {
        opts.insert(0, Opt::Thread { axis: 0, amount: outer });
    }
    let lowered = lower::lower_reduces(&sink);
    LinearKernel { name, uops: linearize::linearize(&lowered), outer, ops, mem, opts }
}

fn is_reduce_range(topo: &[UOp], r: &UOp) -> bool {
    topo.iter().any(|u| u.op == Ops::REDUCE && u.src[1..].contains(r))
}

/// ALU ops of non-index dtype (and reduce updates), each weighted by the iterations of the loops it sits in:
/// the product of the sizes of the RANGEs it depends on, less those its reductions closed.
fn count_ops(topo: &[UOp]) -> u64 {
    let ranges: Vec<&UOp> = topo.iter().filter(|u| u.op == Ops::RANGE).take(64).collect();
    let bit = |r: &UOp| ranges.iter().position(|x| *x == r).map_or(0, |i| 1u64 << i);
    let iters = |m: u64| (0..ranges.len()).filter(|i| m >> i & 1 != 0).map(|i| range_size(ranges[i]) as u64).product::<u64>();
    let mut masks: rustc_hash::FxHashMap<&UOp, u64> = rustc_hash::FxHashMap::default();
    let mut total = 0;
    for u in topo {
        let mut m = u.src.iter().fold(0, |m, s| m | masks[s]);
        match u.op {
            Ops::RANGE => m |= bit(u),
            Ops::REDUCE => {
                total += iters(masks[&u.src[0]]);
                m = masks[&u.src[0]] & !u.src[1..].iter().fold(0, |a, r| a | bit(r));
            }
            op if GroupOp::ALU.contains(op) && !u.dtype.is_int() => total += iters(m),
            _ => {}
        }
        masks.insert(u, m);
    }
    total
}
