//! Codegen. In: a kernel AST from the scheduler (a SINK of STOREs over typed RANGEs). Out: a [`LinearKernel`]:
//! the UOps in the order a renderer prints them, with loops opened (RANGE) and closed (END). Passes, one line
//! each in [`full_rewrite`]: simplify index math, collapse one-hot sums into gathers, split a reduction's output ranges
//! read as `r % c` or `r / c`, apply opts (given, BEAM-searched or hand-coded), order reduce loops, decompose
//! transcendentals, fuse multiply-adds, expand lane axes into vectors, lower reductions to accumulators (and, on CPUs,
//! prefetch the next THREAD iteration's rows or a block further on), linearize. Follows tinygrad `codegen/__init__.py`
//! (`full_rewrite_to_sink`, `linearize`).

mod decompositions;
mod expand;
mod gpudims;
mod group;
mod linearize;
mod lower;
pub use lower::STRIDE_AHEAD;
pub mod opt;
mod simplify;

pub use crate::renderer::LinearKernel;
pub use opt::{Kernel, KernelOptError, Opt, OptOps};

use crate::helpers::NOOPT;
use crate::renderer::Renderer;
use crate::uop::{graph_rewrite, spec, symbolic::SYMBOLIC, AxisType, GroupOp, Ops, UOp};
use opt::range_size;

/// Simplifies `ast` (a SINK of STOREs), applies `opts` (`None`: the hand-coded heuristics, none under NOOPT=1),
/// then expands, lowers and linearizes it for `ren` (tinygrad `full_rewrite`).
///
/// # Errors
/// A [`KernelOptError`] when one of the given `opts` is illegal for this kernel on `ren`.
pub fn full_rewrite(ast: &UOp, ren: &Renderer, opts: Option<&[Opt]>) -> Result<LinearKernel, KernelOptError> {
    let mut k = kernel(ast, ren);
    spec::verify(&k.ast, &spec::KERNEL_SPEC, "simplify and reduce collapse");
    let topo = k.ast.toposort();
    let ops = count_ops(&topo);
    let mem =
        topo.iter().filter(|u| u.op == Ops::DEFINE_GLOBAL).map(|g| g.dtype.size.max(0) as u64 * g.dtype.base().itemsize() as u64).sum();
    let opts = match opts {
        Some(o) => o.to_vec(),
        None if NOOPT.value() != 0 => vec![],
        None => opt::heuristic::hand_coded_optimizations(&k),
    };
    for o in opts {
        k.apply_opt(o)?;
    }
    let (name, display_name) = k.names();
    let outer = k.rngs().iter().find(|r| r.axis().1 == AxisType::Thread).map_or(0, range_size);
    let sink = if k.applied_opts.is_empty() { k.ast.clone() } else { graph_rewrite(&k.ast, &SYMBOLIC, &mut (), "simplify opts") };
    spec::verify(&sink, &spec::KERNEL_SPEC, "opts");
    let sink = opt::order_reduce_loops(&sink);
    spec::verify(&sink, &spec::KERNEL_SPEC, "order reduce loops");
    // (opts add no transcendentals: the AST before them says whether there is anything to decompose)
    let decomposed = topo.iter().any(|u| ren.decomposed.contains(&u.op));
    let sink = if decomposed { decompositions::decompose(&sink, ren) } else { sink };
    // (multiply-adds fuse before expansion folds lane constants into some kernels' copies of an expression)
    let float_mul_add = |u: &UOp| u.op == Ops::ADD && u.dtype.is_float() && u.src.iter().any(|s| s.op == Ops::MUL);
    let sink = if ren.mulacc && (decomposed || topo.iter().any(float_mul_add)) { decompositions::fuse_mulacc(&sink) } else { sink };
    spec::verify(&sink, &spec::KERNEL_SPEC, "decompositions");
    let grouped = k.axis_types().contains(&AxisType::GroupReduce);
    let sink = if grouped { group::lower_groups(&sink) } else { sink };
    spec::verify(&sink, &spec::KERNEL_SPEC, "group reduces");
    let (sink, global_size, local_size) = if ren.has_local { gpudims::add_gpudims(&sink) } else { (sink, [outer.max(1), 1, 1], [1; 3]) };
    spec::verify(&sink, &spec::KERNEL_SPEC, "gpu dims");
    // (where the products of unrolled lanes, and the accumulators' `acc + a*b`, fuse too)
    // (float16 vectors on CPUs that convert them in one instruction: x86-64-v3's F16C, AArch64)
    let half = ren.cpu.is_some_and(|c| c.avx2 || c.neon);
    let sink = expand::expand(&sink, if ren.vector_bytes == 0 { 0 } else { ren.vector_bytes.max(16) }, ren.mulacc, half, ren.overread);
    spec::verify(&sink, &spec::KERNEL_SPEC, "expand");
    let sink = lower::lower_reduces(&sink, ren.mulacc);
    let sink = if ren.language == crate::renderer::Language::C {
        lower::add_prefetches(&sink, ren.cpu.map_or(0, |c| c.sequential_ahead))
    } else {
        sink
    };
    spec::verify(&sink, &spec::PROGRAM_SPEC, "lower reduces");
    let uops = linearize::linearize(&sink);
    spec::verify_list(&uops, &spec::PROGRAM_SPEC, "linearize");
    let mut vars: Vec<std::sync::Arc<str>> = uops.iter().filter(|u| u.op == Ops::DEFINE_VAR).map(|u| u.var_name().into()).collect();
    vars.sort();
    vars.dedup();
    Ok(LinearKernel { name, display_name, uops, outer, global_size, local_size, ops, mem, opts: k.applied_opts, vars })
}

/// The [`Kernel`] that opts for `ast` apply to: `ast` simplified, some output ranges split and all renumbered
/// ([`simplify::split_ranges`]), with no opts yet; on a target with workgroups its output loops are GLOBAL axes (the
/// launch grid). Opt axes count in its [`Kernel::rngs`].
pub fn kernel(ast: &UOp, ren: &Renderer) -> Kernel {
    let ast = simplify::split_ranges(&simplify::simplify_and_collapse(ast));
    if !ren.has_local {
        return Kernel::new(&ast, ren);
    }
    let grid: rustc_hash::FxHashMap<UOp, UOp> = ast
        .toposort()
        .into_iter()
        .filter(|u| u.op == Ops::RANGE && u.axis().1 == AxisType::Loop)
        .map(|r| (r.clone(), UOp::range(r.src[0].clone(), r.axis().0, AxisType::Global)))
        .collect();
    Kernel::new(&if grid.is_empty() { ast } else { ast.substitute(&grid) }, ren)
}

/// ALU ops of non-index dtype (and reduce updates), each weighted by the iterations of the loops it sits in:
/// the product of the sizes of the RANGEs it depends on, less those its reductions closed. A loop of symbolic size
/// counts at its largest: what decides whether launches split over the cores ([`parallel_launch`]), so an LLM's
/// attention over a span of `span_blocks` blocks of keys splits at every span, as it does at the largest.
///
/// [`parallel_launch`]: crate::runtime::cpu::parallel_launch
fn count_ops(topo: &[UOp]) -> u64 {
    let ranges: Vec<&UOp> = topo.iter().filter(|u| u.op == Ops::RANGE).take(64).collect();
    let bit = |r: &UOp| ranges.iter().position(|x| *x == r).map_or(0, |i| 1u64 << i);
    let size = |r: &UOp| r.src[0].bounds().1.clamp(0, u32::MAX.into()) as u64;
    let iters = |m: u64| (0..ranges.len()).filter(|i| m >> i & 1 != 0).map(|i| size(ranges[i])).fold(1, u64::saturating_mul);
    let mut masks: rustc_hash::FxHashMap<&UOp, u64> = rustc_hash::FxHashMap::default();
    let mut total = 0;
    for u in topo {
        let mut m = u.src.iter().fold(0, |m, s| m | masks[s]);
        match u.op {
            Ops::RANGE => m |= bit(u),
            Ops::REDUCE => {
                total = iters(masks[&u.src[0]]).saturating_add(total);
                m = masks[&u.src[0]] & !u.src[1..].iter().fold(0, |a, r| a | bit(r));
            }
            op if GroupOp::ALU.contains(op) && !u.dtype.is_int() => total = iters(m).saturating_add(total),
            _ => {}
        }
        masks.insert(u, m);
    }
    total
}
