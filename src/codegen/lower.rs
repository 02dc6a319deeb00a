//! Lowering reductions: `REDUCE(op)(value, ranges)` becomes a register accumulator initialized to the op's
//! identity, updated inside the ranges, and read after they END (tinygrad `codegen/late/devectorizer.py`
//! `reduce_to_acc`).

use crate::dtype::{dtypes, AddrSpace, ConstValue};
use crate::pm;
use crate::uop::{graph_rewrite, Arg, Ops, PatternMatcher, UOp, UPat};
use std::sync::LazyLock;

fn lower_reduce(r: &UOp, next_acc: &mut i64) -> UOp {
    let Arg::Op(op) = r.arg else { panic!("REDUCE without an op: {:?}", r.arg) };
    let (value, ranges) = (&r.src[0], &r.src[1..]);
    let identity = match op {
        Ops::ADD => ConstValue::Int(0),
        Ops::MUL => ConstValue::Int(1),
        _ => r.dtype.min(),
    };
    let acc = UOp::new(Ops::DEFINE_REG, r.dtype.ptr(1, AddrSpace::Reg), [], Arg::Int(*next_acc));
    *next_acc += 1;
    let idx = UOp::new(Ops::INDEX, acc.dtype, [acc, UOp::const_(dtypes::WEAKINT, 0)], Arg::None);
    let init = UOp::new(Ops::STORE, dtypes::VOID, [idx.clone(), r.const_like(identity)], Arg::None);
    let cur = UOp::new(Ops::LOAD, r.dtype, [idx.clone(), init], Arg::None);
    let upd_src: Vec<UOp> = [idx.clone(), cur.alu(op, &[value])].into_iter().chain(ranges.iter().cloned()).collect();
    let upd = UOp::new(Ops::STORE, dtypes::VOID, upd_src, Arg::None);
    let end = UOp::new(Ops::END, dtypes::VOID, std::iter::once(upd).chain(ranges.iter().cloned()).collect::<Vec<_>>(), Arg::None);
    UOp::new(Ops::LOAD, r.dtype, [idx, end], Arg::None)
}

static PM_REDUCE_TO_ACC: LazyLock<PatternMatcher<i64>> = LazyLock::new(|| {
    pm! { next_acc: i64;
        UPat::ops(Ops::REDUCE).named("r") => |r| lower_reduce(r, next_acc),
    }
});

/// `sink` with every REDUCE lowered to an accumulator.
pub fn lower_reduces(sink: &UOp) -> UOp {
    graph_rewrite(sink, &PM_REDUCE_TO_ACC, &mut 0, "reduce to acc")
}
