//! Image-sampling handlers (onnx's operator definitions): `GridSample`, `RoiAlign` and `Col2Im`. `GridSample` is
//! lazy (taps gathered from the flattened image by computed indices); `RoiAlign` and `Col2Im` build their sampling
//! weights on the host from the (small) box and shape inputs.

use super::{arg, floats, one, values, Node, Outputs};
use crate::dtype::dtypes;
use crate::tensor::Tensor;

/// `x` reflected into `[lo, hi]` (GridSample's `reflection` padding): folded back and forth by the span.
fn reflect(x: &Tensor, lo: f64, hi: f64) -> Tensor {
    let span = hi - lo;
    let fold = |d: Tensor, from: f64, sign: f64| {
        let k = d.div(span).floor();
        let r = d.sub(k.mul(span));
        let even = k.mod_(2.0).eq(0.0);
        even.where_(r.mul(sign).add(from), r.mul(-sign).add(from + sign * span))
    };
    let below = fold(x.neg().add(lo), lo, 1.0);
    let above = fold(x.sub(hi), hi, -1.0);
    x.lt(lo).where_(below, x.gt(hi).where_(above, x))
}

/// `GridSample(X, grid)`: `X` `(N, C, *D)` sampled at the normalized coordinates of `grid` `(N, *O, r)` (x first),
/// by `nearest` (half to even), N-`linear` or N-`cubic` (a = -0.75) taps, outside points read as 0 (`zeros`), the
/// nearest edge (`border`) or a reflection (`reflection`); `align_corners` maps -1 and 1 to the corner centers.
pub(super) fn grid_sample(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let (x, grid) = (arg(a, 0)?, arg(a, 1)?.cast(dtypes::FLOAT32));
    let (mode, pad) = (n.string("mode", "linear"), n.string("padding_mode", "zeros"));
    let corners = n.int("align_corners", 0) != 0;
    let (nb, c, dims) = (x.shape()[0], x.shape()[1], x.shape()[2..].to_vec());
    let out = grid.shape()[1..grid.ndim() - 1].to_vec();
    let r = dims.len();
    let cells: usize = out.iter().product();
    let grid = grid.reshape([nb, cells, r]);
    // per spatial dim: its taps as (integer index, weight) tensors (N, cells)
    let mut per_dim: Vec<Vec<(Tensor, Tensor)>> = Vec::new();
    for (i, &d) in dims.iter().enumerate() {
        let g = grid.getitem(&[crate::tensor::Index::Ellipsis, crate::tensor::Index::Int((r - 1 - i) as i64)]);
        let df = d as f64;
        let mut xc = if corners { g.add(1.0).div(2.0).mul(df - 1.0) } else { g.add(1.0).mul(df).sub(1.0).div(2.0) };
        let (lo, hi) = if corners { (0.0, df - 1.0) } else { (-0.5, df - 0.5) };
        if mode == "nearest" {
            xc = xc.round();
        }
        let outside = xc.lt(lo).bitwise_or(xc.gt(hi));
        xc = match pad.as_str() {
            "border" => outside.where_(xc.clamp(0.0, df - 1.0), &xc),
            "reflection" => reflect(&xc, lo, hi),
            _ => xc,
        };
        let base = xc.floor();
        let t = xc.sub(&base);
        let taps: Vec<(i64, Tensor)> = match mode.as_str() {
            "nearest" => vec![(0, t.ones_like())],
            "cubic" => {
                let aa = -0.75;
                let near = |d: &Tensor| d.mul(aa + 2.0).sub(aa + 3.0).mul(d).mul(d).add(1.0);
                let far = |d: &Tensor| d.mul(aa).sub(5.0 * aa).mul(d).add(8.0 * aa).mul(d).sub(4.0 * aa);
                let u = t.neg().add(1.0);
                vec![(-1, far(&t.add(1.0))), (0, near(&t)), (1, near(&u)), (2, far(&u.add(1.0)))]
            }
            _ => vec![(0, t.neg().add(1.0)), (1, t.clone())],
        };
        let start = if mode == "nearest" { xc.trunc() } else { base };
        per_dim.push(
            taps.into_iter()
                .map(|(o, w)| {
                    let idx = start.add(o as f64);
                    let idx = match pad.as_str() {
                        "border" => idx.clamp(0.0, df - 1.0),
                        "reflection" => reflect(&idx, lo, hi).trunc().clamp(0.0, df - 1.0),
                        _ => idx,
                    };
                    let inside = idx.ge(0.0).bitwise_and(idx.lt(df));
                    (idx.clamp(0.0, df - 1.0).cast(dtypes::INT64), inside.where_(w, 0.0))
                })
                .collect(),
        );
    }
    // every combination of one tap per dim: a flat index into the image and the product of the weights
    let plane: usize = dims.iter().product();
    let flat = x.reshape([nb, c, plane]).cast(dtypes::FLOAT32);
    let mut combos: Vec<(Tensor, Tensor)> =
        vec![(Tensor::full_dtype([nb, cells], 0i64, dtypes::INT64), Tensor::full_dtype([nb, cells], 1.0, dtypes::FLOAT32))];
    for (i, taps) in per_dim.iter().enumerate() {
        let stride: usize = dims[i + 1..].iter().product();
        combos = combos.iter().flat_map(|(fi, fw)| taps.iter().map(move |(ti, tw)| (fi.add(ti.mul(stride as i64)), fw.mul(tw)))).collect();
    }
    let mut y: Option<Tensor> = None;
    for (idx, w) in combos {
        let picked = flat.gather(2, &idx.unsqueeze(1).expand([nb as i64, c as i64, cells as i64]));
        let term = picked.mul(w.unsqueeze(1));
        y = Some(y.map_or(term.clone(), |s| s.add(&term)));
    }
    let y = y.ok_or("GridSample with no taps")?;
    one(y.reshape([vec![nb, c], out].concat()).cast(x.dtype()))
}

/// `RoiAlign(X, rois, batch_indices)`: each box pooled to `output_height x output_width` bins, each bin the mean
/// (or max of weighted corners) of `sampling_ratio²` (adaptive when 0) bilinear samples; a sampling matrix built
/// on the host, applied as one matmul per box.
pub(super) fn roi_align(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let (x, rois, batch) = (arg(a, 0)?, floats(arg(a, 1)?)?, values(arg(a, 2)?)?);
    let (c, h, w) = (x.shape()[1], x.shape()[2], x.shape()[3]);
    let (oh, ow) = (n.int("output_height", 1) as usize, n.int("output_width", 1) as usize);
    let (ratio, scale) = (n.int("sampling_ratio", 0), n.float("spatial_scale", 1.0) as f64);
    let half = n.string("coordinate_transformation_mode", "half_pixel") == "half_pixel";
    let max = n.string("mode", "avg") == "max";
    let mut outs = Vec::new();
    for (r, &b) in batch.iter().enumerate() {
        let off = if half { 0.5 } else { 0.0 };
        let [x1, y1, x2, y2] = [0, 1, 2, 3].map(|i| rois[r * 4 + i] * scale - off);
        let (mut rw, mut rh) = (x2 - x1, y2 - y1);
        if !half {
            (rw, rh) = (rw.max(1.0), rh.max(1.0));
        }
        let (bh, bw) = (rh / oh as f64, rw / ow as f64);
        let gh = if ratio > 0 { ratio as usize } else { (rh / oh as f64).ceil() as usize };
        let gw = if ratio > 0 { ratio as usize } else { (rw / ow as f64).ceil() as usize };
        let count = (gh * gw).max(1) as f64;
        // per output bin and sample: its 4 (pixel, weight) corners
        let samples = |ph: usize, pw: usize| -> Vec<Vec<(usize, f64)>> {
            let mut v = Vec::new();
            for iy in 0..gh {
                for ix in 0..gw {
                    let yy = y1 + ph as f64 * bh + (iy as f64 + 0.5) * bh / gh as f64;
                    let xx = x1 + pw as f64 * bw + (ix as f64 + 0.5) * bw / gw as f64;
                    if yy < -1.0 || yy > h as f64 || xx < -1.0 || xx > w as f64 {
                        v.push(vec![]);
                        continue;
                    }
                    let edge = |v: f64, size: usize| {
                        let lo = v.max(0.0) as usize;
                        if lo >= size - 1 {
                            (size - 1, size - 1, (size - 1) as f64)
                        } else {
                            (lo, lo + 1, v.max(0.0))
                        }
                    };
                    let ((yl, yh, yy), (xl, xh, xx)) = (edge(yy, h), edge(xx, w));
                    let (ly, lx) = (yy - yl as f64, xx - xl as f64);
                    let (hy, hx) = (1.0 - ly, 1.0 - lx);
                    v.push(vec![(yl * w + xl, hy * hx), (yl * w + xh, hy * lx), (yh * w + xl, ly * hx), (yh * w + xh, ly * lx)]);
                }
            }
            v
        };
        let img = x.getitem(&[crate::tensor::Index::Int(b)]).reshape([c, h * w]).cast(dtypes::FLOAT32);
        let bins: Vec<Vec<Vec<(usize, f64)>>> = (0..oh * ow).map(|p| samples(p / ow, p % ow)).collect();
        let out = if max {
            // max over samples of the max weighted corner: one matrix per (sample, corner) slot
            let slots = gh * gw * 4;
            let mut best: Option<Tensor> = None;
            for s in 0..slots {
                let mut m = vec![0.0f32; h * w * oh * ow];
                for (p, bin) in bins.iter().enumerate() {
                    if let Some(&(pix, wt)) = bin.get(s / 4).and_then(|c| c.get(s % 4)) {
                        m[pix * oh * ow + p] = wt as f32;
                    }
                }
                let v = img.matmul(&Tensor::from_slice(&m, [h * w, oh * ow]));
                best = Some(best.map_or(v.clone(), |b| b.maximum(&v)));
            }
            best.ok_or("RoiAlign with no samples")?
        } else {
            let mut m = vec![0.0f32; h * w * oh * ow];
            for (p, bin) in bins.iter().enumerate() {
                for &(pix, wt) in bin.iter().flatten() {
                    m[pix * oh * ow + p] += (wt / count) as f32;
                }
            }
            img.matmul(&Tensor::from_slice(&m, [h * w, oh * ow]))
        };
        outs.push(out.reshape([c, oh, ow]));
    }
    let (first, rest) = outs.split_first().ok_or("RoiAlign with no boxes")?;
    one(first.stack(&rest.iter().collect::<Vec<_>>(), 0).cast(x.dtype()))
}

/// `Col2Im(input, image_shape, block_shape)`: the columns of `(N, C·∏block, L)` summed back into an image
/// `(N, C, *image_shape)` (the inverse of an unfold with `strides`, `dilations`, `pads`), by a 0/1 matrix built on
/// the host.
pub(super) fn col2im(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let x = arg(a, 0)?;
    let (img, blk) = (values(arg(a, 1)?)?, values(arg(a, 2)?)?);
    let nd = img.len();
    let per = |name: &str, d: i64| n.ints(name).unwrap_or_else(|| vec![d; nd]);
    let (dil, st) = (per("dilations", 1), per("strides", 1));
    let pads = n.ints("pads").unwrap_or_else(|| vec![0; 2 * nd]);
    let nb: Vec<i64> = (0..nd).map(|i| (img[i] + pads[i] + pads[i + nd] - (dil[i] * (blk[i] - 1) + 1)) / st[i] + 1).collect();
    let (k, l, pix): (i64, i64, i64) = (blk.iter().product(), nb.iter().product(), img.iter().product());
    let unravel = |mut v: i64, shape: &[i64]| {
        let mut out = vec![0; shape.len()];
        for d in (0..shape.len()).rev() {
            out[d] = v % shape[d];
            v /= shape[d];
        }
        out
    };
    let mut m = vec![0.0f32; (k * l * pix) as usize];
    for kk in 0..k {
        let ko = unravel(kk, &blk);
        for ll in 0..l {
            let bo = unravel(ll, &nb);
            let p: Vec<i64> = (0..nd).map(|i| bo[i] * st[i] - pads[i] + ko[i] * dil[i]).collect();
            if p.iter().zip(&img).all(|(&p, &d)| (0..d).contains(&p)) {
                let flat = p.iter().zip(&img).fold(0, |acc, (&p, &d)| acc * d + p);
                m[((kk * l + ll) * pix + flat) as usize] += 1.0;
            }
        }
    }
    let (batch, c) = (x.shape()[0], x.shape()[1] / k as usize);
    let cols = x.cast(dtypes::FLOAT32).reshape([batch, c, (k * l) as usize]);
    let y = cols.matmul(&Tensor::from_slice(&m, [(k * l) as usize, pix as usize]));
    let shape: Vec<usize> = [vec![batch, c], img.iter().map(|&d| d as usize).collect()].concat();
    one(y.reshape(shape).cast(x.dtype()))
}

/// `DeformConv(X, W, offset, B, mask)` (2-D): each kernel tap reads the image at its position moved by `offset`
/// (`(dy, dx)` per offset group, tap and output position), bilinearly (corners outside the image read 0), scaled by
/// `mask`; then the grouped convolution's sum with `W`, plus `B`.
pub(super) fn deform_conv(n: &Node, a: &[Option<crate::tensor::Tensor>]) -> super::Outputs {
    use crate::tensor::Index;
    let (x, w, offset) = (arg(a, 0)?.cast(dtypes::FLOAT32), arg(a, 1)?.cast(dtypes::FLOAT32), arg(a, 2)?.cast(dtypes::FLOAT32));
    let (nb, c, h, wd) = (x.shape()[0], x.shape()[1], x.shape()[2], x.shape()[3]);
    let (oc, kh, kw) = (w.shape()[0], w.shape()[2], w.shape()[3]);
    let (oh, ow) = (offset.shape()[2], offset.shape()[3]);
    let (group, og) = (n.int("group", 1) as usize, n.int("offset_group", 1) as usize);
    let s = n.ints("strides").unwrap_or(vec![1, 1]);
    let d = n.ints("dilations").unwrap_or(vec![1, 1]);
    let p = n.ints("pads").unwrap_or(vec![0; 4]);
    let (taps, cells) = (kh * kw, oh * ow);
    let off = offset.reshape([nb, og, taps, 2, cells]);
    let mask = super::opt(a, 4).map(|m| m.cast(dtypes::FLOAT32).reshape([nb, og, taps, cells]));
    let flat = x.reshape([nb, c, h * wd]);
    let per_group = c / og;
    let widen = |t: &crate::tensor::Tensor| t.repeat_interleave(per_group, Some(1));
    // (each output position's undeformed tap coordinate along rows or columns)
    let grid = |stride: i64, pad: i64, dil: i64, k: usize, along_rows: bool| {
        let pos: Vec<f32> = (0..cells)
            .map(|q| if along_rows { q / ow } else { q % ow })
            .map(|i| (i as i64 * stride - pad + k as i64 * dil) as f32)
            .collect();
        crate::tensor::Tensor::from_slice(&pos, [1, 1, cells])
    };
    let mut sampled = Vec::with_capacity(taps);
    for t in 0..taps {
        let (ti, tj) = (t / kw, t % kw);
        let at =
            |k: i64| off.getitem(&[Index::Slice(None, None, None), Index::Slice(None, None, None), Index::Int(t as i64), Index::Int(k)]);
        let y = at(0).add(grid(s[0], p[0], d[0], ti, true));
        let xx = at(1).add(grid(s[1], p[1], d[1], tj, false));
        let (y0, x0) = (y.floor(), xx.floor());
        let (ly, lx) = (y.sub(&y0), xx.sub(&x0));
        let mut v: Option<crate::tensor::Tensor> = None;
        for (dy, dx) in [(0.0, 0.0), (0.0, 1.0), (1.0, 0.0), (1.0, 1.0)] {
            let (yy, xc) = (y0.add(dy), x0.add(dx));
            let wgt = (if dy == 0.0 { ly.neg().add(1.0) } else { ly.clone() }).mul(if dx == 0.0 { lx.neg().add(1.0) } else { lx.clone() });
            let inside = yy.ge(0.0).bitwise_and(yy.lt(h as f64)).bitwise_and(xc.ge(0.0)).bitwise_and(xc.lt(wd as f64));
            let idx = yy.clamp(0.0, (h - 1) as f64).mul(wd as f64).add(xc.clamp(0.0, (wd - 1) as f64)).cast(dtypes::INT64);
            let picked = flat.gather(2, &widen(&idx));
            let term = picked.mul(widen(&inside.where_(wgt, 0.0)));
            v = Some(v.map_or(term.clone(), |acc| acc.add(&term)));
        }
        let v = v.ok_or("DeformConv with no corners")?;
        let v = match &mask {
            Some(m) => v.mul(widen(&m.getitem(&[Index::Slice(None, None, None), Index::Slice(None, None, None), Index::Int(t as i64)]))),
            None => v,
        };
        sampled.push(v);
    }
    // (N, C, taps, cells) -> per group: W (oC/g, C/g·taps) @ V (C/g·taps, cells)
    let v = sampled[0].stack(&sampled[1..].iter().collect::<Vec<_>>(), 2);
    let (cg, ocg) = (c / group, oc / group);
    let v = v.reshape([nb, group, cg * taps, cells]);
    let wg = w.reshape([group, ocg, cg * taps]).unsqueeze(0);
    let mut y = wg.matmul(&v).reshape([nb, oc, oh, ow]);
    if let Some(b) = super::opt(a, 3) {
        y = y.add(b.cast(dtypes::FLOAT32).reshape([1, oc, 1, 1]));
    }
    super::one(y.cast(arg(a, 0)?.dtype()))
}
