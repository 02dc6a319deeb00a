//! Patterns over UOps and the matcher that applies rules. In: [`UPat`]s paired with rewrite functions. Out: a
//! [`PatternMatcher`] whose `rewrite(node)` gives the first rule's replacement. Follows tinygrad `UPat` and
//! `PatternMatcher` (rules dispatched by root op, tried in table order, first match wins).

use super::{Arg, GroupOp, OpSet, Ops, UOp};
use crate::dtype::{ConstValue, DType};
use std::panic::Location;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// How a pattern's sources match a node's sources.
#[derive(Clone, Debug)]
enum SrcPat {
    /// Any sources.
    Any,
    /// In order; `any_len`: the node may have more sources after these.
    Exact(Arc<[UPat]>, bool),
    /// Any permutation (commutative ops): the index orders to try.
    Permute(Arc<[UPat]>, Arc<[Vec<usize>]>),
    /// Every source matches this one pattern (any count).
    Repeat(Box<UPat>),
}

/// A pattern over one node and, through `src`, the nodes below it (tinygrad `UPat`).
///
/// Build with [`var`], [`cvar`], [`UPat::ops`], [`UPat::cnst`], the operators (`var("x") + 0`,
/// `var("x") * cvar("c")`: commutative ops match either source order) and builder methods.
#[derive(Clone, Debug)]
pub struct UPat {
    ops: Option<OpSet>,
    /// Bit set of `Scalar`s the node's dtype (or its element) must have; 0 for any.
    dtypes: u32,
    src: SrcPat,
    arg: Option<Arg>,
    /// For CONST patterns: the value, compared numerically (`0` matches `0.0` and `false`, as Python's `==`).
    value: Option<ConstValue>,
    name: Option<&'static str>,
    /// Where the pattern was written (its outermost builder call): the rule's location.
    loc: &'static Location<'static>,
}

/// Any node, bound to `name` (tinygrad `UPat.var`).
#[track_caller]
pub fn var(name: &'static str) -> UPat {
    UPat { name: Some(name), ..UPat::any() }
}
/// Any CONST, bound to `name` (tinygrad `UPat.cvar`).
#[track_caller]
pub fn cvar(name: &'static str) -> UPat {
    UPat::ops(Ops::CONST).named(name)
}

fn num_eq(a: ConstValue, b: ConstValue) -> bool {
    use ConstValue::*;
    match (a, b) {
        (Invalid, Invalid) => true,
        (Invalid, _) | (_, Invalid) => false,
        (Float(_), _) | (_, Float(_)) => a.as_f64() == b.as_f64(),
        _ => a.as_i128() == b.as_i128(),
    }
}

fn permutations(n: usize) -> Vec<Vec<usize>> {
    if n <= 1 {
        return vec![(0..n).collect()];
    }
    let mut out = Vec::new();
    for p in permutations(n - 1) {
        for i in 0..n {
            let mut q = p.clone();
            q.insert(i, n - 1);
            out.push(q);
        }
    }
    out.sort();
    out
}

impl UPat {
    /// Any node.
    #[track_caller]
    pub fn any() -> UPat {
        UPat { ops: None, dtypes: 0, src: SrcPat::Any, arg: None, value: None, name: None, loc: Location::caller() }
    }
    /// A node whose op is in `ops` (an op or an [`OpSet`]).
    #[track_caller]
    pub fn ops(ops: impl Into<OpSet>) -> UPat {
        UPat { ops: Some(ops.into()), ..UPat::any() }
    }
    /// A CONST equal (numerically) to `v` (tinygrad `UPat.const`).
    #[track_caller]
    pub fn cnst(v: impl Into<ConstValue>) -> UPat {
        UPat { value: Some(v.into()), ..UPat::ops(Ops::CONST) }
    }
    /// Binds the node to `name`; a name bound twice must be the same node.
    #[track_caller]
    pub fn named(mut self, name: &'static str) -> UPat {
        self.name = Some(name);
        self.loc = Location::caller();
        self
    }
    /// Restricts the dtype: the node's dtype, or its element dtype, is one of `dts`.
    #[track_caller]
    pub fn dtype(mut self, dts: &[DType]) -> UPat {
        self.dtypes = dts.iter().fold(0, |m, d| m | 1 << d.scalar as u32);
        self
    }
    /// Requires the node's arg to equal `arg`.
    #[track_caller]
    pub fn arg(mut self, arg: Arg) -> UPat {
        self.arg = Some(arg);
        self
    }
    /// Sources in order, exactly these many.
    #[track_caller]
    pub fn src(mut self, src: impl Into<Vec<UPat>>) -> UPat {
        self.src = SrcPat::Exact(src.into().into(), false);
        self
    }
    /// Sources in order; more may follow (tinygrad `allow_any_len`).
    #[track_caller]
    pub fn src_prefix(mut self, src: impl Into<Vec<UPat>>) -> UPat {
        self.src = SrcPat::Exact(src.into().into(), true);
        self
    }
    /// Sources in any order.
    ///
    /// # Panics
    /// With more than 4 sources (24 orders to try).
    #[track_caller]
    pub fn src_any_order(mut self, src: impl Into<Vec<UPat>>) -> UPat {
        let src: Vec<UPat> = src.into();
        assert!(src.len() <= 4, "UPat::src_any_order: {} sources, at most 4", src.len());
        let perms = permutations(src.len());
        self.src = SrcPat::Permute(src.into(), perms.into());
        self
    }
    /// Every source (any number) matches `p`.
    #[track_caller]
    pub fn src_all(mut self, p: UPat) -> UPat {
        self.src = SrcPat::Repeat(Box::new(p));
        self
    }
    /// The ALU op `op` over `self` and `src`; commutative ops match their sources in any order.
    #[track_caller]
    pub fn alu(self, op: Ops, src: impl IntoIterator<Item = UPat>) -> UPat {
        let all: Vec<UPat> = std::iter::once(self).chain(src).collect();
        if GroupOp::COMMUTATIVE.contains(op) {
            UPat::ops(op).src_any_order(all)
        } else {
            UPat::ops(op).src(all)
        }
    }
    /// `self < x`.
    #[track_caller]
    pub fn cmplt(self, x: impl Into<UPat>) -> UPat {
        self.alu(Ops::CMPLT, [x.into()])
    }
    /// `self != x`.
    #[track_caller]
    pub fn cmpne(self, x: impl Into<UPat>) -> UPat {
        self.alu(Ops::CMPNE, [x.into()])
    }
    /// `max(self, x)`.
    #[track_caller]
    pub fn maximum(self, x: impl Into<UPat>) -> UPat {
        self.alu(Ops::MAX, [x.into()])
    }
    /// `self ? a : b`.
    #[track_caller]
    pub fn where_(self, a: impl Into<UPat>, b: impl Into<UPat>) -> UPat {
        self.alu(Ops::WHERE, [a.into(), b.into()])
    }
    /// A CAST of `self` (to any dtype).
    #[track_caller]
    pub fn cast(self) -> UPat {
        UPat::ops(Ops::CAST).src([self])
    }
    /// A unary op of `self`.
    #[track_caller]
    pub fn unary(self, op: Ops) -> UPat {
        UPat::ops(op).src([self])
    }
    /// Bool negation as tinygrad writes it: `self != true`.
    #[track_caller]
    pub fn logical_not(self) -> UPat {
        self.cmpne(true)
    }

    /// Matches `u`, pushing bindings to `b`; for each complete match calls `k`, returning its first `Some`.
    /// On failure `b` is restored.
    fn match_with<'a>(&self, u: &'a UOp, b: &mut Binds<'a>, k: &mut Cont<'a, '_>) -> Option<UOp> {
        if self.ops.is_some_and(|o| !o.contains(u.op))
            || (self.dtypes != 0 && self.dtypes >> u.dtype.scalar as u32 & 1 == 0)
            || self.arg.as_ref().is_some_and(|a| *a != u.arg)
            || self.value.is_some_and(|v| u.const_value().is_none_or(|c| !num_eq(v, c)))
        {
            return None;
        }
        let mark = b.len;
        if let Some(name) = self.name {
            match b.get(name) {
                Some(prev) if prev != u => return None,
                Some(_) => {}
                None => b.push(name, u),
            }
        }
        let ret = match &self.src {
            SrcPat::Any => k(b),
            SrcPat::Exact(ps, any_len) => {
                let ok = if *any_len { u.src.len() >= ps.len() } else { u.src.len() == ps.len() };
                if ok {
                    match_seq(ps, &u.src, b, k)
                } else {
                    None
                }
            }
            SrcPat::Permute(ps, perms) if u.src.len() == ps.len() => perms.iter().find_map(|perm| {
                let mut srcs: [&UOp; 4] = [u; 4];
                perm.iter().zip(srcs.iter_mut()).for_each(|(&i, s)| *s = &u.src[i]);
                match_seq_ref(ps, &srcs[..ps.len()], b, k)
            }),
            SrcPat::Permute(..) => None,
            SrcPat::Repeat(p) => match_repeat(p, &u.src, b, k),
        };
        if ret.is_none() {
            b.len = mark;
        }
        ret
    }
}

/// Most names one pattern binds.
const MAX_BINDS: usize = 16;

/// The bindings of a match in progress, by reference and on the stack (no reference count touched, no allocation
/// per match).
struct Binds<'a> {
    names: [&'static str; MAX_BINDS],
    nodes: [Option<&'a UOp>; MAX_BINDS],
    len: usize,
}

impl<'a> Binds<'a> {
    fn new() -> Self {
        Binds { names: [""; MAX_BINDS], nodes: [None; MAX_BINDS], len: 0 }
    }
    fn get(&self, name: &str) -> Option<&'a UOp> {
        (0..self.len).find(|&i| self.names[i] == name).and_then(|i| self.nodes[i])
    }
    fn push(&mut self, name: &'static str, u: &'a UOp) {
        assert!(self.len < MAX_BINDS, "UPat: a pattern binds more than {MAX_BINDS} names");
        (self.names[self.len], self.nodes[self.len]) = (name, Some(u));
        self.len += 1;
    }
}

/// What to do with each complete match (the rest of the match, then the rewrite function).
type Cont<'a, 'k> = dyn FnMut(&mut Binds<'a>) -> Option<UOp> + 'k;

fn match_seq<'a>(ps: &[UPat], us: &'a [UOp], b: &mut Binds<'a>, k: &mut Cont<'a, '_>) -> Option<UOp> {
    match ps.split_first() {
        None => k(b),
        Some((p, rest)) => p.match_with(&us[0], b, &mut |b| match_seq(rest, &us[1..], b, k)),
    }
}

fn match_repeat<'a>(p: &UPat, us: &'a [UOp], b: &mut Binds<'a>, k: &mut Cont<'a, '_>) -> Option<UOp> {
    match us.split_first() {
        None => k(b),
        Some((u, rest)) => p.match_with(u, b, &mut |b| match_repeat(p, rest, b, k)),
    }
}

fn match_seq_ref<'a>(ps: &[UPat], us: &[&'a UOp], b: &mut Binds<'a>, k: &mut Cont<'a, '_>) -> Option<UOp> {
    match ps.split_first() {
        None => k(b),
        Some((p, rest)) => p.match_with(us[0], b, &mut |b| match_seq_ref(rest, &us[1..], b, k)),
    }
}

impl From<i64> for UPat {
    #[track_caller]
    fn from(v: i64) -> UPat {
        UPat::cnst(v)
    }
}
impl From<f64> for UPat {
    #[track_caller]
    fn from(v: f64) -> UPat {
        UPat::cnst(v)
    }
}
impl From<bool> for UPat {
    #[track_caller]
    /// A bool CONST (of dtype bool: `0` does not match `false` here).
    fn from(v: bool) -> UPat {
        UPat::cnst(v).dtype(&[crate::dtype::dtypes::BOOL])
    }
}

macro_rules! upat_binops {
    ($($tr:ident $m:ident $op:ident),*) => {$(
        impl<T: Into<UPat>> std::ops::$tr<T> for UPat { type Output = UPat; #[track_caller] fn $m(self, x: T) -> UPat { self.alu(Ops::$op, [x.into()]) } }
        impl std::ops::$tr<UPat> for i64 { type Output = UPat; #[track_caller] fn $m(self, x: UPat) -> UPat { UPat::from(self).alu(Ops::$op, [x]) } }
    )*};
}
// as on UOp, `/` and `%` are floor division and floor modulo
upat_binops!(Add add ADD, Mul mul MUL, Div div FLOORDIV, Rem rem FLOORMOD, BitAnd bitand AND, BitOr bitor OR, BitXor bitxor XOR, Shr shr SHR, Shl shl SHL);

/// The nodes a match bound, by name: `b["x"]`.
pub struct Bindings<'a, 'b>(&'b Binds<'a>);

impl std::ops::Index<&str> for Bindings<'_, '_> {
    type Output = UOp;
    /// # Panics
    /// If the pattern bound no such name (a bug in the rule).
    fn index(&self, name: &str) -> &UOp {
        self.get(name).unwrap_or_else(|| panic!("pattern bound no {name:?}"))
    }
}
impl Bindings<'_, '_> {
    /// The node bound to `name`, if any.
    pub fn get(&self, name: &str) -> Option<&UOp> {
        self.0.get(name)
    }
}

/// What a rewrite function may return: a node (`UOp` or `&UOp`, meaning "rewrite to this") or an `Option`.
pub trait IntoRewrite {
    /// `Some(replacement)` or `None` for no rewrite.
    fn into_rewrite(self) -> Option<UOp>;
}
impl IntoRewrite for UOp {
    fn into_rewrite(self) -> Option<UOp> {
        Some(self)
    }
}
impl IntoRewrite for &UOp {
    fn into_rewrite(self) -> Option<UOp> {
        Some(self.clone())
    }
}
impl IntoRewrite for Option<UOp> {
    fn into_rewrite(self) -> Option<UOp> {
        self
    }
}

type RewriteFn<C> = dyn Fn(&Bindings, &mut C) -> Option<UOp> + Send + Sync;

/// What a node's sources must hold for a pattern to have a chance (tinygrad's `early_reject`): checked before
/// matching, on a mask of the sources' ops, so most failing rules cost a few instructions.
#[derive(Clone, Copy, Default)]
struct Reject {
    /// Sources: exactly this many, or (with `any_len`) at least this many.
    nsrc: u8,
    any_len: bool,
    /// Op sets of which each must meet the sources' ops (one per source pattern that names ops, at most 4; 0:
    /// none).
    need: [u128; 4],
}

impl Reject {
    fn of(p: &UPat) -> Reject {
        let (ps, any_len): (&[UPat], bool) = match &p.src {
            SrcPat::Any | SrcPat::Repeat(_) => (&[], true),
            SrcPat::Exact(ps, any_len) => (ps, *any_len),
            SrcPat::Permute(ps, _) => (ps, false),
        };
        let mut need = [0; 4];
        ps.iter().filter_map(|s| s.ops).take(4).zip(&mut need).for_each(|(o, n)| *n = o.0);
        Reject { nsrc: ps.len() as u8, any_len, need }
    }
    #[inline]
    fn rejects(&self, nsrc: usize, srcmask: u128) -> bool {
        (if self.any_len { nsrc < self.nsrc as usize } else { nsrc != self.nsrc as usize })
            || self.need.iter().any(|&n| n != 0 && n & srcmask == 0)
    }
}

/// One rule: a pattern, the function that rewrites its matches, and where it was written.
pub struct Rule<C> {
    pat: UPat,
    reject: Reject,
    f: Arc<RewriteFn<C>>,
    /// Where the rule was written: named by runaway-rewrite panics and by SPEC=1 when a spec rule rejects a node.
    pub location: &'static Location<'static>,
    /// Times this rule rewrote something (counted when TRACK_MATCH_STATS is on).
    pub hits: Arc<AtomicU64>,
    /// The rule as written (the [`pm!`](crate::pm) macro captures it; "" for a rule built otherwise): what VIZ shows.
    pub text: &'static str,
}

impl<C> Clone for Rule<C> {
    fn clone(&self) -> Self {
        Rule {
            pat: self.pat.clone(),
            reject: self.reject,
            f: self.f.clone(),
            location: self.location,
            hits: self.hits.clone(),
            text: self.text,
        }
    }
}

impl<C> Rule<C> {
    /// A rule; its location is where `pat` was built (see the [`pm!`](crate::pm) macro).
    pub fn new(pat: UPat, f: impl Fn(&Bindings, &mut C) -> Option<UOp> + Send + Sync + 'static) -> Rule<C> {
        Rule { location: pat.loc, reject: Reject::of(&pat), pat, f: Arc::new(f), hits: Arc::default(), text: "" }
    }
    /// This rule with its source text (what [`pm!`](crate::pm) passes).
    pub fn with_text(mut self, text: &'static str) -> Rule<C> {
        self.text = text;
        self
    }
}

/// An ordered rule table with dispatch by root op (tinygrad `PatternMatcher`). `C` is the context rewrite
/// functions receive (`()` for none). Build once (in a `LazyLock` static); combine with `+`.
pub struct PatternMatcher<C = ()> {
    /// Unique per matcher: marks the nodes that are its fixed points.
    pub(super) id: u32,
    /// The matchers a fixed point of this one is a fixed point of, a bit per id below 64: its own, and those it
    /// was combined from with `+` (when no rule of `a + b` applies anywhere, none of `a`'s does).
    pub(super) fixes: u64,
    rules: Vec<Rule<C>>,
    /// For each op, the indices of the rules whose root can match it, in table order.
    pdict: Vec<Vec<u32>>,
}

impl<C> Clone for PatternMatcher<C> {
    fn clone(&self) -> Self {
        PatternMatcher::new(self.rules.clone())
    }
}

impl<C> PatternMatcher<C> {
    /// A matcher over `rules`, tried in order.
    pub fn new(rules: Vec<Rule<C>>) -> PatternMatcher<C> {
        let mut pdict = vec![Vec::new(); Ops::COUNT];
        for (i, r) in rules.iter().enumerate() {
            for op in r.pat.ops.unwrap_or(GroupOp::ALL).iter() {
                pdict[op as usize].push(i as u32);
            }
        }
        static NEXT_ID: AtomicU32 = AtomicU32::new(1);
        let id = NEXT_ID.fetch_add(1, Relaxed);
        PatternMatcher { id, fixes: 1u64.checked_shl(id).unwrap_or(0), rules, pdict }
    }
    /// The rules, in order.
    pub fn rules(&self) -> &[Rule<C>] {
        &self.rules
    }
    /// The first rule's rewrite of `u` that differs from `u`, and that rule's index.
    pub fn rewrite_with_rule(&self, u: &UOp, ctx: &mut C) -> Option<(UOp, usize)> {
        let srcmask = u.src.iter().fold(0u128, |m, s| m | 1 << s.op as u8);
        for &i in &self.pdict[u.op as usize] {
            let rule = &self.rules[i as usize];
            if rule.reject.rejects(u.src.len(), srcmask) {
                continue;
            }
            if let Some(n) = rule.pat.match_with(u, &mut Binds::new(), &mut |b| (rule.f)(&Bindings(b), ctx).filter(|n| n != u)) {
                if crate::helpers::TRACK_MATCH_STATS.value() > 0 {
                    rule.hits.fetch_add(1, Relaxed);
                }
                return Some((n, i as usize));
            }
        }
        None
    }
    /// The first rule's rewrite of `u`, or `None` when no rule applies.
    pub fn rewrite(&self, u: &UOp, ctx: &mut C) -> Option<UOp> {
        self.rewrite_with_rule(u, ctx).map(|(n, _)| n)
    }
}

impl<C> std::ops::Add for PatternMatcher<C> {
    type Output = PatternMatcher<C>;
    /// The rules of `self`, then those of `o`.
    fn add(self, o: PatternMatcher<C>) -> PatternMatcher<C> {
        let fixes = self.fixes | o.fixes;
        let mut pm = PatternMatcher::new(self.rules.into_iter().chain(o.rules).collect());
        pm.fixes |= fixes;
        pm
    }
}
impl<C> std::ops::Add<&PatternMatcher<C>> for &PatternMatcher<C> {
    type Output = PatternMatcher<C>;
    fn add(self, o: &PatternMatcher<C>) -> PatternMatcher<C> {
        let mut pm = PatternMatcher::new(self.rules.iter().chain(&o.rules).cloned().collect());
        pm.fixes |= self.fixes | o.fixes;
        pm
    }
}

impl PatternMatcher<()> {
    /// These context-free rules as rules of a matcher with context `C` (to combine with `+`).
    pub fn with_ctx<C: 'static>(&self) -> PatternMatcher<C> {
        let rules = self
            .rules
            .iter()
            .map(|r| {
                let f = r.f.clone();
                Rule {
                    pat: r.pat.clone(),
                    reject: r.reject,
                    f: Arc::new(move |b: &Bindings, _: &mut C| f(b, &mut ())),
                    location: r.location,
                    hits: r.hits.clone(),
                    text: r.text,
                }
            })
            .collect();
        PatternMatcher::new(rules)
    }
}

/// A [`PatternMatcher`] from one-line rules `pattern => |names| body`, where the closure's parameters are
/// names the pattern binds (each a `&UOp`) and `body` gives a `UOp`, `&UOp` or `Option<UOp>`:
///
/// ```
/// use tinygrad::{pm, uop::{var, cvar, PatternMatcher}};
/// let m: PatternMatcher = pm! {
///     var("x") + 0 => |x| x,                                   // x+0 -> x
///     (var("x") * cvar("c")) * cvar("d") => |x, c, d| x * (c * d), // (x*c)*d -> x*(c*d)
/// };
/// ```
/// With a context, start with `ctx: Type;` and use `ctx` (a `&mut Type`) in bodies.
#[macro_export]
macro_rules! pm {
    ($ctx:ident : $cty:ty ; $($pat:expr => |$($arg:ident),*| $body:expr),* $(,)?) => {
        $crate::uop::PatternMatcher::<$cty>::new(vec![$($crate::uop::Rule::new($pat, |b: &$crate::uop::Bindings, $ctx: &mut $cty| {
            let _ = &$ctx;
            $(#[allow(unused_variables)] let $arg = &b[stringify!($arg)];)*
            $crate::uop::IntoRewrite::into_rewrite($body)
        }).with_text(concat!(stringify!($pat), " => |", stringify!($($arg),*), "| ", stringify!($body)))),*])
    };
    ($($pat:expr => |$($arg:ident),*| $body:expr),* $(,)?) => { $crate::pm!(_ctx: (); $($pat => |$($arg),*| $body),*) };
}
