//! Decompositions: ops the renderer lacks become ops it has. In: a kernel AST. Out: the same AST where each op in
//! [`Renderer::decomposed`] is computed from ADD, MUL, MAX, bit ops, casts and bitcasts, which vectorize (a libm
//! call computes one lane at a time, and spills a kernel's vector registers around each call): float32 EXP2 as a
//! polynomial, THREEFRY (the random-bits hash) as its 20 rounds of uint32 adds, rotations and xors. Runs after the
//! opts, so that scheduling, simplification and optimization see a random kernel's hash as one node, not hundreds.
//! Follows tinygrad `uop/decompositions.py` (`xexp2`, `ldexp2k`, `pow2if`, `threefry2x32`), which its CPU
//! renderer uses too; the exp2 coefficients are SLEEF's. [`fuse_mulacc`] makes float multiply-adds one MULACC.

use crate::dtype::{dtypes, Scalar};
use crate::pm;
use crate::renderer::Renderer;
use crate::uop::{graph_rewrite, symbolic::SYMBOLIC, var, Ops, PatternMatcher, UOp, UPat};
use std::sync::LazyLock;

/// Each op a renderer may lack, as the ops it has: float32 EXP2 as [`xexp2`], uint64 THREEFRY as
/// [`threefry2x32`]. The context is the renderer's [`Renderer::decomposed`] list: only those ops are rewritten.
static PM_DECOMP: LazyLock<PatternMatcher<&'static [Ops]>> = LazyLock::new(|| {
    pm! { ops: &'static [Ops];
        UPat::ops(Ops::EXP2).named("e") => |e| (ops.contains(&Ops::EXP2) && e.dtype.scalar == Scalar::Float32 && e.dtype.count == 1).then(|| xexp2(&e.src[0])),
        UPat::ops(Ops::THREEFRY).src([var("x"), var("key")]) => |x, key| ops.contains(&Ops::THREEFRY).then(|| threefry2x32(x, key)),
    }
});

/// Float `a*b + c` as one MULACC (tinygrad's late rewrite to MULACC where a renderer has it): the graph decides every
/// contraction, so an expression rounds the same in every kernel that computes it (an equality mask such as a max's
/// gradient compares values two kernels computed) and on every device. float32 and float64 only, scalar or vector:
/// halves compute in float and round where C's rules say.
static PM_MULACC: LazyLock<PatternMatcher> = LazyLock::new(|| {
    pm! {
        ((var("a") * var("b")) + var("c")).named("x") => |x, a, b, c| matches!(x.dtype.scalar, Scalar::Float32 | Scalar::Float64)
            .then(|| UOp::new(Ops::MULACC, x.dtype, [a.clone(), b.clone(), c.clone()], crate::uop::Arg::None)),
    }
});

/// [`SYMBOLIC`] and [`PM_MULACC`]: what expansion simplifies with where multiply-adds fuse (its unrolled reductions
/// add products of lanes).
pub static SYMBOLIC_MULACC: LazyLock<PatternMatcher> = LazyLock::new(|| &*SYMBOLIC + &*PM_MULACC);

/// `ast` with each float32 or float64 `a*b + c` a MULACC (see [`PM_MULACC`]); for renderers with [`Renderer::mulacc`].
pub fn fuse_mulacc(ast: &UOp) -> UOp {
    graph_rewrite(ast, &PM_MULACC, &mut (), "mulacc")
}

/// `MULACC(a, b, acc)` for the update `acc + a*b` of a float32 or float64 sum, else None.
pub fn mulacc_update(acc: &UOp, val: &UOp) -> Option<UOp> {
    (val.op == Ops::MUL && matches!(acc.dtype.scalar, Scalar::Float32 | Scalar::Float64))
        .then(|| UOp::new(Ops::MULACC, acc.dtype, [val.src[0].clone(), val.src[1].clone(), acc.clone()], crate::uop::Arg::None))
}

/// `ast` with the ops that `ren` lacks decomposed.
pub fn decompose(ast: &UOp, ren: &Renderer) -> UOp {
    graph_rewrite(ast, &PM_DECOMP, &mut { ren.decomposed }, "decompositions")
}

/// Threefry-2x32 with 20 rounds (tinygrad `threefry2x32`) of the uint64 `x` (two words, low first) under the uint64
/// `key`, in uint32 ops; the two result words packed back into a uint64.
fn threefry2x32(x: &UOp, key: &UOp) -> UOp {
    const ROTATIONS: [[i64; 4]; 2] = [[13, 15, 26, 6], [17, 29, 16, 24]];
    let words = |v: &UOp| [(v & 0xffff_ffffi64).cast(dtypes::UINT32), (v.shr(32i64) & 0xffff_ffffi64).cast(dtypes::UINT32)];
    let ([x0, x1], [k0, k1]) = (words(x), words(key));
    let ks = [k1.clone(), &(&k0 ^ &k1) ^ 0x1BD1_1BDAi64, k0];
    let mut xr = [&x0 + &ks[2], &x1 + &ks[0]];
    for i in 0..5 {
        for r in ROTATIONS[i % 2] {
            let sum = &xr[0] + &xr[1];
            let rot = &xr[1].shl(r) + &xr[1].shr(32 - r);
            xr = [sum.clone(), &sum ^ &rot];
        }
        xr = [&xr[0] + &ks[i % 3], &(&xr[1] + &ks[(i + 1) % 3]) + (i as i64 + 1)];
    }
    &xr[1].cast(dtypes::UINT64).shl(32i64) | &xr[0].cast(dtypes::UINT64)
}

/// `2^e` as a float32 for `e` in `[-126, 127]`, built from its exponent bits (tinygrad `pow2if`).
fn pow2if(e: &UOp) -> UOp {
    (e + 127i64).shl(23i64).bitcast(dtypes::FLOAT32)
}

/// `2^d` of a float32 `d` (tinygrad `xexp2`): `d` clamped to `[-150, 128]` (beyond, the result is 0 or inf; NaN
/// stays NaN as MAX keeps its first operand when a comparison fails), rounded to `q`, the polynomial for `2^s`,
/// `s = d - q` in about `[-0.5, 0.5]`, then scaled by `2^q` in two halves so each stays a normal float (tinygrad
/// `ldexp2k`). Within 1 ulp of the exact result. At `d <= -150` (a masked score's `-inf`) the polynomial is replaced
/// by 0 before the scaling, whose product would underflow to 0: each underflow costs Intel's cores a microcode assist
/// of ~150 cycles a vector (a causal softmax's kernels ran 3-5x slower with half their lanes masked).
fn xexp2(d: &UOp) -> UOp {
    let x = d.maximum(-150.0).minimum(128.0);
    // round half up, on a positive shift of x so that truncation is floor
    let q = &(&x + 151.5).cast(dtypes::INT32) - 151i64;
    let s = &x - &q.cast(dtypes::FLOAT32);
    let coeffs = [0.153_592_089_2e-3, 0.133_926_270_1e-2, 0.961_838_476_4e-2, 0.555_034_726_9e-1, 0.240_226_447_6, 0.693_147_182_5, 1.0];
    let u = x.cmpeq(-150.0).where_(0.0, coeffs[1..].iter().fold(s.const_like(coeffs[0]), |acc, &c| &(&acc * &s) + c));
    let q1 = q.shr(1i64);
    &(&u * &pow2if(&q1)) * &pow2if(&(&q - &q1))
}
