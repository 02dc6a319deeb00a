//! The shape of tensor-level UOps, derived from sources and movement args once per node (iteratively).
//! Kernel-level nodes have no shape. A dim may be symbolic ([`Sint`]): an expression over variables, each bound
//! to a value (BIND) in the tensor graph and unbound (DEFINE_VAR) in the schedule. Follows tinygrad `UOp._shape`.

use super::{exec_alu, Arg, GroupOp, Ops, UOp};
use crate::dtype::{dtypes, ConstValue};
use rustc_hash::FxHashMap;
use std::fmt;

/// A tensor dim: a number, or a symbolic `weakint` expression over variables (tinygrad `sint`). Built through
/// [`Sint::from_uop`], so a symbolic dim is never a constant in disguise.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum Sint {
    /// A known size.
    Int(usize),
    /// An expression over BINDs (tensor graphs) or DEFINE_VARs (schedules), simplified.
    Sym(UOp),
}

impl fmt::Debug for Sint {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Sint::Int(n) => write!(f, "{n}"),
            Sint::Sym(u) => f.write_str(&u.render()),
        }
    }
}

impl From<usize> for Sint {
    fn from(n: usize) -> Sint {
        Sint::Int(n)
    }
}

impl Sint {
    /// Variable `name` in `[min, max]` bound to `value`, as a dim (tinygrad `Variable(name, min, max).bind(value)`).
    /// Buffers holding tensors of this dim are allocated for `max`.
    ///
    /// # Panics
    /// If `value` is outside `[min, max]` or `name` is not an identifier.
    pub fn bound(name: &str, min: usize, max: usize, value: usize) -> Sint {
        Sint::Sym(UOp::variable(name, min as i128, max as i128).bind(value as i128))
    }
    /// `u` (an integer expression: a BIND, a DEFINE_VAR, arithmetic on them) simplified; an `Int` if it folds.
    pub fn from_uop(u: &UOp) -> Sint {
        let u = u.simplify();
        match u.const_int() {
            Some(n) => Sint::Int(usize::try_from(n).expect("a dim is not negative")),
            None => Sint::Sym(u),
        }
    }
    /// This dim as a `weakint` expression.
    pub fn uop(&self) -> UOp {
        match self {
            Sint::Int(n) => UOp::const_(dtypes::WEAKINT, *n as i64),
            Sint::Sym(u) => u.clone(),
        }
    }
    /// The number, if it is one.
    pub fn int(&self) -> Option<usize> {
        match self {
            Sint::Int(n) => Some(*n),
            Sint::Sym(_) => None,
        }
    }
    /// Its value: each BIND's value, each unbound variable at its max (the size a buffer is allocated for).
    pub fn value(&self) -> usize {
        match self {
            Sint::Int(n) => *n,
            Sint::Sym(u) => usize::try_from(eval_at(u, false)).expect("a dim is not negative"),
        }
    }
    /// Its largest value: each variable at its max, bound or not (the size a buffer holding it is allocated for).
    pub fn max(&self) -> usize {
        match self {
            Sint::Int(n) => *n,
            Sint::Sym(u) => usize::try_from(eval_at(u, true)).expect("a dim is not negative"),
        }
    }
    /// `self op other`, folded.
    fn alu(&self, op: Ops, other: &Sint) -> Sint {
        match (self, other) {
            (Sint::Int(a), Sint::Int(b)) if op == Ops::MUL => Sint::Int(a.checked_mul(*b).expect("a dim's product overflows")),
            (Sint::Int(a), Sint::Int(b)) if op == Ops::ADD => Sint::Int(a.checked_add(*b).expect("a dim's sum overflows")),
            (Sint::Int(a), Sint::Int(b)) => {
                let v = exec_alu(op, dtypes::WEAKINT, &[ConstValue::Int(*a as i128), ConstValue::Int(*b as i128)]);
                Sint::Int(usize::try_from(v.as_i128()).expect("a dim is not negative"))
            }
            _ => Sint::from_uop(&self.uop().alu(op, &[&other.uop()])),
        }
    }
    /// The product of `dims`.
    pub fn product<'a>(dims: impl IntoIterator<Item = &'a Sint>) -> Sint {
        dims.into_iter().fold(Sint::Int(1), |a, d| &a * d)
    }
}

impl std::ops::Mul for &Sint {
    type Output = Sint;
    fn mul(self, o: &Sint) -> Sint {
        self.alu(Ops::MUL, o)
    }
}
impl std::ops::Add for &Sint {
    type Output = Sint;
    fn add(self, o: &Sint) -> Sint {
        self.alu(Ops::ADD, o)
    }
}
impl std::ops::Sub for &Sint {
    type Output = Sint;
    fn sub(self, o: &Sint) -> Sint {
        match (self, o) {
            (Sint::Int(a), Sint::Int(b)) => Sint::Int(a.checked_sub(*b).expect("a dim is not negative")),
            _ => Sint::from_uop(&self.uop().alu(Ops::ADD, &[&-&o.uop()])),
        }
    }
}
/// The value of integer expression `u`: constants, BINDs' values (their variables' max when `max`), unbound
/// variables at their max.
fn eval_at(u: &UOp, max: bool) -> i128 {
    let mut memo: FxHashMap<UOp, ConstValue> = FxHashMap::default();
    for n in u.toposort() {
        let v = match (&n.arg, n.op) {
            (Arg::Var { max, .. }, _) => ConstValue::Int(*max),
            (_, Ops::BIND) if !max => n.src[1].const_value().expect("BIND of a constant"),
            (_, Ops::BIND) => memo[&n.src[0]],
            (Arg::Const(c), _) => *c,
            _ if GroupOp::ALU.contains(n.op) => exec_alu(n.op, n.dtype, &n.src.iter().map(|s| memo[s]).collect::<Vec<_>>()),
            _ => panic!("a dim expression can't hold {}", n.op),
        };
        memo.insert(n, v);
    }
    memo[u].as_i128()
}

/// A movement op's args as dims (RESHAPE, EXPAND: one per dim; SHRINK: begin and end per dim; PAD: before and
/// after per dim; PERMUTE, FLIP: per dim).
///
/// # Panics
/// If `u` has neither `Arg::Ints` nor `Arg::Sints`.
pub fn margs(u: &UOp) -> Vec<Sint> {
    match &u.arg {
        Arg::Ints(v) => v.iter().map(|&x| Sint::Int(usize::try_from(x).expect("a movement arg is not negative"))).collect(),
        Arg::Sints(v) => v.to_vec(),
        a => panic!("{}: expected a dims arg, got {a:?}", u.op),
    }
}

/// A reshape from `src` to `dst` as independent groups of dims (`dst[a]` holds what `src[b]` does, with equal
/// products), so an index is flattened and split only within the dims a reshape actually merges or splits (one
/// flat index over every dim leaves div/mod chains the simplifier can't undo).
pub fn reshape_groups(dst: &[usize], src: &[usize]) -> Vec<(std::ops::Range<usize>, std::ops::Range<usize>)> {
    let (nd, ns) = (dst.len(), src.len());
    let (mut a, mut b, mut groups) = (0, 0, Vec::new());
    while a < nd || b < ns {
        let (a0, b0, mut pa, mut pb) = (a, b, 1usize, 1usize);
        loop {
            let need_a = a < nd && (a == a0 || pa < pb || b == ns);
            let need_b = b < ns && (b == b0 || pb < pa || a == nd);
            if need_a && (pa <= pb || !need_b) {
                pa *= dst[a];
                a += 1;
            } else if need_b {
                pb *= src[b];
                b += 1;
            } else {
                break;
            }
            if pa == pb && (a > a0 || a == nd) && (b > b0 || b == ns) {
                break;
            }
        }
        groups.push((a0..a, b0..b));
    }
    groups
}

/// A node's shape: its dims' values, and the dims themselves where any is symbolic.
pub(super) struct Shape {
    dims: Box<[usize]>,
    sym: Option<Box<[Sint]>>,
}

fn ints(u: &UOp) -> &[i64] {
    match &u.arg {
        Arg::Ints(v) => v,
        a => panic!("{}: expected an int list arg, got {a:?}", u.op),
    }
}

/// The symbolic shape of `u` from its sources' (`None` when `u` and its sources are all concrete).
fn compute_sym(u: &UOp) -> Option<Box<[Sint]>> {
    let sym = |s: &UOp| s.shape.get().is_some_and(|x| x.as_ref().is_some_and(|x| x.sym.is_some()));
    if !u.src.iter().any(sym) && !matches!(u.arg, Arg::Sints(_)) {
        return None;
    }
    let src = || u.src[0].sym_shape().expect("a tensor source");
    Some(match u.op {
        Ops::RESHAPE | Ops::EXPAND => margs(u).into(),
        Ops::SHRINK => margs(u).chunks(2).map(|c| &c[1] - &c[0]).collect(),
        Ops::PERMUTE => ints(u).iter().map(|&p| src()[p as usize].clone()).collect(),
        Ops::PAD => src().iter().zip(ints(u).chunks(2)).map(|(s, p)| s + &Sint::Int((p[0] + p[1]) as usize)).collect(),
        Ops::REDUCE_AXIS => match &u.arg {
            Arg::ReduceAxis(_, axes) => {
                src().into_iter().enumerate().map(|(i, s)| if axes.contains(&i) { Sint::Int(1) } else { s }).collect()
            }
            _ => return None,
        },
        Ops::WHERE => u.src[1].sym_shape()?.into(),
        Ops::MULTI => match u.arg {
            Arg::Int(a) if a >= 0 => {
                src().into_iter().enumerate().map(|(i, s)| if i == a as usize { &s * &Sint::Int(u.src.len()) } else { s }).collect()
            }
            _ => src().into(),
        },
        // elementwise: the symbolic source's (each has the same values)
        _ => u.src.iter().find(|s| sym(s))?.sym_shape()?.into(),
    })
}

/// The shape of `u` given its sources' shapes (already computed).
fn compute_dims(u: &UOp) -> Option<Box<[usize]>> {
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
        Ops::RESHAPE | Ops::EXPAND => match &u.arg {
            Arg::Ints(v) => v.iter().map(|&x| x as usize).collect(),
            _ => margs(u).iter().map(Sint::value).collect(),
        },
        Ops::PERMUTE => ints(u).iter().map(|&p| src(0).unwrap()[p as usize]).collect(),
        Ops::PAD => src(0)?.iter().enumerate().map(|(i, s)| s + (ints(u)[2 * i] + ints(u)[2 * i + 1]) as usize).collect(),
        Ops::SHRINK => match &u.arg {
            Arg::Ints(v) => v.chunks(2).map(|c| (c[1] - c[0]) as usize).collect(),
            _ => margs(u).chunks(2).map(|c| c[1].value() - c[0].value()).collect(),
        },
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

fn compute(u: &UOp) -> Option<Shape> {
    Some(Shape { dims: compute_dims(u)?, sym: compute_sym(u) })
}

impl UOp {
    /// The tensor shape of this node (`None` for kernel-level and effect nodes). A symbolic dim reads as its value
    /// ([`Sint::value`]): the bound value in a tensor graph, the variable's max in a schedule.
    pub fn shape(&self) -> Option<&[usize]> {
        self.shape_info().map(|s| &*s.dims)
    }
    /// The tensor shape with symbolic dims as expressions.
    pub fn sym_shape(&self) -> Option<Vec<Sint>> {
        let s = self.shape_info()?;
        Some(s.sym.as_ref().map_or_else(|| s.dims.iter().map(|&d| Sint::Int(d)).collect(), |d| d.to_vec()))
    }
    /// Whether some dim of this node's shape is symbolic.
    pub fn is_symbolic(&self) -> bool {
        self.shape_info().is_some_and(|s| s.sym.is_some())
    }
    fn shape_info(&self) -> Option<&Shape> {
        if let Some(s) = self.shape.get() {
            return s.as_ref();
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
        self.shape.get().expect("shape computed").as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::reshape_groups;

    #[test]
    fn reshape_groups_split_only_what_changes() {
        let g = |d: &[usize], s: &[usize]| reshape_groups(d, s).into_iter().map(|(a, b)| (a.len(), b.len())).collect::<Vec<_>>();
        // (64, 32, 125) -> (64, 32, 5, 25): only the last dim splits
        assert_eq!(g(&[64, 32, 5, 25], &[64, 32, 125]), [(1, 1), (1, 1), (2, 1)]);
        // (2, 3) <-> (3, 2) share no boundary
        assert_eq!(g(&[2, 3], &[3, 2]), [(2, 2)]);
        // size-1 dims on either side
        assert_eq!(g(&[6, 1], &[6]), [(1, 1), (1, 0)]);
        assert_eq!(g(&[6], &[1, 6]), [(1, 2)]);
        assert_eq!(g(&[4, 1, 32], &[4, 32]), [(1, 1), (2, 1)]);
    }
}
