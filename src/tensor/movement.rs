//! Tensor ops: movement and indexing (tinygrad `mixin/movement.py`, the indexing, padding, gather/scatter and
//! creation parts of `mixin/op.py`, and `Tensor.__setitem__`). Built from the primitive ops in `ops.rs`, so each
//! differentiates through the primitives' gradient rules; like tinygrad, indexing by tensor is a comparison
//! against an `arange` (a one-hot mask) reduced with `where`/`sum`, with no gather primitive.

use super::{IntoDims, IntoOperand, Tensor};
use crate::dtype::{dtypes, ConstValue, DType};
use crate::error::Result;
use crate::helpers::ceildiv;
use crate::uop::{Ops, Sint, UOp};
use rustc_hash::FxHashSet;

/// One item of a subscript for [`Tensor::getitem`] / [`Tensor::setitem`] (a Python index).
#[derive(Clone, Debug)]
pub enum Index {
    /// `i`: one position, removing the dim (negative counts from the end).
    Int(i64),
    /// `start:stop:step`, each optional, with Python's clamping and negative steps.
    Slice(Option<i64>, Option<i64>, Option<i64>),
    /// `None`: a new dim of size 1.
    NewAxis,
    /// `...`: as many full slices as the other items leave dims.
    Ellipsis,
    /// An int tensor of positions (advanced indexing; negative values count from the end, out of range gives 0).
    Tensor(Tensor),
}

impl Index {
    /// The slice `start:stop:step`.
    pub fn slice(start: Option<i64>, stop: Option<i64>, step: Option<i64>) -> Index {
        Index::Slice(start, stop, step)
    }
}
impl From<i64> for Index {
    fn from(i: i64) -> Index {
        Index::Int(i)
    }
}
impl From<i32> for Index {
    fn from(i: i32) -> Index {
        Index::Int(i as i64)
    }
}
impl From<std::ops::RangeFull> for Index {
    fn from(_: std::ops::RangeFull) -> Index {
        Index::Slice(None, None, None)
    }
}
impl From<std::ops::Range<i64>> for Index {
    fn from(r: std::ops::Range<i64>) -> Index {
        Index::Slice(Some(r.start), Some(r.end), None)
    }
}
impl From<std::ops::RangeFrom<i64>> for Index {
    fn from(r: std::ops::RangeFrom<i64>) -> Index {
        Index::Slice(Some(r.start), None, None)
    }
}
impl From<std::ops::RangeTo<i64>> for Index {
    fn from(r: std::ops::RangeTo<i64>) -> Index {
        Index::Slice(None, Some(r.end), None)
    }
}
impl From<Tensor> for Index {
    fn from(t: Tensor) -> Index {
        Index::Tensor(t)
    }
}
impl From<&Tensor> for Index {
    fn from(t: &Tensor) -> Index {
        Index::Tensor(t.clone())
    }
}

/// `d` in `0..ndim` (`0..=ndim` with `extra`, for a new dim), negative counting from the end (tinygrad `_resolve_dim`).
fn resolve_dim(d: i64, ndim: usize, extra: bool, op: &str) -> usize {
    let total = (ndim + extra as usize).max(1) as i64;
    assert!((-total..total).contains(&d), "{op}: dim {d} out of range for {ndim} dims");
    d.rem_euclid(total) as usize
}

/// The numpy broadcast of `shapes`.
fn broadcast_shapes(shapes: &[Vec<usize>], op: &str) -> Vec<usize> {
    let n = shapes.iter().map(Vec::len).max().unwrap_or(0);
    let mut out = vec![1; n];
    for s in shapes {
        for (o, &d) in out[n - s.len()..].iter_mut().zip(s) {
            assert!(*o == d || *o == 1 || d == 1, "{op}: shapes {shapes:?} can't be broadcast");
            *o = if d == 1 { *o } else { d };
        }
    }
    out
}

/// Bool `a & b`.
fn and(a: &Tensor, b: &Tensor) -> Tensor {
    a.where_(b, false)
}

/// Bool `a | b`.
fn or(a: &Tensor, b: &Tensor) -> Tensor {
    a.where_(true, b)
}

/// A 0-d zero of `t`'s dtype (the neutral fill of masked selections).
fn zero_of(t: &Tensor) -> Tensor {
    Tensor::full_dtype((), 0, t.dtype())
}

/// `idx == arange(n)` with the arange along dim `dim` of `idx` (tinygrad `_one_hot_along_dim`).
fn one_hot_along(idx: &Tensor, n: &Sint, dim: i64) -> Tensor {
    assert!(idx.dtype().is_int(), "one_hot: index dtype {} is not an int", idx.dtype());
    let offset = idx.ndim() - resolve_dim(dim, idx.ndim(), false, "one_hot") - 1;
    // (along a symbolic dim: the range to its max, shrunk to it)
    let range = Tensor::arange(0.0, n.max() as f64, 1.0).shrink_sym(&[(0.into(), n.clone())]);
    idx.eq(range.reshape_sym(&[vec![n.clone()], vec![Sint::Int(1); offset]].concat()))
}

/// `i` with `dim` added where it is negative (indices counted from the end); `dim` may be symbolic.
pub(crate) fn from_end(i: &Tensor, dim: &Sint) -> Tensor {
    let wrapped = match dim.int() {
        Some(n) => i.add(n as i64),
        None => i.add(Tensor::from_uop(dim.uop()).cast(i.dtype())),
    };
    i.lt(0).where_(wrapped, i)
}

/// [`broadcast_shapes`] of shapes whose dims may be symbolic (each dim the first that is not 1; checked at the
/// bound values).
fn broadcast_sym(shapes: &[Vec<Sint>], op: &str) -> Vec<Sint> {
    let n = shapes.iter().map(Vec::len).max().unwrap_or(0);
    let mut out = vec![Sint::Int(1); n];
    for s in shapes {
        for (o, d) in out[n - s.len()..].iter_mut().zip(s) {
            assert!(o.value() == d.value() || o.value() == 1 || d.value() == 1, "{op}: shapes {shapes:?} can't be broadcast");
            if *o == Sint::Int(1) {
                *o = d.clone();
            }
        }
    }
    out
}

/// Dims `start..=end` merged into one (tinygrad `flatten(start_dim, end_dim)`).
fn merge_dims(t: &Tensor, start: usize, end: usize) -> Tensor {
    let s = t.shape();
    t.reshape([s[..start].to_vec(), vec![s[start..=end].iter().product()], s[end + 1..].to_vec()].concat())
}

/// One subscript item resolved against its dim: the `[start, end)` it reads, the step, whether an int removes
/// the dim, and the resulting size.
struct Parsed {
    size: usize,
    bound: (usize, usize),
    stride: i64,
    collapse: bool,
    index: Index,
}

/// Python's `slice.indices(size)`, turned into the bounds a shrink keeps and the step to take within them.
fn parse_slice(start: Option<i64>, stop: Option<i64>, step: Option<i64>, size: usize) -> ((usize, usize), i64, usize) {
    let step = step.unwrap_or(1);
    assert!(step != 0, "getitem: slice step cannot be 0");
    let n = size as i64;
    let fix = |v: Option<i64>, default: i64| {
        v.map_or(default, |v| {
            let v = if v < 0 { v + n } else { v };
            if step < 0 {
                v.clamp(-1, n - 1)
            } else {
                v.clamp(0, n)
            }
        })
    };
    let (a, b) = if step < 0 { (fix(start, n - 1), fix(stop, -1)) } else { (fix(start, 0), fix(stop, n)) };
    let (lo, hi) = if step * (b - a) < 0 {
        (0, 0)
    } else if step < 0 {
        (b + 1, a + 1)
    } else {
        (a, b)
    };
    ((lo as usize, hi as usize), step, ((hi - lo) as usize).div_ceil(step.unsigned_abs() as usize))
}

impl Tensor {
    /// `self` joined with `others` along `dim`; all shapes must match except at `dim` (tinygrad `cat`).
    ///
    /// # Panics
    /// If the ranks or the other dims differ; the message names `cat` and the shapes.
    pub fn cat(&self, others: &[&Tensor], dim: i64) -> Tensor {
        let s = self.shape();
        let d = resolve_dim(dim, s.len(), false, "cat");
        let all: Vec<&Tensor> = std::iter::once(self).chain(others.iter().copied()).collect();
        let shapes: Vec<Vec<usize>> = all.iter().map(|t| t.shape()).collect();
        assert!(
            shapes.iter().all(|o| o.len() == s.len() && o.iter().zip(&s).enumerate().all(|(i, (a, b))| i == d || a == b)),
            "cat: shapes {shapes:?} don't match outside dim {d}"
        );
        let total: usize = shapes.iter().map(|o| o[d]).sum();
        let mut at = 0;
        let padded: Vec<Tensor> = all
            .iter()
            .zip(&shapes)
            .map(|(t, o)| {
                let pads: Vec<(i64, i64)> =
                    (0..s.len()).map(|i| if i == d { (at as i64, (total - at - o[d]) as i64) } else { (0, 0) }).collect();
                at += o[d];
                t.pad(&pads)
            })
            .collect();
        padded[1..].iter().fold(padded[0].clone(), |acc, t| acc.add(t))
    }
    /// `self` and `others` (all of one shape) stacked along a new dim `dim` (tinygrad `stack`).
    ///
    /// # Panics
    /// If the shapes differ.
    pub fn stack(&self, others: &[&Tensor], dim: i64) -> Tensor {
        let s = self.shape();
        assert!(
            others.iter().all(|t| t.shape() == s),
            "stack: shapes must match, got {s:?} and {:?}",
            others.iter().map(|t| t.shape()).collect::<Vec<_>>()
        );
        let d = resolve_dim(dim, s.len(), true, "stack") as i64;
        let rest: Vec<Tensor> = others.iter().map(|t| t.unsqueeze(d)).collect();
        self.unsqueeze(d).cat(&rest.iter().collect::<Vec<_>>(), d)
    }
    /// Pieces of `size` along `dim` (the last may be smaller) (tinygrad `split` with an int).
    pub fn split(&self, size: usize, dim: i64) -> Vec<Tensor> {
        let d = resolve_dim(dim, self.ndim(), false, "split");
        let n = self.shape()[d];
        let sizes: Vec<usize> = (0..n.max(1)).step_by(size.max(1)).map(|i| size.min(n - i)).collect();
        self.split_sizes(&sizes, dim)
    }
    /// Pieces with the given sizes along `dim` (tinygrad `split` with a list).
    ///
    /// # Panics
    /// If the sizes don't add up to the dim.
    pub fn split_sizes(&self, sizes: &[usize], dim: i64) -> Vec<Tensor> {
        let shape = self.shape();
        let d = resolve_dim(dim, shape.len(), false, "split");
        assert_eq!(sizes.iter().sum::<usize>(), shape[d], "split: sizes {sizes:?} don't add up to dim {d} of {shape:?}");
        let mut at = 0;
        sizes
            .iter()
            .map(|&n| {
                let b: Vec<(usize, usize)> = shape.iter().enumerate().map(|(i, &s)| if i == d { (at, at + n) } else { (0, s) }).collect();
                at += n;
                self.shrink(&b)
            })
            .collect()
    }
    /// At most `chunks` equal pieces along `dim`, the last possibly smaller (tinygrad `chunk`).
    ///
    /// # Panics
    /// If `chunks` is 0.
    pub fn chunk(&self, chunks: usize, dim: i64) -> Vec<Tensor> {
        assert!(chunks > 0, "chunk: chunks must be positive");
        let n = self.shape()[resolve_dim(dim, self.ndim(), false, "chunk")];
        if n == 0 {
            return self.split_sizes(&vec![0; chunks], dim);
        }
        self.split(n.div_ceil(chunks), dim)
    }
    /// The tensor tiled `repeats[i]` times along each dim; extra leading repeats add dims (tinygrad `repeat`).
    ///
    /// # Panics
    /// If `repeats` has fewer entries than dims or a negative one.
    pub fn repeat(&self, repeats: impl IntoDims) -> Tensor {
        let r: Vec<usize> = repeats.into_dims().iter().map(|&x| usize::try_from(x).expect("repeat: negative repeat")).collect();
        let s = self.shape();
        assert!(r.len() >= s.len(), "repeat: {} repeats for shape {s:?}", r.len());
        let base = [vec![1; r.len() - s.len()], s].concat();
        let unsq: Vec<usize> = r.iter().zip(&base).flat_map(|(&r, &s)| if r == 1 { vec![s] } else { vec![1, s] }).collect();
        let exp: Vec<usize> = r.iter().zip(&base).flat_map(|(&r, &s)| if r == 1 { vec![s] } else { vec![r, s] }).collect();
        self.reshape(unsq).expand(exp).reshape(r.iter().zip(&base).map(|(r, s)| r * s).collect::<Vec<_>>())
    }
    /// Each element repeated `repeats` times along `dim`; `None` flattens first (tinygrad `repeat_interleave`).
    pub fn repeat_interleave(&self, repeats: usize, dim: Option<i64>) -> Tensor {
        let (x, d) = match dim {
            Some(d) => (self.clone(), resolve_dim(d, self.ndim(), false, "repeat_interleave")),
            None => (self.flatten(0), 0),
        };
        let s = x.shape();
        let with = |mid: Vec<usize>| [s[..d].to_vec(), mid, s[d + 1..].to_vec()].concat();
        x.reshape(with(vec![s[d], 1])).expand(with(vec![s[d], repeats])).reshape(with(vec![s[d] * repeats]))
    }
    /// Elements shifted circularly by `shifts[i]` along `dims[i]` (tinygrad `roll`).
    ///
    /// # Panics
    /// If `shifts` and `dims` differ in length.
    pub fn roll(&self, shifts: impl IntoDims, dims: impl IntoDims) -> Tensor {
        let (shifts, dims) = (shifts.into_dims(), dims.into_dims());
        assert_eq!(shifts.len(), dims.len(), "roll: {} shifts for {} dims", shifts.len(), dims.len());
        let shape = self.shape();
        let dims: Vec<usize> = dims.iter().map(|&d| resolve_dim(d, shape.len(), false, "roll")).collect();
        if shape.contains(&0) {
            return self.clone();
        }
        let mut b: Vec<(usize, usize)> = shape.iter().map(|&s| (0, s)).collect();
        for (&d, &sh) in dims.iter().zip(&shifts) {
            let delta = shape[d] - sh.rem_euclid(shape[d] as i64) as usize;
            b[d] = (delta, delta + shape[d]);
        }
        self.repeat((0..shape.len()).map(|i| if dims.contains(&i) { 2 } else { 1 }).collect::<Vec<i64>>()).shrink(&b)
    }
    /// [`Tensor::roll`] of the flattened tensor, reshaped back (tinygrad `roll` with `dims=None`).
    pub fn roll_flat(&self, shift: i64) -> Tensor {
        self.flatten(0).roll(shift, 0).reshape(self.shape())
    }
    /// Windows of `size` every `step` along `dim`: that dim becomes `(self.shape[dim] - size) / step + 1` and a
    /// new last dim of `size` is added (tinygrad `unfold`).
    ///
    /// # Panics
    /// If `step` is 0 or `size` exceeds the dim.
    pub fn unfold(&self, dim: i64, size: usize, step: usize) -> Tensor {
        let n = self.ndim();
        let d = resolve_dim(dim, n, false, "unfold");
        assert!(step > 0, "unfold: step must be > 0");
        assert!(size <= self.shape()[d], "unfold: size {size} exceeds dim {d} of {:?}", self.shape());
        let to_last: Vec<usize> = (0..n).filter(|&i| i != d).chain([d]).collect();
        let mut back: Vec<usize> = (0..n).map(|i| to_last.iter().position(|&j| j == i).unwrap()).collect();
        back.push(n);
        pool(&self.permute(to_last), &[size], &[step], &[1]).permute(back)
    }
    /// Dim `dim` removed if it has size 1, else `self` (tinygrad `squeeze(dim)`).
    pub fn squeeze(&self, dim: i64) -> Tensor {
        let s = self.shape();
        let d = resolve_dim(dim, s.len(), false, "squeeze");
        if s.is_empty() || s[d] != 1 {
            return self.clone();
        }
        self.reshape([&s[..d], &s[d + 1..]].concat())
    }
    /// All size-1 dims removed (tinygrad `squeeze()`).
    pub fn squeeze_all(&self) -> Tensor {
        self.reshape(self.shape().into_iter().filter(|&d| d != 1).collect::<Vec<_>>())
    }
    /// A size-1 dim inserted at `dim` (`-1`: last) (tinygrad `unsqueeze`).
    pub fn unsqueeze(&self, dim: i64) -> Tensor {
        let s = self.shape();
        let d = resolve_dim(dim, s.len(), true, "unsqueeze");
        self.reshape([&s[..d], &[1], &s[d..]].concat())
    }
    /// Dim `dim` split into `sizes` (one may be `-1`) (tinygrad `unflatten`).
    pub fn unflatten(&self, dim: i64, sizes: impl IntoDims) -> Tensor {
        let s: Vec<i64> = self.shape().iter().map(|&x| x as i64).collect();
        let d = resolve_dim(dim, s.len(), false, "unflatten");
        self.reshape([&s[..d], &sizes.into_dims()[..], &s[d + 1..]].concat())
    }
    /// Dims `start..=end` merged into one (tinygrad `flatten(start_dim, end_dim)`).
    pub fn flatten_range(&self, start: i64, end: i64) -> Tensor {
        let n = self.ndim();
        merge_dims(self, resolve_dim(start, n, false, "flatten"), resolve_dim(end, n, false, "flatten"))
    }
    /// Each dim cut to the first `shape[i]` elements (`-1` keeps a dim) (tinygrad `shrink_to`).
    pub fn shrink_to(&self, shape: impl IntoDims) -> Tensor {
        let b: Vec<(usize, usize)> =
            shape.into_dims().iter().zip(self.shape()).map(|(&n, s)| (0, if n < 0 { s } else { n as usize })).collect();
        self.shrink(&b)
    }
    /// Each dim zero-padded at the end to `shape[i]` (`-1` keeps a dim) (tinygrad `pad_to`).
    ///
    /// # Panics
    /// If `shape` has the wrong length.
    pub fn pad_to(&self, shape: impl IntoDims) -> Tensor {
        self.pad(&self.pad_to_amounts(shape))
    }
    /// [`Tensor::pad_to`] filling with `value` (tinygrad `pad_to(..., value=v)`).
    pub fn pad_to_value(&self, shape: impl IntoDims, value: f64) -> Tensor {
        self.pad_value(&self.pad_to_amounts(shape), value)
    }
    fn pad_to_amounts(&self, shape: impl IntoDims) -> Vec<(i64, i64)> {
        let (new, old) = (shape.into_dims(), self.shape());
        assert_eq!(new.len(), old.len(), "pad_to: shape {new:?} for {old:?}");
        new.iter().zip(old).map(|(&n, o)| (0, if n < 0 { 0 } else { n - o as i64 })).collect()
    }
    /// Padding that mirrors the tensor without repeating the edge, `(before, after)` per dim; negative amounts crop
    /// after reflecting (tinygrad `pad(..., mode="reflect")`).
    ///
    /// # Panics
    /// If an amount is not less than its dim.
    pub fn pad_reflect(&self, pads: &[(i64, i64)]) -> Tensor {
        self.pad_edges(pads, true)
    }
    /// Padding that repeats the edge element (tinygrad `pad(..., mode="replicate")`).
    pub fn pad_replicate(&self, pads: &[(i64, i64)]) -> Tensor {
        self.pad_edges(pads, false)
    }
    fn pad_edges(&self, pads: &[(i64, i64)], reflect: bool) -> Tensor {
        let n = self.ndim();
        assert_eq!(pads.len(), n, "pad: {} pads for shape {:?}", pads.len(), self.shape());
        let mut x = self.clone();
        for (d, &(b, a)) in pads.iter().enumerate() {
            let (b, a, s) = (b.max(0), a.max(0), x.shape()[d] as i64);
            let along = |i: Index| (0..n).map(|j| if j == d { i.clone() } else { Index::Slice(None, None, None) }).collect::<Vec<_>>();
            let (xb, xa) = if reflect {
                assert!(b < s && a < s, "pad: reflect padding ({b}, {a}) must be less than the size {s} of dim {d}");
                let after = Index::slice(Some(s - 2), if s - 2 - a >= 0 { Some(s - 2 - a) } else { None }, Some(-1));
                (x.getitem(&along(Index::slice(Some(b), Some(0), Some(-1)))), x.getitem(&along(after)))
            } else {
                let edge = |at: i64, p: i64| {
                    let sh = x.shape();
                    let bounds: Vec<(usize, usize)> =
                        sh.iter().enumerate().map(|(j, &m)| if j == d { (at as usize, at as usize + 1) } else { (0, m) }).collect();
                    x.shrink(&bounds).expand(sh.iter().enumerate().map(|(j, &m)| if j == d { p } else { m as i64 }).collect::<Vec<_>>())
                };
                (edge(0, b), edge(s - 1, a))
            };
            let pieces: Vec<&Tensor> = [(b > 0).then_some(&xb), Some(&x), (a > 0).then_some(&xa)].into_iter().flatten().collect();
            x = pieces[0].cat(&pieces[1..], d as i64);
        }
        let crop: Vec<(usize, usize)> =
            pads.iter().zip(x.shape()).map(|(&(b, a), s)| ((-b.min(0)) as usize, (a.min(0) + s as i64) as usize)).collect();
        x.shrink(&crop)
    }
    /// Padding that wraps around, `(before, after)` per dim; negative amounts crop first (tinygrad
    /// `pad(..., mode="circular")`).
    ///
    /// # Panics
    /// If a padding wraps around more than once.
    pub fn pad_circular(&self, pads: &[(i64, i64)]) -> Tensor {
        let shape = self.shape();
        assert_eq!(pads.len(), shape.len(), "pad: {} pads for shape {shape:?}", pads.len());
        let crop: Vec<(usize, usize)> =
            pads.iter().zip(&shape).map(|(&(b, a), &s)| ((-b.min(0)) as usize, (a.min(0) + s as i64) as usize)).collect();
        let x = self.shrink(&crop);
        let orig = x.shape();
        let p: Vec<(usize, usize)> = pads.iter().map(|&(b, a)| (b.max(0) as usize, a.max(0) as usize)).collect();
        assert!(
            p.iter().zip(&orig).all(|(&(b, a), &s)| b <= s && a <= s),
            "pad: circular padding {pads:?} of {shape:?} wraps around more than once"
        );
        let x = x.repeat(p.iter().map(|&(b, a)| 1 + (b > 0) as i64 + (a > 0) as i64).collect::<Vec<_>>());
        let b: Vec<(usize, usize)> = p
            .iter()
            .zip(orig.iter().zip(x.shape()))
            .map(|(&(b, a), (&o, xs))| (if b == 0 { 0 } else { o - b }, if a == 0 { xs } else { xs - o + a }))
            .collect();
        x.shrink(&b)
    }
    /// The diagonal over dims `dim1` and `dim2` (moved to the end, replaced by one dim), `offset` above (positive)
    /// or below (negative) the main one (tinygrad `diagonal`). An offset past the edge gives an empty diagonal
    /// (tinygrad fails there).
    ///
    /// # Panics
    /// If `dim1 == dim2`.
    pub fn diagonal(&self, offset: i64, dim1: i64, dim2: i64) -> Tensor {
        let n = self.ndim();
        let (d1, d2) = (resolve_dim(dim1, n, false, "diagonal"), resolve_dim(dim2, n, false, "diagonal"));
        assert!(d1 != d2, "diagonal: dim1 and dim2 are both {d1}");
        let x = self.permute((0..n).filter(|&i| i != d1 && i != d2).chain([d1, d2]).collect::<Vec<_>>());
        let s = x.shape();
        let mut b: Vec<(usize, usize)> = s.iter().map(|&m| (0, m)).collect();
        let off = offset.unsigned_abs() as usize;
        let k = if offset >= 0 { n - 1 } else { n - 2 };
        b[k] = (off.min(s[k]), s[k]);
        let x = x.shrink(&b);
        let s = x.shape();
        let (lead, dd) = (s[..n - 2].to_vec(), s[n - 2].min(s[n - 1]));
        let keep = |v: Vec<i64>| [lead.iter().map(|&m| m as i64).collect::<Vec<_>>(), v].concat();
        if dd == 0 {
            return x.reshape(keep(vec![0]));
        }
        let x = x.shrink_to(keep(vec![dd as i64, dd as i64])).flatten(-2).pad_to(keep(vec![(dd * (dd + 1)) as i64]));
        x.unflatten(-1, [dd, dd + 1]).shrink_to(keep(vec![-1, 1])).squeeze(-1)
    }
    /// A square matrix with `self` (1-D) on its diagonal (tinygrad `diag`).
    ///
    /// # Panics
    /// If `self` is not 1-D.
    pub fn diag(&self) -> Tensor {
        assert_eq!(self.ndim(), 1, "diag: expects a 1-D tensor, got shape {:?}", self.shape());
        let n = self.shape()[0];
        self.unsqueeze(-1).pad_to([-1, n as i64 + 1]).flatten(0).shrink_to([n * n]).reshape([n, n])
    }
    /// Coordinate grids from 1-D (or 0-d) tensors: `"ij"` (matrix) or `"xy"` (Cartesian, first two swapped)
    /// indexing (tinygrad `meshgrid`).
    ///
    /// # Panics
    /// If `indexing` is neither.
    pub fn meshgrid(&self, others: &[&Tensor], indexing: &str) -> Vec<Tensor> {
        assert!(matches!(indexing, "ij" | "xy"), "meshgrid: indexing must be \"ij\" or \"xy\", got {indexing:?}");
        let all: Vec<&Tensor> = std::iter::once(self).chain(others.iter().copied()).collect();
        if all.len() == 1 {
            return vec![self.clone()];
        }
        let n = all.len();
        let basis: Vec<usize> = if indexing == "ij" { (0..n).collect() } else { [1, 0].into_iter().chain(2..n).collect() };
        let shaped: Vec<Tensor> = basis.iter().zip(&all).map(|(&b, t)| t.reshape([vec![-1i64], vec![1; n - 1 - b]].concat())).collect();
        let out = broadcast_shapes(&shaped.iter().map(|t| t.shape()).collect::<Vec<_>>(), "meshgrid");
        shaped.iter().map(|t| t.expand(out.clone())).collect()
    }
    /// Dims regrouped and reordered by an einops pattern such as `"b c (h w) -> b (w h) c"`; `sizes` names the
    /// sizes of split dims that can't be inferred; `...` stands for the unnamed dims, `1` for a unit dim (tinygrad
    /// `rearrange`).
    ///
    /// # Panics
    /// If the pattern is malformed, its names differ between sides, or a size doesn't match.
    pub fn rearrange(&self, formula: &str, sizes: &[(&str, usize)]) -> Tensor {
        fn side(s: &str) -> (Vec<String>, Vec<(usize, usize)>) {
            let spaced = format!(" {s} ").replace('…', "...").replace('(', " ( ").replace(')', " ) ");
            let (mut names, mut groups, mut open) = (Vec::new(), Vec::new(), None);
            for tok in spaced.split_whitespace() {
                match tok {
                    "(" => {
                        assert!(open.is_none(), "rearrange: nested brackets in {s:?}");
                        open = Some(names.len());
                    }
                    ")" => groups.push((open.take().unwrap_or_else(|| panic!("rearrange: bracket mismatch in {s:?}")), names.len())),
                    "1" => groups.push((names.len(), names.len())),
                    t => names.push(t.to_string()),
                }
            }
            assert!(open.is_none(), "rearrange: bracket mismatch in {s:?}");
            (names, groups)
        }
        let (l, r) = formula.split_once("->").unwrap_or_else(|| panic!("rearrange: need exactly one \"->\" in {formula:?}"));
        assert!(!r.contains("->"), "rearrange: need exactly one \"->\" in {formula:?}");
        let ((mut lhs, mut lgroups), (mut rhs, mut rgroups)) = (side(l), side(r));
        for (name, _) in sizes {
            assert!(lhs.iter().any(|n| n == name), "rearrange: axis {name} is not used in {formula:?}");
        }
        let (mut ls, mut rs) = (lhs.clone(), rhs.clone());
        ls.sort();
        rs.sort();
        let mut uniq = ls.clone();
        uniq.dedup();
        assert!(ls == rs && uniq.len() == ls.len(), "rearrange: name mismatch in {formula:?}");
        for name in &lhs {
            let ok = name == "..."
                || (name.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_')
                    && name.chars().all(|c| c.is_alphanumeric() || c == '_'));
            assert!(ok && !name.starts_with('_') && !name.ends_with('_'), "rearrange: invalid axis name {name:?}");
        }
        assert!(
            lgroups.iter().all(|&(s, e)| !lhs[s..e].iter().any(|n| n == "...")),
            "rearrange: no ellipsis inside brackets on the left of {formula:?}"
        );
        if lhs.iter().any(|n| n == "...") {
            let ell = self.ndim() + 1 + lgroups.iter().map(|&(s, e)| e - s).sum::<usize>() - lhs.len() - lgroups.len();
            let expand = |names: &mut Vec<String>, groups: &mut Vec<(usize, usize)>| {
                let i = names.iter().position(|n| n == "...").expect("ellipsis on both sides");
                names.splice(i..=i, (0..ell).map(|j| format!("...{j}")));
                let shift = |p: usize| if p > i { p + ell - 1 } else { p };
                groups.iter_mut().for_each(|g| *g = (shift(g.0), shift(g.1)));
            };
            expand(&mut lhs, &mut lgroups);
            expand(&mut rhs, &mut rgroups);
        }
        let size_of = |n: &str| sizes.iter().find(|(k, _)| *k == n).map_or(-1, |&(_, v)| v as i64);
        let mut t = self.clone();
        for &(s, e) in &lgroups {
            t = t.unflatten(s as i64, lhs[s..e].iter().map(|n| size_of(n)).collect::<Vec<_>>());
        }
        let shape = t.shape();
        for (i, n) in lhs.iter().enumerate() {
            let want = size_of(n);
            assert!(want < 0 || want as usize == shape[i], "rearrange: size {want} given for axis {n} is not {}", shape[i]);
        }
        t = t.permute(rhs.iter().map(|n| lhs.iter().position(|m| m == n).unwrap()).collect::<Vec<_>>());
        for &(s, e) in rgroups.iter().rev() {
            t = if s < e { merge_dims(&t, s, e - 1) } else { t.unsqueeze(s as i64) };
        }
        t
    }

    /// Python indexing `self[indices]` with tinygrad's semantics (tinygrad `__getitem__`): ints remove dims,
    /// slices take strided (possibly reversed) ranges, `NewAxis` adds dims, one `Ellipsis` fills, and int tensors
    /// select by value (advanced indexing: their broadcast shape replaces the indexed dims, in place when they are
    /// adjacent, else in front); out-of-range tensor values give 0.
    ///
    /// # Panics
    /// If there are more indices than dims or several ellipses, an int is out of range, a slice step is 0, or an
    /// index tensor is not int or its shapes don't broadcast.
    pub fn getitem(&self, indices: &[Index]) -> Tensor {
        self.index_impl(indices, None)
    }
    /// Python item assignment `self[indices] = v` (tinygrad `__setitem__`): the indexed elements of `self` are
    /// replaced by `v` (broadcast), selected with `where` and written with [`Tensor::assign`], so a realized
    /// tensor is updated in its buffer (views of it see the change). With repeated tensor indices the last one
    /// wins. Constants take `self`'s dtype.
    ///
    /// # Panics
    /// As [`Tensor::getitem`], or if `v`'s dtype differs from `self`'s or its shape doesn't broadcast.
    pub fn setitem(&self, indices: &[Index], v: impl IntoOperand) {
        let v = v.into_operand();
        let v = if v.dtype().is_weak() { v.cast(self.dtype()) } else { v };
        assert_eq!(v.dtype(), self.dtype(), "setitem: dtype mismatch, tensor is {} and value {}", self.dtype(), v.dtype());
        let out = self.index_impl(indices, Some(&v));
        // in place when `self` lives in a buffer; a `v` that reads that buffer is computed into its own buffer
        // first, else the write could clobber elements `v` has yet to read
        let bufs: FxHashSet<UOp> = self.uop().toposort().into_iter().filter(|u| u.op == Ops::BUFFER).collect();
        let aliased = v.uop().toposort().iter().any(|u| bufs.contains(u));
        self.assign(if aliased { out.contiguous() } else { out });
    }

    fn index_impl(&self, indices: &[Index], v: Option<&Tensor>) -> Tensor {
        let (shape, sym) = (self.shape(), self.sym_shape());
        let n_ell = indices.iter().filter(|i| matches!(i, Index::Ellipsis)).count();
        assert!(n_ell <= 1, "getitem: indices can only have a single ellipsis");
        let real = indices.len() - n_ell - indices.iter().filter(|i| matches!(i, Index::NewAxis)).count();
        assert!(real <= shape.len(), "getitem: too many indices ({real}) for shape {shape:?}");
        let fill = indices.iter().position(|i| matches!(i, Index::Ellipsis)).unwrap_or(indices.len());
        let mut idx: Vec<Index> = indices.iter().filter(|i| !matches!(i, Index::Ellipsis)).cloned().collect();
        idx.splice(fill..fill, vec![Index::Slice(None, None, None); shape.len() - real]);

        let mut dim = 0;
        let parsed: Vec<Parsed> = idx
            .into_iter()
            .map(|index| {
                let size = if matches!(index, Index::NewAxis) { 1 } else { shape[dim] };
                let full = |index| Parsed { size, bound: (0, size), stride: 1, collapse: false, index };
                let p = match index {
                    Index::NewAxis => full(Index::NewAxis),
                    Index::Int(i) => {
                        let n = size as i64;
                        assert!((-n..n).contains(&i), "getitem: index {i} is out of bounds for dim {dim} of size {size} in {shape:?}");
                        let b = i.rem_euclid(n) as usize;
                        Parsed { size, bound: (b, b + 1), stride: 1, collapse: true, index }
                    }
                    Index::Slice(a, b, c) => {
                        let (bound, stride, n) = parse_slice(a, b, c, size);
                        Parsed { size: n, bound, stride, collapse: false, index }
                    }
                    Index::Tensor(t) => {
                        assert!(t.dtype().is_int(), "getitem: index dtype {} is not supported", t.dtype());
                        full(Index::Tensor(from_end(&t, &sym[dim])))
                    }
                    Index::Ellipsis => unreachable!("ellipsis was expanded"),
                };
                if !matches!(p.index, Index::NewAxis) {
                    dim += 1;
                }
                p
            })
            .collect();
        let mops: Vec<&Parsed> = parsed.iter().filter(|p| !matches!(p.index, Index::NewAxis)).collect();

        // view ops: shrink, flip the negative steps, then take every step-th element by padding and reshaping
        let mut x = self.shrink(&mops.iter().map(|p| p.bound).collect::<Vec<_>>());
        x = x.flip(mops.iter().enumerate().filter(|(_, p)| p.stride < 0).map(|(i, _)| i).collect::<Vec<_>>());
        let steps: Vec<usize> = mops.iter().map(|p| p.stride.unsigned_abs() as usize).collect();
        if steps.iter().any(|&s| s != 1) {
            let s = x.shape();
            x = x.pad_to(s.iter().zip(&steps).map(|(&d, &st)| d.next_multiple_of(st)).collect::<Vec<_>>());
            let s = x.shape();
            x = x.reshape(s.iter().zip(&steps).flat_map(|(&d, &st)| [d / st, st]).collect::<Vec<_>>());
            let s = x.shape();
            x = x.shrink_to(s.chunks(2).flat_map(|c| [c[0], 1]).collect::<Vec<_>>()).reshape(s.chunks(2).map(|c| c[0]).collect::<Vec<_>>());
        }
        let x_dims: Vec<&Parsed> = parsed.iter().filter(|p| !p.collapse).collect();
        let x = x.reshape(x_dims.iter().map(|p| p.size).collect::<Vec<_>>());

        let tops: Vec<(usize, &Tensor)> =
            x_dims.iter().enumerate().filter_map(|(d, p)| if let Index::Tensor(t) = &p.index { Some((d, t)) } else { None }).collect();
        let vb = if tops.is_empty() {
            match v {
                None => return x,
                Some(v) => v.expand(x.shape()),
            }
        } else {
            let dims: Vec<usize> = tops.iter().map(|&(d, _)| d).collect();
            let big = broadcast_sym(&tops.iter().map(|(_, t)| t.sym_shape()).collect::<Vec<_>>(), "getitem: cannot broadcast indices");
            let (xs, d0, nb) = (x.sym_shape(), dims[0], big.len());
            let pre_reduce = [&xs[..d0], &big[..], &xs[d0..]].concat();
            let ones = |n: usize| vec![Sint::Int(1); n];
            let masks: Vec<Tensor> = tops
                .iter()
                .map(|&(d, t)| {
                    let lead = ones(pre_reduce.len() - t.ndim() - (xs.len() - d0));
                    let i = t.reshape_sym(&[lead, t.sym_shape(), ones(xs.len() - d0)].concat()).expand_sym(&pre_reduce);
                    one_hot_along(&i, &xs[d], d as i64 - xs.len() as i64)
                })
                .collect();
            let mut mask = masks[1..].iter().fold(masks[0].clone(), |m, n| and(&m, n));
            let xr = x.reshape_sym(&[&xs[..d0], &ones(nb)[..], &xs[d0..]].concat());
            let sum_axes: Vec<usize> = dims.iter().map(|d| d + nb).collect();
            let mut out = mask.where_(&xr, zero_of(&x)).sum(sum_axes.clone()).cast(x.dtype());
            let permuted = d0 != 0 && dims.len() != 1 && dims.windows(2).any(|w| w[1] != w[0] + 1);
            if permuted {
                let order = |nd: usize| (d0..d0 + nb).chain(0..d0).chain(d0 + nb..nd).collect::<Vec<_>>();
                mask = mask.permute(order(mask.ndim()));
                out = out.permute(order(out.ndim()));
            }
            let Some(v) = v else { return out };
            let mut vb = v.expand(broadcast_shapes(&[out.shape(), v.shape()], "setitem"));
            for &d in &sum_axes {
                vb = vb.unsqueeze(d as i64);
            }
            let start = if permuted { 0 } else { d0 };
            masked_merge(&x, &vb, &mask, start..start + nb)
        };

        // setitem: put vb back where the view ops took the elements from, selected by a mask per dim
        let mut vb = vb.reshape(mops.iter().map(|p| if p.collapse { 1 } else { p.size }).collect::<Vec<_>>());
        let mut sel: Option<Tensor> = None;
        for (d, (p, &st)) in mops.iter().zip(&steps).enumerate() {
            let (s, e) = p.bound;
            if st != 1 {
                vb = vb.unsqueeze(d as i64 + 1);
                let sh = vb.shape();
                vb = vb.pad_to(sh.iter().enumerate().map(|(j, &m)| if j == d + 1 { st as i64 } else { m as i64 }).collect::<Vec<_>>());
                vb = merge_dims(&vb, d, d + 1);
                vb = vb.shrink_to(
                    vb.shape().iter().enumerate().map(|(j, &m)| if j == d { (e - s) as i64 } else { m as i64 }).collect::<Vec<_>>(),
                );
            }
            let n = shape[d];
            let idx = Tensor::arange(0.0, n as f64, 1.0).reshape([vec![1; d], vec![n], vec![1; shape.len() - d - 1]].concat());
            let mut m = and(&idx.ge(s as i64), &idx.lt(e as i64));
            if st != 1 {
                let off = if p.stride < 0 { idx.neg().add(e as i64 - 1) } else { idx.sub(s as i64) };
                m = and(&m, &off.sub(off.div_floor(st as i64).mul(st as i64)).eq(0));
            }
            sel = Some(match sel {
                Some(a) => and(&a, &m),
                None => m,
            });
        }
        let vb = vb.flip(mops.iter().enumerate().filter(|(_, p)| p.stride < 0).map(|(i, _)| i).collect::<Vec<_>>());
        let vb = vb.pad(&mops.iter().enumerate().map(|(d, p)| (p.bound.0 as i64, (shape[d] - p.bound.1) as i64)).collect::<Vec<_>>());
        match sel {
            Some(m) => m.where_(&vb, self),
            None => vb,
        }
    }

    /// `self[..., index[...], ...]` along `dim`: `out[i][j][k] = self[i][index[i][j][k]][k]` for `dim == 1`;
    /// `index` has `self`'s rank and may be smaller in the other dims (tinygrad `gather`).
    ///
    /// # Panics
    /// If the ranks differ, `index` is larger than `self` outside `dim`, or `index` is not an int tensor.
    pub fn gather(&self, dim: i64, index: &Tensor) -> Tensor {
        let (s, is) = (self.shape(), index.shape());
        assert_eq!(s.len(), is.len(), "gather: self {s:?} and index {is:?} differ in rank");
        let d = resolve_dim(dim, s.len(), false, "gather");
        assert!(
            s.iter().zip(&is).enumerate().all(|(j, (a, b))| j == d || a >= b),
            "gather: index {is:?} is larger than self {s:?} outside dim {d}"
        );
        let x = self.shrink_to(is.iter().enumerate().map(|(j, &m)| if j == d { -1 } else { m as i64 }).collect::<Vec<_>>());
        let x = x.unsqueeze(-1).transpose(-1, d as i64);
        one_hot_along(&index.unsqueeze(-1), &self.sym_shape()[d], -1).where_(&x, zero_of(self)).sum(-1).cast(self.dtype())
    }
    /// `self` with `src` (a tensor of `self`'s dtype, or a constant) written at the positions `index` gives along
    /// `dim`: `out[i][index[i][j]] = src[i][j]` for `dim == 1`; with repeated indices the last write wins
    /// (tinygrad `scatter`).
    ///
    /// # Panics
    /// If the ranks differ, `index` is larger than `src` or than `self` outside `dim`, or the dtypes differ.
    pub fn scatter(&self, dim: i64, index: &Tensor, src: impl IntoOperand) -> Tensor {
        let src = self.scatter_src(index, src);
        let (src, mask) = self.pre_scatter(dim, index, &src);
        masked_merge(self, &src, &mask, self.ndim()..self.ndim() + 1)
    }
    /// [`Tensor::scatter`] combining with `reduce` (`"add"` or `"multiply"`) instead of overwriting; `src` must be a
    /// constant (tinygrad `scatter(..., reduce=...)`; use [`Tensor::scatter_reduce`] for tensors).
    ///
    /// # Panics
    /// If `reduce` is neither or `src` is a tensor.
    pub fn scatter_with(&self, dim: i64, index: &Tensor, src: impl IntoOperand, reduce: &str) -> Tensor {
        let src = src.into_operand();
        assert!(src.dtype().is_weak(), "scatter: a tensor src is not supported with reduce, use scatter_reduce");
        let src = self.scatter_src(index, src);
        match reduce {
            "add" => self.scatter_reduce(dim, index, &src, "sum", true),
            "multiply" => self.scatter_reduce(dim, index, &src, "prod", true),
            r => panic!("scatter: reduce {r:?} must be \"add\" or \"multiply\""),
        }
    }
    fn scatter_src(&self, index: &Tensor, src: impl IntoOperand) -> Tensor {
        let src = src.into_operand();
        if src.dtype().is_weak() {
            src.cast(self.dtype()).reshape(vec![1; index.ndim()]).expand(index.shape())
        } else {
            src
        }
    }
    /// `src` and the one-hot mask of `index`, both `self.shape + [index.shape[dim]]` (tinygrad `_pre_scatter`).
    fn pre_scatter(&self, dim: i64, index: &Tensor, src: &Tensor) -> (Tensor, Tensor) {
        let (s, is, ss) = (self.shape(), index.shape(), src.shape());
        let d = resolve_dim(dim, s.len(), false, "scatter");
        assert!(is.len() == s.len() && ss.len() == s.len(), "scatter: self {s:?}, index {is:?} and src {ss:?} must have one rank");
        assert!(
            (0..s.len()).all(|j| (j == d || s[j] >= is[j]) && ss[j] >= is[j]),
            "scatter: index {is:?} must not be larger than src {ss:?}, nor than self {s:?} outside dim {d}"
        );
        assert_eq!(self.dtype(), src.dtype(), "scatter: self is {} but src is {}", self.dtype(), src.dtype());
        let src = src.shrink_to(is.clone());
        let src = src.unsqueeze(-1).expand([is.clone(), vec![s[d]]].concat()).transpose(-1, d as i64);
        let mask = one_hot_along(&index.unsqueeze(-1), &Sint::Int(s[d]), -1).transpose(-1, d as i64);
        let to = [s.iter().map(|&m| m as i64).collect::<Vec<_>>(), vec![-1]].concat();
        (src.pad_to(to.clone()), mask.pad_to(to))
    }
    /// `self` with the `src` values at `index` along `dim` combined by `reduce`: `"sum"`, `"prod"`, `"mean"`,
    /// `"amax"` or `"amin"`; `include_self` makes `self`'s values part of each reduction (tinygrad `scatter_reduce`).
    ///
    /// # Panics
    /// As [`Tensor::scatter`], or if `reduce` is not one of these.
    pub fn scatter_reduce(&self, dim: i64, index: &Tensor, src: &Tensor, reduce: &str, include_self: bool) -> Tensor {
        let (src, mask) = self.pre_scatter(dim, index, src);
        let untouched = mask.cast(dtypes::INT32).sum(-1).eq(0);
        let base = |fill: Tensor| if include_self { self.clone() } else { untouched.where_(self, fill) };
        let c = |v: crate::dtype::ConstValue| Tensor::full_dtype((), v, src.dtype());
        let dt = src.dtype();
        match reduce {
            "sum" => mask.where_(&src, c(0.into())).sum(-1).add(base(c(0.into()))),
            "prod" => mask.where_(&src, c(1.into())).prod(-1).mul(base(c(1.into()))),
            "amax" => mask.where_(&src, c(dt.min())).max(-1).maximum(base(c(dt.min()))),
            "amin" => mask.where_(&src, c(dt.max())).min(-1).minimum(base(c(dt.max()))),
            "mean" => {
                let count = mask.where_(1, 0).sum(-1).add(if include_self {
                    Tensor::full_dtype((), 1, dtypes::INT32)
                } else {
                    untouched.where_(1, 0)
                });
                mask.where_(&src, c(0.into())).sum(-1).add(base(c(0.into()))).div(count)
            }
            r => panic!("scatter_reduce: reduce {r:?} must be one of sum, prod, mean, amax, amin"),
        }
    }
    /// The elements of `self` where `mask` (bool, broadcast to `self`) is true, flattened (tinygrad
    /// `masked_select`). The output size depends on the data, so this realizes `mask`.
    ///
    /// # Panics
    /// If `mask` is not bool or doesn't broadcast.
    ///
    /// # Errors
    /// If realizing `mask` fails.
    pub fn masked_select(&self, mask: &Tensor) -> Result<Tensor> {
        let pos = self.mask_positions(mask)?;
        let n = pos.len();
        Ok(self.flatten(0).getitem(&[Tensor::from_slice(&pos, [n]).into()]))
    }
    /// [`Tensor::masked_select`] with a fixed output length `size`: truncated, or padded with `fill_value`
    /// (tinygrad `masked_select(..., size=, fill_value=)`).
    ///
    /// # Errors
    /// If realizing `mask` fails.
    pub fn masked_select_size(&self, mask: &Tensor, size: usize, fill_value: f64) -> Result<Tensor> {
        let mut pos = self.mask_positions(mask)?;
        let count = pos.len().min(size);
        pos.resize(size, 0);
        let got = self.flatten(0).getitem(&[Tensor::from_slice(&pos, [size]).into()]);
        Ok(Tensor::arange(0.0, size as f64, 1.0).lt(count as i64).where_(got, Tensor::full_dtype((), fill_value, self.dtype())))
    }
    fn mask_positions(&self, mask: &Tensor) -> Result<Vec<i32>> {
        assert!(mask.dtype().is_bool(), "masked_select: mask must be bool, got {}", mask.dtype());
        let m = mask.expand(self.shape()).to_vec::<bool>()?;
        Ok(m.iter().enumerate().filter(|(_, &b)| b).map(|(i, _)| i as i32).collect())
    }
    /// Int class indices as one-hot vectors: a new last dim of `num_classes`, int32 (tinygrad `one_hot`).
    ///
    /// # Panics
    /// If `self` is not an int tensor.
    pub fn one_hot(&self, num_classes: usize) -> Tensor {
        assert!(self.dtype().is_int(), "one_hot: expects an int tensor, got {}", self.dtype());
        one_hot_along(&self.unsqueeze(-1), &Sint::Int(num_classes), -1).where_(1, 0)
    }
    /// The upper triangle of the last two dims (from the `diagonal`-th diagonal up), zeros below (tinygrad `triu`).
    pub fn triu(&self, diagonal: i64) -> Tensor {
        tri_of(self, diagonal).where_(self, zero_of(self))
    }
    /// The lower triangle of the last two dims (up to the `diagonal`-th diagonal), zeros above (tinygrad `tril`).
    pub fn tril(&self, diagonal: i64) -> Tensor {
        tri_of(self, diagonal + 1).where_(zero_of(self), self)
    }

    /// The `n x m` identity-like matrix of `dtype`: ones where row == column (tinygrad `Tensor.eye`).
    pub fn eye(n: usize, m: usize, dtype: DType) -> Tensor {
        Tensor::arange(0.0, n as f64, 1.0).unsqueeze(-1).eq(Tensor::arange(0.0, m as f64, 1.0)).cast(dtype)
    }
    /// `steps` evenly spaced values from `start` to `stop` inclusive, of `dtype` (tinygrad `Tensor.linspace`).
    ///
    /// # Panics
    /// If `dtype` is bool.
    pub fn linspace(start: f64, stop: f64, steps: usize, dtype: DType) -> Tensor {
        assert!(!dtype.is_bool(), "linspace: bool dtype is not supported");
        if steps == 1 {
            return Tensor::full_dtype([1], start, dtype);
        }
        let i = Tensor::arange(0.0, steps as f64, 1.0).cast(dtypes::DEFAULT_FLOAT);
        i.mul((stop - start) / (steps as f64 - 1.0)).add(start).cast(dtype)
    }
    /// A tensor of `self`'s shape filled with `v`, of `dtype` (tinygrad `full_like(..., dtype=)`).
    pub fn full_like_dtype(&self, v: impl Into<crate::dtype::ConstValue>, dtype: DType) -> Tensor {
        Tensor::full_dtype(self.shape(), v, dtype)
    }
}

/// The bool mask `col - row >= diagonal` ([`tri`]) over the last two dims of `x`.
fn tri_of(x: &Tensor, diagonal: i64) -> Tensor {
    let s = x.shape();
    assert!(s.len() >= 2, "tril/triu: need at least 2 dims, got {s:?}");
    tri(s[s.len() - 2], s[s.len() - 1], diagonal)
}

/// `base` with `values` where `mask` is true; over the `axes` (which `mask` and `values` have and `base` lacks),
/// the last true position wins (tinygrad `_masked_merge`).
fn masked_merge(base: &Tensor, values: &Tensor, mask: &Tensor, axes: std::ops::Range<usize>) -> Tensor {
    let (mut mask, mut values) = (mask.clone(), values.clone());
    for d in axes.clone().rev() {
        let (ms, vs) = (mask.split(1, d as i64), values.split(1, d as i64));
        let (m, v) = ms.iter().zip(&vs).skip(1).fold((ms[0].clone(), vs[0].clone()), |(am, av), (m, v)| (or(&am, m), m.where_(v, &av)));
        (mask, values) = (m, v);
    }
    for d in axes.rev() {
        (mask, values) = (mask.squeeze(d as i64), values.squeeze(d as i64));
    }
    mask.where_(&values, base)
}

// ***** helpers for the ops built on movement (reductions, convolutions, losses) *****

/// `x` with a size-1 dim inserted at `d`.
pub(super) fn unsq(x: &Tensor, d: usize) -> Tensor {
    let mut s = x.shape();
    s.insert(d, 1);
    x.reshape(s)
}

/// `x` without its size-1 dim `d`.
pub(super) fn sq(x: &Tensor, d: usize) -> Tensor {
    let mut s = x.shape();
    s.remove(d);
    x.reshape(s)
}

/// `(0, 0)` pads except `p` on dim `d`.
pub(super) fn pad_on(ndim: usize, d: usize, p: (i64, i64)) -> Vec<(i64, i64)> {
    (0..ndim).map(|i| if i == d { p } else { (0, 0) }).collect()
}

/// Padding with the constant `v` of `x`'s dtype (tinygrad `_pad_constant`); negative pads crop.
pub(super) fn pad_const(x: &Tensor, pads: &[(i64, i64)], v: ConstValue) -> Tensor {
    if v.as_f64() == 0.0 {
        return x.pad(pads);
    }
    let mask = Tensor::full_dtype(x.shape(), true, dtypes::BOOL).pad(pads);
    mask.where_(x.pad(pads), Tensor::full_dtype((), v, x.dtype()))
}

/// Elements `lo..hi` of dim `d`.
pub(super) fn slice_dim(x: &Tensor, d: usize, lo: usize, hi: usize) -> Tensor {
    x.shrink(&x.shape().iter().enumerate().map(|(i, &n)| if i == d { (lo, hi) } else { (0, n) }).collect::<Vec<_>>())
}

/// Windows over the last `k.len()` dims: `(..., i...)` becomes `(..., o..., k...)` (tinygrad `_pool`), built from
/// repeat, shrink and reshape so strides and dilations need no gather.
pub(super) fn pool(x: &Tensor, k: &[usize], stride: &[usize], dilation: &[usize]) -> Tensor {
    let shape = x.shape();
    assert!(shape.len() >= k.len(), "pool: can't pool shape {shape:?} with kernel {k:?}");
    let noop = shape.len() - k.len();
    let [k, s, d, i]: [Vec<i64>; 4] = [k, stride, dilation, &shape[noop..]].map(|v| v.iter().map(|&x| x as i64).collect());
    assert!(
        (0..k.len()).all(|j| d[j] * (k[j] - 1) < i[j]),
        "pool: kernel {k:?} with dilation {d:?} is larger than the input dims of shape {shape:?}"
    );
    let o: Vec<i64> = (0..k.len()).map(|j| ceildiv(i[j] - d[j] * (k[j] - 1), s[j])).collect();
    let keep: Vec<i64> = shape[..noop].iter().map(|&x| x as i64).collect();
    let dims = |g: &dyn Fn(usize) -> Vec<i64>| [keep.clone(), (0..k.len()).flat_map(g).collect()].concat();
    if (0..k.len()).all(|j| k[j] <= s[j] && d[j] == 1) {
        // windows that don't overlap: each dim cut (or padded, past the last window) to o*s, split into (o, s),
        // and the first k of each s kept; its gradient is a pad, not a sum over shifted copies
        let x = x.pad_to(dims(&|j| vec![(o[j] * s[j]).max(i[j])])).shrink_to(dims(&|j| vec![o[j] * s[j]]));
        let x = x.reshape(dims(&|j| vec![o[j], s[j]])).shrink_to(dims(&|j| vec![o[j], k[j]]));
        let order: Vec<usize> = (0..noop).chain((0..k.len()).map(|j| noop + 2 * j)).chain((0..k.len()).map(|j| noop + 2 * j + 1)).collect();
        return x.permute(order);
    }
    let f: Vec<i64> = (0..k.len()).map(|j| ceildiv(o[j] * s[j] - d[j], i[j]).max(1)).collect();
    let to = |t: &Tensor, v: Vec<i64>| t.shrink_to(v);
    let reps: Vec<usize> = [vec![1; noop], (0..k.len()).map(|j| ceildiv(k[j] * (i[j] * f[j] + d[j]), i[j]) as usize).collect()].concat();
    let x = to(&x.repeat(reps), dims(&|j| vec![k[j] * (i[j] * f[j] + d[j])]));
    let x = x.reshape(dims(&|j| vec![k[j], i[j] * f[j] + d[j]]));
    let x = to(&x, dims(&|j| vec![k[j], o[j] * s[j]])).reshape(dims(&|j| vec![k[j], o[j], s[j]]));
    let x = to(&x, dims(&|j| vec![k[j], o[j], 1])).reshape(dims(&|j| vec![k[j], o[j]]));
    let order: Vec<usize> = (0..noop).chain((0..k.len()).map(|j| noop + 2 * j + 1)).chain((0..k.len()).map(|j| noop + 2 * j)).collect();
    x.permute(order)
}

/// `idx == arange(n)` along a new dim placed at `d` of the result (tinygrad `_one_hot_along_dim` on `idx`
/// with a size-1 dim at `d`).
pub(super) fn one_hot_at(idx: &Tensor, n: usize, d: usize) -> Tensor {
    assert!(idx.dtype().is_int(), "one_hot: index tensor must be int, got {}", idx.dtype());
    let offset = idx.ndim() - d - 1;
    idx.eq(Tensor::arange(0.0, n as f64, 1.0).reshape([vec![n], vec![1; offset]].concat()))
}

/// Bool `(r, c)`: `j >= i + diagonal` (tinygrad `_tri`, the mask of `triu`).
pub(super) fn tri(r: usize, c: usize, diagonal: i64) -> Tensor {
    let i = Tensor::arange(0.0, r as f64, 1.0).reshape([r, 1]);
    i.add(diagonal).le(Tensor::arange(0.0, c as f64, 1.0))
}
