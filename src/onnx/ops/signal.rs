//! Spectral handlers (onnx's operator definitions; tinygrad has none): `DFT`, `STFT` and `MelWeightMatrix`.
//! The transforms are matrix products with cosine and sine tables built on the host; signals carry a last dim of
//! 1 (real) or 2 (real, imaginary), as ONNX lays them out.

use super::{arg, axis_of, dtype_attr, floats, one, opt, values, Node, Outputs};
use crate::dtype::dtypes;
use crate::tensor::{Index, Tensor};
use std::f64::consts::PI;

/// A `rows x cols` table `f(row, col)` as a float32 tensor.
fn table(rows: usize, cols: usize, f: impl Fn(usize, usize) -> f64) -> Tensor {
    let v: Vec<f32> = (0..rows * cols).map(|i| f(i / cols, i % cols) as f32).collect();
    Tensor::from_slice(&v, [rows, cols])
}

/// The DFT of `(re, im)` along their last dim (`m` samples, cut or zero-padded to `n`): forward (`e^{-2πi jk/n}`,
/// unscaled) or inverse (`e^{+}`, over `n`), keeping `n/2 + 1` bins when `onesided`. An inverse onesided transform
/// is numpy's `irfft`: the first `n/2 + 1` bins give a real signal of `n` samples. Returns `(re, im)` (im `None`
/// for a real result).
fn transform(re: &Tensor, im: Option<&Tensor>, n: usize, inverse: bool, onesided: bool) -> (Tensor, Option<Tensor>) {
    let fit = |t: &Tensor, len: usize| {
        let m = t.shape()[t.ndim() - 1] as i64;
        let pads: Vec<(i64, i64)> = (0..t.ndim()).map(|d| if d == t.ndim() - 1 { (0, len as i64 - m) } else { (0, 0) }).collect();
        t.cast(dtypes::FLOAT32).pad(&pads)
    };
    if inverse && onesided {
        let bins = n / 2 + 1;
        let take = |t: &Tensor| fit(&t.getitem(&[Index::Ellipsis, Index::Slice(None, Some(bins as i64), None)]), bins);
        let weight = |k: usize| if k == 0 || (n.is_multiple_of(2) && k == n / 2) { 1.0 } else { 2.0 } / n as f64;
        let cos = table(bins, n, |k, t| weight(k) * (2.0 * PI * (k * t) as f64 / n as f64).cos());
        let sin = table(bins, n, |k, t| -weight(k) * (2.0 * PI * (k * t) as f64 / n as f64).sin());
        let mut x = take(re).matmul(&cos);
        if let Some(i) = im {
            x = x.add(take(i).matmul(&sin));
        }
        return (x, None);
    }
    let bins = if onesided { n / 2 + 1 } else { n };
    let (sign, scale) = if inverse { (1.0, 1.0 / n as f64) } else { (-1.0, 1.0) };
    let cos = table(n, bins, |j, k| scale * (2.0 * PI * (j * k % n) as f64 / n as f64).cos());
    let sin = table(n, bins, |j, k| sign * scale * (2.0 * PI * (j * k % n) as f64 / n as f64).sin());
    let (xr, xi) = (fit(re, n), im.map(|i| fit(i, n)));
    // (a + ib)(c + is) = (ac - bs) + i(as + bc)
    let mut out_re = xr.matmul(&cos);
    let mut out_im = xr.matmul(&sin);
    if let Some(xi) = xi {
        out_re = out_re.sub(xi.matmul(&sin));
        out_im = out_im.add(xi.matmul(&cos));
    }
    (out_re, Some(out_im))
}

/// `(re, im)` stacked on a new last dim of 2 (or `re` with a last dim of 1), in `dt`.
fn complex(re: Tensor, im: Option<Tensor>, dt: crate::dtype::DType) -> Tensor {
    match im {
        Some(im) => re.stack(&[&im], -1).cast(dt),
        None => re.unsqueeze(-1).cast(dt),
    }
}

/// The real and imaginary parts of a signal `(..., 1|2)`.
fn parts(x: &Tensor) -> (Tensor, Option<Tensor>) {
    let part = |i: i64| x.getitem(&[Index::Ellipsis, Index::Int(i)]);
    (part(0), (x.shape()[x.ndim() - 1] == 2).then(|| part(1)))
}

/// `DFT(input, dft_length, axis)`: along `axis` (input 2 from opset 20, default -2; the attribute, default 1,
/// before), `inverse` and `onesided` as [`transform`] reads them.
pub(super) fn dft(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let x = arg(a, 0)?;
    let axis = match (n.opset >= 20, opt(a, 2)) {
        (true, Some(t)) => values(t)?[0],
        (true, None) => -2,
        (false, _) => n.int("axis", 1),
    };
    let axis = axis_of(axis, x.ndim());
    let (inverse, onesided) = (n.int("inverse", 0) != 0, n.int("onesided", 0) != 0);
    let (re, im) = parts(x);
    let m = x.shape()[axis as usize];
    let len = match opt(a, 1) {
        Some(t) => values(t)?[0] as usize,
        None if inverse && onesided => 2 * (m - 1),
        None => m,
    };
    let last = re.ndim() as i64 - 1;
    let (re, im) = (re.transpose(axis, last), im.map(|i| i.transpose(axis, last)));
    let (r, i) = transform(&re, im.as_ref(), len, inverse, onesided);
    one(complex(r.transpose(axis, last), i.map(|i| i.transpose(axis, last)), x.dtype()))
}

/// `STFT(signal, frame_step, window, frame_length)`: frames of `frame_length` (or the window's length) every
/// `frame_step` samples, windowed, each transformed (onesided by default): `(batch, frames, bins, 2)`.
pub(super) fn stft(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let (x, step) = (arg(a, 0)?, values(arg(a, 1)?)?[0] as usize);
    let window = opt(a, 2);
    let len = match (opt(a, 3), window) {
        (Some(t), _) => values(t)?[0] as usize,
        (None, Some(w)) => w.numel(),
        (None, None) => x.shape()[1],
    };
    let frames = 1 + (x.shape()[1] - len) / step;
    let (re, im) = parts(x);
    let frame = |t: &Tensor, f: usize| {
        t.getitem(&[Index::Slice(None, None, None), Index::Slice(Some((f * step) as i64), Some((f * step + len) as i64), None)])
    };
    let stack = |t: &Tensor| {
        let fs: Vec<Tensor> = (0..frames).map(|f| frame(t, f)).collect();
        let s = fs[0].stack(&fs[1..].iter().collect::<Vec<_>>(), 1);
        window.map_or(s.clone(), |w| s.mul(w))
    };
    let (r, i) = transform(&stack(&re), im.map(|i| stack(&i)).as_ref(), len, false, n.int("onesided", 1) != 0);
    one(complex(r, i, x.dtype()))
}

/// `MelWeightMatrix(num_mel_bins, dft_length, sample_rate, lower_edge_hertz, upper_edge_hertz)`: triangular
/// filters between mel-spaced edges, `(dft_length/2 + 1, num_mel_bins)` in `output_datatype`.
pub(super) fn mel_weight_matrix(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let v = |i| arg(a, i).and_then(floats).map(|v| v[0]);
    let (mels, dft, rate, lo, hi) = (v(0)? as usize, v(1)? as usize, v(2)?, v(3)?, v(4)?);
    let mel = |h: f64| 2595.0 * (1.0 + h / 700.0).log10();
    let step = (mel(hi) - mel(lo)) / (mels + 2) as f64;
    let edge: Vec<usize> = (0..mels + 2)
        .map(|i| 700.0 * (10f64.powf((mel(lo) + i as f64 * step) / 2595.0) - 1.0))
        .map(|f| ((dft + 1) as f64 * f / rate).floor() as usize)
        .collect();
    let bins = dft / 2 + 1;
    let mut out = vec![0.0f64; bins * mels];
    for i in 0..mels {
        let (l, c, h) = (edge[i], edge[i + 1], edge[i + 2]);
        if c == l {
            out[c * mels + i] = 1.0;
        } else {
            (l..=c).for_each(|j| out[j * mels + i] = (j - l) as f64 / (c - l) as f64);
        }
        if h > c {
            (c..h).for_each(|j| out[j * mels + i] = (h - j) as f64 / (h - c) as f64);
        }
    }
    one(Tensor::from_slice(&out, [bins, mels]).cast(dtype_attr(n.int("output_datatype", 1))?))
}
