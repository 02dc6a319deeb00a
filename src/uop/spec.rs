//! The spec: what a well-formed UOp graph looks like at each stage, as rule tables, and [`type_verify`], which
//! checks every node of a graph against one and panics naming the pass that broke it. With `SPEC=1` the
//! scheduler and codegen call [`verify`] after each pass. Follows tinygrad `uop/spec.py` (`spec_shared`,
//! `spec_tensor`, `spec_program`, `type_verify`), adapted to this IR's ops and args.
//!
//! A rule's body gives a verdict: [`ok`] (well-formed), [`bad`] (malformed), or `None` (no verdict: the next
//! rule that matches decides). A node no rule accepts is malformed. Tables:
//! - [`TENSOR_SPEC`]: the tensor graph handed to the scheduler (BUFFERs, movement ops with valid args, REDUCE_AXIS,
//!   elementwise ops over equal shapes; no kernel ops).
//! - [`KERNEL_SPEC`]: a kernel AST from rangeify through expand (DEFINE_GLOBALs, INDEX/LOAD/STORE, RANGEs, REDUCE,
//!   vectors; no tensor or movement ops).
//! - [`PROGRAM_SPEC`]: after reductions are lowered and the kernel linearized (no REDUCE, no lane axes left).

use super::{var, Arg, AxisType, GroupOp, OpSet, Ops, PatternMatcher, UOp, UPat};
use crate::dtype::{dtypes, AddrSpace, ConstValue, DType};
use crate::helpers::SPEC;
use crate::pm;
use std::fmt::Write;
use std::sync::LazyLock;
use Ops::*;

static OK: LazyLock<UOp> = LazyLock::new(|| UOp::new(NOOP, dtypes::VOID, [], Arg::Str("spec: ok".into())));
static BAD: LazyLock<UOp> = LazyLock::new(|| UOp::new(NOOP, dtypes::VOID, [], Arg::Str("spec: malformed".into())));

/// The verdict "well-formed".
pub fn ok() -> Option<UOp> {
    Some(OK.clone())
}
/// The verdict "malformed".
pub fn bad() -> Option<UOp> {
    Some(BAD.clone())
}
/// [`ok`] when `c` holds, else [`bad`].
fn check(c: bool) -> Option<UOp> {
    if c {
        ok()
    } else {
        bad()
    }
}
/// [`bad`] when `c` holds, else no verdict (a later rule decides).
fn reject_if(c: bool) -> Option<UOp> {
    if c {
        bad()
    } else {
        None
    }
}

/// Whether a source of dtype `s` may feed an op computing `d`: the same dtype, a weak one (it takes the op's), or
/// the scalar of a vector op (C broadcasts it).
fn fits(s: DType, d: DType) -> bool {
    s == d || (s.is_weak() && !d.is_ptr()) || (s.count == 1 && !s.is_ptr() && s.scalar() == d.scalar())
}

/// Whether a CONST's value is of its dtype's kind (`Invalid` marks an index that must not be accessed).
fn const_fits(x: &UOp) -> bool {
    match x.arg {
        Arg::Const(ConstValue::Bool(_)) => x.dtype.is_bool(),
        Arg::Const(ConstValue::Int(_)) => x.dtype.is_int(),
        Arg::Const(ConstValue::Float(_)) => x.dtype.is_float(),
        Arg::Const(ConstValue::Invalid) => x.dtype.is_int(),
        _ => false,
    }
}

fn ints(x: &UOp) -> &[i64] {
    match &x.arg {
        Arg::Ints(v) => v,
        _ => &[],
    }
}

/// Whether `x` or its first source has symbolic dims: their values are the bound ones in a tensor graph but the
/// variables' maxima in a schedule, so only ranks are checked.
fn symbolic(x: &UOp, a: &UOp) -> bool {
    x.is_symbolic() || a.is_symbolic()
}

/// The number of sources each ALU op takes.
fn arity(op: Ops) -> usize {
    if GroupOp::UNARY.contains(op) {
        1
    } else if GroupOp::BINARY.contains(op) {
        2
    } else {
        3
    }
}

const BITWISE: OpSet = OpSet::of(&[AND, OR, XOR, SHL, SHR]);
const INT_DIVISION: OpSet = OpSet::of(&[CDIV, CMOD, FLOORDIV, FLOORMOD]);
const FLOAT_ONLY: OpSet = OpSet::of(&[SIN, LOG2, EXP2, SQRT, TRUNC, FDIV]);

/// Rules for the ops every stage has: constants, ALU ops (operand dtypes agree, comparisons give bool, WHERE's
/// condition is bool, bit and integer-division ops are integer), casts, variables.
fn shared() -> PatternMatcher {
    pm! {
        UPat::ops(SINK).named("x") => |x| check(x.dtype == dtypes::VOID),
        UPat::ops(NOOP).named("x") => |x| ok(),
        UPat::ops(CONST).named("x") => |x| check(x.src.is_empty() && const_fits(x)),
        UPat::ops(DEFINE_VAR).named("x") => |x| check(x.src.is_empty() && x.dtype.is_int() && matches!(x.arg, Arg::Var { .. })),
        UPat::ops(BIND).src([UPat::ops(DEFINE_VAR).named("v"), UPat::ops(CONST).named("c")]).named("x") => |x, v, c| check(x.dtype == v.dtype && fits(c.dtype, v.dtype)),
        UPat::ops(WHERE).src([var("c"), var("a"), var("b")]).named("x") => |x, c, a, b| {
            check(c.dtype.is_bool() && (c.dtype.count == 1 || c.dtype.count == x.dtype.count) && fits(a.dtype, x.dtype) && fits(b.dtype, x.dtype))
        },
        UPat::ops(GroupOp::COMPARISON).src([var("a"), var("b")]).named("x") => |x, a, b| {
            check(x.dtype.is_bool() && x.dtype.count == a.dtype.count.max(b.dtype.count) && (fits(a.dtype, b.dtype) || fits(b.dtype, a.dtype)))
        },
        UPat::ops(BITWISE).named("x") => |x| reject_if(x.dtype.is_float() || x.src.iter().any(|s| s.dtype.is_float())),
        UPat::ops(OpSet::of(&[SHL, SHR])).src([var("a"), var("b")]).named("x") => |x, a, b| check(fits(a.dtype, x.dtype) && b.dtype.is_int()),
        UPat::ops(INT_DIVISION).named("x") => |x| reject_if(!x.dtype.is_int()),
        UPat::ops(FLOAT_ONLY).named("x") => |x| reject_if(!x.dtype.is_float()),
        UPat::ops(OpSet::of(&[DP4A, DP4AS])).named("x") => |x| reject_if(x.dtype.scalar() != dtypes::INT32 || x.src.iter().any(|s| s.dtype.scalar() != dtypes::INT32)),
        UPat::ops(GroupOp::ALU).named("x") => |x| {
            check(x.src.len() == arity(x.op) && !x.dtype.is_ptr() && x.src.iter().all(|s| fits(s.dtype, x.dtype)))
        },
        UPat::ops(CAST).src([var("a")]).named("x") => |x, a| check(!x.dtype.is_ptr() && !a.dtype.is_ptr() && (a.dtype.count == x.dtype.count || a.dtype.count == 1)),
        UPat::ops(BITCAST).src([var("a")]).named("x") => |x, a| check(a.dtype.itemsize() == x.dtype.itemsize()),
    }
}

/// Tensor-graph rules before [`shared`].
fn tensor() -> PatternMatcher {
    let one_src = |ops: &[Ops]| UPat::ops(OpSet::of(ops)).src([var("a")]).named("x");
    pm! {
        UPat::ops(BUFFER).named("x") => |x| check(x.src.is_empty() && !x.dtype.is_ptr() && matches!(x.arg, Arg::Buffer(_))),
        // arange's index: a RANGE without sources, its size as arg
        UPat::ops(RANGE).named("x") => |x| check(x.src.is_empty() && x.dtype.is_int() && matches!(x.arg, Arg::Int(n) if n >= 0)),
        UPat::ops(OpSet::of(&[RESHAPE, EXPAND, SHRINK])).src([var("a")]).named("x") => |x, a| {
            let n = crate::uop::margs(x).len();
            let rank = a.shape().map_or(0, <[usize]>::len) * if x.op == SHRINK { 2 } else { 1 };
            symbolic(x, a).then(|| check(a.dtype == x.dtype && (x.op == RESHAPE || n == rank))).flatten()
        },
        UPat::ops(RESHAPE).src([var("a")]).named("x") => |x, a| {
            check(a.dtype == x.dtype && ints(x).iter().all(|&d| d >= 0) && a.shape().is_some_and(|s| s.iter().product::<usize>() as i64 == ints(x).iter().product::<i64>()))
        },
        UPat::ops(EXPAND).src([var("a")]).named("x") => |x, a| {
            let s = a.shape().unwrap_or(&[]);
            check(a.dtype == x.dtype && s.len() == ints(x).len() && s.iter().zip(ints(x)).all(|(&s, &o)| s as i64 == o || s == 1))
        },
        UPat::ops(PERMUTE).src([var("a")]).named("x") => |x, a| {
            let mut p = ints(x).to_vec();
            p.sort_unstable();
            check(a.dtype == x.dtype && a.shape().is_some_and(|s| s.len() == p.len()) && p.iter().enumerate().all(|(i, &d)| d == i as i64))
        },
        UPat::ops(PAD).src([var("a")]).named("x") => |x, a| {
            check(a.dtype == x.dtype && a.shape().is_some_and(|s| 2 * s.len() == ints(x).len()) && ints(x).iter().all(|&p| p >= 0))
        },
        UPat::ops(SHRINK).src([var("a")]).named("x") => |x, a| {
            let s = a.shape().unwrap_or(&[]);
            check(a.dtype == x.dtype && 2 * s.len() == ints(x).len() && s.iter().zip(ints(x).chunks(2)).all(|(&d, c)| 0 <= c[0] && c[0] <= c[1] && c[1] <= d as i64))
        },
        UPat::ops(FLIP).src([var("a")]).named("x") => |x, a| check(a.dtype == x.dtype && a.shape().is_some_and(|s| s.len() == ints(x).len())),
        UPat::ops(REDUCE_AXIS).src([var("a")]).named("x") => |x, a| match &x.arg {
            Arg::ReduceAxis(op, axes) => check(a.dtype == x.dtype && GroupOp::REDUCE.contains(*op) && a.shape().is_some_and(|s| axes.iter().all(|&i| i < s.len()))),
            _ => bad(),
        },
        one_src(&[CONTIGUOUS, CONTIGUOUS_BACKWARD, DETACH, COPY, ALLREDUCE]) => |x, a| check(a.dtype == x.dtype),
        // (value, placeholder, then (input, its gradient in terms of the placeholder) pairs)
        UPat::ops(CUSTOM_GRADIENT).named("x") => |x| check(x.src.len() >= 4 && x.src.len().is_multiple_of(2) && x.src[0].dtype == x.dtype
            && x.src[1].shape() == x.shape() && x.src[2..].chunks(2).all(|p| p[0].shape() == p[1].shape())),
        UPat::ops(ASSIGN).src([var("t"), var("v")]).named("x") => |x, t, v| check(t.dtype == x.dtype && v.dtype == x.dtype && t.shape() == v.shape()),
        // broadcasting is explicit: an elementwise op's sources have one shape
        UPat::ops(GroupOp::ELEMENTWISE).named("x") => |x| {
            let vals = if x.op == WHERE { &x.src[1..] } else { &x.src[..] };
            let sym = x.src.iter().any(|s| s.is_symbolic());
            reject_if(x.src.iter().any(|s| s.shape().map(<[usize]>::len) != x.src[0].shape().map(<[usize]>::len)) || (!sym && (x.src.iter().any(|s| s.shape() != x.src[0].shape()) || vals.iter().any(|s| s.shape() != x.shape()))))
        },
    }
}

/// Kernel-AST rules before [`shared`].
fn kernel() -> PatternMatcher {
    pm! {
        UPat::ops(SINK).named("x") => |x| check(x.dtype == dtypes::VOID && x.src.iter().all(|s| matches!(s.op, STORE | END | NOOP))),
        UPat::ops(DEFINE_GLOBAL).named("x") => |x| check(x.src.is_empty() && x.dtype.addrspace == Some(AddrSpace::Global) && matches!(x.arg, Arg::Int(i) if i >= 0)),
        UPat::ops(DEFINE_REG).named("x") => |x| check(x.src.is_empty() && x.dtype.addrspace == Some(AddrSpace::Reg)),
        UPat::ops(DEFINE_LOCAL).named("x") => |x| check(x.src.is_empty() && x.dtype.addrspace == Some(AddrSpace::Local)),
        // INDEX(buffer, index[, gate]): a pointer into the buffer
        UPat::ops(INDEX).named("x") => |x| {
            check((2..=3).contains(&x.src.len()) && GroupOp::DEFINES.contains(x.src[0].op) && x.src[0].op != DEFINE_VAR
                && x.dtype == x.src[0].dtype && x.src[1].dtype.is_int() && x.src[1].dtype.count == 1 && x.src.get(2).is_none_or(|g| g.dtype == dtypes::BOOL))
        },
        // LOAD(index[, what it must follow][, the loops it is read in]): a value (or vector of them) of the buffer's
        // element dtype
        UPat::ops(LOAD).named("x") => |x| {
            check(!x.src.is_empty() && x.src[0].op == INDEX && x.dtype.scalar() == x.src[0].dtype.base().scalar() && x.src[1..].iter().all(|s| matches!(s.op, STORE | END | BARRIER | RANGE)))
        },
        // BARRIER(the stores into workgroup memory every thread waits for): a grouped reduction's partials
        UPat::ops(BARRIER).named("x") => |x| check(x.dtype == dtypes::VOID && !x.src.is_empty() && x.src.iter().all(|s| matches!(s.op, STORE | END))),
        // STORE(index, value[, ranges it runs in])
        UPat::ops(STORE).named("x") => |x| {
            check(x.dtype == dtypes::VOID && x.src.len() >= 2 && x.src[0].op == INDEX && x.src[1].dtype.scalar() == x.src[0].dtype.base().scalar()
                && x.src[2..].iter().all(|s| s.op == RANGE))
        },
        // SPECIAL(size): a thread's index in one dimension of the launch grid, named gidx0..2 or lidx0..2
        UPat::ops(SPECIAL).named("x") => |x| check(x.src.len() == 1 && x.dtype.is_int() && x.src[0].op == CONST && matches!(x.arg, Arg::Str(_))),
        UPat::ops(RANGE).named("x") => |x| check(x.src.len() == 1 && x.dtype.is_int() && x.src[0].dtype == x.dtype && matches!(x.arg, Arg::Range(..))),
        UPat::ops(REDUCE).named("x") => |x| match x.arg {
            Arg::Op(op) => {
                let (vals, ranges) = x.reduce_parts();
                check(GroupOp::REDUCE.contains(op) && !vals.is_empty() && vals.iter().all(|v| v.dtype == x.dtype) && ranges.iter().all(|s| s.op == RANGE))
            }
            _ => bad(),
        },
        // END(what the loops compute..., the RANGEs it closes...), or END(RANGE) closing an output loop
        UPat::ops(END).named("x") => |x| {
            let first_range = x.src.iter().position(|s| s.op == RANGE);
            check(x.dtype == dtypes::VOID && first_range.is_some_and(|k| x.src[k..].iter().all(|s| s.op == RANGE)))
        },
        // CUSTOM(sources...): a statement the renderer prints from the format string in its arg
        UPat::ops(CUSTOM).named("x") => |x| check(x.dtype == dtypes::VOID && matches!(&x.arg, Arg::Str(_))),
        UPat::ops(VECTORIZE).named("x") => |x| check(x.src.len() == x.dtype.count as usize && x.src.len() > 1 && x.src.iter().all(|s| s.dtype == x.dtype.scalar())),
        // GEP(a) of a lane, or of several: a vector of a's lanes in the arg's order (a shuffle)
        UPat::ops(GEP).src([var("a")]).named("x") => |x, a| check(match &x.arg {
            Arg::Int(k) => x.dtype == a.dtype.scalar() && (0..i64::from(a.dtype.count)).contains(k),
            Arg::Ints(ks) => ks.len() > 1 && x.dtype == a.dtype.scalar().vec(ks.len() as u16) && ks.iter().all(|k| (0..i64::from(a.dtype.count)).contains(k)),
            _ => false,
        }),
        // WMMA(a, b, c): a tensor core's D = A·B + C over a warp's fragments, named by its arg (one of the target's
        // `Renderer::tensor_cores`, the only ones the TC opt makes)
        UPat::ops(WMMA).named("x") => |x| check(x.src.len() == 3 && x.src[2].dtype == x.dtype && x.src[0].dtype.scalar() == x.src[1].dtype.scalar() && matches!(&x.arg, Arg::Str(_))),
    }
}

/// Program rules (after lowering and linearizing) before [`kernel`] and [`shared`].
fn program() -> PatternMatcher {
    pm! {
        UPat::ops(REDUCE).named("x") => |x| bad(),
        UPat::ops(RANGE).named("x") => |x| reject_if(matches!(x.arg, Arg::Range(_, AxisType::Upcast | AxisType::Unroll))),
    }
}

/// The tensor graph handed to the scheduler (tinygrad `spec_tensor`).
pub static TENSOR_SPEC: LazyLock<PatternMatcher> = LazyLock::new(|| tensor() + shared());
/// A kernel AST from rangeify through opts and expansion (tinygrad `spec_program` before lowering).
pub static KERNEL_SPEC: LazyLock<PatternMatcher> = LazyLock::new(|| kernel() + shared());
/// A lowered kernel and its linearized UOps (tinygrad `spec_program`).
pub static PROGRAM_SPEC: LazyLock<PatternMatcher> = LazyLock::new(|| program() + kernel() + shared());

/// Checks every node of `uops` against `spec` (tinygrad `type_verify`).
///
/// # Panics
/// On the first node no rule of `spec` accepts: names `pass` (the pass that produced the graph), the node, the
/// rule that rejected it, and prints the graph (one node a line, sources by index; the first 400 nodes).
pub fn type_verify(uops: &[UOp], spec: &PatternMatcher, pass: &str) {
    for (i, u) in uops.iter().enumerate() {
        let verdict = spec.rewrite_with_rule(u, &mut ());
        if verdict.as_ref().is_some_and(|(v, _)| *v == *OK) {
            continue;
        }
        let why = match verdict {
            Some((_, r)) => format!("rejected by the rule at {}", spec.rules()[r].location),
            None => "no rule accepts this op at this stage".into(),
        };
        panic!("SPEC: the graph after pass `{pass}` is malformed at node {i}, {}: {why}\n{}", describe(u, uops), listing(uops));
    }
}

/// [`type_verify`] of `root`'s graph when `SPEC >= 1`; nothing otherwise (one atomic load).
///
/// # Panics
/// As [`type_verify`].
pub fn verify(root: &UOp, spec: &PatternMatcher, pass: &str) {
    if SPEC.value() >= 1 {
        type_verify(&root.toposort(), spec, pass);
    }
}

/// [`type_verify`] of `uops` when `SPEC >= 1`.
///
/// # Panics
/// As [`type_verify`].
pub fn verify_list(uops: &[UOp], spec: &PatternMatcher, pass: &str) {
    if SPEC.value() >= 1 {
        type_verify(uops, spec, pass);
    }
}

/// `op dtype [sources as (op, dtype)] arg`.
fn describe(u: &UOp, uops: &[UOp]) -> String {
    let src: Vec<String> = u
        .src
        .iter()
        .map(|s| match uops.iter().position(|x| x == s) {
            Some(j) => format!("%{j} {:?} {}", s.op, s.dtype),
            None => format!("{:?} {}", s.op, s.dtype),
        })
        .collect();
    format!("{:?} {} [{}] {:?}", u.op, u.dtype, src.join(", "), u.arg)
}

fn listing(uops: &[UOp]) -> String {
    let mut out = String::new();
    for (i, u) in uops.iter().enumerate().take(400) {
        let _ = writeln!(out, "%{i:<4} {}", describe(u, uops));
    }
    if uops.len() > 400 {
        let _ = writeln!(out, "... {} more", uops.len() - 400);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn idx(v: i64) -> UOp {
        UOp::const_(dtypes::WEAKINT, v)
    }

    #[test]
    fn a_well_formed_kernel_passes_and_each_broken_rule_is_caught() {
        let g = |slot, dt: DType| UOp::new(DEFINE_GLOBAL, dt.ptr(16, AddrSpace::Global), [], Arg::Int(slot));
        let r = UOp::range(idx(16), 0, AxisType::Loop);
        let at = |g: &UOp, i: &UOp| UOp::new(INDEX, g.dtype, [g.clone(), i.clone()], Arg::None);
        let (out, inp) = (g(0, dtypes::FLOAT32), g(1, dtypes::FLOAT32));
        let ld = UOp::new(LOAD, dtypes::FLOAT32, [at(&inp, &r)], Arg::None);
        let store = |v: &UOp| UOp::sink(vec![UOp::new(STORE, dtypes::VOID, [at(&out, &r), v.clone()], Arg::None)]);
        type_verify(&store(&(&ld * 2.0)).toposort(), &KERNEL_SPEC, "test");
        let i32c = UOp::const_(dtypes::INT32, 1);
        let malformed = [
            ("ALU sources of other dtypes", UOp::new(ADD, dtypes::FLOAT32, [ld.clone(), i32c.clone()], Arg::None)),
            ("comparison not bool", UOp::new(CMPLT, dtypes::FLOAT32, [ld.clone(), ld.clone()], Arg::None)),
            ("WHERE on a float", UOp::new(WHERE, dtypes::FLOAT32, [ld.clone(), ld.clone(), ld.clone()], Arg::None)),
            ("float RANGE", UOp::new(RANGE, dtypes::FLOAT32, [UOp::const_(dtypes::FLOAT32, 4.0)], Arg::Range(1, AxisType::Reduce))),
            ("LOAD of a buffer", UOp::new(LOAD, dtypes::FLOAT32, [inp.clone()], Arg::None)),
            ("LOAD of another dtype", UOp::new(LOAD, dtypes::INT32, [at(&inp, &r)], Arg::None)),
            ("float index", UOp::new(LOAD, dtypes::FLOAT32, [UOp::new(INDEX, inp.dtype, [inp.clone(), ld.clone()], Arg::None)], Arg::None)),
            ("float modulo", UOp::new(FLOORMOD, dtypes::FLOAT32, [ld.clone(), ld.clone()], Arg::None)),
            ("movement op in a kernel", UOp::new(RESHAPE, dtypes::FLOAT32, [ld.clone()], Arg::Ints(vec![1].into()))),
        ];
        for (what, v) in malformed {
            let v = if v.dtype == dtypes::FLOAT32 { v } else { v.cast(dtypes::FLOAT32) };
            let err =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| type_verify(&store(&v).toposort(), &KERNEL_SPEC, "my pass")))
                    .expect_err(what);
            let msg = err.downcast_ref::<String>().cloned().unwrap_or_default();
            assert!(msg.starts_with("SPEC: the graph after pass `my pass` is malformed at node"), "{what}: {msg}");
        }
    }

    #[test]
    fn the_program_spec_rejects_unlowered_reductions() {
        let r = UOp::range(idx(4), 0, AxisType::Reduce);
        let red = UOp::new(REDUCE, dtypes::WEAKINT, [r.clone(), r.clone()], Arg::Op(ADD));
        type_verify(&[idx(4), r.clone(), red.clone()], &KERNEL_SPEC, "kernel");
        let msg = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            type_verify(&[idx(4), r.clone(), red.clone()], &PROGRAM_SPEC, "linearize")
        }))
        .expect_err("REDUCE");
        assert!(msg.downcast_ref::<String>().unwrap().contains("pass `linearize` is malformed at node 2, REDUCE"));
    }
}
