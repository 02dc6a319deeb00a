//! Decompositions: transcendental ops the renderer lacks become polynomials in ops it has. In: a kernel AST. Out:
//! the same AST where each float32 op in [`Renderer::decomposed`] is computed from ADD, MUL, MAX, casts, shifts
//! and bitcasts, which vectorize (a libm call computes one lane at a time, and spills a kernel's vector registers
//! around each call). Follows tinygrad `uop/decompositions.py` (`xexp2`, `ldexp2k`, `pow2if`), which its CPU
//! renderer uses for EXP2 too; the coefficients are SLEEF's.

use crate::dtype::{dtypes, Scalar};
use crate::pm;
use crate::renderer::Renderer;
use crate::uop::{graph_rewrite, Ops, PatternMatcher, UOp, UPat};
use std::sync::LazyLock;

/// EXP2 of float32 as [`xexp2`].
static PM_EXP2: LazyLock<PatternMatcher> = LazyLock::new(|| {
    pm! {
        UPat::ops(Ops::EXP2).named("e") => |e| (e.dtype.scalar == Scalar::Float32 && e.dtype.count == 1).then(|| xexp2(&e.src[0])),
    }
});

/// `ast` with the float32 ops that `ren` lacks decomposed.
pub fn decompose(ast: &UOp, ren: &Renderer) -> UOp {
    if !ren.decomposed.contains(&Ops::EXP2) {
        return ast.clone();
    }
    graph_rewrite(ast, &PM_EXP2, &mut (), "decompositions")
}

/// `2^e` as a float32 for `e` in `[-126, 127]`, built from its exponent bits (tinygrad `pow2if`).
fn pow2if(e: &UOp) -> UOp {
    (e + 127i64).shl(23i64).bitcast(dtypes::FLOAT32)
}

/// `2^d` of a float32 `d` (tinygrad `xexp2`): `d` clamped to `[-150, 128]` (beyond, the result is 0 or inf; NaN
/// stays NaN as MAX keeps its first operand when a comparison fails), rounded to `q`, the polynomial for `2^s`,
/// `s = d - q` in about `[-0.5, 0.5]`, then scaled by `2^q` in two halves so each stays a normal float (tinygrad
/// `ldexp2k`). Within 1 ulp of the exact result.
fn xexp2(d: &UOp) -> UOp {
    let x = d.maximum(-150.0).minimum(128.0);
    // round half up, on a positive shift of x so that truncation is floor
    let q = &(&x + 151.5).cast(dtypes::INT32) - 151i64;
    let s = &x - &q.cast(dtypes::FLOAT32);
    let coeffs = [0.153_592_089_2e-3, 0.133_926_270_1e-2, 0.961_838_476_4e-2, 0.555_034_726_9e-1, 0.240_226_447_6, 0.693_147_182_5, 1.0];
    let u = coeffs[1..].iter().fold(s.const_like(coeffs[0]), |acc, &c| &(&acc * &s) + c);
    let q1 = q.shr(1i64);
    &(&u * &pow2if(&q1)) * &pow2if(&(&q - &q1))
}
