//! UPat / PatternMatcher / graph_rewrite: captures, op sets, dtypes, commutative and any-length sources,
//! constant patterns, contexts, rewrite order, deep graphs and runaway rules.

use tinygrad::dtype::dtypes;
use tinygrad::pm;
use tinygrad::uop::{cvar, graph_rewrite, graph_rewrite_top_down, var, GroupOp, OpSet, Ops, PatternMatcher, UOp, UPat};

fn x() -> UOp {
    UOp::variable("x", 0, 10)
}
fn y() -> UOp {
    UOp::variable("y", 0, 10)
}
fn rw(u: &UOp, pm: &PatternMatcher) -> UOp {
    graph_rewrite(u, pm, &mut (), "test")
}

#[test]
fn captures_must_agree() {
    let m: PatternMatcher = pm! { var("a") + var("a") => |a| a * 2 };
    assert_eq!(rw(&(x() + x()), &m), x() * 2);
    assert_eq!(rw(&(x() + y()), &m), x() + y(), "different nodes under one name don't match");
}

#[test]
fn commutative_sources_match_either_order() {
    let m: PatternMatcher = pm! { var("a") * cvar("c") => |a, c| a.cmplt(c) };
    assert_eq!(rw(&(x() * 3), &m), x().cmplt(3));
    let three = x().const_like(3);
    assert_eq!(rw(&three.alu(Ops::MUL, &[&x()]), &m), x().cmplt(3));
    let ordered: PatternMatcher = pm! { UPat::ops(Ops::FLOORDIV).src([cvar("c"), var("a")]) => |a| a.clone() };
    assert_eq!(rw(&(x() / 3), &ordered), x() / 3, "non-commutative sources match in order only");
}

#[test]
fn op_sets_dtypes_args_and_any_len() {
    let m: PatternMatcher = pm! {
        UPat::ops(OpSet::of(&[Ops::MAX, Ops::CMPLT])).src([var("a"), var("a")]) => |a| a.const_like(7),
        var("f").dtype(&[dtypes::FLOAT32]).unary(Ops::SQRT) => |f| f.clone(),
        UPat::ops(Ops::SINK).src_prefix([var("first")]) => |first| UOp::sink(vec![first.clone()]),
    };
    assert_eq!(rw(&x().maximum(x()), &m), x().const_like(7));
    let f = UOp::const_(dtypes::FLOAT32, 2.0).cast(dtypes::FLOAT32);
    let fv = UOp::new(Ops::DEFINE_VAR, dtypes::FLOAT32, [], tinygrad::uop::Arg::Str("f".into()));
    assert_eq!(rw(&fv.unary(Ops::SQRT), &m), fv);
    let hv = UOp::new(Ops::DEFINE_VAR, dtypes::FLOAT16, [], tinygrad::uop::Arg::Str("h".into()));
    assert_eq!(rw(&hv.unary(Ops::SQRT), &m), hv.unary(Ops::SQRT), "dtype filter rejects float16");
    assert_eq!(rw(&UOp::sink(vec![x(), y(), f.clone()]), &m), UOp::sink(vec![x()]));
    assert!(GroupOp::BINARY.contains(Ops::ADD) && !GroupOp::UNARY.contains(Ops::ADD));
}

#[test]
fn constant_patterns_compare_numerically() {
    let m: PatternMatcher = pm! { var("a") + 0 => |a| a };
    assert_eq!(rw(&(x() + 0), &m), x());
    let fz = UOp::const_(dtypes::FLOAT32, 0.0);
    let fv = UOp::new(Ops::DEFINE_VAR, dtypes::FLOAT32, [], tinygrad::uop::Arg::Str("f".into()));
    assert_eq!(rw(&fv.alu(Ops::ADD, &[&fz]), &m), fv, "0 matches 0.0");
    assert_eq!(rw(&(x() + 1), &m), x() + 1);
}

#[test]
fn context_reaches_rules() {
    let m: PatternMatcher<Vec<String>> = pm! { ctx: Vec<String>;
        var("a") * cvar("c") => |a, c| { ctx.push(format!("{a}*{c}")); a.clone() },
    };
    let mut seen = Vec::new();
    let out = graph_rewrite(&((x() * 2) + (y() * 3)), &m, &mut seen, "ctx");
    assert_eq!(out, x() + y());
    seen.sort();
    assert_eq!(seen, ["x*2", "y*3"]);
}

#[test]
fn order_sources_first_or_top_down() {
    // a child rule (v*2 -> v) and a parent rule that needs the child intact ((v*2)+w -> 99)
    let m: PatternMatcher = pm! {
        var("v") * 2 => |v| v,
        (var("v") * 2) + var("w") => |v| v.const_like(99),
    };
    let e = x() * 2 + y();
    assert_eq!(graph_rewrite(&e, &m, &mut (), "sources first"), x() + y());
    assert_eq!(graph_rewrite_top_down(&e, &m, &mut (), "top down"), x().const_like(99));
}

#[test]
fn deep_chain_rewrites_without_recursion() {
    // (((x+1)+1)+...)+1 with 200,000 ADDs folds to x+200000
    let x = UOp::variable("x", 0, 10);
    let mut e = x.clone();
    for _ in 0..200_000 {
        e = &e + 1;
    }
    let out = std::thread::Builder::new().stack_size(1 << 20).spawn(move || e.simplify()).unwrap().join().unwrap();
    assert_eq!(out, &x + 200_000);
}

#[test]
#[should_panic(expected = "runaway rewrite")]
fn runaway_rules_stop_with_an_error() {
    // x+1 -> x+2 -> x+3 ... never settles
    let m: PatternMatcher = pm! { var("a") + cvar("c") => |a, c| a + (c + 1) };
    rw(&(x() + 1), &m);
}

#[test]
fn runaway_error_names_the_rule() {
    let m: PatternMatcher = pm! { var("a") * 2 => |a| (a * 2) * 1 };
    let err = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| rw(&(x() * 2), &m))).unwrap_err();
    let msg = err.downcast_ref::<String>().unwrap();
    assert!(msg.contains("tests/pattern.rs:"), "{msg}");
}
