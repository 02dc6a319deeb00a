//! Property test of the symbolic rules: random integer expression trees over 3 bounded variables keep their
//! value under `simplify` for random assignments, and every node's value lies within its [vmin, vmax].

use proptest::prelude::*;
use rustc_hash::FxHashMap;
use tinygrad::dtype::ConstValue;
use tinygrad::uop::{exec_alu, Arg, UOp};

const VARS: [(&str, i128, i128); 3] = [("a", 0, 15), ("b", -8, 7), ("c", 1, 40)];

/// The value of `root` with the variables assigned `vals`, evaluating each node once with `exec_alu`.
fn eval(root: &UOp, vals: &[i128; 3]) -> FxHashMap<UOp, ConstValue> {
    let mut out: FxHashMap<UOp, ConstValue> = FxHashMap::default();
    for u in root.toposort() {
        let v = match (&u.arg, u.op) {
            (Arg::Var { name, .. }, _) => ConstValue::Int(vals[VARS.iter().position(|v| *v.0 == **name).unwrap()]),
            (Arg::Const(c), _) => *c,
            _ => exec_alu(u.op, u.dtype, &u.src.iter().map(|s| out[s]).collect::<Vec<_>>()),
        };
        out.insert(u, v);
    }
    out
}

/// A recipe for an expression (built after generation so the nodes are made in the test thread).
#[derive(Clone, Debug)]
enum E {
    Var(usize),
    Const(i64),
    Add(Box<E>, Box<E>),
    Mul(Box<E>, Box<E>),
    MulC(Box<E>, i64),
    Div(Box<E>, i64),
    Mod(Box<E>, i64),
    Max(Box<E>, Box<E>),
    Neg(Box<E>),
    Where(Box<E>, Box<E>, Box<E>, Box<E>),
    Ne(Box<E>, Box<E>, Box<E>),
}

fn build(e: &E, vars: &[UOp]) -> UOp {
    let b = |e: &E| build(e, vars);
    match e {
        E::Var(i) => vars[*i].clone(),
        E::Const(c) => vars[0].const_like(*c),
        E::Add(x, y) => b(x) + b(y),
        E::Mul(x, y) => b(x) * b(y),
        E::MulC(x, c) => b(x) * *c,
        E::Div(x, c) => b(x) / *c,
        E::Mod(x, c) => b(x) % *c,
        E::Max(x, y) => b(x).maximum(b(y)),
        E::Neg(x) => -b(x),
        E::Where(p, q, t, f) => b(p).cmplt(b(q)).where_(b(t), b(f)),
        E::Ne(p, t, f) => b(p).cmpne(0).where_(b(t), b(f)),
    }
}

fn expr() -> impl Strategy<Value = E> {
    let leaf = prop_oneof![3 => (0..3usize).prop_map(E::Var), 1 => (-8..17i64).prop_map(E::Const)];
    leaf.prop_recursive(8, 200, 3, |inner| {
        let i = || inner.clone().prop_map(Box::new);
        prop_oneof![
            (i(), i()).prop_map(|(x, y)| E::Add(x, y)),
            (i(), i()).prop_map(|(x, y)| E::Mul(x, y)),
            (i(), -6..7i64).prop_map(|(x, c)| E::MulC(x, c)),
            (i(), 1..13i64).prop_map(|(x, c)| E::Div(x, c)),
            (i(), 1..13i64).prop_map(|(x, c)| E::Mod(x, c)),
            (i(), i()).prop_map(|(x, y)| E::Max(x, y)),
            i().prop_map(E::Neg),
            (i(), i(), i(), i()).prop_map(|(p, q, t, f)| E::Where(p, q, t, f)),
            (i(), i(), i()).prop_map(|(p, t, f)| E::Ne(p, t, f)),
        ]
    })
}

fn assignment() -> impl Strategy<Value = [i128; 3]> {
    (VARS[0].1..=VARS[0].2, VARS[1].1..=VARS[1].2, VARS[2].1..=VARS[2].2).prop_map(|(a, b, c)| [a, b, c])
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 10_000, failure_persistence: None, ..ProptestConfig::default() })]
    #[test]
    fn simplify_keeps_values_and_bounds(e in expr(), vals in prop::collection::vec(assignment(), 4)) {
        let vars: Vec<UOp> = VARS.iter().map(|(n, lo, hi)| UOp::variable(n, *lo, *hi)).collect();
        let u = build(&e, &vars);
        let s = u.simplify();
        for v in &vals {
            let (before, after) = (eval(&u, v), eval(&s, v));
            prop_assert_eq!(before[&u], after[&s], "{} -> {} at {:?}", u, s, v);
            for (node, val) in before.iter().chain(after.iter()) {
                let (lo, hi) = node.bounds();
                let x = val.as_i128();
                prop_assert!(lo <= x && x <= hi, "{} = {} outside [{}, {}] at {:?}", node, x, lo, hi, v);
            }
        }
    }
}
