//! Target rewrites. In: the tensor graph to schedule and the target's [`Renderer`]. Out: the same values, regrouped
//! into kernels that suit the target: a long reduction split in two (tinygrad `split_reduceop`), and on a target of
//! loops rather than a grid (the CPU) a large padded input realized before its windows are read (a convolution's
//! loads then need no bounds check per element, so they stay vector loads) and a large float32 matmul's right
//! operand packed into panels of two vector registers' width (what BLAS packing does; tinygrad has none). Copies and
//! regroupings only: dtypes are unchanged, values too but for a split float sum's rounding (two partial sums, as
//! tinygrad's), and gradients, taken before scheduling, never see them, so the graph a user builds is the same on
//! every host. The rules leave the reductions they made alone (`made`): each fires once per reduction.

use crate::dtype::dtypes;
use crate::helpers::SPLIT_REDUCEOP;
use crate::pm;
use crate::renderer::Renderer;
use crate::uop::{graph_rewrite, Arg, Ops, PatternMatcher, UOp, UPat};
use rustc_hash::FxHashSet;
use std::sync::LazyLock;

/// What the rules read: the target, and the reductions they made (which they leave alone).
struct Target {
    ren: Renderer,
    made: FxHashSet<UOp>,
}

static PM_TARGET: LazyLock<PatternMatcher<Target>> = LazyLock::new(|| {
    pm! { t: Target;
        UPat::ops(Ops::REDUCE_AXIS).src([UPat::ops(Ops::MUL).named("m")]).named("r") => |r, m| pack_matmul(t, r, m),
        UPat::ops(Ops::REDUCE_AXIS).src([UPat::ops(Ops::MUL).named("m")]).named("r") => |r, m| split_matvec(t, r, m),
        UPat::ops(Ops::REDUCE_AXIS).named("r") => |r| split_reduce(t, r),
        UPat::ops(Ops::EXPAND).src([UPat::ops(Ops::RESHAPE).src([UPat::ops(Ops::PAD).named("p")]).named("v")]).named("e") => |e, v, p| pad_first(&t.ren, e, v, p),
    }
});

/// `roots` rewritten for `ren` (see the module doc).
pub fn rewrite_for_target(roots: &[UOp], ren: &Renderer) -> Vec<UOp> {
    let sink =
        graph_rewrite(&UOp::sink(roots.to_vec()), &PM_TARGET, &mut Target { ren: ren.clone(), made: FxHashSet::default() }, "target");
    sink.src.to_vec()
}

fn mv(u: &UOp, op: Ops, arg: impl IntoIterator<Item = usize>) -> UOp {
    UOp::new(op, u.dtype, [u.clone()], Arg::Ints(arg.into_iter().map(|d| d as i64).collect()))
}

fn contiguous(u: UOp) -> UOp {
    UOp::new(Ops::CONTIGUOUS, u.dtype, [u], Arg::None)
}

fn reduce(t: &mut Target, x: UOp, op: Ops, axes: Vec<usize>) -> UOp {
    let r = UOp::new(Ops::REDUCE_AXIS, x.dtype, [x], Arg::ReduceAxis(op, axes.into()));
    t.made.insert(r.clone());
    r
}

/// A reduction of at least 32768 inputs per output, in two: one reduced axis split into `d` (256 down to 8, the first
/// that divides it) parts reduced separately into a buffer, then the `d` partials (tinygrad `split_reduceop`). The
/// first kernel has an output axis of `d` to spread over cores or workgroups. `None` under `SPLIT_REDUCEOP=0`, for a
/// smaller reduction or one without such an axis, and for a reduction of an arange (an indexing, which codegen turns
/// into a gather when it sees it whole).
fn split_reduce(t: &mut Target, r: &UOp) -> Option<UOp> {
    let (Arg::ReduceAxis(op, axes), Some(shape)) = (&r.arg, r.src[0].shape()) else { return None };
    let out: usize = shape.iter().enumerate().filter(|(i, _)| !axes.contains(i)).map(|(_, &d)| d).product();
    if SPLIT_REDUCEOP.value() == 0
        || t.made.contains(r)
        || shape.iter().product::<usize>() / out.max(1) < 32768
        || reaches_arange(&r.src[0])
    {
        return None;
    }
    let (a, d) = axes.iter().find_map(|&a| (8..=256).rev().find(|&d| shape[a].is_multiple_of(d) && shape[a] / d >= 8).map(|d| (a, d)))?;
    let split = [&shape[..a], &[d, shape[a] / d], &shape[a + 1..]].concat();
    let inner = axes.iter().map(|&x| if x < a { x } else { x + 1 }).collect();
    let partial = contiguous(reduce(t, mv(&r.src[0], Ops::RESHAPE, split), *op, inner));
    let whole = reduce(t, partial, *op, vec![a]);
    Some(mv(&whole, Ops::RESHAPE, r.shape()?.to_vec()))
}

/// A float vector-matrix product `r` (a sum over the last axis of `m`, a product of `(..., M, N, K)` with M <= 2
/// rows in all) whose matrix (at least 2^20 elements) is read down its columns, as `x @ W` with `W` a row-major
/// `(K, N)`, on a target of loops: K split into blocks of up to `CpuFeatures::stream_rows` rows (8 to 64, leaving 8
/// blocks or more), each block's partial sums (`(..., K/b, N)`) written by a kernel whose loops walk the matrix's rows
/// as streams, then summed.
/// Kept whole, each output tile's kernel reads a few vectors from every row, a page apart: 15 GB/s where streams
/// give 28-31 on this project's 2-core machines. Same values but for the split sum's rounding. Not for a one-hot
/// product (an embedding lookup, which codegen turns into a gather).
fn split_matvec(t: &mut Target, r: &UOp, m: &UOp) -> Option<UOp> {
    let (Arg::ReduceAxis(Ops::ADD, axes), Some(s)) = (&r.arg, m.shape()) else { return None };
    let nd = s.len();
    if nd < 2 || **axes != [nd - 1] || !m.dtype.is_float() || t.ren.has_local || t.made.contains(r) {
        return None;
    }
    let (rows, n, k) = (s[..nd - 2].iter().product::<usize>(), s[nd - 2], s[nd - 1]);
    let most = t.ren.cpu.map_or(8, |c| c.stream_rows);
    let kb = [64, 32, 16, 8].into_iter().find(|&b| b <= most && k.is_multiple_of(b) && (b == 8 || k / b >= 8))?;
    // (one row: codegen streams the rows itself where it can, `Renderer::matvec_chunks`)
    let streamed = rows == 1 && t.ren.matvec_chunks(k, n, r.dtype.itemsize()).is_some();
    if streamed || rows > 2 || n < 256 || n * k < 1 << 20 || reaches_arange(m) {
        return None;
    }
    // the matrix is the operand not broadcast along N; its K axis must not be its buffer's innermost
    let along_n = |u: &UOp| !(u.op == Ops::EXPAND && u.src[0].shape().is_some_and(|p| p[nd - 2] == 1));
    let w = m.src.iter().find(|u| along_n(u))?;
    if innermost(w, nd - 1) != Some(false) {
        return None;
    }
    let blocks = [&s[..nd - 1], &[k / kb, kb]].concat();
    let order: Vec<usize> = (0..nd - 2).chain([nd - 1, nd - 2, nd]).collect();
    let partial = contiguous(reduce(t, mv(&mv(m, Ops::RESHAPE, blocks), Ops::PERMUTE, order), Ops::ADD, vec![nd]));
    let whole = reduce(t, partial, Ops::ADD, vec![nd - 2]);
    Some(mv(&whole, Ops::RESHAPE, r.shape()?.to_vec()))
}

/// Whether axis `a` of view `u` is, through its movement ops, the innermost axis of the buffer they view (`None` for
/// a view of a computed value, whose layout in memory the kernels decide).
fn innermost(u: &UOp, a: usize) -> Option<bool> {
    let (mut u, mut a) = (u.clone(), Some(a));
    while crate::uop::GroupOp::MOVEMENT.contains(u.op) {
        let (out, inp) = (u.shape()?.to_vec(), u.src[0].shape()?.to_vec());
        // (`None` once the axis has a stride over 1 in a reshape's input: the walk goes on to find the buffer)
        a = a.and_then(|a| match (&u.op, &u.arg) {
            (Ops::PERMUTE, Arg::Ints(p)) => Some(p[a] as usize),
            // (row-major: an axis with only ones after it stays innermost, one that keeps its size and what follows
            // it is the same axis, and any other has a stride over 1 in the reshape's input)
            (Ops::RESHAPE, _) => {
                let after = |sh: &[usize], i: usize| sh[i + 1..].iter().product::<usize>();
                match (0..inp.len()).find(|&j| inp[j] == out[a] && after(&inp, j) == after(&out, a)) {
                    Some(j) => Some(j),
                    None if after(&out, a) == 1 => inp.len().checked_sub(1),
                    None => None,
                }
            }
            _ => Some(a),
        });
        u = u.src[0].clone();
    }
    matches!(u.op, Ops::BUFFER | Ops::CONTIGUOUS).then(|| a.is_some_and(|a| a + 1 == u.shape().map_or(0, <[usize]>::len)))
}

/// Whether `u` is a one-hot: through movement ops and casts, a comparison `==` of which one side reaches an arange
/// (an attention mask, a `where` over an arange's comparison, is not: its product is no gather).
fn one_hot(u: &UOp) -> bool {
    let mut u = u;
    while crate::uop::GroupOp::MOVEMENT.contains(u.op) || u.op == Ops::CAST {
        u = &u.src[0];
    }
    u.op == Ops::CMPEQ && u.src.iter().any(reaches_arange)
}

/// Whether an arange (a RANGE with no sources) feeds `u` other than through a reduction.
fn reaches_arange(u: &UOp) -> bool {
    let (mut seen, mut stack) = (FxHashSet::default(), vec![u.clone()]);
    while let Some(x) = stack.pop() {
        if x.op == Ops::RANGE && x.src.is_empty() {
            return true;
        }
        if x.op != Ops::REDUCE_AXIS && seen.insert(x.clone()) {
            stack.extend(x.src.iter().cloned());
        }
    }
    false
}

/// On a target of loops, the windows (`e`, an EXPAND of a view `v` of PAD `p`: how pooling and convolution read
/// their input) of a padded input of at least 2^14 elements read it from a buffer of its own: the kernel that reads
/// the windows then loads without a bounds check per element, so its loads along a row are vector loads (tinygrad
/// pads lazily inside the kernel).
fn pad_first(ren: &Renderer, e: &UOp, v: &UOp, p: &UOp) -> Option<UOp> {
    let big = p.src[0].shape().is_some_and(|s| s.iter().product::<usize>() >= 1 << 14);
    (!ren.has_local && big).then(|| e.with_src([v.with_src([contiguous(p.clone())])]))
}

/// A float32 matmul `r` (a sum over the last axis of `m`, a product of `(..., M, N, K)` whose left operand is
/// broadcast along N and right along M, as `Tensor::matmul` builds it) on a target of loops, with K, N >= 128 and
/// M >= 64: the right operand copied into panels of `P` columns first (two vector registers of floats: 16 with AVX2,
/// 32 with AVX-512; `P/2` when only that divides N), each panel's K rows contiguous (its `(K, N)` matrix stored as
/// `(N/P, K, P)`) and viewed back: same values, but the matmul kernel walks its register tile's columns through one
/// stream instead of one page per row. Columns that neither divides are padded with zeros to a multiple of `P`,
/// computed into a buffer and dropped.
fn pack_matmul(t: &mut Target, r: &UOp, m: &UOp) -> Option<UOp> {
    let (Arg::ReduceAxis(Ops::ADD, axes), Some(s)) = (&r.arg, m.shape()) else { return None };
    let nd = s.len();
    if nd < 3 || **axes != [nd - 1] || m.dtype != dtypes::FLOAT32 || t.ren.has_local || t.ren.vector_bytes == 0 || t.made.contains(r) {
        return None;
    }
    let (rows, n, k) = (s[nd - 3], s[nd - 2], s[nd - 1]);
    if k < 128 || n < 128 || rows < 64 {
        return None;
    }
    // x broadcast along N; w broadcast along M only, its own (N, K) whole (not a vector or a scalar broadcast)
    let broadcast = |u: &UOp, axis: usize| u.op == Ops::EXPAND && u.src[0].shape().is_some_and(|p| p[axis] == 1);
    let whole = |u: &UOp| u.src[0].shape().is_some_and(|p| p[nd - 2..] == [n, k]);
    let (x, w) = match (&m.src[0], &m.src[1]) {
        (a, b) if broadcast(a, nd - 2) && broadcast(b, nd - 3) && whole(b) => (a, b),
        (b, a) if broadcast(a, nd - 2) && broadcast(b, nd - 3) && whole(b) => (a, b),
        _ => return None,
    };
    // (a one-hot left operand, an embedding's `arange == id`: the kernel's reduce collapses into a gather of w's rows,
    // which packing would copy whole first, a 671 MB table for Gemma 3's prefill)
    if one_hot(x) {
        return None;
    }
    let wide = 2 * t.ren.vector_bytes / 4;
    let panel = if n.is_multiple_of(wide / 2) && !n.is_multiple_of(wide) { wide / 2 } else { wide };
    let np = n.next_multiple_of(panel);
    // w's source is (..., 1, N, K): as (..., 1, K, N), padded, in panels (..., 1, N/P, K, P), and viewed back
    let ws = w.src[0].shape()?.to_vec();
    let b = ws[..nd - 2].to_vec();
    let order = |tail: &[usize]| (0..nd - 2).chain(tail.iter().map(|&a| nd - 2 + a)).collect::<Vec<_>>();
    let kn = mv(&w.src[0], Ops::PERMUTE, order(&[1, 0]));
    let kn = if np == n { kn } else { mv(&kn, Ops::PAD, [vec![0; 2 * (nd - 1)], vec![0, np - n]].concat()) };
    let panels = mv(&mv(&kn, Ops::RESHAPE, [b.clone(), vec![k, np / panel, panel]].concat()), Ops::PERMUTE, order(&[1, 0, 2]));
    let packed = mv(&contiguous(panels), Ops::PERMUTE, order(&[1, 0, 2]));
    let nk = mv(&mv(&packed, Ops::RESHAPE, [b, vec![k, np]].concat()), Ops::PERMUTE, order(&[1, 0]));
    let full = [&s[..nd - 2], &[np, k]].concat();
    let x = if np == n { x.clone() } else { mv(&x.src[0], Ops::EXPAND, full.clone()) };
    let prod = UOp::new(Ops::MUL, m.dtype, [x, mv(&nk, Ops::EXPAND, full)], Arg::None);
    let out = reduce(t, prod, Ops::ADD, vec![nd - 1]);
    if np == n {
        return Some(out);
    }
    // the padded columns are computed into a buffer, then dropped
    let bounds = r.shape()?.iter().flat_map(|&d| [0, d]).collect::<Vec<_>>();
    Some(mv(&contiguous(out), Ops::SHRINK, bounds))
}
