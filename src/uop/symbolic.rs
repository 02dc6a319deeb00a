//! Symbolic algebra: the rule tables that fold constants and simplify integer (index) expressions using
//! value bounds. In: UOp graphs. Out: equivalent, smaller graphs. Follows tinygrad 0.14 `uop/symbolic.py`
//! (`symbolic_simple`, `symbolic`) and `uop/divandmod.py`.

use super::{cvar, exec_alu, graph_rewrite, var, GroupOp, OpSet, Ops, PatternMatcher, UOp, UPat};
use crate::dtype::{can_lossless_cast, dtypes, ConstValue, DType};
use crate::pm;
use std::sync::LazyLock;
use Ops::*;

const WEAKINT: &[DType] = &[dtypes::WEAKINT];
const BOOL: &[DType] = &[dtypes::BOOL];
const INTS_BOOL: &[DType] = &[
    dtypes::BOOL,
    dtypes::WEAKINT,
    dtypes::INT8,
    dtypes::INT16,
    dtypes::INT32,
    dtypes::INT64,
    dtypes::UINT8,
    dtypes::UINT16,
    dtypes::UINT32,
    dtypes::UINT64,
];

fn gcd(a: i128, b: i128) -> i128 {
    let (mut a, mut b) = (a.unsigned_abs(), b.unsigned_abs());
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a as i128
}
fn fdiv(a: i128, b: i128) -> i128 {
    a.div_euclid(b) - if b < 0 && a.rem_euclid(b) != 0 { 1 } else { 0 }
}
fn fmod(a: i128, b: i128) -> i128 {
    a - fdiv(a, b) * b
}

/// The identity of an associative op in `dt` (tinygrad `identity_element`): 1 for MUL, `dt`'s minimum for MAX,
/// 0 otherwise. `dt` is a scalar dtype.
pub fn identity_element(op: Ops, dt: DType) -> ConstValue {
    match op {
        MUL => ConstValue::Int(1).cast(dt),
        MAX => dt.min(),
        _ => ConstValue::Int(0).cast(dt),
    }
}

/// Symbolic helpers on expressions (tinygrad `UOp.split_uop`, `const_factor`, `divides`, ...).
impl UOp {
    /// The operands of a chain of `op`: `split_uop(ADD)` of `(a+b)+c` is `[a, b, c]` (iterative).
    pub fn split_uop(&self, op: Ops) -> Vec<UOp> {
        let (mut out, mut stack) = (Vec::new(), vec![self]);
        while let Some(u) = stack.pop() {
            if u.op == op {
                stack.extend(u.src.iter().rev());
            } else {
                out.push(u.clone());
            }
        }
        out
    }
    /// Whether this value is 0 wherever `cond` fails: a LOAD whose gate has every clause of `cond`, through casts.
    pub fn gated_by(&self, cond: &UOp) -> bool {
        let mut v = self;
        while v.op == CAST {
            v = &v.src[0];
        }
        let gate = if v.op == LOAD { v.src[0].src.get(2).map(|g| g.split_uop(AND)) } else { None };
        gate.is_some_and(|g| cond.split_uop(AND).iter().all(|t| g.contains(t)))
    }
    /// The largest known integer dividing this expression (tinygrad `const_factor`).
    pub fn const_factor(&self) -> i128 {
        match self.op {
            CONST => self.const_int().unwrap_or(1),
            VECTORIZE => self.src.iter().fold(0, |g, s| gcd(g, s.const_factor())),
            ADD => gcd(self.src[0].const_factor(), self.src[1].const_factor()),
            MUL => self.src.iter().find_map(UOp::const_int).unwrap_or(1),
            _ => 1,
        }
    }
    /// `self / v` when `v` provably divides it, structurally (tinygrad `divides`).
    pub fn divides(&self, v: i128) -> Option<UOp> {
        if v == 1 {
            return Some(self.clone());
        }
        if v == 0 {
            return None;
        }
        match self.op {
            CONST => self.const_int().filter(|c| c % v == 0).map(|c| self.const_like(c / v)),
            ADD => Some(&self.src[0].divides(v)? + &self.src[1].divides(v)?),
            MUL => match self.src[0].divides(v) {
                Some(d) => Some(&d * &self.src[1]),
                None => Some(&self.src[0] * &self.src[1].divides(v)?),
            },
            _ => None,
        }
    }
    /// `(x, c)` for `x op c` with a constant `c`, else `(self, identity)` (tinygrad `pop_const`).
    pub fn pop_const(&self, op: Ops) -> (UOp, i128) {
        match (self.op == op).then(|| self.src[1].const_int()).flatten() {
            Some(c) => (self.src[0].clone(), c),
            None => (self.clone(), identity_element(op, self.dtype).as_i128()),
        }
    }
    /// `self / v` exactly, for a symbolic `v` (tinygrad `divide_exact`).
    pub fn divide_exact(&self, v: &UOp) -> Option<UOp> {
        if self == v {
            return Some(self.const_like(1));
        }
        if let Some(c) = v.const_int() {
            return self.divides(c);
        }
        match self.op {
            ADD => Some(&self.src[0].divide_exact(v)? + &self.src[1].divide_exact(v)?),
            MUL => {
                let ((fac, c), (dfac, dc)) = (self.pop_const(MUL), v.pop_const(MUL));
                let mut left = fac.split_uop(MUL);
                for f in dfac.split_uop(MUL) {
                    let i = left.iter().position(|x| *x == f)?;
                    left.remove(i);
                }
                (dc != 0 && c % dc == 0).then(|| left.iter().fold(self.const_like(c / dc), |acc, f| &acc * f))
            }
            _ => None,
        }
    }
    /// The greatest common divisor of `uops` as an expression: shared factors times the gcd of their constant
    /// factors (tinygrad `UOp.gcd`).
    pub fn gcd(uops: &[UOp]) -> UOp {
        let split: Vec<(Vec<UOp>, i128)> = uops
            .iter()
            .map(|u| {
                let f = u.const_factor();
                (u.divides(f).unwrap_or_else(|| u.clone()).split_uop(MUL), f)
            })
            .collect();
        let mut common = split[0].0.clone();
        for (terms, _) in &split[1..] {
            let mut left = terms.clone();
            common.retain(|t| left.iter().position(|x| x == t).map(|i| left.remove(i)).is_some());
        }
        let g = split.iter().fold(0, |g, (_, f)| gcd(g, *f));
        common.iter().fold(uops[0].const_like(g), |acc, f| f * &acc)
    }
    /// `self` simplified by the full [`SYMBOLIC`] rules (tinygrad `simplify`).
    pub fn simplify(&self) -> UOp {
        graph_rewrite(self, &SYMBOLIC, &mut (), "simplify")
    }
}

/// `terms` added up (`0` when empty; tinygrad `usum`).
fn usum(terms: &[UOp], like: &UOp) -> UOp {
    match terms.split_first() {
        None => like.const_like(0),
        Some((first, rest)) => rest.iter().fold(first.clone(), |acc, t| &acc + t),
    }
}

/// `c * v`, without building `v*1` or `v*0`.
fn scaled(v: &UOp, c: i128) -> Option<UOp> {
    match c {
        0 => None,
        1 => Some(v.clone()),
        _ => Some(v * c),
    }
}

fn fold_const(a: &UOp) -> Option<UOp> {
    let vals: Vec<ConstValue> = a.src.iter().map(UOp::const_value).collect::<Option<_>>()?;
    Some(a.const_like(exec_alu(a.op, a.dtype, &vals)))
}

/// `x < c` as a smaller comparison when the terms of `x` that are not multiples of `d` stay in `[0, d)`.
fn lt_folding(x: &UOp, c: i128) -> Option<UOp> {
    let (p, np): (Vec<UOp>, Vec<UOp>) = x.split_uop(ADD).into_iter().partition(|u| u.const_factor() == 1);
    if np.is_empty() {
        return None;
    }
    let d = np.iter().fold(c, |g, u| gcd(g, u.const_factor()));
    let (lo, hi) = p.iter().fold((0, 0), |(lo, hi), u| (lo + u.bounds().0, hi + u.bounds().1));
    (d > 1 && 0 <= lo && hi < d).then(|| usum(&np, x).divides(d).map(|s| s.cmplt(c / d))).flatten()
}

/// For `a0*x0 + a1*x1 + ...` with positive `ai` and `xi >= 0`: `x0 + x1 + ...` (same sign).
fn canonicalize_simplex(x: &UOp) -> Option<UOp> {
    let mut changed = false;
    let mut ret = Vec::new();
    for mut u in x.split_uop(ADD) {
        if u.op == MUL && u.src[1].const_int().is_some_and(|c| c > 0) {
            changed = true;
            u = u.src[0].clone();
        }
        if !(GroupOp::IRREDUCIBLE.contains(u.op) && u.bounds().0 >= 0) {
            return None;
        }
        ret.push(u);
    }
    changed.then(|| usum(&ret, x))
}

/// The cheap canonical operand order of commutative index ops: by op (constants last), then structure hash.
fn canonical_key(u: &UOp) -> (u8, u64) {
    (u.op as u8, u.key())
}

/// `x // y` or `x % y` (floor semantics, weakint) folded using bounds, constant factors and gcds
/// (tinygrad `fold_divmod_general`).
fn fold_divmod(d: &UOp) -> Option<UOp> {
    let (x, y, is_mod) = (&d.src[0], &d.src[1], d.op == FLOORMOD);
    let alu = |a: &UOp, b: &UOp| a.alu(d.op, &[b]);
    let (y0, y1) = y.bounds();
    if y0 <= 0 && 0 <= y1 {
        return None;
    }
    let (q0, q1) = x.floordiv(y).bounds();
    if q0 == q1 {
        return Some(if is_mod { x - &(y * q0) } else { d.const_like(q0) });
    }
    let (x_peeled, cst) = x.pop_const(ADD);
    let terms = x_peeled.split_uop(ADD);
    if let Some(c) = y.const_int().filter(|&c| c > 0) {
        // (x%(k*c))//c -> (x//c)%k
        if !is_mod && x.op == FLOORMOD {
            if let Some(k) = x.src[1].const_int().filter(|k| k % c == 0 && k / c > 0) {
                return Some(x.src[0].floordiv(y).floormod(k / c));
            }
        }
        // (a%4 + b)%2 -> (a+b)%2
        if is_mod && terms.iter().any(|u| u.op == FLOORMOD && u.src[1].divides(c).is_some()) {
            let new: Vec<UOp> = terms
                .iter()
                .map(|u| if u.op == FLOORMOD && u.src[1].divides(c).is_some() { u.src[0].clone() } else { u.clone() })
                .collect();
            return Some((&usum(&new, x) + cst).floormod(y));
        }
        let factors: Vec<i128> = terms.iter().map(UOp::const_factor).collect();
        if factors.contains(&0) {
            return None;
        }
        let bases: Vec<UOp> = terms.iter().zip(&factors).map(|(u, &f)| u.divides(f).expect("divides its const factor")).collect();
        // congruence: x is congruent mod c to a sum whose range lies within one period
        let choices: Vec<Vec<i128>> = factors
            .iter()
            .map(|&f| {
                let r = fmod(f, c);
                if r * 2 == c || terms.len() == 1 {
                    vec![r, r - c]
                } else {
                    vec![if (r - c).abs() < r.abs() { r - c } else { r }]
                }
            })
            .collect();
        let mut pick = vec![0usize; choices.len()];
        loop {
            let rems: Vec<i128> = pick.iter().zip(&choices).map(|(&i, ch)| ch[i]).collect();
            // the bounds of rem = sum(r*v) + cst%c, by interval arithmetic (as vmin/vmax would give), before building it
            let (r0, r1) = rems.iter().zip(&bases).fold((fmod(cst, c), fmod(cst, c)), |(a, b), (&r, v)| {
                let (lo, hi) = v.bounds();
                let (lo, hi) =
                    if r >= 0 { (r.saturating_mul(lo), r.saturating_mul(hi)) } else { (r.saturating_mul(hi), r.saturating_mul(lo)) };
                (a.saturating_add(lo), b.saturating_add(hi))
            });
            if fdiv(r0, c) == fdiv(r1, c) {
                if is_mod {
                    let parts: Vec<UOp> = rems.iter().zip(&bases).filter_map(|(&r, v)| scaled(v, r)).collect();
                    let rem = &usum(&parts, x) + fmod(cst, c);
                    return Some(&rem - fdiv(r0, c) * c);
                }
                let q: Vec<UOp> = factors.iter().zip(&rems).zip(&bases).filter_map(|((&f, &r), v)| scaled(v, fdiv(f - r, c))).collect();
                return Some(&usum(&q, x) + (fdiv(cst, c) + fdiv(r0, c)));
            }
            // next combination
            let Some(i) = (0..pick.len()).find(|&i| pick[i] + 1 < choices[i].len()) else { break };
            pick[i] += 1;
            pick[..i].iter_mut().for_each(|p| *p = 0);
        }
        // factor the common gcd out of the numerator
        let g = factors.iter().fold(c, |g, &f| gcd(g, f));
        if g > 1 {
            let new_x = &x_peeled.divides(g)?.simplify() + fmod(fdiv(cst, g), c / g);
            if new_x.bounds().0 >= 0 {
                return Some(if is_mod { &(new_x.floormod(c / g) * g) + fmod(cst, g) } else { &new_x.floordiv(c / g) + fdiv(cst, c) });
            }
        }
        // nest by a factor f of c: x//c -> (x//f)//(c//f), x%c -> ((x//f)%(c//f))*f + x%f
        let mut divs: Vec<i128> = terms
            .iter()
            .zip(&factors)
            .filter(|(u, f)| u.op != CONST && 1 < f.abs() && f.abs() < c && c % *f == 0)
            .map(|(_, f)| f.abs())
            .collect();
        divs.sort();
        divs.dedup();
        let mut best: Option<(usize, UOp)> = None;
        for div in divs {
            let Some(newxs) = fold_divmod(&x.floordiv(div)) else { continue };
            let r = if !is_mod {
                newxs.floordiv(c / div)
            } else {
                if x.bounds().0 < 0 || newxs.bounds().0 < 0 {
                    continue;
                }
                let mut parts: Vec<UOp> = factors.iter().zip(&bases).filter_map(|(&f, t)| scaled(t, fmod(f, div))).collect();
                if fmod(cst, div) != 0 {
                    parts.push(x.const_like(fmod(cst, div)));
                }
                let b = usum(&parts, x);
                let (b0, b1) = b.bounds();
                if !(0 <= b0 && b1 < div) {
                    continue;
                }
                &(newxs.floormod(c / div) * div) + &b
            };
            let size = r.toposort().len();
            if best.as_ref().is_none_or(|(s, _)| size < *s) {
                best = Some((size, r));
            }
        }
        if let Some((_, r)) = best {
            return Some(r);
        }
    }
    // divide numerator and denominator by their gcd
    let all = x.split_uop(ADD);
    let g = match y.const_int() {
        Some(c) => y.const_like(all.iter().fold(c, |g, u| gcd(g, u.const_factor()))),
        None => UOp::gcd(&[all.as_slice(), std::slice::from_ref(y)].concat()).simplify(),
    };
    if g.const_int().is_none_or(|c| c != 1 && c != 0) {
        if let (Some(xg), Some(yg)) = (x.divide_exact(&g), y.divide_exact(&g)) {
            let ret = alu(&xg, &yg);
            return Some(if is_mod { &ret * &g } else { ret });
        }
    }
    // (d*x + y)//d -> x + y//d
    if y0 <= 0 || x.bounds().0 < 0 {
        return None;
    }
    let (mut quo, mut rem) = (Vec::new(), Vec::new());
    for u in &all {
        if let Some(q) = u.divide_exact(y) {
            quo.push(q);
        } else if let Some(yc) = y.const_int().filter(|&yc| fmod(u.const_factor(), yc) != u.const_factor()) {
            let c = u.const_factor();
            let base = u.divides(c)?;
            rem.extend(scaled(&base, fmod(c, yc)));
            quo.push(if is_mod { u.const_like(0) } else { &base * fdiv(c, yc) });
        } else {
            rem.push(u.clone());
        }
    }
    if quo.is_empty() {
        return None;
    }
    let new_x = usum(&rem, x);
    if new_x.bounds().0 < 0 {
        return None;
    }
    Some(if is_mod { new_x.floormod(y) } else { &new_x.floordiv(y) + &usum(&quo, x) })
}

/// For a clause `x % c < t` of a load's gate: `(q, r)` with `x = c*q + r` (each term's factor split to the
/// residue nearest 0) when the gate forces `0 <= r`: a negative `r` (at least `-c`) gives `x % c = r + c >= t`.
/// Where the gate holds, then, `x % c = r` and `x // c = q`.
fn residue_split(m: &UOp, t: i128) -> Option<(UOp, UOp)> {
    let (x, c) = (&m.src[0], m.src[1].const_int().filter(|&c| c > 0 && 0 < t && t <= c)?);
    let (x_peeled, cst) = x.pop_const(ADD);
    let (mut q, mut r) = (vec![x.const_like(fdiv(cst, c))], vec![x.const_like(fmod(cst, c))]);
    let (mut r0, mut r1) = (fmod(cst, c), fmod(cst, c));
    for u in x_peeled.split_uop(ADD) {
        let f = u.const_factor();
        let base = u.divides(f)?;
        let rf = if fmod(f, c) * 2 > c { fmod(f, c) - c } else { fmod(f, c) };
        let (lo, hi) = base.bounds();
        let (lo, hi) = if rf >= 0 { (rf * lo, rf * hi) } else { (rf * hi, rf * lo) };
        (r0, r1) = (r0 + lo, r1 + hi);
        q.extend(scaled(&base, (f - rf) / c));
        r.extend(scaled(&base, rf));
    }
    (-c <= r0 && r0 < 0 && r1 < c && r0 + c >= t).then(|| (usum(&q, x), usum(&r, x)))
}

/// A gated INDEX's address with `x % c` and `x // c` folded by the gate's clauses `x % c < t` (a case of
/// tinygrad `uop_given_valid`); each such clause becomes `0 <= r & r < t`. A convolution's input gradient reads
/// its windows at `(i + (c-1)*k) % c`, which is `i - k` wherever the read is valid.
fn fold_index_given_valid(i: &UOp) -> Option<UOp> {
    let gate = i.src.get(2)?;
    let (mut map, mut clauses) = (rustc_hash::FxHashMap::default(), Vec::new());
    for cl in gate.split_uop(AND) {
        let split = (cl.op == CMPLT && cl.src[0].op == FLOORMOD).then(|| residue_split(&cl.src[0], cl.src[1].const_int()?)).flatten();
        let Some((q, r)) = split else {
            clauses.push(cl);
            continue;
        };
        let m = &cl.src[0];
        map.insert(m.src[0].floordiv(&m.src[1]), q);
        clauses.extend([r.cmplt(0).logical_not(), r.cmplt(&cl.src[1])]);
        map.insert(m.clone(), r);
    }
    if !map.is_empty() {
        let gate = clauses.into_iter().reduce(|a, b| &a & &b)?;
        return Some(i.with_src(vec![i.src[0].clone(), i.src[1].substitute(&map), gate]));
    }
    // the bounds the clauses `e < k` and `!(e < k)` put on an expression `e`: the address simplified with `e`
    // as a variable of those bounds, kept when it has fewer divisions (`e` anywhere in a division's dividend: a
    // padded panel reads `(c + 257*r) % 262397` under `c < 257`, which is `c + 257*r`)
    let mut bounds: rustc_hash::FxHashMap<UOp, (i128, i128)> = rustc_hash::FxHashMap::default();
    for cl in &clauses {
        let (lt, negated) =
            if cl.op == CMPNE && cl.src[1].const_value() == Some(ConstValue::Bool(true)) { (&cl.src[0], true) } else { (cl, false) };
        let Some(k) = (lt.op == CMPLT && lt.src[0].dtype == dtypes::WEAKINT).then(|| lt.src[1].const_int()).flatten() else { continue };
        let b = bounds.entry(lt.src[0].clone()).or_insert_with(|| lt.src[0].bounds());
        *b = if negated { (b.0.max(k), b.1) } else { (b.0, b.1.min(k - 1)) };
    }
    let divs = |u: &UOp| u.toposort().iter().filter(|u| DIVMOD.contains(u.op)).count();
    let (idx, mut n) = (i.src[1].clone(), divs(&i.src[1]));
    // (every node inside a division's dividend, walked once)
    let divs_in = idx.toposort().into_iter().filter(|u| DIVMOD.contains(u.op));
    let dividends: rustc_hash::FxHashSet<UOp> = divs_in.flat_map(|u| u.src[0].toposort()).collect();
    let mut best = None;
    for (e, (lo, hi)) in bounds {
        if (lo, hi) == e.bounds() || lo > hi || !dividends.contains(&e) {
            continue;
        }
        let v = UOp::variable(&format!("given_valid_{}", e.key()), lo, hi);
        let new = idx.substitute(&[(e.clone(), v.clone())].into_iter().collect()).simplify();
        let new = new.substitute(&[(v, e)].into_iter().collect());
        if divs(&new) < n {
            (n, best) = (divs(&new), Some(new));
        }
    }
    best.map(|idx| i.with_src(vec![i.src[0].clone(), idx, gate.clone()]))
}

fn const_gt(c: &UOp, v: i128) -> bool {
    c.const_int().is_some_and(|c| c > v)
}

/// Generic folding: identities, constant folding, bool algebra, casts and where (tinygrad `symbolic_simple`).
#[allow(clippy::erasing_op)] // `x * 0` and `x & 0` here are patterns, not arithmetic
pub static SYMBOLIC_SIMPLE: LazyLock<PatternMatcher> = LazyLock::new(|| {
    let x = || var("x");
    let int_x = || var("x").dtype(INTS_BOOL);
    let bool_x = || var("x").dtype(BOOL);
    pm! {
        UPat::ops(ADD_XOR_OR).src_any_order([x(), UPat::cnst(0)]) => |x| x,             // x+0, x^0, x|0 -> x
        UPat::ops(SHIFTS).src([x(), UPat::cnst(0)]) => |x| x,                           // x<<0, x>>0 -> x
        x() * 1 => |x| x,                                                                     // x*1 -> x
        x() / x() => |x| (x.bounds().0 > 0 || x.bounds().1 < 0).then(|| x.const_like(1)),    // x//x -> 1 (x != 0)
        x() / 1 => |x| x,                                                                     // x//1 -> x
        x() / -1 => |x| -x,                                                                   // x//-1 -> -x
        (x() ^ var("y")) ^ var("y") => |x, y| x,                                              // (x^y)^y -> x
        (UPat::any() % var("y")).named("base") % var("y") => |base, y| base,                 // (x%y)%y -> x%y
        x() % cvar("c") + (x() / cvar("c")) * cvar("c") => |x, c| x,                          // x%c + (x//c)*c -> x
        (x() / cvar("c1")) * cvar("c3") + (x() % cvar("c1")) * cvar("c2") => |x, c1, c2, c3|  // (x//c1)*c1*c2 + (x%c1)*c2 -> x*c2
            (c1.const_int().unwrap() * c2.const_int().unwrap() == c3.const_int().unwrap()).then(|| x * c2),
        (var("y") + x() % cvar("c")) + (x() / cvar("c")) * cvar("c") => |x, y, c| y + x,      // y + x%c + (x//c)*c -> y+x
        (var("y") + (x() / cvar("c")) * cvar("c")) + x() % cvar("c") => |x, y, c| y + x,      // y + (x//c)*c + x%c -> y+x
        bool_x() & cvar("c") => |x, c| if c.const_value().unwrap().as_bool() { x } else { c }, // x&true -> x, x&false -> false
        bool_x() | cvar("c") => |x, c| if c.const_value().unwrap().as_bool() { c } else { x }, // x|true -> true, x|false -> x
        bool_x().cmpne(false) => |x| x,                                                       // x != false -> x
        UPat::ops(GroupOp::IDEMPOTENT).src([x(), x()]) => |x| x,                              // x&x, x|x, max(x,x) -> x
        bool_x().logical_not().logical_not() => |x| x,                                        // !!x -> x
        bool_x().where_(true, false) => |x| x,                                                // x?true:false -> x
        bool_x().where_(false, true) => |x| x.logical_not(),                                  // x?false:true -> !x
        int_x().unary(TRUNC) => |x| x,                                                        // trunc(int) -> int
        x().cmplt(x()) => |x| UOp::const_(dtypes::BOOL, false),                               // x<x -> false
        x() % x() => |x| x.const_like(0),                                                     // x%x -> 0
        x() ^ x() => |x| x.const_like(0),                                                     // x^x -> 0
        x() & 0 => |x| x.const_like(0),                                                       // x&0 -> 0
        int_x().cmpne(int_x()) => |x| UOp::const_(dtypes::BOOL, false),                       // x!=x -> false (ints)
        x() * 0 => |x| match x.const_value() {                                                // x*0 -> 0 (nan*0, inf*0 -> nan)
            Some(ConstValue::Float(f)) if !f.is_finite() => x.const_like(f64::NAN),
            _ => x.const_like(0),
        },
        // constant folding
        UPat::ops(CAST).src([cvar("c")]).named("a") => |a, c| a.const_like(c.const_value().unwrap()),
        UPat::ops(GroupOp::UNARY).src([cvar("c")]).named("a") => |a| fold_const(a),
        UPat::ops(GroupOp::BINARY.minus(THREEFRY.into())).src([cvar("c"), cvar("d")]).named("a") => |a| fold_const(a),
        UPat::ops(GroupOp::TERNARY).src([cvar("c"), cvar("d"), cvar("e")]).named("a") => |a| fold_const(a),
        // bool MUL is AND, ADD and MAX are OR
        bool_x() * var("y").dtype(BOOL) => |x, y| x & y,
        bool_x() + var("y").dtype(BOOL) => |x, y| x | y,
        bool_x().maximum(var("y").dtype(BOOL)) => |x, y| x | y,
        // casts
        UPat::ops(CASTS).named("a") => |a| (a.dtype == a.src[0].dtype).then(|| a.src[0].clone()),  // cast to own dtype
        UPat::ops(BITCAST).src([cvar("c")]).named("a") => |a, c|                                          // bitcast of const
            (c.dtype.itemsize() == a.dtype.itemsize()).then(|| a.const_like(ConstValue::from_bits(c.const_value().unwrap().to_bits(c.dtype), a.dtype))),
        x().cast().named("a").cast().named("b") => |x, a, b| (x.dtype == b.dtype && can_lossless_cast(b.dtype, a.dtype)).then(|| x.clone()),
        x().cast().named("a").cast().named("b") => |x, a, b| can_lossless_cast(x.dtype, a.dtype).then(|| x.cast(b.dtype)),
        UPat::ops(CAST).src([x()]).dtype(BOOL) => |x| x.cmpne(0),                            // bool(x) -> x != 0
        // gated accesses whose gate is a constant (a lane of an upcast axis: a stack's row picks one buffer)
        UPat::ops(INDEX).named("i") => |i| (i.src.get(2).and_then(UOp::const_value) == Some(ConstValue::Bool(true))).then(|| i.with_src(i.src[..2].to_vec())),
        UPat::ops(LOAD).named("l") => |l| (l.dtype.count == 1 && l.src[0].src.get(2).and_then(UOp::const_value) == Some(ConstValue::Bool(false))).then(|| l.const_like(0)),
        // where
        UPat::any().where_(var("v"), var("v")) => |v| v,                                      // c?v:v -> v
        cvar("g").where_(var("a"), var("b")) => |g, a, b| if g.const_value().unwrap().as_bool() { a } else { b },
        var("a").where_(var("b").where_(var("c"), var("d")), var("d")) => |a, b, c, d| (a & b).where_(c, d),
        var("a").where_(var("c"), var("b").where_(var("c"), var("d"))) => |a, b, c, d| (a | b).where_(c, d),
    }
});

const ADD_XOR_OR: OpSet = OpSet::of(&[ADD, XOR, OR]);
const SHIFTS: OpSet = OpSet::of(&[SHL, SHR]);
const CASTS: OpSet = OpSet::of(&[CAST, BITCAST]);
const FOLD_BY_BOUNDS: OpSet = OpSet::of(&[CMPLT, CMPNE, FLOORDIV, FLOORMOD, DEFINE_VAR, SPECIAL]);

/// Orders the operands of commutative index ops canonically (constants last) so that equal sums meet
/// (tinygrad `commutative`).
static COMMUTATIVE: LazyLock<PatternMatcher> = LazyLock::new(|| {
    pm! {
        UPat::ops(GroupOp::COMMUTATIVE).dtype(WEAKINT).named("x") => |x|
            (canonical_key(&x.src[1]) < canonical_key(&x.src[0])).then(|| x.with_src([x.src[1].clone(), x.src[0].clone()])),
    }
});

/// Rules that need deeper matches or bounds: term collection, comparison folding, div/mod folding (tinygrad
/// `symbolic` minus `symbolic_simple`, with `div_and_mod_symbolic`).
static SYMBOLIC_EXTRA: LazyLock<PatternMatcher> = LazyLock::new(|| {
    let x = || var("x");
    let y = || var("y");
    let wx = || var("x").dtype(WEAKINT);
    pm! {
        // bool algebra
        x().dtype(BOOL) | x().logical_not() => |x| x.const_like(true),                       // x|!x -> true
        // combine terms
        x() * cvar("c0") + x() * cvar("c1") => |x, c0, c1| x * (c0 + c1),                    // x*c0 + x*c1 -> x*(c0+c1)
        (y() + x() * cvar("c0")) + x() * cvar("c1") => |x, y, c0, c1| y + &(x * (c0 + c1)),
        x() + x() * cvar("c") => |x, c| x * (c + 1),                                         // x + x*c -> x*(c+1)
        (y() + x()) + x() * cvar("c") => |x, y, c| y + &(x * (c + 1)),
        (y() + x() * cvar("c")) + x() => |x, y, c| y + &(x * (c + 1)),
        x() + x() => |x| x * 2,                                                              // x+x -> x*2
        (y() + x()) + x() => |x, y| y + &(x * 2),
        -1 * (x() + cvar("c")) => |x, c| &(-x) + &(-c),                                      // -(x+c) -> -x + -c
        cvar("y") * (wx() + cvar("c")) => |x, y, c| &(y * x) + &(y * c),                     // y*(x+c) -> y*x + y*c
        // x * 1/(1+x) -> 1 - 1/(1+x): a sigmoid's gradient stays finite where exp2 overflows (tinygrad `sym`)
        x() * (x() + 1).alu(RECIPROCAL, []).named("d") => |x, d| 1 - d,
        x() * ((x() + 1).alu(RECIPROCAL, []).named("d") * y()) => |x, y, d| y * (1 - d),
        x() * ((x() + 1).alu(RECIPROCAL, []).named("d") + y()) => |x, y, d| &(1 - d) + &(x * y),
        x().alu(POW, [cvar("c")]) => |x, c| simplify_pow(x, c),                            // x**3 -> x*x*x
        // where
        var("c").dtype(BOOL).logical_not().where_(var("t"), var("f")) => |c, t, f| c.where_(f, t),   // !c?t:f -> c?f:t
        UPat::ops(GroupOp::BINARY).src([var("c").where_(var("t"), var("f")), var("c").where_(var("tt"), var("ff"))]).named("a") =>
            |a, c, t, f, tt, ff| ((t.op == CONST && tt.op == CONST) || (f.op == CONST && ff.op == CONST))
                .then(|| c.where_(t.alu(a.op, &[tt]), f.alu(a.op, &[ff]))),
        var("c").where_(var("t"), 0) + var("c").where_(0, var("f")) => |c, t, f| c.where_(t, f),
        // bounds: an expression with vmin == vmax is that constant
        UPat::ops(FOLD_BY_BOUNDS).named("x") => |x| (x.vmin() == x.vmax()).then(|| x.const_like(x.vmin())),
        // max
        cvar("a").cmplt(var("b")).where_(var("b"), cvar("c")) => |a, b, c| (a.const_value() == c.const_value()).then(|| a.maximum(b)),
        var("a").cmplt(cvar("b")).where_(cvar("c"), var("a")) => |a, b, c| (b.const_value() == c.const_value()).then(|| a.maximum(b)),
        x().maximum(y()) => |x, y| {                                                          // max by bounds
            let ((x0, x1), (y0, y1)) = (x.bounds(), y.bounds());
            if x.dtype.is_float() { None } else if x0 >= y1 { Some(x.clone()) } else if x1 <= y0 { Some(y.clone()) } else { None }
        },
        // two-stage ALU folding: (x op c1) op c2 -> x op (c1 op c2)
        UPat::ops(ADD).src_any_order([UPat::ops(ADD).src_any_order([x(), cvar("c1")]), cvar("c2")]) => |x, c1, c2| x + (c1 + c2),
        UPat::ops(MUL).src_any_order([UPat::ops(MUL).src_any_order([x(), cvar("c1")]), cvar("c2")]) => |x, c1, c2| x * (c1 * c2),
        UPat::ops(AND).src_any_order([UPat::ops(AND).src_any_order([x(), cvar("c1")]), cvar("c2")]) => |x, c1, c2| x & (c1 & c2),
        UPat::ops(OR).src_any_order([UPat::ops(OR).src_any_order([x(), cvar("c1")]), cvar("c2")]) => |x, c1, c2| x | (c1 | c2),
        UPat::ops(MAX).src_any_order([UPat::ops(MAX).src_any_order([x(), cvar("c1")]), cvar("c2")]) => |x, c1, c2| x.maximum(c1.maximum(c2)),
        (x() / cvar("c1")) / cvar("c2") => |x, c1, c2| const_gt(c2, 0).then(|| x / (c1 * c2)),   // (x//c1)//c2 -> x//(c1*c2)
        // comparisons
        (cvar("c0") + wx()).cmplt(cvar("c1")) => |x, c0, c1| x.cmplt(c1 - c0),               // x+c0 < c1 -> x < c1-c0
        (cvar("c0") * wx()).cmplt(cvar("c1")) => |x, c0, c1| {                               // c0*x < c1 -> sign(c0)*x < ceil(c1/|c0|)
            let (c0, c1) = (c0.const_int().unwrap(), c1.const_int().unwrap());
            (c0.abs() > 1).then(|| (if c0 > 0 { x.clone() } else { -x }).cmplt(-fdiv(-c1, c0.abs())))
        },
        (wx() / cvar("d")).cmplt(cvar("c")) => |x, d, c| {                                   // x//d < c -> x < c*d (d>0)
            let (d, c) = (d.const_int().unwrap(), c.const_int().unwrap());
            if d > 0 { Some(x.cmplt(c * d)) } else if d < 0 { Some(x.const_like(c * d).cmplt(x)) } else { None }
        },
        // move constants to the end of sums and products
        (x() + cvar("c1")) + y() => |x, c1, y| (y.op != CONST).then(|| &(x + y) + c1),       // (x+c1)+y -> (x+y)+c1
        (x() * cvar("c1")) * y() => |x, c1, y| (y.op != CONST).then(|| &(x * y) * c1),       // (x*c1)*y -> (x*y)*c1
        wx().cmplt(cvar("c")) => |x, c| const_gt(c, 0).then(|| lt_folding(x, c.const_int().unwrap())).flatten(),
        (wx() * -1).cmplt(var("y") * -1) => |x, y| y.cmplt(x),                                // -x < -y -> y < x
        wx().cmplt(1).cmpne(true) => |x| canonicalize_simplex(x).map(|n| n.cmplt(1).cmpne(true)),
        // ranges
        UPat::ops(RANGE).src([UPat::cnst(1)]).named("r") => |r| r.const_like(0),             // a loop of 1 is index 0
        UPat::ops(RANGE).src([var("end")]).named("r") % var("end") => |r, end| r,            // r % end -> r
        UPat::ops(RANGE).src([var("end")]).named("r") / var("end") => |r, end| r.const_like(0), // r // end -> 0
        // div and mod
        (x() / cvar("c") + cvar("a")) / cvar("d") => |x, c, a, d|                             // (x//c+a)//d -> (x+a*c)//(c*d)
            (const_gt(c, 0) && const_gt(d, 0)).then(|| (x + &(a * c)) / (c * d)),
        UPat::ops(DIVMOD).src([wx() + cvar("c"), cvar("d")]).named("n") => |n, x, c, d| {  // (x+c)//d -> (x+c%d)//d + c//d
            let (c, d) = (c.const_int().unwrap(), d.const_int().unwrap());
            if d == 0 || fmod(c, d) == c { return None; }
            Some(if n.op == FLOORDIV { &((x + fmod(c, d)) / d) + fdiv(c, d) } else { (x + fmod(c, d)) % d })
        },
        UPat::ops(DIVMOD).dtype(WEAKINT).named("d") => |d| fold_divmod(d),
        UPat::ops(INDEX).named("i") => |i| fold_index_given_valid(i),
    }
});
const DIVMOD: OpSet = OpSet::of(&[FLOORDIV, FLOORMOD]);

/// `x ** c` for a constant `c` of at most 1024 in size as multiplications, and for a float `x` a reciprocal and a
/// square root (tinygrad `simplify_pow`): Gemma's GELU takes `x ** 3` as two multiplies, where C's `powf` on each
/// lane took 17 us a layer. Other exponents stay POW.
fn simplify_pow(x: &UOp, c: &UOp) -> Option<UOp> {
    fn times(x: &UOp, n: u32) -> UOp {
        match n {
            0 => x.const_like(1),
            1 => x.clone(),
            _ => {
                let y = times(x, n / 2);
                let y2 = y.alu(MUL, &[&y]);
                if n % 2 == 1 {
                    y2.alu(MUL, &[x])
                } else {
                    y2
                }
            }
        }
    }
    let c = c.const_value()?.as_f64();
    let float = x.dtype.is_float();
    match c {
        _ if c.is_nan() || c.abs() > 1024.0 => None,
        _ if c < 0.0 => (float && (-c).fract() % 0.5 == 0.0).then(|| x.alu(RECIPROCAL, &[]).alu(POW, &[&x.const_like(-c)])),
        _ if c.fract() == 0.0 => Some(times(x, c as u32)),
        _ if c.fract() == 0.5 && float => Some(times(x, c as u32).alu(MUL, &[&x.alu(SQRT, &[])])),
        _ => None,
    }
}

/// All symbolic rules (tinygrad `symbolic`): [`SYMBOLIC_SIMPLE`], canonical operand order, then the rest.
pub static SYMBOLIC: LazyLock<PatternMatcher> = LazyLock::new(|| &(&*SYMBOLIC_SIMPLE + &*COMMUTATIVE) + &*SYMBOLIC_EXTRA);
