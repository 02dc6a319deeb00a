//! The IR. In: nothing (every later stage builds UOps). Out: [`UOp`], an immutable, hash-consed node
//! (`op`, `dtype`, `src`, `arg`, `tag`), the pattern language ([`UPat`], [`PatternMatcher`],
//! [`graph_rewrite`]) and the symbolic algebra that simplifies index math. Follows tinygrad 0.14 `uop/`.

mod alu;
mod intern;
mod ops;
mod opt;
mod render;
mod rewrite;
mod shape;
pub mod spec;
pub mod symbolic;
pub mod track;
mod upat;

pub use alu::exec_alu;
pub use intern::{interned_count, multi_made};
pub use ops::{GroupOp, OpSet, Ops};
pub use opt::{Opt, OptOps};
pub use rewrite::{graph_rewrite, graph_rewrite_top_down};
pub use shape::{margs, reshape_groups, Sint};
pub use upat::{cvar, var, Bindings, IntoRewrite, PatternMatcher, Rule, UPat};

use crate::dtype::{dtypes, least_upper_dtype, ConstValue, DType};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::sync::{Arc, OnceLock};

/// A node's payload beyond op, dtype and sources.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub enum Arg {
    /// Nothing.
    #[default]
    None,
    /// The value of a CONST.
    Const(ConstValue),
    /// A small integer: a DEFINE_GLOBAL slot, a GEP lane, a DEFINE_REG id.
    Int(i64),
    /// A RANGE: its axis id (unique in a kernel; loops of one kind nest by id) and what kind of axis it is.
    Range(i64, AxisType),
    /// A list of integers: shapes, permutations, axes.
    Ints(Arc<[i64]>),
    /// A movement op's dims where some are symbolic (RESHAPE, EXPAND: one per dim; SHRINK: begin and end per dim).
    Sints(Arc<[Sint]>),
    /// A DEFINE_VAR: a named integer in `[min, max]`.
    Var { name: Arc<str>, min: i128, max: i128 },
    /// A name: DEVICE, SPECIAL, CUSTOM format strings.
    Str(Arc<str>),
    /// An op: the reduce op of REDUCE.
    Op(Ops),
    /// REDUCE_AXIS: the reduce op and the axes it reduces.
    ReduceAxis(Ops, Arc<[usize]>),
    /// BUFFER: which buffer (its memory is the runtime's business).
    Buffer(Arc<BufferInfo>),
}

/// What a kernel axis (a RANGE) is for (tinygrad `AxisType`). Opts change an axis's type: THREAD splits it over
/// cores, UPCAST/UNROLL turn it into lanes of one iteration, LOCAL/GROUP put it in a GPU workgroup.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AxisType {
    /// A GPU grid dimension.
    Global,
    /// Split over CPU cores: the launcher hands each core a part of it.
    Thread,
    /// A GPU workgroup dimension.
    Local,
    /// A plain output loop.
    Loop,
    /// Output lanes computed in one iteration (vector lanes or unrolled copies).
    Upcast,
    /// A reduction split over a GPU workgroup, combined through shared memory.
    GroupReduce,
    /// A reduction loop.
    Reduce,
    /// Reduction lanes computed in one iteration.
    Unroll,
    /// An output loop run inside the reduction loops, its accumulators in memory (a matrix-vector product's column
    /// tiles under its rows: each row a stream read once; OpenBLAS's `gemv_n`). Not in tinygrad.
    Inner,
}

impl AxisType {
    /// Position of this kind in a kernel's axis order: outputs first (grid, threads, workgroup, loops, upcasts),
    /// then reductions (grouped, looped, unrolled).
    pub fn order(self) -> u8 {
        self as u8
    }
    /// Whether the axis is reduced over.
    pub fn is_reduce(self) -> bool {
        matches!(self, AxisType::GroupReduce | AxisType::Reduce | AxisType::Unroll)
    }
    /// The color of this kind in kernel names (tinygrad's `axis_colors`).
    pub fn color(self) -> &'static str {
        match self {
            AxisType::Global | AxisType::Thread => "blue",
            AxisType::Local => "cyan",
            AxisType::Loop => "WHITE",
            AxisType::Upcast => "yellow",
            AxisType::GroupReduce => "green",
            AxisType::Reduce => "red",
            AxisType::Unroll => "magenta",
            AxisType::Inner => "BLUE",
        }
    }
}

/// A device buffer as the IR sees it: identity, element count and device. The runtime attaches the memory
/// (opaque here) on first use, copying in [`BufferInfo::init`] if set; it is freed when the last BUFFER node
/// holding this drops.
pub struct BufferInfo {
    /// Unique per buffer.
    pub id: u64,
    /// Number of elements.
    pub size: usize,
    /// Device name (`CPU`, ...).
    pub device: Arc<str>,
    /// The device memory, set by the runtime when first needed.
    pub mem: OnceLock<Box<dyn std::any::Any + Send + Sync>>,
    /// Host bytes the memory starts with (a tensor made from host data), taken when the memory is allocated:
    /// creating a tensor allocates nothing on the device, so allocation errors surface at realize. The lock
    /// also makes first use happen once when several threads reach it together.
    /// The bytes may be shared (a slice of a memory-mapped file): on a device whose kernels read host memory the
    /// buffer may be those bytes themselves, read-only ([`crate::runtime::Allocator::borrow`]).
    pub init: parking_lot::Mutex<Option<bytes::Bytes>>,
    /// Whether `init` may become the memory itself, read-only (a tensor made by `Tensor::from_blob`).
    pub borrow: bool,
}

impl BufferInfo {
    /// A new buffer identity of `size` elements on `device`, without memory yet.
    pub fn new(size: usize, device: &str) -> Arc<BufferInfo> {
        BufferInfo::with_init(size, device, None, false)
    }

    /// A new buffer identity of `size` elements on `device` whose memory, when allocated, starts as `init`
    /// (which the runtime checks holds at least the buffer's bytes), or, where `borrow` and the device allows, is.
    pub fn with_init(size: usize, device: &str, init: Option<bytes::Bytes>, borrow: bool) -> Arc<BufferInfo> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        Arc::new(BufferInfo {
            id: NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            size,
            device: device.into(),
            mem: OnceLock::new(),
            init: parking_lot::Mutex::new(init),
            borrow,
        })
    }
}
impl PartialEq for BufferInfo {
    fn eq(&self, o: &Self) -> bool {
        self.id == o.id
    }
}
impl Eq for BufferInfo {}
impl Hash for BufferInfo {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.id.hash(h)
    }
}
impl fmt::Debug for BufferInfo {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "Buffer(id={}, size={}, {})", self.id, self.size, self.device)
    }
}

/// The fields of a node, reached through [`UOp`]'s `Deref`.
pub struct UOpInner {
    /// The operation.
    pub op: Ops,
    /// The value's dtype (`void` for effects such as STORE and SINK).
    pub dtype: DType,
    /// Sources, in order.
    pub src: Box<[UOp]>,
    /// Payload.
    pub arg: Arg,
    /// A marker that rewrites can set to tell otherwise identical nodes apart.
    pub tag: Option<u32>,
    hash: u64,
    minmax: OnceLock<(ConstValue, ConstValue)>,
    shape: OnceLock<Option<shape::Shape>>,
    /// The context-free matchers this node is a fixed point of, a bit per matcher id below 64, so rewrites skip
    /// it (one node meets several matchers in turn: symbolic, then reduce collapse, then symbolic again).
    fixed: std::sync::atomic::AtomicU64,
}

/// A handle to an immutable, hash-consed IR node (tinygrad `UOp`).
///
/// Building the same `(op, dtype, src, arg, tag)` twice returns the same node, so equality and hashing are by
/// pointer: O(1), and rewrites memoize on nodes. Cloning is an `Arc` increment; a node is freed (and leaves
/// the interner) when its last handle drops, without recursion however deep the graph.
#[derive(Clone)]
pub struct UOp(pub(crate) Arc<UOpInner>);

impl Deref for UOp {
    type Target = UOpInner;
    #[inline]
    fn deref(&self) -> &UOpInner {
        &self.0
    }
}
impl PartialEq for UOp {
    #[inline]
    fn eq(&self, o: &UOp) -> bool {
        Arc::ptr_eq(&self.0, &o.0)
    }
}
impl Eq for UOp {}
impl Hash for UOp {
    #[inline]
    fn hash<H: Hasher>(&self, h: &mut H) {
        h.write_u64(self.0.hash)
    }
}
impl PartialOrd for UOp {
    fn partial_cmp(&self, o: &UOp) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
/// A total order that is stable across runs (by structural hash, then address): for canonical operand order.
impl Ord for UOp {
    fn cmp(&self, o: &UOp) -> std::cmp::Ordering {
        (self.0.hash, Arc::as_ptr(&self.0)).cmp(&(o.0.hash, Arc::as_ptr(&o.0)))
    }
}

impl UOp {
    /// The node `(op, dtype, src, arg)`, shared with any equal node alive.
    pub fn new(op: Ops, dtype: DType, src: impl Into<Box<[UOp]>>, arg: Arg) -> UOp {
        intern::intern(op, dtype, src.into(), arg, None)
    }
    /// This node with some fields replaced (tinygrad `replace`); returns `self` when nothing changes.
    pub fn replace(&self, op: Ops, dtype: DType, src: impl Into<Box<[UOp]>>, arg: Arg, tag: Option<u32>) -> UOp {
        intern::intern(op, dtype, src.into(), arg, tag)
    }
    /// This node with other sources.
    pub fn with_src(&self, src: impl Into<Box<[UOp]>>) -> UOp {
        let src = src.into();
        if *src == *self.src {
            return self.clone();
        }
        intern::intern(self.op, self.dtype, src, self.arg.clone(), self.tag)
    }
    /// This node with another tag.
    pub fn with_tag(&self, tag: Option<u32>) -> UOp {
        intern::intern(self.op, self.dtype, self.src.clone(), self.arg.clone(), tag)
    }
    /// The structural hash, stable across runs (a key for caches).
    pub fn key(&self) -> u64 {
        self.0.hash
    }

    /// A CONST of `dtype` holding `v` converted to it with C semantics (tinygrad `UOp.const`).
    pub fn const_(dtype: DType, v: impl Into<ConstValue>) -> UOp {
        UOp::new(Ops::CONST, dtype, [], Arg::Const(v.into().cast(dtype)))
    }
    /// A CONST of this node's dtype.
    pub fn const_like(&self, v: impl Into<ConstValue>) -> UOp {
        UOp::const_(self.dtype, v)
    }
    /// A symbolic integer `name` in `[min, max]` (tinygrad `Variable`), of dtype `weakint`.
    ///
    /// # Panics
    /// If `min > max`.
    pub fn variable(name: &str, min: i128, max: i128) -> UOp {
        assert!(min <= max, "Variable {name}: min {min} > max {max}");
        let ident = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        assert!(ident, "Variable {name:?}: the name must be an identifier (letters, digits, _): kernels declare it");
        UOp::new(Ops::DEFINE_VAR, dtypes::WEAKINT, [], Arg::Var { name: name.into(), min, max })
    }
    /// This variable bound to `val` (tinygrad `bind`).
    ///
    /// # Panics
    /// If `self` is not a DEFINE_VAR or `val` is out of its range.
    pub fn bind(&self, val: i128) -> UOp {
        let Arg::Var { name, min, max } = &self.arg else { panic!("bind: {} is not a Variable", self.op) };
        assert!(*min <= val && val <= *max, "bind: {val} not in range [{min}, {max}] of {name}");
        UOp::new(Ops::BIND, self.dtype, [self.clone(), self.const_like(val)], Arg::None)
    }
    /// A RANGE over `[0, size)` with axis id `id` of kind `kind` (dtype `weakint`).
    pub fn range(size: UOp, id: i64, kind: AxisType) -> UOp {
        UOp::new(Ops::RANGE, dtypes::WEAKINT, [size], Arg::Range(id, kind))
    }
    /// A RANGE's axis id and kind.
    ///
    /// # Panics
    /// If `self` is not a RANGE.
    pub fn axis(&self) -> (i64, AxisType) {
        match self.arg {
            Arg::Range(id, kind) => (id, kind),
            _ => panic!("axis: {} is not a RANGE", self.op),
        }
    }
    /// A SINK of `srcs`.
    pub fn sink(srcs: impl Into<Box<[UOp]>>) -> UOp {
        UOp::new(Ops::SINK, dtypes::VOID, srcs, Arg::None)
    }
    /// The ALU op `op` of `self` and `src`. The dtype is bool for comparisons, else the least upper dtype of the
    /// value operands (WHERE's condition excluded).
    ///
    /// # Panics
    /// If WHERE's condition is not bool.
    pub fn alu(&self, op: Ops, src: &[&UOp]) -> UOp {
        let all: Box<[UOp]> = std::iter::once(self).chain(src.iter().copied()).cloned().collect();
        let dtype = if GroupOp::COMPARISON.contains(op) {
            dtypes::BOOL.vec(self.dtype.count)
        } else {
            let vals = if op == Ops::WHERE {
                assert!(self.dtype.scalar().is_bool(), "WHERE: condition must be bool, got {}", self.dtype);
                &all[1..]
            } else if matches!(op, Ops::SHL | Ops::SHR) {
                &all[..1]
            } else {
                &all[..]
            };
            if vals.iter().all(|s| s.dtype == vals[0].dtype) {
                vals[0].dtype
            } else {
                least_upper_dtype(&vals.iter().map(|s| s.dtype).collect::<Vec<_>>()).vec(vals[0].dtype.count)
            }
        };
        UOp::new(op, dtype, all, Arg::None)
    }
    /// `self` converted to `dtype` (no node when it already is).
    pub fn cast(&self, dtype: DType) -> UOp {
        if self.dtype == dtype {
            return self.clone();
        }
        UOp::new(Ops::CAST, dtype, [self.clone()], Arg::None)
    }
    /// `self`'s bits read as `dtype` (same item size).
    pub fn bitcast(&self, dtype: DType) -> UOp {
        UOp::new(Ops::BITCAST, dtype, [self.clone()], Arg::None)
    }
    /// `cond ? a : b` with `self` as the condition.
    pub fn where_(&self, a: impl IntoSrc, b: impl IntoSrc) -> UOp {
        let a = a.into_src(self);
        let b = b.into_src(&a);
        let a = if a.op == Ops::CONST && b.op != Ops::CONST { a.cast_const(b.dtype) } else { a };
        self.alu(Ops::WHERE, &[&a, &b])
    }
    fn cast_const(&self, dtype: DType) -> UOp {
        match &self.arg {
            Arg::Const(v) if self.op == Ops::CONST => UOp::const_(dtype, *v),
            _ => self.clone(),
        }
    }
    fn binop(&self, op: Ops, x: impl IntoSrc) -> UOp {
        let x = x.into_src(self);
        self.alu(op, &[&x])
    }
    /// `self < x`.
    pub fn cmplt(&self, x: impl IntoSrc) -> UOp {
        self.binop(Ops::CMPLT, x)
    }
    /// `self != x`.
    pub fn cmpne(&self, x: impl IntoSrc) -> UOp {
        self.binop(Ops::CMPNE, x)
    }
    /// `self == x`.
    pub fn cmpeq(&self, x: impl IntoSrc) -> UOp {
        self.binop(Ops::CMPEQ, x)
    }
    /// `max(self, x)`.
    pub fn maximum(&self, x: impl IntoSrc) -> UOp {
        self.binop(Ops::MAX, x)
    }
    /// `min(self, x)`, as `-max(-self, -x)`.
    pub fn minimum(&self, x: impl IntoSrc) -> UOp {
        let x = x.into_src(self);
        -((-self).maximum(-&x))
    }
    /// Floor division (tinygrad `//` on ints: FLOORDIV).
    pub fn floordiv(&self, x: impl IntoSrc) -> UOp {
        self.binop(Ops::FLOORDIV, x)
    }
    /// Floor modulo (tinygrad `%` on ints: FLOORMOD; the sign follows the divisor).
    pub fn floormod(&self, x: impl IntoSrc) -> UOp {
        self.binop(Ops::FLOORMOD, x)
    }
    /// C division, truncating toward zero (CDIV).
    pub fn cdiv(&self, x: impl IntoSrc) -> UOp {
        self.binop(Ops::CDIV, x)
    }
    /// C remainder, with the sign of the dividend (CMOD).
    pub fn cmod(&self, x: impl IntoSrc) -> UOp {
        self.binop(Ops::CMOD, x)
    }
    /// Bool negation, as `self != true`.
    pub fn logical_not(&self) -> UOp {
        self.cmpne(true)
    }
    /// `self << x`.
    pub fn shl(&self, x: impl IntoSrc) -> UOp {
        self.binop(Ops::SHL, x)
    }
    /// `self >> x`.
    pub fn shr(&self, x: impl IntoSrc) -> UOp {
        self.binop(Ops::SHR, x)
    }
    /// A unary ALU op (EXP2, LOG2, SIN, SQRT, RECIPROCAL, NEG, TRUNC).
    pub fn unary(&self, op: Ops) -> UOp {
        UOp::new(op, self.dtype, [self.clone()], Arg::None)
    }

    /// The CONST value, if this is a CONST.
    pub fn const_value(&self) -> Option<ConstValue> {
        match (&self.op, &self.arg) {
            (Ops::CONST, Arg::Const(v)) => Some(*v),
            _ => None,
        }
    }
    /// The integer of an int CONST.
    pub fn const_int(&self) -> Option<i128> {
        self.const_value().and_then(ConstValue::int)
    }

    /// The nodes reachable from `self`, each after all its sources (iterative: no recursion limit).
    pub fn toposort(&self) -> Vec<UOp> {
        let mut seen = rustc_hash::FxHashSet::default();
        let (mut out, mut stack) = (Vec::new(), vec![(self, false)]);
        while let Some((u, done)) = stack.pop() {
            if done {
                out.push(u.clone());
            } else if seen.insert(Arc::as_ptr(&u.0)) {
                stack.push((u, true));
                stack.extend(u.src.iter().rev().map(|s| (s, false)));
            }
        }
        out
    }
    /// This graph with each key of `map` replaced by its value (tinygrad `substitute`), rebuilt bottom-up
    /// without recursion; nodes below no key are shared, not copied.
    pub fn substitute(&self, map: &rustc_hash::FxHashMap<UOp, UOp>) -> UOp {
        // only nodes above a key are rebuilt (and remembered); the rest are themselves
        let mut new: rustc_hash::FxHashMap<UOp, UOp> = map.clone();
        for u in self.toposort() {
            if !new.contains_key(&u) && u.src.iter().any(|s| new.contains_key(s)) {
                let n = u.with_src(u.src.iter().map(|s| new.get(s).unwrap_or(s).clone()).collect::<Vec<_>>());
                new.insert(u, n);
            }
        }
        new.get(self).unwrap_or(self).clone()
    }
    /// The DEFINE_VARs this graph depends on, sorted by name (tinygrad `variables`).
    pub fn variables(&self) -> Vec<UOp> {
        let mut vars: Vec<UOp> = self.toposort().into_iter().filter(|u| u.op == Ops::DEFINE_VAR).collect();
        vars.sort_by(|a, b| a.var_name().cmp(b.var_name()));
        vars
    }
    /// A kernel-level REDUCE's values and its ranges. After expand, a reduction over unrolled lanes lists its copies
    /// first (their count in `tag`), each added to the accumulator in turn (tinygrad `reduce_to_acc`'s order), so
    /// unrolling a reduction never changes its rounding; before, one value.
    pub fn reduce_parts(&self) -> (&[UOp], &[UOp]) {
        self.src.split_at(self.tag.map_or(1, |k| k as usize))
    }
    /// The name of a DEFINE_VAR (or of the variable a BIND binds); "" otherwise.
    pub fn var_name(&self) -> &str {
        match (&self.arg, self.op) {
            (Arg::Var { name, .. }, _) => name,
            (_, Ops::BIND) => self.src[0].var_name(),
            _ => "",
        }
    }

    /// The smallest value this expression can take (tinygrad `vmin`), computed once per node.
    pub fn vmin(&self) -> ConstValue {
        self.min_max().0
    }
    /// The largest value this expression can take (tinygrad `vmax`).
    pub fn vmax(&self) -> ConstValue {
        self.min_max().1
    }
    /// `(vmin, vmax)` as integers (bools as 0/1, floats truncated).
    pub fn bounds(&self) -> (i128, i128) {
        let (a, b) = self.min_max();
        (a.as_i128(), b.as_i128())
    }
    /// `(vmin, vmax)`: computed for every node below that lacks it, sources first, without recursion.
    pub fn min_max(&self) -> (ConstValue, ConstValue) {
        if let Some(v) = self.minmax.get() {
            return *v;
        }
        let mut stack = vec![(self.clone(), false)];
        while let Some((u, ready)) = stack.pop() {
            if u.minmax.get().is_some() {
                continue;
            }
            if ready || !alu::minmax_needs_src(u.op) {
                let v = alu::compute_min_max(&u);
                let _ = u.minmax.set(v);
            } else {
                stack.push((u.clone(), true));
                stack.extend(u.src.iter().filter(|s| s.minmax.get().is_none()).map(|s| (s.clone(), false)));
            }
        }
        *self.minmax.get().expect("min_max computed")
    }

    /// A readable one-line rendering of an expression: `((a*4)+(b//4))` (tinygrad `render`).
    pub fn render(&self) -> String {
        render::render(self)
    }
}

/// Things that become a source of a UOp op: nodes, and Rust numbers and bools, which become a CONST of the
/// other operand's dtype (as tinygrad's `ufix` for index math).
pub trait IntoSrc {
    /// The node, with `like` giving the dtype of a constant.
    fn into_src(self, like: &UOp) -> UOp;
}
impl IntoSrc for UOp {
    fn into_src(self, _: &UOp) -> UOp {
        self
    }
}
impl IntoSrc for &UOp {
    fn into_src(self, _: &UOp) -> UOp {
        self.clone()
    }
}
macro_rules! into_src_const { ($($t:ty),*) => { $(impl IntoSrc for $t { fn into_src(self, like: &UOp) -> UOp { like.const_like(self) } })* } }
into_src_const!(i32, i64, i128, usize, f64, bool);

macro_rules! uop_binops {
    ($($tr:ident $m:ident $op:ident),*) => {$(
        impl<T: IntoSrc> std::ops::$tr<T> for &UOp { type Output = UOp; fn $m(self, x: T) -> UOp { self.binop(Ops::$op, x) } }
        impl<T: IntoSrc> std::ops::$tr<T> for UOp { type Output = UOp; fn $m(self, x: T) -> UOp { self.binop(Ops::$op, x) } }
        impl std::ops::$tr<&UOp> for i64 { type Output = UOp; fn $m(self, x: &UOp) -> UOp { x.const_like(self).binop(Ops::$op, x) } }
        impl std::ops::$tr<UOp> for i64 { type Output = UOp; fn $m(self, x: UOp) -> UOp { x.const_like(self).binop(Ops::$op, x) } }
    )*};
}
// `/` and `%` are tinygrad's `//` and `%` on ints: floor division and floor modulo (index math).
uop_binops!(Add add ADD, Mul mul MUL, Div div FLOORDIV, Rem rem FLOORMOD, BitAnd bitand AND, BitOr bitor OR, BitXor bitxor XOR);

impl<T: IntoSrc> std::ops::Sub<T> for &UOp {
    type Output = UOp;
    /// `self + (-x)`, as tinygrad builds subtraction.
    fn sub(self, x: T) -> UOp {
        let x = x.into_src(self);
        self + (-&x)
    }
}
impl<T: IntoSrc> std::ops::Sub<T> for UOp {
    type Output = UOp;
    fn sub(self, x: T) -> UOp {
        &self - x
    }
}
impl std::ops::Sub<&UOp> for i64 {
    type Output = UOp;
    fn sub(self, x: &UOp) -> UOp {
        x.const_like(self) - x
    }
}
impl std::ops::Neg for &UOp {
    type Output = UOp;
    /// `self * -1` (`logical_not` for bools; constants fold at once), as tinygrad.
    fn neg(self) -> UOp {
        match self.const_value() {
            Some(ConstValue::Int(i)) => self.const_like(-i),
            Some(ConstValue::Float(f)) => self.const_like(-f),
            _ if self.dtype.is_bool() => self.logical_not(),
            _ => self * -1,
        }
    }
}
impl std::ops::Neg for UOp {
    type Output = UOp;
    fn neg(self) -> UOp {
        -&self
    }
}

impl fmt::Debug for UOp {
    /// Multi-line tree (shared nodes printed once, then referenced by index), as tinygrad's `repr`.
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let topo = self.toposort();
        let idx: rustc_hash::FxHashMap<&UOp, usize> = topo.iter().enumerate().map(|(i, u)| (u, i)).collect();
        for (i, u) in topo.iter().enumerate() {
            let src: Vec<String> = u.src.iter().map(|s| idx[s].to_string()).collect();
            let tag = u.tag.map(|t| format!(" tag={t}")).unwrap_or_default();
            writeln!(f, "{i:4} {:<14} {:<20} [{}] {:?}{tag}", format!("{:?}", u.op), u.dtype.to_string(), src.join(", "), u.arg)?;
        }
        Ok(())
    }
}
impl fmt::Display for UOp {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(&self.render())
    }
}
