//! The shape of tensor-level UOps, derived from sources and movement args once per node (iteratively).
//! Kernel-level nodes have no shape. Follows tinygrad `UOp._shape`.

use super::{Arg, GroupOp, Ops, UOp};

fn ints(u: &UOp) -> &[i64] {
    match &u.arg {
        Arg::Ints(v) => v,
        a => panic!("{}: expected an int list arg, got {a:?}", u.op),
    }
}

/// The shape of `u` given its sources' shapes (already computed).
fn compute(u: &UOp) -> Option<Box<[usize]>> {
    let src = |i: usize| u.src[i].shape();
    Some(match u.op {
        Ops::BUFFER => match &u.arg {
            Arg::Buffer(b) => vec![b.size].into(),
            _ => return None,
        },
        Ops::CONST | Ops::DEFINE_VAR | Ops::BIND => Box::new([]),
        // a tensor-level RANGE (no sources) is the index along its one axis: arange
        Ops::RANGE if u.src.is_empty() => match u.arg {
            Arg::Int(n) => Box::new([n as usize]),
            _ => return None,
        },
        Ops::RESHAPE | Ops::EXPAND => ints(u).iter().map(|&x| x as usize).collect(),
        Ops::PERMUTE => ints(u).iter().map(|&p| src(0).unwrap()[p as usize]).collect(),
        Ops::PAD => src(0)?.iter().enumerate().map(|(i, s)| s + (ints(u)[2 * i] + ints(u)[2 * i + 1]) as usize).collect(),
        Ops::SHRINK => ints(u).chunks(2).map(|c| (c[1] - c[0]) as usize).collect(),
        Ops::REDUCE_AXIS => match &u.arg {
            Arg::ReduceAxis(_, axes) => src(0)?.iter().enumerate().map(|(i, &s)| if axes.contains(&i) { 1 } else { s }).collect(),
            _ => return None,
        },
        Ops::WHERE => src(1)?.into(),
        // the shards' blocks along the axis in arg (-1: replicated, each shard the whole)
        Ops::MULTI => match u.arg {
            Arg::Int(a) if a >= 0 => src(0)?.iter().enumerate().map(|(i, &s)| if i == a as usize { s * u.src.len() } else { s }).collect(),
            _ => src(0)?.into(),
        },
        op if GroupOp::ALU.contains(op)
            || matches!(
                op,
                Ops::CAST
                    | Ops::BITCAST
                    | Ops::CONTIGUOUS
                    | Ops::CONTIGUOUS_BACKWARD
                    | Ops::CUSTOM_GRADIENT
                    | Ops::DETACH
                    | Ops::COPY
                    | Ops::ALLREDUCE
                    | Ops::ASSIGN
                    | Ops::FLIP
            ) =>
        {
            src(0)?.into()
        }
        _ => return None,
    })
}

impl UOp {
    /// The tensor shape of this node (`None` for kernel-level and effect nodes).
    pub fn shape(&self) -> Option<&[usize]> {
        if let Some(s) = self.shape.get() {
            return s.as_deref();
        }
        let mut stack = vec![(self.clone(), false)];
        while let Some((u, ready)) = stack.pop() {
            if u.shape.get().is_some() {
                continue;
            }
            if ready || u.src.is_empty() {
                let _ = u.shape.set(compute(&u));
            } else {
                stack.push((u.clone(), true));
                stack.extend(u.src.iter().filter(|s| s.shape.get().is_none()).map(|s| (s.clone(), false)));
            }
        }
        self.shape.get().expect("shape computed").as_deref()
    }
}
