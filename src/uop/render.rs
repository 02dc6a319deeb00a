//! A readable one-line rendering of (index) expressions for errors, tests and DEBUG output, in tinygrad's
//! `render` notation: `((a*4)+(b//4))`. Nodes it has no notation for print as `OP(src, ...)`.

use super::{Arg, Ops, UOp};
use rustc_hash::FxHashMap;

fn infix(op: Ops) -> Option<&'static str> {
    use Ops::*;
    Some(match op {
        ADD => "+",
        SUB => "-",
        MUL => "*",
        FDIV => "/",
        FLOORDIV => "//",
        FLOORMOD => "%",
        CDIV => " cdiv ",
        CMOD => " cmod ",
        CMPLT => "<",
        CMPNE => "!=",
        CMPEQ => "==",
        AND => "&",
        OR => "|",
        XOR => "^",
        SHL => "<<",
        SHR => ">>",
        _ => return None,
    })
}

/// Renders `root`, each shared node once (iteratively, so deep graphs are fine).
pub(super) fn render(root: &UOp) -> String {
    let mut out: FxHashMap<&UOp, String> = FxHashMap::default();
    let topo = root.toposort();
    for u in &topo {
        let s: Vec<&str> = u.src.iter().map(|x| out[x].as_str()).collect();
        let r = match (u.op, &u.arg) {
            (Ops::CONST, Arg::Const(v)) => v.to_string(),
            (Ops::DEFINE_VAR, Arg::Var { name, .. }) => name.to_string(),
            (Ops::BIND, _) => format!("{}={}", s[0], s[1]),
            (Ops::RANGE, Arg::Range(i, _)) => format!("r{i}"),
            (Ops::NEG, _) => format!("(-{})", s[0]),
            (Ops::MAX, _) => format!("max({}, {})", s[0], s[1]),
            (Ops::WHERE, _) => format!("({}?{}:{})", s[0], s[1], s[2]),
            (Ops::CAST, _) => format!("({}){}", u.dtype.name(), s[0]),
            (op, _) if s.len() == 2 && infix(op).is_some() => format!("({}{}{})", s[0], infix(op).unwrap(), s[1]),
            (op, _) => format!("{op:?}({})", s.join(", ")),
        };
        out.insert(u, r);
    }
    out.remove(root).unwrap_or_default()
}
