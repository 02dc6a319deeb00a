//! `Ops`, the one op set of the IR (tensor graph and kernels alike), and `OpSet`, a constant bit set of them
//! for the op families (tinygrad `Ops` and `GroupOp` in `uop/__init__.py`).

use std::fmt;

macro_rules! ops {
    ($($name:ident),* $(,)?) => {
        /// Every UOp's operation. Names are tinygrad's; the order groups them as tinygrad does (commutative operands are
        /// ordered by it).
        #[allow(non_camel_case_types, clippy::upper_case_acronyms, missing_docs)]
        #[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
        #[repr(u8)]
        pub enum Ops { $($name),* }
        impl Ops {
            /// All ops, in order (`ALL[op as usize] == op`).
            pub const ALL: &'static [Ops] = &[$(Ops::$name),*];
            /// Number of ops (the size of per-op tables).
            pub const COUNT: usize = Self::ALL.len();
        }
    };
}

ops! {
    // defines and special
    SPECIAL, BUFFER, DEFINE_GLOBAL, DEFINE_LOCAL, DEFINE_REG, DEFINE_VAR, BIND,
    // not rendered
    NOOP, SINK, AFTER, GROUP, UNIQUE, DEVICE, KERNEL, CALL,
    // vectors
    VECTORIZE, GEP, VCONST, CAT, UNROLL, CONTRACT,
    // load and store
    INDEX, LOAD, STORE,
    // math
    WMMA, CAST, BITCAST,
    EXP2, LOG2, SIN, SQRT, RECIPROCAL, NEG, TRUNC,
    ADD, MUL, SHL, SHR, CDIV, MAX, CMOD, CMPLT, CMPNE, CMPEQ, XOR, OR, AND, THREEFRY, SUB, FDIV, POW, FLOORDIV, FLOORMOD,
    WHERE, MULACC,
    // control flow, constants, custom code
    BARRIER, RANGE, IF, END, ENDIF, CONST, CUSTOM, CUSTOMI,
    // tensor graph only
    CONTIGUOUS, CONTIGUOUS_BACKWARD, DETACH, COPY, ASSIGN, BUFFER_VIEW, BUFFERIZE, MSELECT, MSTACK, MULTI,
    RESHAPE, PERMUTE, EXPAND, PAD, SHRINK, FLIP,
    REDUCE_AXIS, REDUCE, ALLREDUCE,
    // math no tinygrad op has (last, so the order that canonical operand orders follow is tinygrad's): DP4A's bytes
    // unsigned times signed, DP4AS's signed times signed
    DP4A, DP4AS,
    // tensor graph only, no tinygrad op: a value whose inputs' gradients are given (see `Tensor::custom_gradient`)
    CUSTOM_GRADIENT,
}

impl fmt::Display for Ops {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "Ops.{self:?}")
    }
}

/// A set of [`Ops`] as a 128-bit mask: `contains` is one AND.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct OpSet(pub u128);

impl OpSet {
    /// The set of `ops`.
    pub const fn of(ops: &[Ops]) -> OpSet {
        let (mut m, mut i) = (0u128, 0);
        while i < ops.len() {
            m |= 1 << ops[i] as u8;
            i += 1;
        }
        OpSet(m)
    }
    /// Membership.
    #[inline]
    pub const fn contains(self, op: Ops) -> bool {
        self.0 >> op as u8 & 1 != 0
    }
    /// Union.
    pub const fn union(self, o: OpSet) -> OpSet {
        OpSet(self.0 | o.0)
    }
    /// Difference.
    pub const fn minus(self, o: OpSet) -> OpSet {
        OpSet(self.0 & !o.0)
    }
    /// The members, in op order.
    pub fn iter(self) -> impl Iterator<Item = Ops> {
        Ops::ALL.iter().copied().filter(move |&o| self.contains(o))
    }
}

impl From<Ops> for OpSet {
    fn from(op: Ops) -> OpSet {
        OpSet::of(&[op])
    }
}

/// The op families (tinygrad `GroupOp`).
pub struct GroupOp;

use Ops::*;
impl GroupOp {
    pub const UNARY: OpSet = OpSet::of(&[EXP2, LOG2, SIN, SQRT, RECIPROCAL, NEG, TRUNC]);
    pub const BINARY: OpSet =
        OpSet::of(&[ADD, MUL, CDIV, MAX, CMOD, CMPLT, CMPNE, CMPEQ, XOR, SHL, SHR, OR, AND, THREEFRY, SUB, FDIV, POW, FLOORDIV, FLOORMOD]);
    pub const TERNARY: OpSet = OpSet::of(&[WHERE, MULACC, DP4A, DP4AS]);
    pub const ALU: OpSet = Self::UNARY.union(Self::BINARY).union(Self::TERNARY);
    pub const ELEMENTWISE: OpSet = Self::ALU.union(OpSet::of(&[CAST, BITCAST]));
    pub const IRREDUCIBLE: OpSet = OpSet::of(&[CONST, DEFINE_VAR, SPECIAL, RANGE]);
    pub const MOVEMENT: OpSet = OpSet::of(&[RESHAPE, EXPAND, PERMUTE, PAD, SHRINK, FLIP]);
    /// Binary ops with `f(a, b) == f(b, a)`.
    pub const COMMUTATIVE: OpSet = OpSet::of(&[ADD, MUL, MAX, CMPNE, CMPEQ, XOR, AND, OR]);
    /// Binary ops with `f(f(a, b), c) == f(a, f(b, c))`.
    pub const ASSOCIATIVE: OpSet = OpSet::of(&[ADD, MUL, AND, OR, MAX]);
    /// Binary ops with `f(x, x) == x`.
    pub const IDEMPOTENT: OpSet = OpSet::of(&[OR, AND, MAX]);
    pub const COMPARISON: OpSet = OpSet::of(&[CMPLT, CMPNE, CMPEQ]);
    /// Ops valid as the reduce op of REDUCE / REDUCE_AXIS.
    pub const REDUCE: OpSet = OpSet::of(&[ADD, MUL, MAX]);
    pub const DEFINES: OpSet = OpSet::of(&[DEFINE_GLOBAL, DEFINE_LOCAL, DEFINE_REG, DEFINE_VAR]);
    pub const ALL: OpSet = OpSet(u128::MAX >> (128 - Ops::COUNT));
}
