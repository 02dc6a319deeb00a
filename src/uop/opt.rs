//! Kernel optimizations as data (tinygrad `codegen/opt/__init__.py`'s `OptOps` and `Opt`, which tinygrad's
//! `KernelInfo` carries in the AST): what codegen applies, BEAM searches over and caches, and a
//! rendered program lists. Applying them is codegen's (`codegen::opt::Kernel::apply_opt`).

use std::fmt;

/// The kinds of optimization (tinygrad `OptOps`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OptOps {
    /// Output lanes: `arg` iterations of an output axis computed in one (vector lanes, register tiles).
    Upcast,
    /// Reduction lanes: `arg` iterations of a reduce axis summed in one.
    Unroll,
    /// A GPU workgroup dimension of `arg` threads.
    Local,
    /// A reduction split over a workgroup of `arg`, combined in shared memory (inner split).
    Group,
    /// As GROUP, splitting the outer part of the axis.
    GroupTop,
    /// The axis split over `arg` CPU cores (the whole axis when `arg` is its size).
    Thread,
    /// The axis padded up to a multiple of `arg`; the extra iterations are masked.
    Padto,
    /// Loop order: output axis `axis` and output axis `arg` trade places.
    Swap,
    /// No workgroups for this kernel.
    NoLocals,
    /// The reduction over reduce axis `axis` computed by tensor core `arg` of the renderer's list (warp-wide WMMA);
    /// only as the first opt.
    Tc,
    /// Output loop `axis` (its inner `arg` iterations; 0: all) runs inside the reduction loops, accumulating in memory
    /// (`AxisType::Inner`; CPU targets). Not in tinygrad.
    Inner,
}

impl fmt::Display for OptOps {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let s = match self {
            OptOps::Upcast => "UPCAST",
            OptOps::Unroll => "UNROLL",
            OptOps::Local => "LOCAL",
            OptOps::Group => "GROUP",
            OptOps::GroupTop => "GROUPTOP",
            OptOps::Thread => "THREAD",
            OptOps::Padto => "PADTO",
            OptOps::Swap => "SWAP",
            OptOps::NoLocals => "NOLOCALS",
            OptOps::Tc => "TC",
            OptOps::Inner => "INNER",
        };
        f.write_str(s)
    }
}

/// One optimization (tinygrad `Opt`): `op` on axis `axis` with amount `arg` (0: the axis's whole size). UNROLL,
/// GROUP and GROUPTOP count `axis` among the reduce axes, the others among all axes in `Kernel::rngs` (codegen) order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Opt {
    pub op: OptOps,
    pub axis: Option<usize>,
    pub arg: usize,
}

impl Opt {
    /// `op(axis, arg)`.
    pub fn new(op: OptOps, axis: usize, arg: usize) -> Opt {
        Opt { op, axis: Some(axis), arg }
    }
}

impl fmt::Display for Opt {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self.axis {
            Some(a) => write!(f, "{}(axis={a}, {})", self.op, self.arg),
            None => write!(f, "{}", self.op),
        }
    }
}
