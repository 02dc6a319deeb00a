//! Reductions, sorting, convolution, pooling and losses on the CPU: against naive references worked out here
//! (N-d convolution, transposed convolution, unpooling), against tinygrad 0.14 values for options the
//! conformance vectors don't cover, a float64 finite-difference check of autograd through a small conv net, and
//! the shape errors.

use tinygrad::tensor::{Conv2dOpts, InterpolateMode, Pool2dOpts, Reduction, SdpaOpts};
use tinygrad::{dtypes, Tensor};

/// `sin(k i)` for `i` in `0..n` as f32: the inputs the tinygrad reference values were made from.
fn data(n: usize, k: f64) -> Vec<f32> {
    (0..n).map(|i| (i as f64 * k).sin() as f32).collect()
}

fn sin_t(shape: &[usize], k: f64) -> Tensor {
    Tensor::from_slice(&data(shape.iter().product(), k), shape)
}

fn f32s(t: &Tensor) -> Vec<f64> {
    t.to_vec::<f32>().unwrap().into_iter().map(f64::from).collect()
}

#[track_caller]
fn check(t: &Tensor, shape: &[usize], want: &[f64]) {
    assert_eq!(t.shape(), shape);
    let got = f32s(t);
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= 2e-5 + 1e-4 * w.abs(), "element {i}: got {g}, want {w}\n{got:?}");
    }
}

/// Naive N-d grouped convolution: `x` `(n, cin, *sp)`, `w` `(cout, cin/g, *k)`, per-dim `(before, after)` pads.
#[allow(clippy::too_many_arguments)]
fn conv_ref(
    x: &[f32],
    xs: &[usize],
    w: &[f32],
    ws: &[usize],
    g: usize,
    s: &[usize],
    d: &[usize],
    p: &[(i64, i64)],
) -> (Vec<f64>, Vec<usize>) {
    let nd = xs.len() - 2;
    let (cin_g, cout) = (ws[1], ws[0]);
    let os: Vec<usize> =
        (0..nd).map(|j| ((xs[2 + j] as i64 + p[j].0 + p[j].1 - (d[j] * (ws[2 + j] - 1)) as i64 - 1) / s[j] as i64 + 1) as usize).collect();
    let idx = |shape: &[usize], pos: &[usize]| pos.iter().zip(shape).fold(0, |acc, (&i, &n)| acc * n + i);
    let grid = |shape: &[usize]| -> Vec<Vec<usize>> {
        shape.iter().fold(vec![vec![]], |acc, &n| acc.iter().flat_map(|v| (0..n).map(move |i| [v.clone(), vec![i]].concat())).collect())
    };
    let out_shape = [vec![xs[0], cout], os.clone()].concat();
    let mut out = vec![0.0; out_shape.iter().product()];
    for b in 0..xs[0] {
        for oc in 0..cout {
            let grp = oc / (cout / g);
            for o in grid(&os) {
                let mut acc = 0.0;
                for ic in 0..cin_g {
                    for k in grid(&ws[2..]) {
                        let pos: Vec<i64> = (0..nd).map(|j| (o[j] * s[j] + k[j] * d[j]) as i64 - p[j].0).collect();
                        if pos.iter().zip(&xs[2..]).all(|(&q, &n)| q >= 0 && q < n as i64) {
                            let xp: Vec<usize> = [vec![b, grp * cin_g + ic], pos.iter().map(|&q| q as usize).collect()].concat();
                            let wp = [vec![oc, ic], k.clone()].concat();
                            acc += x[idx(xs, &xp)] as f64 * w[idx(ws, &wp)] as f64;
                        }
                    }
                }
                out[idx(&out_shape, &[vec![b, oc], o].concat())] = acc;
            }
        }
    }
    (out, out_shape)
}

#[test]
fn conv3d_groups_stride_dilation_asymmetric_padding() {
    let (xs, ws) = ([2, 4, 4, 5, 4], [6, 2, 2, 3, 2]);
    let (x, w) = (data(xs.iter().product(), 0.37), data(ws.iter().product(), 0.53));
    // torch-order padding: last dim (0, 1), middle (2, 0), first (1, 1)
    let opts = Conv2dOpts::default().groups(2).stride([1, 2, 1]).dilation([2, 1, 1]).padding([0, 1, 2, 0, 1, 1]);
    let got = Tensor::from_slice(&x, xs).conv2d(&Tensor::from_slice(&w, ws), opts);
    let (want, shape) = conv_ref(&x, &xs, &w, &ws, 2, &[1, 2, 1], &[2, 1, 1], &[(1, 1), (2, 0), (0, 1)]);
    check(&got, &shape, &want);
}

#[test]
fn conv1d_negative_padding_crops() {
    let x = data(2 * 3 * 9, 0.3);
    let w = data(4 * 3 * 2, 0.7);
    let got = Tensor::from_slice(&x, [2, 3, 9]).conv2d(&Tensor::from_slice(&w, [4, 3, 2]), Conv2dOpts::default().padding([-1, 2]));
    let (want, shape) = conv_ref(&x, &[2, 3, 9], &w, &[4, 3, 2], 1, &[1], &[1], &[(-1, 2)]);
    check(&got, &shape, &want);
}

#[test]
fn conv_transpose2d_against_scatter() {
    let (xs, ws, g, s, d, p, op) = ([1, 4, 5, 5], [4, 2, 3, 3], 2, 2, 2, 1, 1);
    let (x, w) = (data(100, 0.37), data(72, 0.53));
    let opts = Conv2dOpts::default().groups(g).stride(s).dilation(d).padding(p).output_padding(op);
    let got = Tensor::from_slice(&x, xs).conv_transpose2d(&Tensor::from_slice(&w, ws), opts);
    let o = (xs[2] - 1) * s - 2 * p + d * (ws[2] - 1) + op + 1;
    let (cin_g, cout_g) = (xs[1] / g, ws[1]);
    let mut want = vec![0.0; g * cout_g * o * o];
    for ic in 0..xs[1] {
        for oc in 0..cout_g {
            for (iy, ix, ky, kx) in itertools(xs[2], xs[3], ws[2], ws[3]) {
                let (oy, ox) = ((iy * s + ky * d) as i64 - p as i64, (ix * s + kx * d) as i64 - p as i64);
                if (0..o as i64).contains(&oy) && (0..o as i64).contains(&ox) {
                    let c = ic / cin_g * cout_g + oc;
                    want[(c * o + oy as usize) * o + ox as usize] +=
                        x[(ic * 5 + iy) * 5 + ix] as f64 * w[((ic * 2 + oc) * 3 + ky) * 3 + kx] as f64;
                }
            }
        }
    }
    check(&got, &[1, 4, o, o], &want);
}

fn itertools(a: usize, b: usize, c: usize, d: usize) -> impl Iterator<Item = (usize, usize, usize, usize)> {
    (0..a).flat_map(move |i| (0..b).flat_map(move |j| (0..c).flat_map(move |k| (0..d).map(move |l| (i, j, k, l)))))
}

#[test]
fn pooling_options() {
    let x = sin_t(&[1, 2, 7, 7], 0.37);
    let avg = x.avg_pool2d(Pool2dOpts::default().kernel_size([3, 3]).stride(2).padding(1).ceil_mode(true));
    #[rustfmt::skip]
    check(&avg, &[1, 2, 4, 4], &[0.118473, 0.155007, 0.062136, -0.022281, 0.122067, 0.079535, -0.08238, -0.123327, 0.138306, 0.222663,
        0.148694, 0.026201, 0.113899, 0.114691, -0.002953, -0.0644, 0.081994, 0.167731, 0.153389, 0.060258, 0.153296, 0.197744, 0.07524,
        -0.032367, 0.059924, 0.182845, 0.22214, 0.119479, 0.108295, 0.171928, 0.11201, 0.017486]);
    let mx = x.max_pool2d(Pool2dOpts::default().kernel_size([2, 3]).stride([2, 1]).dilation([2, 1]).padding([1, 0, 0, 1]));
    #[rustfmt::skip]
    check(&mx, &[1, 2, 3, 6], &[0.361615, 0.674288, 0.895699, 0.995881, 0.995881, 0.995881, -0.66924, -0.355254, 0.006815, 0.367961,
        0.679305, 0.898708, 0.167175, 0.167175, -0.200665, -0.541346, -0.348875, 0.013629, -0.342481, 0.020443, 0.380599, 0.689243,
        0.904602, 0.997526, -0.213998, -0.213998, -0.552755, -0.33607, 0.027255, 0.386892, 0.775508, 0.775508, 0.494726, 0.146985,
        -0.22065, -0.558421]);
}

#[test]
fn max_unpool2d_inverts_max_pool2d() {
    let xd = data(2 * 36, 1.7);
    let x = Tensor::from_slice(&xd, [1, 2, 6, 6]);
    let opts = Pool2dOpts::default().kernel_size([2, 3]);
    let (vals, idx) = x.max_pool2d_with_indices(opts.clone());
    assert_eq!((vals.shape(), idx.dtype()), (vec![1, 2, 3, 2], dtypes::INT32));
    let back = vals.max_unpool2d(&idx, opts, None);
    let mut want = vec![0.0; 72];
    for c in 0..2 {
        for (oy, ox) in (0..3).flat_map(|i| (0..2).map(move |j| (i, j))) {
            let win = (0..2).flat_map(|ky| (0..3).map(move |kx| c * 36 + (oy * 2 + ky) * 6 + ox * 3 + kx));
            let best = win.fold(None, |b: Option<usize>, i| if b.is_none_or(|b| xd[i] > xd[b]) { Some(i) } else { b }).unwrap();
            want[best] = xd[best] as f64;
        }
    }
    check(&back, &[1, 2, 6, 6], &want);
}

#[test]
fn interpolate_modes() {
    let x = sin_t(&[1, 1, 3, 4], 0.37);
    #[rustfmt::skip]
    check(&x.interpolate(&[5, 7], InterpolateMode::NearestExact, false), &[1, 1, 5, 7], &[0.0, 0.0, 0.361615, 0.674288, 0.674288,
        0.895699, 0.895699, 0.0, 0.0, 0.361615, 0.674288, 0.674288, 0.895699, 0.895699, 0.995881, 0.995881, 0.961275, 0.796565, 0.796565,
        0.524044, 0.524044, 0.180596, 0.180596, -0.187295, -0.529836, -0.529836, -0.800667, -0.800667, 0.180596, 0.180596, -0.187295,
        -0.529836, -0.529836, -0.800667, -0.800667]);
    // uint8 interpolates in tinygrad's 7-bit fixed point
    let img =
        Tensor::from_slice(&(0..12u8).map(|i| i * 20).collect::<Vec<_>>(), [1, 3, 4]).interpolate(&[5, 7], InterpolateMode::Linear, false);
    #[rustfmt::skip]
    assert_eq!(img.to_vec::<u8>().unwrap(), [0, 7, 19, 30, 41, 53, 60, 32, 39, 51, 62, 73, 85, 92, 80, 87, 99, 110, 121, 133, 140, 128, 135,
        147, 158, 169, 181, 188, 160, 167, 179, 190, 201, 213, 220]);
}

#[test]
fn sort_is_stable_and_pads_to_a_power_of_two() {
    let x = Tensor::from([3.0f32, 1.0, 2.0, 1.0, 3.0, 1.0]);
    let (v, i) = x.sort(-1, false);
    assert_eq!((v.to_vec::<f32>().unwrap(), i.to_vec::<i32>().unwrap()), (vec![1., 1., 1., 2., 3., 3.], vec![1, 3, 5, 2, 0, 4]));
    let (v, i) = x.sort(0, true);
    assert_eq!((v.to_vec::<f32>().unwrap(), i.to_vec::<i32>().unwrap()), (vec![3., 3., 2., 1., 1., 1.], vec![0, 4, 2, 1, 3, 5]));
    let (v, i) = x.topk(2, -1, false);
    assert_eq!((v.to_vec::<f32>().unwrap(), i.to_vec::<i32>().unwrap()), (vec![1., 1.], vec![1, 3]));
    let (v, i) = Tensor::from([3u8, 1, 255, 9, 0]).sort(0, false);
    assert_eq!((v.to_vec::<u8>().unwrap(), i.to_vec::<i32>().unwrap()), (vec![0, 1, 3, 9, 255], vec![4, 1, 0, 3, 2]));
    let (v, i) = Tensor::from([[2i32, 1, 2], [1, 1, 0]]).sort(0, true);
    assert_eq!((v.to_vec::<i32>().unwrap(), i.to_vec::<i32>().unwrap()), (vec![2, 1, 2, 1, 1, 0], vec![0, 0, 0, 1, 1, 1]));
}

#[test]
fn arg_and_cumulative_reductions() {
    assert_eq!(Tensor::from([1.0f32, 3.0, 3.0, 2.0]).argmax(None, false).item::<i32>().unwrap(), 1);
    assert_eq!(Tensor::from([[5i32, 1, 5], [0, 0, 9]]).argmin(Some(1), false).to_vec::<i32>().unwrap(), [1, 0]);
    let x = sin_t(&[2, 5], 0.37);
    check(&x.logcumsumexp(1), &[2, 5], &[0.0, 0.890212, 1.481214, 1.923859, 2.257005, 0.961275, 1.575455, 1.875148, 2.043777, 2.145804]);
    let (v, i) = x.cummin(1);
    check(&v, &[2, 5], &[0.0, 0.0, 0.0, 0.0, 0.0, 0.961275, 0.796565, 0.524044, 0.180596, -0.187295]);
    assert_eq!(i.to_vec::<i32>().unwrap(), [0, 0, 0, 0, 0, 0, 1, 2, 3, 4]);
    // long axes take the two-stage path; int8 accumulates in int32
    let c = Tensor::full([3, 1000], 1i8).cumsum(1);
    assert_eq!(c.dtype(), dtypes::INT32);
    assert_eq!(c.to_vec::<i32>().unwrap(), (0..3).flat_map(|_| 1..=1000).collect::<Vec<i32>>());
    let p = Tensor::full([700], 1.001f64).cumprod(0).to_vec::<f64>().unwrap();
    assert!(p.iter().enumerate().all(|(i, v)| (v - 1.001f64.powi(i as i32 + 1)).abs() < 1e-9));
    // tinygrad sums an int tensor's squared deviations as ints
    assert_eq!(Tensor::from([1i32, 2, 4]).var(.., false, 1.0).item::<f32>().unwrap(), 1.5);
    let (s, m) = Tensor::from([1.0f32, 2.0, 4.0]).std_mean(.., false, 0.0);
    assert!((s.item::<f32>().unwrap() - 1.247219).abs() < 1e-6 && (m.item::<f32>().unwrap() - 7.0 / 3.0).abs() < 1e-6);
}

#[test]
fn einsum_forms() {
    let (a, b) = (sin_t(&[2, 3, 4], 0.37), sin_t(&[2, 4, 2], 0.7));
    #[rustfmt::skip]
    check(&Tensor::einsum("...ij,...jk", &[&a, &b]), &[2, 3, 2], &[-0.198437, -0.804361, 0.757384, 0.677075, 0.335783, 0.927144,
        -0.56346, -0.695773, 0.294244, -0.479405, 0.616819, 0.608836]);
    check(&Tensor::einsum("ii", &[&sin_t(&[3, 3], 0.37)]), &[], &[1.176477]);
    // a repeated letter before another one keeps the dims in order (tinygrad 0.14 returns the transpose here)
    let x = Tensor::from_slice(&(0..36).map(|i| i as f32).collect::<Vec<_>>(), [3, 3, 4]);
    let want: Vec<f64> = (0..3).flat_map(|i| (0..4).map(move |j| (i * 12 + i * 4 + j) as f64)).collect();
    check(&Tensor::einsum("iij->ij", &[&x]), &[3, 4], &want);
}

#[test]
fn norms_attention_and_losses() {
    #[rustfmt::skip]
    check(&sin_t(&[3, 4], 0.37).normalize(1.0, 0, 1e-12), &[3, 4], &[0.0, 0.239451, 0.337028, 0.403393, 0.846494, 0.636528, 0.398145,
        0.236012, 0.153506, -0.124021, -0.264827, -0.360594]);
    let bn =
        sin_t(&[2, 3, 4], 0.37).batchnorm(None, Some(&sin_t(&[3, 4], 0.2)), &sin_t(&[3, 4], 0.3), &(sin_t(&[3, 4], 0.4) + 2.0), [1, 2]);
    #[rustfmt::skip]
    check(&bn, &[2, 3, 4], &[0.0, 0.356598, 0.687364, 0.894121, 0.908854, 0.736097, 0.457727, 0.193503, 0.038727, 0.016505, 0.075166,
        0.134459, -1.926262, -2.885496, -3.570558, -3.69434, -3.143973, -2.040713, -0.68899, 0.556034, 1.433032, 1.860203, 1.92655, 1.804656]);
    let q = sin_t(&[1, 3, 4], 0.37);
    let att = q.scaled_dot_product_attention(
        &sin_t(&[1, 5, 4], 0.2),
        &sin_t(&[1, 5, 4], 0.9),
        SdpaOpts { attn_mask: Some(sin_t(&[3, 5], 1.3)), ..Default::default() },
    );
    #[rustfmt::skip]
    check(&att, &[1, 3, 4], &[-0.013854, -0.13851, -0.158345, -0.058348, -0.018144, -0.175991, -0.200652, -0.073464, 0.07499, 0.034814,
        -0.031709, -0.074235]);
    let logits = sin_t(&[5, 4], 0.37);
    let y = Tensor::from([0i32, 3, 1, 1, 2]);
    check(&logits.nll_loss(&y, Some(&Tensor::from([0.5f32, 1.0, 2.0, 3.0])), Some(1), Reduction::Mean), &[], &[-0.419646]);
    check(&logits.cross_entropy(&y, Reduction::Sum, 0.2), &[], &[7.594859]);
    let bce = sin_t(&[6], 0.37).binary_crossentropy_logits(
        &Tensor::from([0.0f32, 1., 1., 0., 1., 0.]),
        Reduction::None,
        Some(&Tensor::from([2.0f32])),
    );
    check(&bce, &[6], &[std::f64::consts::LN_2, 1.057194, 0.823582, 1.238098, 0.628742, 1.2851]);
}

/// Deterministic values in `[-1, 1)`.
fn noise(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (s >> 11) as f64 / (1u64 << 52) as f64 - 1.0
        })
        .collect()
}

#[test]
fn composite_gradient_matches_finite_differences() {
    let weights = Tensor::from_slice(&noise(3, 99), [1, 3]);
    // conv -> batchnorm -> max_pool -> matmul -> log_softmax, weighted into a scalar
    check_gradients(0, &[&[1, 2, 5, 5], &[3, 2, 3, 3], &[3], &[3], &[3], &[12, 3]], |ts| {
        let mean = Tensor::from_slice(&[0.1f64, -0.2, 0.3], [3]);
        let invstd = Tensor::from_slice(&[1.5f64, 0.7, 1.1], [3]);
        let h = ts[0].conv2d(&ts[1], Conv2dOpts::default().bias(&ts[2]).padding(1));
        let h = h.batchnorm(Some(&ts[3]), Some(&ts[4]), &mean, &invstd, 1);
        let h = h.max_pool2d(Pool2dOpts::default()).reshape([1, 12]);
        h.matmul(&ts[5]).log_softmax(-1).mul(&weights).sum(..)
    });
}

/// Central finite differences of `loss` against its autograd gradient for each parameter (float64, noise seeded
/// from `seed`).
fn check_gradients(seed: u64, shapes: &[&[usize]], loss: impl Fn(&[Tensor]) -> Tensor) {
    let params: Vec<Vec<f64>> = shapes.iter().enumerate().map(|(i, s)| noise(s.iter().product(), seed + i as u64)).collect();
    let tensors = |ps: &[Vec<f64>]| -> Vec<Tensor> { ps.iter().zip(shapes).map(|(p, s)| Tensor::from_slice(p, *s)).collect() };
    let ts = tensors(&params);
    let grads = loss(&ts).gradient(&ts.iter().collect::<Vec<_>>(), None);
    for (k, g) in grads.iter().enumerate() {
        let g = g.to_vec::<f64>().unwrap();
        for j in 0..params[k].len() {
            let at = |delta: f64| {
                let mut ps = params.clone();
                ps[k][j] += delta;
                loss(&tensors(&ps)).item::<f64>().unwrap()
            };
            let fd = (at(1e-6) - at(-1e-6)) / 2e-6;
            assert!((fd - g[j]).abs() <= 1e-6 + 1e-5 * fd.abs(), "input {k} element {j}: autograd {}, finite differences {fd}", g[j]);
        }
    }
}

#[test]
fn conv_input_gradient_is_a_transposed_convolution() {
    // grouped, dilated, asymmetric and negative padding (2-D), and 1-D: each input's gradient by finite differences
    let opts = Conv2dOpts::default().groups(2).dilation([2, 1]).padding([1, -1, 2, 0]);
    check_gradients(10, &[&[2, 4, 6, 5], &[6, 2, 2, 3], &[6, 6, 3]], |ts| ts[0].conv2d(&ts[1], opts.clone()).tanh().mul(&ts[2]).sum(..));
    check_gradients(10, &[&[1, 2, 7], &[3, 2, 3]], |ts| ts[0].conv2d(&ts[1], Conv2dOpts::default().padding(2)).square().sum(..));
}

#[test]
fn custom_gradient_replaces_the_derived_one() {
    let (x, w) = (Tensor::from_slice(&[1.0f32, -2.0, 3.0], [3]), Tensor::from_slice(&[0.5f32, 4.0, -1.0], [3]));
    let y = x.mul(&w).custom_gradient(&[&x], |g| vec![g.mul(10.0)]);
    let gs = y.sum(..).gradient(&[&x, &w], None);
    check(&y, &[3], &[0.5, -8.0, -3.0]);
    // x's gradient is the given one (10 g); w's is derived through the product (g x)
    check(&gs[0], &[3], &[10.0, 10.0, 10.0]);
    check(&gs[1], &[3], &[1.0, -2.0, 3.0]);
}

#[test]
#[should_panic(expected = "matmul: shapes [2, 3] and [4, 5]")]
fn matmul_shape_error() {
    Tensor::zeros([2, 3]).matmul(&Tensor::zeros([4, 5]));
}

#[test]
#[should_panic(expected = "conv2d: input shape [1, 3, 8, 8] doesn't match weight shape [4, 2, 3, 3]")]
fn conv2d_shape_error() {
    Tensor::zeros([1, 3, 8, 8]).conv2d(&Tensor::zeros([4, 2, 3, 3]), Conv2dOpts::default());
}
