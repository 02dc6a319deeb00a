//! Reduce collapse and range splitting. In: a kernel AST. Out: the same AST simplified, where each ADD-reduction that
//! picks one row out of a range, `sum over r in [0,n) of (r == e ? v : 0)` with `e` free of `r` (the one-hot
//! compare-and-sum that `x[idx]`, `gather` and `Embedding` build), is that row read directly:
//! `0 <= e < n ? v[r := e] : 0`, its loads at index `e` gated by `0 <= e < n`. Exact: at most one `r` equals
//! `e`, and an `e` outside `[0, n)` gives 0 as the sum does. Follows tinygrad `codegen/simplify.py`
//! (`pm_load_collapse`, `reduce_load_collapse`, the casted-bool rule of `pm_reduce_collapse`); and, in a reduction,
//! where an output RANGE read as `r % c` or `r / c` splits into two that some load tells apart (an output merging a
//! head axis with the head's lanes gets its head axis back: [`split_ranges`], tinygrad `pm_split_ranges`).

use crate::dtype::{dtypes, ConstValue, DType, Scalar};
use crate::pm;
use crate::uop::{var, Arg, AxisType, Ops, PatternMatcher, UOp, UPat};
use rustc_hash::FxHashMap;
use std::sync::LazyLock;

/// The collapse rules (context-free), each on an ADD-REDUCE whose value has one of the one-hot forms.
pub static PM_REDUCE_COLLAPSE: LazyLock<PatternMatcher> = LazyLock::new(|| {
    let sum = |value: UPat| UPat::ops(Ops::REDUCE).arg(Arg::Op(Ops::ADD)).src_prefix([value]).named("red");
    pm! {
        UPat::ops(Ops::STORE).named("st") => |st| store_collapse(st),                                 // buf[i] = c ? a : buf[i] -> if (c) buf[i] = a; pinned loops collapse
        sum(var("c").where_(var("v"), 0)) => |red, c, v| collapse(red, c, v),                        // sum_r((r==e & m) ? v : 0) -> (0<=e<n & m[r:=e]) ? v[r:=e] : 0
        sum(var("a").cmpne(var("b")).where_(0, var("v"))) => |red, a, b, v| collapse(red, &a.cmpeq(b), v), // (a!=b) ? 0 : v == (a==b) ? v : 0
        sum(var("c").where_(var("v"), 0).cast()) => |red, c, v| collapse(red, c, &v.cast(red.src[0].dtype)), // cast(c ? v : 0) == c ? cast(v) : 0
        sum(var("v") * var("g").dtype(&[dtypes::BOOL]).cast()) => |red, v, g| collapse(red, g, v),     // v * cast(g) -> g ? v : 0 (NaN*0 dropped, as tinygrad)
        UPat::ops(Ops::REDUCE).named("red") => |red| reduce_unparented(red),                          // sum_r v -> v*n, max_r v -> v, prod_r v -> v**n (v free of r)
    }
});

/// The symbolic rules and the collapse rules in one table, so a kernel AST is simplified and collapsed in one pass
/// (its fixed points are symbolic's too).
static SYMBOLIC_AND_COLLAPSE: LazyLock<PatternMatcher> = LazyLock::new(|| &*crate::uop::symbolic::SYMBOLIC + &*PM_REDUCE_COLLAPSE);

/// `ast` simplified, with its one-hot reductions collapsed into gathers.
pub fn simplify_and_collapse(ast: &UOp) -> UOp {
    unique_axes(&crate::uop::graph_rewrite(ast, &SYMBOLIC_AND_COLLAPSE, &mut (), "simplify and reduce collapse"))
}

/// `ast` with its ranges renumbered in order where two share an axis id (a store's loop bounded to a window keeps
/// its loop's id, beside that loop in another store of the kernel).
fn unique_axes(ast: &UOp) -> UOp {
    let mut rngs: Vec<UOp> = ast.toposort().into_iter().filter(|u| u.op == Ops::RANGE).collect();
    rngs.sort_by_key(|r| r.axis().0);
    if rngs.windows(2).all(|w| w[0].axis().0 != w[1].axis().0) {
        return ast.clone();
    }
    let map = rngs.iter().enumerate().map(|(i, r)| (r.clone(), UOp::range(r.src[0].clone(), i as i64, r.axis().1))).collect();
    ast.substitute(&map)
}

/// `ast` (simplified) with an output RANGE `r` of `n` iterations that the kernel reads as `r % c` or `r / c` (`c` a
/// constant dividing `n`) split into `r0 * c + r1` (`r0` of `n / c` iterations, `r1` of `c`) where that leaves fewer
/// divisions and remainders and some index moves along one half only (a load reused along the other): `r / c` and
/// `r % c` fold to `r0` and `r1` (tinygrad `pm_split_ranges`, which splits at every `%`, and `simplify_merge_adjacent`,
/// which merges back what does not simplify). Attention's output `[T, heads * head_dim]`, stored from one merged
/// range, gets back its head axis, and the heads `h` reading key-value head `h / group` their axis within the group,
/// along which the values' loads are reused in registers; a matrix stored in tiles of a register's rows
/// (`QuantMatrix`), whose loads move along both halves, keeps its one column axis. Only reductions split (an
/// elementwise kernel's vectors want the longest unit-stride axis: RoPE's pairs would leave 2 lanes), and only their
/// output ranges (a quantized block's bit fields would split the reduce axis into axes of 2). The ranges are
/// renumbered in order, a split one's halves taking consecutive ids.
pub fn split_ranges(ast: &UOp) -> UOp {
    let divmods = |u: &UOp| u.toposort().iter().filter(|x| matches!(x.op, Ops::FLOORDIV | Ops::FLOORMOD)).count();
    let (mut ast, mut tried) = (ast.clone(), rustc_hash::FxHashSet::default());
    if !ast.toposort().iter().any(|u| u.op == Ops::REDUCE) {
        return ast;
    }
    loop {
        let topo = ast.toposort();
        let candidate = topo.iter().filter(|u| matches!(u.op, Ops::FLOORMOD | Ops::FLOORDIV) && u.src[0].op == Ops::RANGE).find_map(|u| {
            let (r, n, c) = (&u.src[0], u.src[0].src[0].const_int()?, u.src[1].const_int()?);
            let fresh = r.axis().1 == AxisType::Loop && c > 1 && c < n && n % c == 0 && !tried.contains(&(r.clone(), c));
            fresh.then(|| (r.clone(), n / c, c))
        });
        let Some((r, outer, c)) = candidate else { return ast };
        tried.insert((r.clone(), c));
        let (split, halves) = split_range(&ast, &topo, &r, outer, c);
        // (an index that moves along one half only: a load reused along the other, which a register tile can exploit)
        let one_half = |u: &UOp| {
            let t = u.src[1].toposort();
            t.contains(&halves[0]) != t.contains(&halves[1])
        };
        if divmods(&split) < divmods(&ast) && split.toposort().iter().any(|u| u.op == Ops::INDEX && one_half(u)) {
            (ast, tried) = (split, rustc_hash::FxHashSet::default());
        }
    }
}

/// `ast` (whose nodes are `topo`) with RANGE `r` as `r0 * c + r1` (`r0` of `outer` iterations), simplified, the
/// ranges renumbered in order; and `[r0, r1]`.
fn split_range(ast: &UOp, topo: &[UOp], r: &UOp, outer: i128, c: i128) -> (UOp, [UOp; 2]) {
    let mut rngs: Vec<&UOp> = topo.iter().filter(|u| u.op == Ops::RANGE).collect();
    rngs.sort_by_key(|r| r.axis().0);
    let (mut map, mut id, mut halves) = (FxHashMap::default(), 0, None);
    let size = |n: i128| UOp::const_(dtypes::WEAKINT, n as i64);
    for x in rngs {
        let kind = x.axis().1;
        if x == r {
            let (r0, r1) = (UOp::range(size(outer), id, kind), UOp::range(size(c), id + 1, kind));
            map.insert(x.clone(), &(&r0 * c as i64) + &r1);
            halves = Some([r0, r1]);
            id += 2;
        } else {
            map.insert(x.clone(), UOp::range(x.src[0].clone(), id, kind));
            id += 1;
        }
    }
    let halves = halves.expect("r is one of the kernel's ranges");
    (crate::uop::graph_rewrite(&ast.substitute(&map), &SYMBOLIC_AND_COLLAPSE, &mut (), "split ranges"), halves)
}

/// `red` without the ranges its value does not depend on (tinygrad `reduce_unparented`): a sum over such a range is
/// the value times its size (exact where adding a float32 2^33 times is not: the sum stalls at 2^24), a max the
/// value, a product its power. `None` when the value depends on every range, or for other reductions.
fn reduce_unparented(red: &UOp) -> Option<UOp> {
    let Arg::Op(op) = red.arg else { return None };
    if !matches!(op, Ops::ADD | Ops::MAX | Ops::MUL) || red.dtype.scalar == Scalar::Bool {
        return None;
    }
    let inside: rustc_hash::FxHashSet<UOp> = red.src[0].toposort().into_iter().filter(|u| u.op == Ops::RANGE).collect();
    let (parented, unparented): (Vec<UOp>, Vec<UOp>) = red.src[1..].iter().cloned().partition(|r| inside.contains(r));
    if unparented.is_empty() {
        return None;
    }
    let v = if parented.is_empty() { red.src[0].cast(red.dtype) } else { red.with_src([vec![red.src[0].clone()], parented].concat()) };
    // (a loop of one iteration may have become its index, a constant: a factor of 1)
    let size = |r: &UOp| if r.op == Ops::RANGE { r.src[0].cast(red.dtype.scalar()) } else { UOp::const_(red.dtype.scalar(), 1) };
    Some(unparented.iter().fold(v, |v, r| match op {
        Ops::ADD => &v * &size(r),
        Ops::MUL => v.alu(Ops::POW, &[&size(r)]),
        _ => v,
    }))
}

/// `red` (a sum of `cond ? v : 0` over its ranges) without the first range `r` that a term `r == e` of the
/// conjunction `cond` pins (with `e` free of `r`); `None` when no range is pinned.
fn collapse(red: &UOp, cond: &UOp, v: &UOp) -> Option<UOp> {
    let terms = split_and(cond);
    let (r, k, e) = red.src[1..].iter().find_map(|r| terms.iter().enumerate().find_map(|(k, t)| pinned(t, r).map(|e| (r, k, e))))?;
    let e = e.cast(r.dtype);
    let valid = &e.cmplt(0).logical_not() & &e.cmplt(&r.src[0]);
    let mut at_e = Gather { map: [(r.clone(), e.clone())].into_iter().collect(), valid: valid.clone() };
    let cond = terms.iter().enumerate().filter(|&(j, _)| j != k).fold(valid.clone(), |c, (_, t)| &c & &at_e.sub(t));
    let v = at_e.sub(v);
    let value = if cond == valid && v.gated_by(&valid) { v } else { cond.where_(v, 0) };
    let rest: Vec<UOp> = red.src[1..].iter().filter(|x| *x != r).cloned().collect();
    let out = if rest.is_empty() {
        value.cast(red.dtype)
    } else {
        UOp::new(Ops::REDUCE, red.dtype, [vec![value], rest].concat(), red.arg.clone())
    };
    Some(out.simplify())
}

/// A store of `c ? a : (the old value)` (an update of part of a buffer: a KV cache's row, a slice assign) as a
/// store of `a` gated by `c`, which reads nothing; and where a term of `c` pins one of the store's loops
/// (`r == e`, `e` free of `r`), that loop collapsed: one store at `r := e`, gated by `0 <= e < n` (a decode step
/// writes one row, not every row); where two terms bound it to a window of `w` rows ([`window`]), a loop of `w`
/// (a prompt chunk writes its rows). `None` when the store is not of that form.
fn store_collapse(st: &UOp) -> Option<UOp> {
    let (idx, val) = (&st.src[0], &st.src[1]);
    let old = |u: &UOp| u.op == Ops::LOAD && u.src.len() == 1 && u.src[0] == *idx;
    if idx.src.len() != 2 || val.op != Ops::WHERE || st.src.len() != 2 {
        return None;
    }
    let (c, a) = match (old(&val.src[1]), old(&val.src[2])) {
        (false, true) => (val.src[0].clone(), &val.src[1]),
        (true, false) => (val.src[0].logical_not(), &val.src[2]),
        _ => return None,
    };
    let terms = split_and(&c);
    let loops: Vec<UOp> = idx.src[1].toposort().into_iter().filter(|u| u.op == Ops::RANGE).collect();
    let pin = loops.iter().find_map(|r| terms.iter().enumerate().find_map(|(k, t)| pinned(t, r).map(|e| (r, vec![k], e))));
    let Some((r, used, e)) = pin.or_else(|| loops.iter().find_map(|r| window(&terms, r).map(|(ks, e)| (r, ks.to_vec(), e)))) else {
        return Some(UOp::new(Ops::STORE, st.dtype, [idx.with_src([idx.src[0].clone(), idx.src[1].clone(), c]), a.clone()], Arg::None));
    };
    let e = e.cast(r.dtype);
    let valid = &e.cmplt(0).logical_not() & &e.cmplt(&r.src[0]);
    let mut at_e = Gather { map: [(r.clone(), e)].into_iter().collect(), valid: valid.clone() };
    let gate = terms.iter().enumerate().filter(|(j, _)| !used.contains(j)).fold(valid, |g, (_, t)| &g & &at_e.sub(t));
    let (i, a) = (at_e.sub(&idx.src[1]), at_e.sub(a));
    Some(UOp::new(Ops::STORE, st.dtype, [idx.with_src([idx.src[0].clone(), i, gate]), a], Arg::None).simplify())
}

/// Where terms `o < w` and `!(o < 0)` of a store's gate, with `o = r + b` (`r` the loop `r` through exact casts, `b`
/// free of it, `w` a constant below its size), bound the loop to a window of `w` rows: their indices and `r`'s
/// value `r' - b` in a new loop `r'` of `w` iterations (a chunk of tokens written into a KV cache at a variable
/// position writes its rows, not every row).
fn window(terms: &[UOp], r: &UOp) -> Option<([usize; 2], UOp)> {
    // (a signed `o`: an unsigned one wraps where `r' - b` would not)
    terms.iter().enumerate().find_map(|(hi, t)| {
        let (o, w) = lt(t)?;
        let w = w.const_int()?;
        let b = match (o.dtype.is_int() && !o.dtype.is_unsigned() && o.op == Ops::ADD, &o.src[..]) {
            (true, [x, b] | [b, x]) if is_range(x, r) && !b.toposort().contains(r) => b,
            _ => return None,
        };
        let not_negative = |u: &UOp| {
            u.op == Ops::CMPNE
                && matches!(u.src[1].const_value(), Some(ConstValue::Bool(true)))
                && lt(&u.src[0]).is_some_and(|(x, z)| x == o && z.const_int() == Some(0))
        };
        let lo = terms.iter().position(not_negative)?;
        let n = r.src[0].const_int()?;
        (0 < w && w < n).then(|| ([hi, lo], &UOp::range(UOp::const_(r.src[0].dtype, w as i64), r.axis().0, r.axis().1) - &b.cast(r.dtype)))
    })
}

/// `(a, b)` when `u` is `a < b`.
fn lt(u: &UOp) -> Option<(&UOp, &UOp)> {
    (u.op == Ops::CMPLT && u.src.len() == 2).then(|| (&u.src[0], &u.src[1]))
}

/// The terms of a conjunction: `a & (b & c)` -> `[a, b, c]`.
fn split_and(u: &UOp) -> Vec<UOp> {
    let (mut out, mut stack) = (Vec::new(), vec![u.clone()]);
    while let Some(x) = stack.pop() {
        if x.op == Ops::AND && x.dtype.is_bool() {
            stack.extend(x.src.iter().rev().cloned());
        } else {
            out.push(x);
        }
    }
    out
}

/// `e` when `t` is `r == e` (either order, `r` through exact casts, an int comparison) and `e` is free of `r`.
fn pinned(t: &UOp, r: &UOp) -> Option<UOp> {
    if t.op != Ops::CMPEQ || !t.src[0].dtype.is_int() {
        return None;
    }
    let (a, b) = (&t.src[0], &t.src[1]);
    let e = if is_range(a, r) {
        b
    } else if is_range(b, r) {
        a
    } else {
        return None;
    };
    (!e.toposort().contains(r)).then(|| e.clone())
}

/// Whether `u` is RANGE `r` through casts that hold each of its values `0..n` exactly.
fn is_range(mut u: &UOp, r: &UOp) -> bool {
    let top = r.vmax().as_i128();
    while u.op == Ops::CAST && top <= exact_up_to(u.dtype) {
        u = &u.src[0];
    }
    u == r
}

/// The largest `m` such that every integer in `[0, m]` is exact in `dt`.
fn exact_up_to(dt: DType) -> i128 {
    let mantissa = match dt.scalar {
        _ if dt.is_int() => return dt.max().as_i128(),
        Scalar::Float16 => 10,
        Scalar::BFloat16 => 7,
        Scalar::Float32 => 23,
        Scalar::Float64 | Scalar::WeakFloat => 52,
        _ => return -1,
    };
    1 << (mantissa + 1)
}

/// Substitution of `r := e` that also gates each load whose index changes with `valid` (the read may be out of
/// bounds where `valid` fails; the gate reads 0 there instead).
struct Gather {
    map: FxHashMap<UOp, UOp>,
    valid: UOp,
}

impl Gather {
    fn sub(&mut self, u: &UOp) -> UOp {
        for x in u.toposort() {
            if self.map.contains_key(&x) {
                continue;
            }
            let src: Vec<UOp> = x.src.iter().map(|s| self.map.get(s).unwrap_or(s).clone()).collect();
            let n = if x.op == Ops::INDEX && *src != *x.src {
                let gate = src.get(2).map_or(self.valid.clone(), |g| g & &self.valid);
                x.with_src([src[0].clone(), src[1].clone(), gate])
            } else {
                x.with_src(src)
            };
            self.map.insert(x, n);
        }
        self.map[u].clone()
    }
}
