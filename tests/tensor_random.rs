//! Random ops: tinygrad's exact values under a seed, distributions, reproducibility. The RNG state is
//! process-wide, so every test holds `SEQ` while it draws.

use parking_lot::Mutex;
use tinygrad::helpers::{Context, TRAINING};
use tinygrad::{dtypes, Tensor};

static SEQ: Mutex<()> = Mutex::new(());

fn f32s(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>().unwrap()
}
fn i32s(t: &Tensor) -> Vec<i32> {
    t.to_vec::<i32>().unwrap()
}
#[track_caller]
fn close(got: &[f32], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
    assert!(got.iter().zip(want).all(|(&g, &w)| (g as f64 - w).abs() <= tol), "{got:?} vs {want:?}");
}
/// Mean and (population) variance, in f64.
fn moments(xs: &[f32]) -> (f64, f64) {
    let n = xs.len() as f64;
    let mean = xs.iter().map(|&x| x as f64).sum::<f64>() / n;
    (mean, xs.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / n)
}

// values printed by tinygrad 0.14 (`Tensor.manual_seed(s); print(Tensor.<op>(...).numpy())`) on CPU
#[test]
fn rand_matches_tinygrad() {
    let _g = SEQ.lock();
    Tensor::manual_seed(42);
    let r8 = [0.19192588329315186, 0.8221741914749146, 0.14642691612243652, 0.19687533378601074, 0.7817155122756958, 0.07299697399139404];
    let r8 = [&r8[..], &[0.6085587739944458, 0.35485386848449707]].concat();
    close(&f32s(&Tensor::rand([8])), &r8, 0.0);
    close(
        &f32s(&Tensor::rand([5])),
        &[0.1435561180114746, 0.3217630386352539, 0.6069575548171997, 0.7600704431533813, 0.7573138475418091],
        0.0,
    );
    Tensor::manual_seed(42);
    let r23 = [0.38104248046875, 0.009775400161743164, 0.1128007173538208, 0.1176995038986206, 0.505361795425415, 0.3721102476119995];
    let t = Tensor::rand([2, 3]);
    assert_eq!(t.shape(), [2, 3]);
    close(&f32s(&t), &r23, 0.0);
    let r8b = [0.29211926460266113, 0.5220440626144409, 0.1538013219833374, 0.928169846534729, 0.6393345594406128, 0.36473357677459717];
    let r8b = [&r8b[..], &[0.7039636373519897, 0.7862671613693237]].concat();
    close(&f32s(&Tensor::rand([8])), &r8b, 0.0);
    // an odd count hashes the same counters as the next even one
    Tensor::manual_seed(42);
    close(&f32s(&Tensor::rand([7])), &r8[..7], 0.0);
    Tensor::manual_seed(7);
    close(&f32s(&Tensor::rand([3])), &[0.4344947338104248, 0.04727065563201904, 0.009084582328796387], 0.0);
    Tensor::manual_seed(42);
    Tensor::rand([1]).realize().unwrap();
    close(&f32s(&Tensor::rand([3])), &[0.6032968759536743, 0.5042158365249634, 0.8580639362335205], 0.0);
}

#[test]
fn rand_dtypes_match_tinygrad() {
    let _g = SEQ.lock();
    Tensor::manual_seed(42);
    let h: Vec<f64> = Tensor::rand_with([5], dtypes::FLOAT16).to_vec::<half::f16>().unwrap().iter().map(|x| x.to_f64()).collect();
    assert_eq!(h, [0.2626953125, 0.533203125, 0.2958984375, 0.669921875, 0.1416015625]);
    Tensor::manual_seed(42);
    let d = Tensor::rand_with([3], dtypes::FLOAT64).to_vec::<f64>().unwrap();
    assert_eq!(d, [0.009775493382718992, 0.11769953908231123, 0.3721103443543803]);
}

#[test]
fn derived_ops_match_tinygrad() {
    let _g = SEQ.lock();
    let seeded = |f: &dyn Fn() -> Tensor| {
        Tensor::manual_seed(42);
        f()
    };
    let randn =
        [1.9576417207717896, -0.1859397292137146, 1.6404170989990234, -0.7646574378013611, -0.8694872856140137, -0.43787896633148193];
    close(&f32s(&seeded(&|| Tensor::randn([6]))), &randn, 1e-5);
    close(
        &f32s(&seeded(&|| Tensor::uniform([4], 2.0, 10.0))),
        &[6.267365455627441, 7.361241340637207, 8.104631423950195, 5.456441879272461],
        1e-6,
    );
    let kaiming =
        [-0.3364458382129669, -1.3864952325820923, -1.0951101779937744, -1.0812550783157349, 0.015164689160883427, -0.36170876026153564];
    close(&f32s(&seeded(&|| Tensor::kaiming_uniform([2, 3], 0.01, dtypes::FLOAT32))), &kaiming, 1e-6);
    let glorot =
        [-0.26062288880348206, -1.0740283727645874, -0.848311185836792, -0.8375784754753113, 0.011747105978429317, -0.28019240498542786];
    close(&f32s(&seeded(&|| Tensor::glorot_uniform([2, 3], dtypes::FLOAT32))), &glorot, 1e-6);
    let scaled =
        [-0.09712841361761093, -0.40026673674583435, -0.3161469101905823, -0.3121470510959625, 0.004377887584269047, -0.10442154854536057];
    close(&f32s(&seeded(&|| Tensor::scaled_uniform([2, 3], dtypes::FLOAT32))), &scaled, 1e-6);
    let kn = [1.598327875137329, -0.15181156992912292, 1.3393280506134033, -0.6243090033531189, -0.7098979353904724, -0.3575088083744049];
    close(&f32s(&seeded(&|| Tensor::kaiming_normal([2, 3], 0.01, dtypes::FLOAT32))), &kn, 1e-5);
    close(&f32s(&seeded(&|| Tensor::normal([3], 10.0, 2.0))), &[9.265910148620605, 12.3685884475708, 11.464863777160645], 1e-5);
    let h = seeded(&|| Tensor::randn_with([3], dtypes::FLOAT16)).to_vec::<half::f16>().unwrap();
    assert_eq!(h.iter().map(|x| x.to_f64()).collect::<Vec<_>>(), [-0.366943359375, 1.1845703125, 0.732421875]);
    assert_eq!(i32s(&seeded(&|| Tensor::randint([8], 5, 10))), [5, 9, 5, 5, 8, 5, 8, 6]);
    assert_eq!(i32s(&seeded(&|| Tensor::randperm(10, dtypes::INT32))), [7, 3, 1, 2, 9, 4, 6, 0, 5, 8]);
    let w = Tensor::from([1i32, 2, 3, 4]);
    let rep = [3, 2, 3, 1, 2, 3, 2, 3, 0, 1, 2, 3, 1, 2, 2, 1, 2, 2, 3, 3];
    assert_eq!(i32s(&seeded(&|| w.multinomial(20, true))), rep);
    assert_eq!(i32s(&seeded(&|| w.multinomial(3, false))), [2, 1, 3]);
    let w2 = Tensor::from([[1.0f32, 2.0, 3.0, 4.0], [4.0, 3.0, 2.0, 1.0]]);
    let m2 = seeded(&|| w2.multinomial(2, false));
    assert_eq!((m2.shape(), i32s(&m2)), (vec![2, 2], vec![1, 3, 0, 2]));
    let m1 = seeded(&|| w2.multinomial(1, false));
    assert_eq!((m1.shape(), i32s(&m1)), (vec![2, 1], vec![3, 2]));
    assert_eq!(i32s(&seeded(&|| Tensor::randperm(1, dtypes::INT32))), [0]);
    let _t = Context::new(&[(&TRAINING, 1)]);
    close(&f32s(&seeded(&|| Tensor::ones([8]).dropout(0.5))), &[0.0, 2.0, 0.0, 0.0, 2.0, 0.0, 2.0, 0.0], 0.0);
}

#[test]
fn seeds_reproduce_and_differ() {
    let _g = SEQ.lock();
    Tensor::manual_seed(1);
    let (a, b) = (f32s(&Tensor::rand([64])), f32s(&Tensor::rand([64])));
    Tensor::manual_seed(1);
    assert_eq!((f32s(&Tensor::rand([64])), f32s(&Tensor::rand([64]))), (a.clone(), b.clone()));
    assert_ne!(a, b);
    Tensor::manual_seed(2);
    assert_ne!(f32s(&Tensor::rand([64])), a);
    // lazy: the draw is fixed when the op is built, not when it is realized
    Tensor::manual_seed(1);
    let (x, y) = (Tensor::rand([64]), Tensor::rand([64]));
    assert_eq!((f32s(&y), f32s(&x)), (b, a));
}

#[test]
fn rand_and_randn_moments() {
    let _g = SEQ.lock();
    Tensor::manual_seed(1234);
    let n = 1 << 20;
    let u = f32s(&Tensor::rand([1024, 1024]));
    assert!(u.iter().all(|&x| (0.0..1.0).contains(&x)));
    let (m, v) = moments(&u);
    // 5 standard errors: sd(mean) = sqrt(1/12/n), sd(var) ~ sqrt((1/80 - 1/144)/n)
    assert!((m - 0.5).abs() < 5.0 * (1.0 / 12.0 / n as f64).sqrt(), "rand mean {m}");
    assert!((v - 1.0 / 12.0).abs() < 5.0 * ((1.0 / 80.0 - 1.0 / 144.0) / n as f64).sqrt(), "rand var {v}");
    let (m, v) = moments(&f32s(&Tensor::randn([n])));
    assert!(m.abs() < 5.0 / (n as f64).sqrt(), "randn mean {m}");
    assert!((v - 1.0).abs() < 5.0 * (2.0 / n as f64).sqrt(), "randn var {v}");
    let (m, v) = moments(&f32s(&Tensor::normal([n], 3.0, 2.0)));
    assert!((m - 3.0).abs() < 10.0 / (n as f64).sqrt() && (v - 4.0).abs() < 20.0 * (2.0 / n as f64).sqrt(), "normal {m} {v}");
}

#[test]
fn randint_in_range_and_uniform() {
    let _g = SEQ.lock();
    Tensor::manual_seed(5);
    let n = 100_000;
    let r = i32s(&Tensor::randint([n], -3, 7));
    let mut counts = [0usize; 10];
    r.iter().for_each(|&x| counts[(x + 3) as usize] += 1);
    let expect = n as f64 / 10.0;
    // chi-square with 9 degrees of freedom: 40 is far in the tail (p < 1e-5)
    let chi2: f64 = counts.iter().map(|&c| (c as f64 - expect).powi(2) / expect).sum();
    assert!(r.iter().all(|&x| (-3..7).contains(&x)) && chi2 < 40.0, "{counts:?} chi2={chi2}");
    assert_eq!(Tensor::randint_with([3], 0, 5, dtypes::INT64).dtype(), dtypes::INT64);
}

#[test]
fn randperm_is_permutation() {
    let _g = SEQ.lock();
    Tensor::manual_seed(9);
    let mut p = i32s(&Tensor::randperm(1000, dtypes::INT32));
    assert_ne!(p, (0..1000).collect::<Vec<_>>());
    p.sort();
    assert_eq!(p, (0..1000).collect::<Vec<_>>());
}

#[test]
fn multinomial_frequencies() {
    let _g = SEQ.lock();
    Tensor::manual_seed(3);
    let probs = [0.1, 0.2, 0.3, 0.4];
    let n = 20_000;
    let chi2 = |xs: &[i32], p: &[f64]| {
        let mut counts = vec![0usize; p.len()];
        xs.iter().for_each(|&x| counts[x as usize] += 1);
        counts.iter().zip(p).map(|(&c, &p)| (c as f64 - p * xs.len() as f64).powi(2) / (p * xs.len() as f64)).sum::<f64>()
    };
    // chi-square with 3 degrees of freedom: 25 is far in the tail (p < 1e-4)
    let s = i32s(&Tensor::from(probs.map(|p| p as f32)).multinomial(n, true));
    assert!(chi2(&s, &probs) < 25.0, "chi2 {}", chi2(&s, &probs));
    // without replacement, one sample per row: the first pick follows the weights
    let w = Tensor::from(probs.map(|p| p as f32)).reshape([1, 4]).expand([n, 4]);
    let s = i32s(&w.multinomial(1, false));
    assert!(chi2(&s, &probs) < 25.0, "chi2 {}", chi2(&s, &probs));
    let all = i32s(&w.multinomial(4, false));
    assert!(all.chunks(4).all(|c| (0..4).all(|i| c.contains(&i))), "without replacement each row is a permutation");
}

#[test]
fn dropout_training_only() {
    let _g = SEQ.lock();
    Tensor::manual_seed(11);
    let x = Tensor::full([100_000], 3.0f32);
    assert_eq!(f32s(&x.dropout(0.3)), f32s(&x), "identity outside training");
    let _t = Context::new(&[(&TRAINING, 1)]);
    let y = f32s(&x.dropout(0.3));
    let zeros = y.iter().filter(|&&v| v == 0.0).count() as f64 / y.len() as f64;
    assert!((zeros - 0.3).abs() < 5.0 * (0.3 * 0.7 / y.len() as f64).sqrt(), "dropped fraction {zeros}");
    assert!(y.iter().all(|&v| v == 0.0 || (v - 3.0 / 0.7).abs() < 1e-5));
    assert_eq!(f32s(&x.dropout(1.0)), vec![0.0; 100_000]);
    assert_eq!(f32s(&x.dropout(0.0)), f32s(&x));
}

#[test]
fn shapes_and_dtypes() {
    let _g = SEQ.lock();
    Tensor::manual_seed(0);
    let empty = Tensor::rand([3, 0]);
    assert_eq!((empty.shape(), f32s(&empty)), (vec![3, 0], vec![]));
    let like = Tensor::full([2, 5], half::f16::ONE).rand_like();
    assert_eq!((like.shape(), like.dtype()), (vec![2, 5], dtypes::FLOAT16));
    assert_eq!(Tensor::randn_with([4], dtypes::FLOAT64).dtype(), dtypes::FLOAT64);
    assert_eq!(Tensor::uniform_with([4], -1.0, 1.0, dtypes::FLOAT16).dtype(), dtypes::FLOAT16);
    let u = f32s(&Tensor::uniform([1000], -3.0, -1.0));
    assert!(u.iter().all(|&x| (-3.0..-1.0).contains(&x)));
    let m = Tensor::from([[0i32, 5, 0], [0, 0, 7]]).multinomial(6, true);
    assert_eq!((m.shape(), i32s(&m)), (vec![2, 6], [[1; 6], [2; 6]].concat()), "zero weights are never drawn");
}
