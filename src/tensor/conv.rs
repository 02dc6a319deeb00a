//! Tensor ops: convolution (any number of spatial dims, grouped, dilated, transposed), pooling (average, max with
//! indices, unpooling) and interpolation. In: tensors and their options ([`Conv2dOpts`], [`Pool2dOpts`],
//! [`InterpolateMode`]). Out: lazy tensors built as windows of the padded input (movement ops), multiplied and
//! summed, so each differentiates through the primitives' rules. Follows tinygrad `tensor.py` (`conv2d`,
//! `_pool`, `avg_pool2d`, `max_pool2d`, `interpolate`).

use super::movement::{one_hot_at, pad_const, pool};
use super::Tensor;
use crate::dtype::{dtypes, DType};
use crate::helpers::ceildiv;

/// Options of [`Tensor::conv2d`] and [`Tensor::conv_transpose2d`] (tinygrad's keyword arguments). Per-dim
/// fields take one value for every spatial dim or one per dim.
#[derive(Clone, Debug)]
pub struct Conv2dOpts {
    /// Added per output channel.
    pub bias: Option<Tensor>,
    /// Channel groups: input and output channels split into `groups` independent convolutions.
    pub groups: usize,
    /// Window step per spatial dim.
    pub stride: Vec<usize>,
    /// Spacing of kernel taps per spatial dim.
    pub dilation: Vec<usize>,
    /// `[p]` for every side, one value per spatial dim (both sides), or `2*dims` values in torch order (last
    /// dim first: left, right, top, bottom, ...). Negative values crop.
    pub padding: Vec<i64>,
    /// `conv_transpose2d` only: extra output size after each spatial dim.
    pub output_padding: Vec<usize>,
    /// `conv2d` only: the accumulation dtype (tinygrad `dtype`); default the inputs' sum dtype.
    pub dtype: Option<DType>,
}

impl Default for Conv2dOpts {
    fn default() -> Self {
        Conv2dOpts { bias: None, groups: 1, stride: vec![1], dilation: vec![1], padding: vec![0], output_padding: vec![0], dtype: None }
    }
}

fn usizes(v: impl super::IntoDims) -> Vec<usize> {
    v.into_dims().into_iter().map(|x| usize::try_from(x).expect("expected non-negative values")).collect()
}

impl Conv2dOpts {
    /// With a bias.
    pub fn bias(mut self, b: &Tensor) -> Self {
        self.bias = Some(b.clone());
        self
    }
    /// With `g` groups.
    pub fn groups(mut self, g: usize) -> Self {
        self.groups = g;
        self
    }
    /// With a stride (one value or one per spatial dim).
    pub fn stride(mut self, s: impl super::IntoDims) -> Self {
        self.stride = usizes(s);
        self
    }
    /// With a dilation (one value or one per spatial dim).
    pub fn dilation(mut self, d: impl super::IntoDims) -> Self {
        self.dilation = usizes(d);
        self
    }
    /// With padding in one of tinygrad's forms (see the `padding` field).
    pub fn padding(mut self, p: impl super::IntoDims) -> Self {
        self.padding = p.into_dims();
        self
    }
    /// With output padding (conv_transpose2d).
    pub fn output_padding(mut self, p: impl super::IntoDims) -> Self {
        self.output_padding = usizes(p);
        self
    }
    /// With an accumulation dtype (conv2d).
    pub fn dtype(mut self, dt: DType) -> Self {
        self.dtype = Some(dt);
        self
    }
}

/// Options of the pooling ops [`Tensor::avg_pool2d`], [`Tensor::max_pool2d`] and [`Tensor::max_unpool2d`]
/// (tinygrad's keyword arguments). They pool over as many trailing dims as `kernel_size` has.
#[derive(Clone, Debug)]
pub struct Pool2dOpts {
    /// Window size per pooled dim (default `[2, 2]`).
    pub kernel_size: Vec<usize>,
    /// Window step (one value or one per dim); `None` is the kernel size.
    pub stride: Option<Vec<usize>>,
    /// Spacing of window taps (one value or one per dim).
    pub dilation: Vec<usize>,
    /// Padding in the forms of the `padding` field of [`Conv2dOpts`].
    pub padding: Vec<i64>,
    /// Output size rounded up: a last window may start in the input and run past it.
    pub ceil_mode: bool,
    /// `avg_pool2d` only: whether padded zeros count in the mean.
    pub count_include_pad: bool,
}

impl Default for Pool2dOpts {
    fn default() -> Self {
        Pool2dOpts { kernel_size: vec![2, 2], stride: None, dilation: vec![1], padding: vec![0], ceil_mode: false, count_include_pad: true }
    }
}

impl Pool2dOpts {
    /// With a kernel size (one entry per pooled dim).
    pub fn kernel_size(mut self, k: impl super::IntoDims) -> Self {
        self.kernel_size = usizes(k);
        self
    }
    /// With a stride.
    pub fn stride(mut self, s: impl super::IntoDims) -> Self {
        self.stride = Some(usizes(s));
        self
    }
    /// With a dilation.
    pub fn dilation(mut self, d: impl super::IntoDims) -> Self {
        self.dilation = usizes(d);
        self
    }
    /// With padding.
    pub fn padding(mut self, p: impl super::IntoDims) -> Self {
        self.padding = p.into_dims();
        self
    }
    /// With ceil mode.
    pub fn ceil_mode(mut self, on: bool) -> Self {
        self.ceil_mode = on;
        self
    }
    /// With or without padding counted in averages.
    pub fn count_include_pad(mut self, on: bool) -> Self {
        self.count_include_pad = on;
        self
    }
}

/// One value per dim from one value or one per dim (tinygrad `make_tuple`).
fn per_dim(v: &[usize], n: usize, what: &str, op: &str) -> Vec<usize> {
    match v.len() {
        1 => vec![v[0]; n],
        l if l == n => v.to_vec(),
        _ => panic!("{op}: {what} {v:?} needs 1 or {n} values"),
    }
}

/// `x` `(N, C, *spatial)` plus `bias` `(C,)` per channel.
fn with_bias(x: Tensor, bias: &Option<Tensor>) -> Tensor {
    match bias {
        Some(b) => {
            let s = x.shape();
            x.add(b.reshape([vec![1, s[1]], vec![1; s.len() - 2]].concat()))
        }
        None => x,
    }
}

/// `(before, after)` per spatial dim from tinygrad's padding forms (`resolve_pool_pads` + `flat_to_grouped`).
fn resolve_pads(p: &[i64], n: usize, op: &str) -> Vec<(i64, i64)> {
    match p.len() {
        1 => vec![(p[0], p[0]); n],
        l if l == 2 * n => (0..n).map(|d| (p[2 * (n - 1 - d)], p[2 * (n - 1 - d) + 1])).collect(),
        l if l == n => p.iter().map(|&x| (x, x)).collect(),
        _ => panic!("{op}: padding {p:?} needs 1, {n} or {} values", 2 * n),
    }
}

/// Kernel, stride, dilation and `(before, after)` padding per pooled dim.
struct Window {
    k: Vec<usize>,
    s: Vec<usize>,
    d: Vec<usize>,
    pads: Vec<(i64, i64)>,
}

impl Window {
    /// The windows of `x` (already padded): `(..., o..., k...)`.
    fn apply(&self, x: &Tensor) -> Tensor {
        pool(x, &self.k, &self.s, &self.d)
    }
    /// The kernel dims of the pooled tensor (the last ones).
    fn axes(&self) -> Vec<i64> {
        (1..=self.k.len() as i64).map(|i| -i).collect()
    }
}

/// Interpolation modes of [`Tensor::interpolate`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InterpolateMode {
    /// Linear in each resized dim (bilinear, trilinear, ...).
    Linear,
    /// The source element at `floor(i * in / out)`.
    Nearest,
    /// The source element at `floor((i + 0.5) * in / out)`.
    NearestExact,
}

impl Tensor {
    /// Convolution over the spatial dims of `self` `(N, Cin, *spatial)` with `weight` `(Cout, Cin/groups,
    /// *kernel)`: 1-D, 2-D, 3-D, ... (tinygrad `conv2d`). Built as windows of the padded input (movement ops),
    /// multiplied by the weight and summed.
    ///
    /// # Panics
    /// If the shapes don't fit together; the message names both shapes.
    pub fn conv2d(&self, weight: &Tensor, opts: Conv2dOpts) -> Tensor {
        let (xs, ws) = (self.shape(), weight.shape());
        assert!(xs.len() >= 3 && xs.len() == ws.len(), "conv2d: input shape {xs:?} doesn't match weight shape {ws:?}");
        let hw = ws[2..].len();
        let pads = resolve_pads(&opts.padding, hw, "conv2d");
        let stride1 = per_dim(&opts.stride, hw, "stride", "conv2d").iter().all(|&s| s == 1);
        // a window's input gradient is a transposed convolution: derived through the windows, it would be the
        // product of every window with the weight, in a buffer kernel-area times the input's, summed back (col2im)
        if stride1 && ws[2..].iter().any(|&k| k > 1) && !self.is_sharded() && !weight.is_sharded() {
            let out = self.conv(weight, &Conv2dOpts { bias: None, ..opts.clone() }, &pads);
            let out = out.custom_gradient(&[self, weight], |g| {
                vec![g.conv_input_gradient(weight, &opts, &pads), g.conv_weight_gradient(self, &ws, &opts, &pads)]
            });
            return with_bias(out, &opts.bias);
        }
        self.conv(weight, &opts, &pads)
    }
    /// The gradient of a stride-1 `conv2d`'s input given its output's gradient `self`: a convolution of `self`,
    /// padded by the kernel's extent less the forward padding, with the flipped kernel, channels swapped per group.
    fn conv_input_gradient(&self, weight: &Tensor, opts: &Conv2dOpts, pads: &[(i64, i64)]) -> Tensor {
        let (ws, g) = (weight.shape(), opts.groups);
        let (nd, rcout, cin) = (ws.len() - 2, ws[0] / g, ws[1]);
        let dilation = per_dim(&opts.dilation, nd, "dilation", "conv2d");
        let w = weight.reshape([vec![g, rcout, cin], ws[2..].to_vec()].concat()).transpose(1, 2).flip((3..3 + nd).collect::<Vec<_>>());
        let w = w.reshape([vec![g * cin, rcout], ws[2..].to_vec()].concat());
        let pads: Vec<(i64, i64)> = pads
            .iter()
            .zip(&ws[2..])
            .zip(&dilation)
            .map(|((&(l, r), &k), &d)| (((k - 1) * d) as i64 - l, ((k - 1) * d) as i64 - r))
            .collect();
        self.conv(&w, &Conv2dOpts { groups: g, dilation, ..Default::default() }, &pads)
    }
    /// The gradient of a stride-1 `conv2d`'s weight (of shape `ws`) given its output's gradient `self` and its
    /// input `x`: each window of `x` times the gradient, summed over images and positions. The gradient is stored
    /// channel innermost first, so a kernel's vectors run along output channels (its windows' pixels broadcast).
    fn conv_weight_gradient(&self, x: &Tensor, ws: &[usize], opts: &Conv2dOpts, pads: &[(i64, i64)]) -> Tensor {
        let (bs, g, nd) = (x.shape()[0], opts.groups, ws.len() - 2);
        let (rcout, cin, k) = (ws[0] / g, ws[1], ws[2..].to_vec());
        let dilation = per_dim(&opts.dilation, nd, "dilation", "conv2d");
        let xw = pool(&x.pad(&[vec![(0, 0); 2], pads.to_vec()].concat()), &k, &vec![1; nd], &dilation);
        let o = xw.shape()[2..2 + nd].to_vec();
        let xw = xw.reshape([vec![bs, g, 1, cin], o.clone(), k.clone()].concat());
        let last: Vec<usize> = [vec![0], (2..2 + nd).collect(), vec![1]].concat();
        let gl = self.permute(last).contiguous().reshape([vec![bs], o.clone(), vec![g, rcout]].concat());
        let gl =
            gl.permute([vec![0, nd + 1, nd + 2], (1..=nd).collect()].concat()).reshape([vec![bs, g, rcout, 1], o, vec![1; nd]].concat());
        let axes: Vec<usize> = [vec![0], (4..4 + nd).collect()].concat();
        xw.mul(gl).sum(axes).reshape(ws.to_vec())
    }
    fn conv(&self, weight: &Tensor, opts: &Conv2dOpts, pads: &[(i64, i64)]) -> Tensor {
        let (xs, ws, g) = (self.shape(), weight.shape(), opts.groups);
        let (bs, cin, cout, hw) = (xs[0], ws[1], ws[0], ws[2..].to_vec());
        assert!(
            g > 0 && g * cin == xs[1] && cout % g == 0,
            "conv2d: input shape {xs:?} doesn't match weight shape {ws:?} with {g} groups ({} vs {} channels)",
            g * cin,
            xs[1]
        );
        let (stride, dilation) =
            (per_dim(&opts.stride, hw.len(), "stride", "conv2d"), per_dim(&opts.dilation, hw.len(), "dilation", "conv2d"));
        let x = pool(&self.pad(&[vec![(0, 0); 2], pads.to_vec()].concat()), &hw, &stride, &dilation);
        // (a strided 1x1 convolution reads every s-th pixel: copied out once, the pixels it reads are a dense image
        // a plain 1x1 convolution runs over at full speed, shared by the convolutions reading it (a ResNet stage's
        // first block and its shortcut); read in place, each would stride across the whole input)
        let x = if hw.iter().all(|&k| k == 1) && stride.iter().any(|&s| s > 1) { x.contiguous() } else { x };
        let (rcout, oyx) = (cout / g, x.shape()[2..2 + hw.len()].to_vec());
        let n = oyx.len();
        let x = x
            .reshape([vec![bs, g, cin, 1], oyx.clone(), hw.clone()].concat())
            .expand([vec![bs, g, cin, rcout], oyx.clone(), hw.clone()].concat())
            .permute([vec![0, 1, 3], (4..4 + n).collect(), vec![2], (4 + n..4 + 2 * n).collect()].concat());
        // (the weight stored output channel innermost: a kernel's vectors run along output channels)
        let wl = if hw.iter().all(|&k| k == 1) {
            weight.clone()
        } else {
            weight.reshape([cout, cin * hw.iter().product::<usize>()]).transpose(0, 1).contiguous().transpose(0, 1)
        };
        let prod = x.mul(wl.reshape([vec![1, g, rcout], vec![1; n], vec![cin], hw].concat()));
        let axes: Vec<i64> = (0..=n as i64).map(|i| -1 - i).collect();
        let summed = match opts.dtype {
            Some(dt) => prod.cast(dt).sum_keepdim(axes),
            None => prod.sum_keepdim(axes),
        };
        with_bias(summed.reshape([vec![bs, cout], oyx].concat()), &opts.bias)
    }
    /// Transposed convolution (the gradient of `conv2d` with respect to its input) of `self` `(N, Cin,
    /// *spatial)` with `weight` `(Cin, Cout/groups, *kernel)`, honouring stride, padding, output padding,
    /// dilation and groups (tinygrad `conv_transpose2d`).
    ///
    /// # Panics
    /// If the shapes don't fit together.
    pub fn conv_transpose2d(&self, weight: &Tensor, opts: Conv2dOpts) -> Tensor {
        let (xs, ws, g) = (self.shape(), weight.shape(), opts.groups);
        assert!(
            xs.len() >= 3 && xs.len() == ws.len() && g > 0 && ws[0] % g == 0 && ws[0] == xs[1],
            "conv_transpose2d: input shape {xs:?} doesn't match weight shape {ws:?} with {g} groups"
        );
        let hw = ws[2..].to_vec();
        let nd = hw.len();
        let w = weight.reshape([vec![g, ws[0] / g], ws[1..].to_vec()].concat()).transpose(1, 2).flip((3..3 + nd).collect::<Vec<_>>());
        let w = w.reshape([vec![g * ws[1], ws[0] / g], hw.clone()].concat());
        let pads = resolve_pads(&opts.padding, nd, "conv_transpose2d");
        let [stride, dilation, outpad] = [("stride", &opts.stride), ("dilation", &opts.dilation), ("output_padding", &opts.output_padding)]
            .map(|(n, v)| per_dim(v, nd, n, "conv_transpose2d"));
        let mut x = self.clone();
        if stride.iter().any(|&s| s > 1) {
            // zeros between the input elements: (k) -> (k, 1) -> pad to (k, s) -> (k*s) -> shrink to k*s-(s-1)
            let sp = &xs[2..];
            x = x.reshape([xs[..2].to_vec(), sp.iter().flat_map(|&k| [k, 1]).collect()].concat());
            x = x.pad(&[vec![(0, 0); 2], stride.iter().flat_map(|&s| [(0, 0), (0, s as i64 - 1)]).collect()].concat());
            x = x.reshape([xs[..2].to_vec(), sp.iter().zip(&stride).map(|(&k, &s)| k * s).collect()].concat());
            x = x.shrink_to([xs[..2].to_vec(), sp.iter().zip(&stride).map(|(&k, &s)| k * s - (s - 1)).collect()].concat());
        }
        let pads: Vec<(i64, i64)> = (0..nd)
            .map(|i| {
                let e = ((hw[i] - 1) * dilation[i]) as i64;
                (e - pads[i].0, e - pads[i].1 + outpad[i] as i64)
            })
            .collect();
        x.conv(&w, &Conv2dOpts { stride: vec![1], dilation, dtype: None, ..opts }, &pads)
    }
    /// The pooling window of `opts` over the trailing dims of `self`, with ceil mode's extra padding if
    /// `ceil` (tinygrad `_apply_ceil_mode`: a last window may start in the input and run past it).
    fn window(&self, opts: &Pool2dOpts, ceil: bool, op: &str) -> Window {
        let k = opts.kernel_size.clone();
        assert!(!k.is_empty() && k.len() <= self.ndim(), "{op}: kernel {k:?} doesn't fit shape {:?}", self.shape());
        let s = per_dim(opts.stride.as_ref().unwrap_or(&k), k.len(), "stride", op);
        let d = per_dim(&opts.dilation, k.len(), "dilation", op);
        let mut pads = resolve_pads(&opts.padding, k.len(), op);
        if ceil {
            let sh = self.shape();
            for (j, (pb, pa)) in pads.iter_mut().enumerate() {
                let (i, k, s, d) = (sh[sh.len() - k.len() + j] as i64, k[j] as i64, s[j] as i64, d[j] as i64);
                let o = ceildiv(i + *pb + *pa - (d * (k - 1) + 1), s) + 1;
                *pa += s * (o - 1) + (d * (k - 1) + 1) - (i + *pb + *pa) - (s * (o - 1) - (*pb + i - 1)).max(0);
            }
        }
        Window { k, s, d, pads }
    }
    /// Average pooling over the trailing `kernel_size.len()` dims (tinygrad `avg_pool2d`).
    pub fn avg_pool2d(&self, opts: Pool2dOpts) -> Tensor {
        let w = self.window(&opts, opts.ceil_mode, "avg_pool2d");
        let reg = self.window(&opts, false, "avg_pool2d").pads;
        let axes = w.axes();
        let lead = vec![(0, 0); self.ndim() - w.k.len()];
        let pooled = |x: &Tensor, p: &[(i64, i64)]| w.apply(&x.pad(&[lead.clone(), p.to_vec()].concat()));
        if !opts.count_include_pad {
            return pooled(self, &w.pads).sum(axes.clone()).div(pooled(&self.ones_like(), &w.pads).sum(axes));
        }
        if !opts.ceil_mode {
            return pooled(self, &w.pads).mean(axes);
        }
        // the extra ceil-mode padding doesn't count; the regular padding does
        let extra: Vec<(i64, i64)> = w.pads.iter().zip(&reg).map(|(c, r)| (c.0 - r.0, c.1 - r.1)).collect();
        let ones = self.pad(&[lead.clone(), reg].concat()).ones_like();
        pooled(self, &w.pads).sum(axes.clone()).div(pooled(&ones, &extra).sum(axes))
    }
    /// Max pooling over the trailing `kernel_size.len()` dims (tinygrad `max_pool2d`); padding is `-inf` (the
    /// dtype's minimum).
    pub fn max_pool2d(&self, opts: Pool2dOpts) -> Tensor {
        let (w, pooled) = self.max_pool_windows(&opts);
        pooled.max(w.axes())
    }
    /// Max pooling and, for each output, the int32 flat index of its first maximum within the input's pooled
    /// dims (tinygrad `max_pool2d(..., return_indices=True)`), as [`Tensor::max_unpool2d`] takes them.
    pub fn max_pool2d_with_indices(&self, opts: Pool2dOpts) -> (Tensor, Tensor) {
        let (w, pooled) = self.max_pool_windows(&opts);
        let spatial = self.shape()[self.ndim() - w.k.len()..].to_vec();
        let n: usize = spatial.iter().product();
        let idx = pad_const(&Tensor::arange(n as f64, 0.0, -1.0).reshape(spatial), &w.pads, dtypes::INT32.min());
        let m = pooled.eq(pooled.max_keepdim(w.axes()));
        let first = m.mul(w.apply(&idx)).max(w.axes());
        (pooled.max(w.axes()), first.neg().add(n as i64))
    }
    fn max_pool_windows(&self, opts: &Pool2dOpts) -> (Window, Tensor) {
        let w = self.window(opts, opts.ceil_mode, "max_pool2d");
        let padded = pad_const(self, &[vec![(0, 0); self.ndim() - w.k.len()], w.pads.clone()].concat(), self.dtype().min());
        let pooled = w.apply(&padded);
        (w, pooled)
    }
    /// The partial inverse of `max_pool2d`: each value of `self` `(N, C, *pooled)` written at its flat index
    /// from `indices` in a zero output of `output_size` (or the size the pooling options imply) (tinygrad
    /// `max_unpool2d`).
    ///
    /// # Panics
    /// If `self` has fewer than 3 dims, `indices` has another shape, or the pooling options are malformed.
    pub fn max_unpool2d(&self, indices: &Tensor, opts: Pool2dOpts, output_size: Option<&[usize]>) -> Tensor {
        let sh = self.shape();
        assert!(sh.len() >= 3 && indices.shape() == sh, "max_unpool2d: indices shape {:?} doesn't match shape {sh:?}", indices.shape());
        let (bs, c, spatial) = (sh[0], sh[1], &sh[2..]);
        let out: Vec<usize> = match output_size {
            Some(o) => o[o.len() - spatial.len()..].to_vec(),
            None => {
                let nd = spatial.len();
                let k = per_dim(&opts.kernel_size, nd, "kernel_size", "max_unpool2d");
                let s = per_dim(opts.stride.as_ref().unwrap_or(&k), nd, "stride", "max_unpool2d");
                let d = per_dim(&opts.dilation, nd, "dilation", "max_unpool2d");
                let p = resolve_pads(&opts.padding, nd, "max_unpool2d");
                (0..nd)
                    .map(|j| ((spatial[j] - 1) * s[j]) as i64 - (p[j].0 + p[j].1) + (d[j] * (k[j] - 1) + 1) as i64)
                    .map(|v| v as usize)
                    .collect()
            }
        };
        let n: usize = out.iter().product();
        let hot = one_hot_at(&indices.reshape([bs as i64, c as i64, 1, -1]), n, 2);
        hot.where_(self.reshape([bs as i64, c as i64, 1, -1]), 0).sum(3).reshape([vec![bs, c], out].concat())
    }
    /// Resizes the trailing `size.len()` dims to `size` (tinygrad `interpolate`): `Linear` (bilinear,
    /// trilinear, ...; `align_corners` maps the corner elements onto each other), `Nearest` or `NearestExact`.
    ///
    /// # Panics
    /// If `size` is empty or longer than the dims, or `align_corners` is set with a non-linear mode.
    pub fn interpolate(&self, size: &[usize], mode: InterpolateMode, align_corners: bool) -> Tensor {
        let nd = self.ndim();
        assert!(!size.is_empty() && size.len() <= nd, "interpolate: size {size:?} doesn't fit shape {:?}", self.shape());
        assert!(!align_corners || mode == InterpolateMode::Linear, "interpolate: align_corners needs mode Linear");
        let (mut x, mut expand) = (self.clone(), self.shape());
        for j in 0..size.len() {
            let (d, out) = (nd - 1 - j, size[size.len() - 1 - j]);
            let in_sz = self.shape()[d];
            expand[d] = out;
            let fit = |t: Tensor| t.reshape((0..nd).map(|i| if i == d { out } else { 1 }).collect::<Vec<_>>()).expand(expand.clone());
            let arr = Tensor::arange(0.0, out as f64, 1.0);
            x = if mode == InterpolateMode::Linear {
                let (num, den) = if align_corners {
                    (arr.mul((in_sz - 1) as i64), out as i64 - 1)
                } else {
                    (arr.mul(2).add(1).mul(in_sz as i64).sub(out as i64), out as i64 * 2)
                };
                let num = num.maximum(0).minimum((in_sz as i64 - 1) * den);
                let low = num.div_floor(den);
                let (high, perc) = (num.add(den - 1).div_floor(den), num.sub(low.mul(den)).cast(dtypes::FLOAT32).div(den));
                x.gather(d as i64, &fit(low)).lerp(&x.gather(d as i64, &fit(high)), fit(perc))
            } else {
                let scale = in_sz as f64 / out as f64;
                let pos = arr.cast(dtypes::FLOAT32);
                let pos = if mode == InterpolateMode::NearestExact { pos.add(0.5) } else { pos };
                x.gather(d as i64, &fit(pos.mul(scale).cast(dtypes::INT32)))
            };
        }
        x.cast(self.dtype())
    }
}
