//! Math ops and dtypes on the CPU, against values worked out here: casts between all 13 dtypes, bf16 and half
//! rounding, bitcasts of every same-size pair, round half to even, closeness, int semantics of mod/pow/shifts.

use half::{bf16, f16};
use tinygrad::codegen::full_rewrite;
use tinygrad::dtype::{dtypes, ConstValue, DType};
use tinygrad::renderer::Renderer;
use tinygrad::schedule::create_schedule;
use tinygrad::tensor::{default_device, IntoOperand};
use tinygrad::{engine, Ops, Tensor};

/// A tensor of `dt` holding the raw little-endian `bits` (one `u64` per element).
fn from_bits(bits: &[u64], dt: DType) -> Tensor {
    let bytes: Vec<u8> = bits.iter().flat_map(|b| b.to_le_bytes()[..dt.itemsize()].to_vec()).collect();
    Tensor::from_uop(engine::buffer_from_bytes(&bytes, dt, bits.len(), &default_device()))
}

/// The raw bits of each element of `t`.
fn bits(t: &Tensor) -> Vec<u64> {
    let t = t.contiguous();
    t.realize().unwrap();
    let bytes = engine::copyout(&t.uop()).unwrap();
    bytes.chunks_exact(t.dtype().itemsize()).map(|c| c.iter().rev().fold(0u64, |acc, &b| acc << 8 | b as u64)).collect()
}

/// A tensor of `dt` holding `vals` converted as tinygrad's `dtype.const` does.
fn of(vals: &[f64], dt: DType) -> Tensor {
    from_bits(&vals.iter().map(|&v| ConstValue::Float(v).cast(dt).to_bits(dt)).collect::<Vec<_>>(), dt)
}

/// The values of `t` as f64, whatever its dtype.
fn vals(t: &Tensor) -> Vec<f64> {
    bits(t).into_iter().map(|b| ConstValue::from_bits(b, t.dtype()).as_f64()).collect()
}

#[track_caller]
fn check(t: &Tensor, dt: DType, want: &[f64]) {
    assert_eq!(t.dtype(), dt);
    let got = vals(t);
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(g == w || (g.is_nan() && w.is_nan()) || (g - w).abs() <= 1e-6 * w.abs(), "element {i}: got {g}, want {w} ({got:?})");
    }
}

#[test]
fn cast_every_pair() {
    for from in dtypes::ALL {
        let mut src = vec![0.0, 1.0, 2.0, 100.0];
        if from.is_float() {
            src.extend([2.75, -0.0]);
        }
        if from.is_float() || (from.is_int() && !from.is_unsigned()) {
            src.push(-3.0);
        }
        for to in dtypes::ALL {
            // float -> unsigned of a negative value is undefined in C (and in tinygrad)
            let src: Vec<f64> = src.iter().copied().filter(|&v| !(from.is_float() && to.is_unsigned() && v < 0.0)).collect();
            let x = of(&src, from);
            let want: Vec<f64> = src.iter().map(|&v| ConstValue::Float(v).cast(from).cast(to).as_f64()).collect();
            let got = vals(&x.cast(to));
            assert_eq!(got, want, "cast {from} -> {to} of {src:?}");
        }
    }
}

#[test]
fn cast_wide_ints() {
    let big = [0u64, 1 << 63, u64::MAX - 1, 0x0123_4567_89ab_cdef];
    let x = from_bits(&big, dtypes::UINT64);
    assert_eq!(bits(&x.add(1)), vec![1, (1 << 63) + 1, u64::MAX, 0x0123_4567_89ab_cdf0]);
    assert_eq!(
        bits(&x.add(Tensor::from_uop(tinygrad::UOp::const_(dtypes::UINT64, u64::MAX)))),
        vec![u64::MAX, (1 << 63) - 1, u64::MAX - 2, 0x0123_4567_89ab_cdee]
    );
    // (signed overflow is undefined in C, so no wrapping cases here)
    let y = Tensor::from([3i64, -5, i64::MIN, i64::MAX]);
    assert_eq!(y.shrink(&[(0, 2)]).mul(1i64 << 40).to_vec::<i64>().unwrap(), vec![3 << 40, -5 << 40]);
    assert_eq!(y.shrink(&[(0, 1)]).add(i64::MIN).to_vec::<i64>().unwrap(), vec![i64::MIN + 3]);
    assert_eq!(y.add(Tensor::from([-1i64, 5, 0, i64::MIN])).to_vec::<i64>().unwrap(), vec![2, 0, i64::MIN, -1]);
    assert_eq!(y.cast(dtypes::UINT64).to_vec::<u64>().unwrap(), vec![3, (-5i64) as u64, 1 << 63, i64::MAX as u64]);
    assert_eq!(y.cast(dtypes::INT32).to_vec::<i32>().unwrap(), vec![3, -5, 0, -1]);
    assert_eq!(Tensor::from([200u8, 100]).add(Tensor::from([100u8, 100])).to_vec::<u8>().unwrap(), vec![44, 200]);
}

#[test]
fn bf16_rounding_and_round_trip() {
    let xs: [f32; 12] =
        [1.0, 1.0 + 1.0 / 256.0, 1.0 + 3.0 / 256.0, 3.3, -2.5e-3, 3.0e38, f32::MAX, f32::INFINITY, f32::NEG_INFINITY, 1e-40, -0.0, 65504.0];
    let b = Tensor::from(xs.to_vec()).cast(dtypes::BFLOAT16);
    let want: Vec<u64> = xs.iter().map(|&x| bf16::from_f32(x).to_bits() as u64).collect();
    assert_eq!(bits(&b), want);
    // ties go to even: 1 + 2^-8 -> 1, 1 + 3*2^-8 -> 1 + 2^-6
    assert_eq!(b.cast(dtypes::FLOAT32).to_vec::<f32>().unwrap()[..3], [1.0, 1.0, 1.015625]);
    let back: Vec<f32> = want.iter().map(|&w| bf16::from_bits(w as u16).to_f32()).collect();
    assert_eq!(b.cast(dtypes::FLOAT32).to_vec::<f32>().unwrap(), back);
    let nan = Tensor::from([f32::NAN, -f32::NAN]).cast(dtypes::BFLOAT16).cast(dtypes::FLOAT32).to_vec::<f32>().unwrap();
    assert!(nan.iter().all(|x| x.is_nan()), "{nan:?}");
    // float64 goes through float32, as in tinygrad
    let d = Tensor::from([1.0f64 + 1e-12, -7.3]).cast(dtypes::BFLOAT16);
    assert_eq!(bits(&d), vec![bf16::from_f32(1.0).to_bits() as u64, bf16::from_f32(-7.3).to_bits() as u64]);
}

#[test]
fn bf16_and_half_arithmetic() {
    let (a, b) = ([1.5f32, -2.25, 3.0, 0.1], [0.5f32, 4.0, -0.3, 7.0]);
    let ab = |t: DType| (Tensor::from(a.to_vec()).cast(t), Tensor::from(b.to_vec()).cast(t));
    for (dt, round) in
        [(dtypes::BFLOAT16, (|x: f32| bf16::from_f32(x).to_f32()) as fn(f32) -> f32), (dtypes::FLOAT16, |x| f16::from_f32(x).to_f32())]
    {
        let (x, y) = ab(dt);
        let r = |f: fn(f32, f32) -> f32| a.iter().zip(&b).map(|(&p, &q)| round(f(round(p), round(q))) as f64).collect::<Vec<_>>();
        check(&x.add(&y), dt, &r(|p, q| p + q));
        check(&x.mul(&y), dt, &r(|p, q| p * q));
        check(&x.maximum(&y), dt, &r(f32::max));
        check(&x.lt(&y), dtypes::BOOL, &r(|p, q| (p < q) as u8 as f32));
        check(&x.where_(&x, 2.0).lt(0), dtypes::BOOL, &[0.0, 1.0, 0.0, 0.0]);
        let s = x.abs().sqrt().cast(dtypes::FLOAT32).to_vec::<f32>().unwrap();
        a.iter().zip(&s).for_each(|(&p, &g)| assert_eq!(g, round(round(p).abs().sqrt()), "{dt} sqrt"));
        check(&x.sum(..), dt, &[round(a.iter().map(|&p| round(p)).sum()) as f64]);
    }
}

#[test]
fn bitcast_same_size_pairs() {
    let patterns = |size: usize, with_bool: bool| -> Vec<u64> {
        match size {
            _ if with_bool => vec![0, 1],
            1 => vec![0, 1, 0x7f, 0x80, 0xff, 0x5a],
            2 => vec![0, 0x3c00, 0xbc00, 0x7bff, 0x1234, 0x8001, 0xc2fe],
            4 => vec![0, 0x3f80_0000, 0xbf80_0000, 0x1234_5678, 0x8000_0001, 0x7f7f_ffff, 0xdead_beef],
            _ => vec![0, 0x3ff0_0000_0000_0000, 0x8000_0000_0000_0001, 0x1234_5678_9abc_def0, 0xfedc_ba98_7654_3210, 1 << 63],
        }
    };
    let mut pairs = 0;
    for from in dtypes::ALL {
        for to in dtypes::ALL.into_iter().filter(|t| t.itemsize() == from.itemsize()) {
            let p = patterns(from.itemsize(), from.is_bool() || to.is_bool());
            // computed in a kernel (the source is a buffer plus zero, so nothing folds)
            let x = from_bits(&p, from);
            let x = if from.is_bool() { x } else { x.add(Tensor::from_uop(tinygrad::UOp::const_(from, 0))) };
            let x = if from.is_float() { from_bits(&p, from) } else { x };
            assert_eq!(bits(&x.bitcast(to)), p, "bitcast {from} -> {to}");
            pairs += 1;
        }
    }
    assert_eq!(pairs, 9 + 16 + 9 + 9);
}

/// A float out of a narrow int's range wraps through a wide int, as numpy and torch do (C leaves it undefined: clang
/// on AVX2 saturated `-1.3 -> uint8` to 0 where AVX-512 wrapped it to 255, and tinygrad's test_ops `TestOpsUint8`
/// `test_cast` failed on one of them). 32 elements, so the CPU's kernel converts vectors; the interpreter agrees.
#[test]
fn out_of_range_float_casts_wrap_on_every_device() {
    let x: Vec<f32> = [-1.3f32, -0.5, 0.7, 1.9, -2.0, 300.0, -200.0, 70000.5].repeat(4);
    let wrap = |m: i64| -> Vec<u64> { x.iter().map(|&v| (v as i64).rem_euclid(m) as u64).collect() };
    for dev in ["CPU", "PYTHON"] {
        let t = Tensor::from_slice(&x, [32]).to(dev);
        assert_eq!(t.cast(dtypes::UINT8).to_vec::<u8>().unwrap(), wrap(256).iter().map(|&b| b as u8).collect::<Vec<_>>(), "{dev}");
        assert_eq!(t.cast(dtypes::INT8).to_vec::<i8>().unwrap(), wrap(256).iter().map(|&b| b as u8 as i8).collect::<Vec<_>>(), "{dev}");
        assert_eq!(t.cast(dtypes::UINT16).to_vec::<u16>().unwrap(), wrap(1 << 16).iter().map(|&b| b as u16).collect::<Vec<_>>(), "{dev}");
        assert_eq!(t.cast(dtypes::UINT32).to_vec::<u32>().unwrap(), wrap(1 << 32).iter().map(|&b| b as u32).collect::<Vec<_>>(), "{dev}");
    }
}

#[test]
fn bitcast_values() {
    assert_eq!(Tensor::from([1.0f32, -2.0]).bitcast(dtypes::INT32).to_vec::<i32>().unwrap(), vec![0x3f80_0000, 0xc000_0000u32 as i32]);
    assert_eq!(Tensor::from([0x3c00u16]).bitcast(dtypes::FLOAT16).to_vec::<f16>().unwrap(), vec![f16::ONE]);
    assert_eq!(Tensor::from([-1i8]).bitcast(dtypes::UINT8).to_vec::<u8>().unwrap(), vec![255]);
    assert!(std::panic::catch_unwind(|| Tensor::from([1.0f32]).bitcast(dtypes::INT16)).is_err());
}

#[test]
fn round_half_to_even() {
    let x = Tensor::from([-2.5f32, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 0.49999997, -0.7, 1e7 + 1.0, 2.4]);
    check(&x.round(), dtypes::FLOAT32, &[-2.0, -2.0, 0.0, 0.0, 2.0, 2.0, 4.0, 0.0, -1.0, 1e7 + 1.0, 2.0]);
    check(&x.trunc(), dtypes::FLOAT32, &[-2.0, -1.0, 0.0, 0.0, 1.0, 2.0, 3.0, 0.0, 0.0, 1e7 + 1.0, 2.0]);
    check(&x.sign(), dtypes::FLOAT32, &[-1.0, -1.0, -1.0, 1.0, 1.0, 1.0, 1.0, 1.0, -1.0, 1.0, 1.0]);
    check(&Tensor::from([-3i32, 0, 7]).sign(), dtypes::INT32, &[-1.0, 0.0, 1.0]);
}

#[test]
fn isclose_allclose() {
    let (inf, nan) = (f32::INFINITY, f32::NAN);
    let a = Tensor::from([1.0f32, 1.0, inf, inf, nan, 0.0, 100.0]);
    let b = Tensor::from([1.0f32 + 1e-6, 1.1, inf, -inf, nan, 1e-9, 100.001]);
    check(&a.isclose(&b, 1e-5, 1e-8, false), dtypes::BOOL, &[1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 1.0]);
    check(&a.isclose(&b, 1e-5, 1e-8, true), dtypes::BOOL, &[1.0, 0.0, 1.0, 0.0, 1.0, 1.0, 1.0]);
    check(&a.isclose(&b, 0.0, 0.0, false), dtypes::BOOL, &[0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0]);
    check(&a.isclose(1.0, 1e-5, 1e-8, false), dtypes::BOOL, &[1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
    let c = Tensor::from([[1.0f32, 2.0], [3.0, 4.0]]);
    assert!(c.allclose(c.add(1e-7), 1e-5, 1e-8, false).item::<bool>().unwrap());
    assert!(!c.allclose(c.add(1e-3), 1e-5, 1e-8, false).item::<bool>().unwrap());
    assert!(c.allclose(c.add(1e-3), 1e-5, 1e-2, false).item::<bool>().unwrap());
    check(&Tensor::from([1.0f32, inf, -inf, nan]).isinf_with(true, false), dtypes::BOOL, &[0.0, 1.0, 0.0, 0.0]);
    check(&Tensor::from([1.0f32, inf, -inf, nan]).isfinite(), dtypes::BOOL, &[1.0, 0.0, 0.0, 0.0]);
}

#[test]
fn int_semantics() {
    let (x, y) = (Tensor::from([7i32, -7, 7, -7]), Tensor::from([3i32, 3, -3, -3]));
    check(&x.mod_(&y), dtypes::INT32, &[1.0, 2.0, -2.0, -1.0]);
    check(&x.fmod(&y), dtypes::INT32, &[1.0, -1.0, 1.0, -1.0]);
    check(&(&x % 4), dtypes::INT32, &[3.0, 1.0, 3.0, 1.0]);
    let (xf, yf) = (x.cast(dtypes::FLOAT32), y.cast(dtypes::FLOAT32));
    check(&xf.mod_(&yf), dtypes::FLOAT32, &[1.0, 2.0, -2.0, -1.0]);
    check(&xf.fmod(&yf), dtypes::FLOAT32, &[1.0, -1.0, 1.0, -1.0]);
    check(&x.pow(2), dtypes::INT32, &[49.0, 49.0, 49.0, 49.0]);
    check(&x.pow(Tensor::from([0i32, 1, 3, 3])), dtypes::INT32, &[1.0, -7.0, 343.0, -343.0]);
    check(&2.into_operand().pow(Tensor::from([0i32, 10, 30])), dtypes::INT32, &[1.0, 1024.0, (1 << 30) as f64]);
    check(&xf.pow(-1), dtypes::FLOAT32, &[1.0 / 7.0, -1.0 / 7.0, 1.0 / 7.0, -1.0 / 7.0]);
    check(
        &Tensor::from([-2.0f32, -2.0, 0.0, 4.0]).pow(Tensor::from([3.0f32, 0.5, 0.0, 0.5])),
        dtypes::FLOAT32,
        &[-8.0, f64::NAN, 1.0, 2.0],
    );
    assert!(std::panic::catch_unwind(|| Tensor::from([1i32]).pow(-1)).is_err());
    // constant exponents become multiplies, a reciprocal and a square root (tinygrad `simplify_pow`)
    let b = Tensor::from([-1.5f32, 0.0, 0.5, 3.0]);
    check(&b.pow(3), dtypes::FLOAT32, &[-3.375, 0.0, 0.125, 27.0]);
    check(&b.pow(6), dtypes::FLOAT32, &[11.390625, 0.0, 0.015625, 729.0]);
    check(&b.pow(0), dtypes::FLOAT32, &[1.0, 1.0, 1.0, 1.0]);
    check(&b.pow(-2), dtypes::FLOAT32, &[1.0 / 2.25, f64::INFINITY, 4.0, 1.0 / 9.0]);
    check(&b.pow(2.5), dtypes::FLOAT32, &[f64::NAN, 0.0, 0.5f64.powf(2.5), 3.0f64.powf(2.5)]);
    check(&b.pow(0.75), dtypes::FLOAT32, &[f64::NAN, 0.0, 0.5f64.powf(0.75), 3.0f64.powf(0.75)]);
    check(&x.pow(3), dtypes::INT32, &[343.0, -343.0, 343.0, -343.0]);
    for e in [3.0, -2.0, 2.5, -0.5] {
        let s = create_schedule(&[b.pow(e).uop()], &Renderer::cpu());
        let pows = s.items.iter().flat_map(|i| full_rewrite(&i.ast, &Renderer::cpu(), None).unwrap().uops).filter(|u| u.op == Ops::POW);
        assert_eq!(pows.count(), 0, "x ** {e} kept a POW");
    }
    check(&x.bitwise_not(), dtypes::INT32, &[-8.0, 6.0, -8.0, 6.0]);
    check(&!Tensor::from([0u8, 5]), dtypes::UINT8, &[255.0, 250.0]);
    check(&!Tensor::from([0u64, 5]), dtypes::UINT64, &[u64::MAX as f64, (u64::MAX - 5) as f64]);
    check(&!Tensor::from([true, false]), dtypes::BOOL, &[0.0, 1.0]);
    check(&(&x << 2), dtypes::INT32, &[28.0, -28.0, 28.0, -28.0]);
    check(&(&x >> 1), dtypes::INT32, &[3.0, -4.0, 3.0, -4.0]);
    check(&(Tensor::from([0xf0u8]) >> Tensor::from([4u8])), dtypes::UINT8, &[15.0]);
    check(&(&x & 5), dtypes::INT32, &[5.0, 1.0, 5.0, 1.0]);
    check(&(&x | 8).bitwise_xor(1), dtypes::INT32, &[14.0, -8.0, 14.0, -8.0]);
    check(&Tensor::from([true, true, false]).bitwise_and(Tensor::from([true, false, false])), dtypes::BOOL, &[1.0, 0.0, 0.0]);
    check(&x.clamp(-5, 5), dtypes::INT32, &[5.0, -5.0, 5.0, -5.0]);
    check(&x.clamp_min(0.5), dtypes::FLOAT32, &[7.0, 0.5, 7.0, 0.5]);
}

#[test]
fn lerp_and_signs() {
    let (a, b) = (Tensor::from([10u8, 200, 0, 255]), Tensor::from([20u8, 100, 255, 0]));
    check(&a.lerp(&b, Tensor::from([0.5f32, 0.25, 1.0, 0.5])), dtypes::UINT8, &[15.0, 175.0, 255.0, 0.0]); // tinygrad's 7-bit fixed point wraps 255 -> 0 here
    let (x, y) = (Tensor::from([1.0f32, 2.0]), Tensor::from([3.0f32, 5.0]));
    check(&x.lerp(&y, 0.25), dtypes::FLOAT32, &[1.5, 2.75]);
    check(
        &Tensor::from([1.0f32, -2.0, 3.0, 4.0]).copysign(Tensor::from([-0.0f32, 0.0, -1.0, f32::INFINITY])),
        dtypes::FLOAT32,
        &[-1.0, 2.0, -3.0, 4.0],
    );
    check(&Tensor::from([1.0f32, 2.0, 3.0]).masked_fill(&Tensor::from([true, false, true]), -1.0), dtypes::FLOAT32, &[-1.0, 2.0, -1.0]);
    check(&Tensor::from([1.0f32, 2.0]).logaddexp(Tensor::from([1.0f32, 100.0])), dtypes::FLOAT32, &[1.0 + 2f64.ln(), 100.0]);
}

/// Distance in units in the last place between two finite float32s of one sign, or 0 when both are the same NaN
/// or infinity.
fn ulps(a: f32, b: f32) -> u32 {
    if a == b || (a.is_nan() && b.is_nan()) {
        return 0;
    }
    (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs().min(u32::MAX as u64) as u32
}

/// EXP2 on the CPU is a polynomial (tinygrad's xexp2): within 1 ulp of the exact result (2 where the result is
/// subnormal), 0 and inf beyond the float range, NaN for NaN; the same in vector kernels (4096 elements) and in
/// scalar ones (a few elements).
#[test]
fn exp2_within_an_ulp_in_vectors_and_in_lanes() {
    let special = [
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        0.0,
        -0.0,
        0.5,
        -0.5,
        1.0,
        127.99,
        128.0,
        129.0,
        -126.0,
        -149.0,
        -150.0,
        -151.0,
        1e9,
        -1e9,
    ];
    let sweep = (0..4096 - special.len()).map(|i| -160.0 + 300.0 * i as f32 / 4096.0 + 1e-3);
    let xs: Vec<f32> = special.iter().copied().chain(sweep).collect();
    for n in [xs.len(), 5, special.len()] {
        let got: Vec<f32> = Tensor::from_slice(&xs[..n], [n]).exp2().to_vec::<f32>().unwrap();
        for (x, g) in xs.iter().zip(&got) {
            let want = (*x as f64).exp2() as f32;
            let most = if want.abs() < f32::MIN_POSITIVE { 2 } else { 1 };
            assert!(ulps(*g, want) <= most, "exp2({x}) with {n} elements: got {g}, want {want}");
        }
    }
}

#[test]
fn narrow_int_arithmetic_wraps_before_a_widening_cast() {
    // C computes uint8/int8/int16 in `int`: 21 - 4 may render as 21 + 4·255, and 100 << 1 as 200; fused into a
    // cast to float64 the result must still wrap to its type first (numpy: 17, and int8 200 -> -56)
    let (a, b) = (Tensor::from_slice(&[21u8, 3], [2]), Tensor::from_slice(&[4u8, 5], [2]));
    assert_eq!(a.sub(&b).cast(dtypes::FLOAT64).to_vec::<f64>().unwrap(), vec![17.0, 254.0]);
    let c = Tensor::from_slice(&[100i8, -100], [2]);
    assert_eq!(c.lshift(1).cast(dtypes::FLOAT64).to_vec::<f64>().unwrap(), vec![-56.0, 56.0]);
    let d = Tensor::from_slice(&[300i16, -2], [2]);
    assert_eq!(d.mul(&d).cast(dtypes::INT64).to_vec::<i64>().unwrap(), vec![24464, 4]);
}
