//! Tensor cores (tinygrad `_apply_tc_opt` in `codegen/opt/postrange.py`). In: a kernel whose one reduction sums
//! products of two values of a [`TensorCore`]'s input dtype into its output dtype. Out: the same kernel computing
//! that reduction a warp at a time: the two multiplied axes split into tiles of the core's `M` and `N`, the reduce
//! axis into steps of `K`, a LOCAL axis of the warp's lanes, and the reduction a sum over the steps of WMMA UOps
//! whose operands gather each lane's fragment elements (VECTORIZE) and whose result's elements (GEP) each store
//! one output element. A departure from tinygrad: the fragment layout is arithmetic on the lane index, so no
//! UNROLL/CONTRACT axes or swizzles are needed, and a target without vectors unrolls the rest as usual.

use super::{depends_on, range_size, Kernel};
use crate::dtype::DType;
use crate::renderer::{Fragment, TensorCore};
use crate::uop::{Arg, AxisType, Ops, UOp};
use rustc_hash::FxHashMap;

/// The two values of `tc.dtype_in` a reduction's `value` multiplies: `a*b` of casts to the output dtype, or a
/// cast of `a*b`.
fn operands(value: &UOp, tc: &TensorCore) -> Option<(UOp, UOp)> {
    let mul = if value.op == Ops::CAST && value.src[0].op == Ops::MUL { &value.src[0] } else { value };
    let input = |u: &UOp| match u.op {
        _ if u.dtype == tc.dtype_in => Some(u.clone()),
        Ops::CAST if u.src[0].dtype == tc.dtype_in => Some(u.src[0].clone()),
        _ => None,
    };
    (mul.op == Ops::MUL).then(|| Some((input(&mul.src[0])?, input(&mul.src[1])?))).flatten()
}

/// The index expression of lane bits weighted by `w` (runs of doubling weights become one shift-and-mask).
fn lane_part(lane: &UOp, w: &[usize]) -> UOp {
    let (mut e, mut b) = (lane.const_like(0), 0);
    while b < w.len() {
        if w[b] == 0 {
            b += 1;
            continue;
        }
        let n = (1..w.len() - b).take_while(|&j| w[b + j] == w[b] << j).count() + 1;
        e = &e + &(&(&(lane / (1i64 << b)) % (1i64 << n)) * w[b] as i64);
        b += n;
    }
    e
}

/// `(row, column)` of fragment `f`'s element `e` as index expressions of the lane.
fn coords(f: &Fragment, lane: &UOp, e: usize) -> (UOp, UOp) {
    let (r0, c0) = f.at(0, e);
    (&lane_part(lane, f.row.0) + r0 as i64, &lane_part(lane, f.col.0) + c0 as i64)
}

/// `k.ast` with its reduction over `kr` computed on `tc`, or why it can't be.
pub(super) fn apply(k: &Kernel, kr: &UOp, tc: &TensorCore) -> Result<UOp, &'static str> {
    let topo = k.ast.toposort();
    let reduces: Vec<&UOp> = topo.iter().filter(|u| u.op == Ops::REDUCE).collect();
    let [red] = reduces[..] else { return Err("needs exactly one reduction") };
    let ok = red.arg == Arg::Op(Ops::ADD) && red.dtype == tc.dtype_out && red.src[1..].contains(kr);
    let (x, y) = operands(&red.src[0], tc).filter(|_| ok).ok_or("the reduction is not a sum of products of the core's dtypes")?;
    let outs: Vec<UOp> = k.rngs().into_iter().filter(|r| matches!(r.axis().1, AxisType::Global | AxisType::Loop)).collect();
    // the innermost output axis each operand reads and the other does not
    let only = |a: &UOp, b: &UOp| outs.iter().rev().find(|r| depends_on(a, r) && !depends_on(b, r)).cloned();
    let (Some(px), Some(py)) = (only(&x, &y), only(&y, &x)) else { return Err("no output axis read by one operand alone") };
    if !depends_on(&x, kr) || !depends_on(&y, kr) {
        return Err("both operands must read the reduce axis");
    }
    let (m, n, kk) = tc.dims;
    let fits = |r: &UOp, c: &UOp| range_size(r).is_multiple_of(m) && range_size(c).is_multiple_of(n);
    // A is the operand whose axis tiles into M rows (the product commutes)
    let (a, rows, b, cols) = match () {
        _ if fits(&px, &py) => (x, px, y, py),
        _ if fits(&py, &px) => (y, py, x, px),
        _ => return Err("the output axes are not multiples of the core's M and N"),
    };
    if !range_size(kr).is_multiple_of(kk) {
        return Err("the reduce axis is not a multiple of the core's K");
    }
    let outer = |r: &UOp, d: usize| match range_size(r) / d {
        1 => r.src[0].const_like(0),
        s => UOp::range(r.src[0].const_like(s as i64), r.axis().0, r.axis().1),
    };
    let (ro, co, ko) = (outer(&rows, m), outer(&cols, n), outer(kr, kk));
    let next = topo.iter().filter(|u| u.op == Ops::RANGE).map(|r| r.axis().0).max().unwrap_or(0) + 1;
    let lane = UOp::range(kr.src[0].const_like(tc.threads as i64), next, AxisType::Local);
    let at = |base: &UOp, d: usize, off: UOp| &(base * d as i64) + &off;
    let fragment = |f: &Fragment, v: &UOp, r: &UOp, rd: (&UOp, usize), c: &UOp, cd: (&UOp, usize), dt: DType| {
        let elems: Vec<UOp> = (0..f.elements())
            .map(|e| {
                let (i, j) = coords(f, &lane, e);
                v.substitute(&[(r.clone(), at(rd.0, rd.1, i)), (c.clone(), at(cd.0, cd.1, j))].into_iter().collect())
            })
            .collect();
        UOp::new(Ops::VECTORIZE, dt.vec(elems.len() as u16), elems, Arg::None)
    };
    let [fa, fb, fc] = &tc.fragments;
    let va = fragment(fa, &a, &rows, (&ro, m), kr, (&ko, kk), tc.dtype_in);
    let vb = fragment(fb, &b, kr, (&ko, kk), &cols, (&co, n), tc.dtype_in);
    let acc_dt = tc.dtype_out.vec(fc.elements() as u16);
    let zero = UOp::new(Ops::VECTORIZE, acc_dt, vec![UOp::const_(tc.dtype_out, 0.0); fc.elements()], Arg::None);
    let wmma = UOp::new(Ops::WMMA, acc_dt, [va, vb, zero], Arg::Str(tc.name.into()));
    let ranges: Vec<UOp> =
        std::iter::once(ko).chain(red.src[1..].iter().filter(|r| *r != kr).cloned()).filter(|r| r.op == Ops::RANGE).collect();
    let acc = if ranges.is_empty() {
        wmma
    } else {
        UOp::new(Ops::REDUCE, acc_dt, std::iter::once(wmma).chain(ranges).collect::<Vec<_>>(), red.arg.clone())
    };
    // each of C's elements stores one output element: the stores copied per element
    let stores = (0..fc.elements()).flat_map(|e| {
        let (i, j) = coords(fc, &lane, e);
        let gep = UOp::new(Ops::GEP, tc.dtype_out, [acc.clone()], Arg::Int(e as i64));
        let map: FxHashMap<UOp, UOp> =
            [((*red).clone(), gep), (rows.clone(), at(&ro, m, i)), (cols.clone(), at(&co, n, j))].into_iter().collect();
        k.ast.src.iter().map(move |s| s.substitute(&map)).collect::<Vec<_>>()
    });
    Ok(UOp::sink(stores.collect::<Vec<_>>()))
}
