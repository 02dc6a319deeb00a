//! Realizing on the CPU: kernel counts (GlobalCounters), and values against references computed here in f64
//! (matmul) or by direct index arithmetic (movement ops).

use std::sync::Mutex;
use tinygrad::helpers::GLOBAL_COUNTERS;
use tinygrad::Tensor;

/// Tests in this binary share GLOBAL_COUNTERS: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// Kernels launched while realizing `t`, and its values.
fn run(t: &Tensor) -> (u64, Vec<f32>) {
    let before = GLOBAL_COUNTERS.kernel_count();
    t.realize().unwrap();
    let n = GLOBAL_COUNTERS.kernel_count() - before;
    (n, t.to_vec::<f32>().unwrap())
}

#[track_caller]
fn close(got: &[f32], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len());
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!((g as f64 - w).abs() <= tol * (1.0 + w.abs()), "element {i}: got {g}, want {w}");
    }
}

fn seq(n: usize, scale: f32) -> Vec<f32> {
    (0..n).map(|i| ((i * 7919 % 1000) as f32 / 1000.0 - 0.5) * scale).collect()
}

#[test]
fn elementwise_chain_is_one_kernel() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (a, b, c) =
        (Tensor::from_slice(&seq(1000, 2.0), [10, 100]), Tensor::from_slice(&seq(1000, 3.0)[..100], [100]), Tensor::from(1.5f32));
    let (n, got) = run(&((&a + &b) * &c).relu());
    assert_eq!(n, 1);
    let (av, bv) = (seq(1000, 2.0), seq(1000, 3.0));
    let want: Vec<f64> = (0..1000).map(|i| ((av[i] as f64 + bv[i % 100] as f64) * 1.5).max(0.0)).collect();
    close(&got, &want, 1e-6);
}

#[test]
fn reduce_with_epilogue_is_one_kernel() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let x = Tensor::from_slice(&seq(600, 1.0), [20, 30]);
    let (n, got) = run(&(x.sum(1) * 2.0 + 40.0).sqrt().relu());
    assert_eq!(n, 1);
    let xv = seq(600, 1.0);
    let want: Vec<f64> = (0..20).map(|r| ((0..30).map(|c| xv[r * 30 + c] as f64).sum::<f64>() * 2.0 + 40.0).sqrt().max(0.0)).collect();
    close(&got, &want, 1e-5);
}

#[test]
fn softmax_is_at_most_three_kernels() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let x = Tensor::from([[1.0f32, 2.0, 3.0], [4.0, 5.0, 9.0]]);
    let (n, got) = run(&x.softmax(1));
    assert!(n <= 3, "{n} kernels");
    // numpy: scipy.special.softmax([[1,2,3],[4,5,9]], axis=1)
    close(&got, &[0.09003057, 0.24472847, 0.66524096, 0.00657326, 0.01786798, 0.97555875], 1e-6);
}

fn matmul_ref(a: &[f32], b: &[f32], m: usize, k: usize, n: usize) -> Vec<f64> {
    let mut c = vec![0.0f64; m * n];
    for i in 0..m {
        for kk in 0..k {
            for j in 0..n {
                c[i * n + j] += a[i * k + kk] as f64 * b[kk * n + j] as f64;
            }
        }
    }
    c
}

#[test]
fn matmul_from_movement_and_sum() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for &(m, k, n) in &[(1, 1, 1), (2, 3, 4), (7, 1, 5), (16, 16, 16), (33, 17, 9), (64, 128, 32), (257, 129, 65)] {
        let (av, bv) = (seq(m * k, 1.0), seq(k * n, 2.0));
        let (a, b) = (Tensor::from_slice(&av, [m, k]), Tensor::from_slice(&bv, [k, n]));
        // (m,k) -> (m,1,k) -> (m,n,k); (k,n) -> (n,k) -> (1,n,k) -> (m,n,k); mul; sum over k
        let prod = a.reshape([m, 1, k]).expand([m, n, k]) * b.permute([1, 0]).reshape([1, n, k]).expand([m, n, k]);
        let (kernels, got) = run(&prod.sum(2));
        assert_eq!(kernels, 1, "matmul {m}x{k}x{n}");
        close(&got, &matmul_ref(&av, &bv, m, k, n), 1e-5);
    }
}

/// A reference view: the value at each output index of a chain of movement ops, by direct index math.
fn at(x: &[f32], shape: &[usize], idx: &[i64]) -> f32 {
    let mut flat = 0;
    for (i, (&ix, &s)) in idx.iter().zip(shape).enumerate() {
        assert!((0..s as i64).contains(&ix), "dim {i}");
        flat = flat * s + ix as usize;
    }
    x[flat]
}

#[test]
fn movement_chains_on_views() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let xv: Vec<f32> = (0..24).map(|i| i as f32).collect();
    let x = Tensor::from_slice(&xv, [2, 3, 4]);
    // permute (4,3,2) -> flip axis 0 -> pad dim1 (1,2) -> shrink dim0 [1,3) -> reshape (2,6,1,2) -> expand (2,6,3,2)
    let t = x.permute([2, 1, 0]).flip(0).pad(&[(0, 0), (1, 2), (0, 0)]).shrink(&[(1, 3), (0, 6), (0, 2)]);
    let t = t.reshape([2, 6, 1, 2]).expand([2, 6, 3, 2]);
    let (_, got) = run(&t);
    let mut want = Vec::new();
    for a in 0..2i64 {
        for b in 0..6i64 {
            for _ in 0..3 {
                for c in 0..2i64 {
                    // shrink: a+1; pad: b-1 valid in [0,3); flip: 3-(a+1); permute (i2,i1,i0) -> x[i0][i1][i2]
                    let (i2, i1, i0) = (3 - (a + 1), b - 1, c);
                    want.push(if (0..3).contains(&i1) { at(&xv, &[2, 3, 4], &[i0, i1, i2]) as f64 } else { 0.0 });
                }
            }
        }
    }
    close(&got, &want, 0.0);
    // a non-zero pad value, a negative pad (crop), and a transposed view reduced
    let (_, got) = run(&x.transpose(0, 2).pad_value(&[(1, -1), (0, 0), (0, 1)], -1.0).sum(1));
    let mut want = Vec::new();
    for i in 0..4i64 {
        for k in 0..3i64 {
            want.push(if i == 0 || k == 2 { -3.0 } else { (0..3).map(|j| at(&xv, &[2, 3, 4], &[k, j, i - 1]) as f64).sum() });
        }
    }
    close(&got, &want, 0.0);
}

#[test]
fn schedule_cache_reuses_structure_with_new_buffers() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for step in 0..3 {
        let (av, bv) = (seq(60, 1.0 + step as f32), seq(60, 2.0 - step as f32));
        let (a, b) = (Tensor::from_slice(&av, [6, 10]), Tensor::from_slice(&bv, [6, 10]));
        let (n, got) = run(&(&a * &b).sum(1).relu());
        assert_eq!(n, 1);
        let want: Vec<f64> = (0..6).map(|r| (0..10).map(|c| av[r * 10 + c] as f64 * bv[r * 10 + c] as f64).sum::<f64>().max(0.0)).collect();
        close(&got, &want, 1e-6);
    }
}

#[test]
fn assign_writes_in_place_after_old_reads() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let t = Tensor::from([1.0f32, 2.0, 3.0]);
    let buf = t.uop();
    let old_times_10 = &t * 10.0;
    t.assign(&t * 2.0 + 1.0);
    Tensor::realize_all(&[&old_times_10, &t]).unwrap();
    assert_eq!(t.to_vec::<f32>().unwrap(), [3.0, 5.0, 7.0]);
    assert_eq!(old_times_10.to_vec::<f32>().unwrap(), [10.0, 20.0, 30.0]);
    assert_eq!(t.uop(), buf, "the tensor keeps its buffer");
    // twice before a realize, then through the schedule cache again
    for want in [[7.0f32, 11.0, 15.0], [15.0, 23.0, 31.0]] {
        t.assign(&t + 1.0);
        t.assign(&t * 2.0 - 1.0);
        assert_eq!(t.to_vec::<f32>().unwrap(), want);
    }
}

/// `Tensor::from_blob` over bytes placed at `at` bytes into a fresh 3-page allocation's first whole page: the
/// tensor (its Bytes slice keeps the allocation alive).
fn blob_at(at: usize, vals: &[f32]) -> Tensor {
    let mut v = vec![0u8; 3 * 4096];
    let page = v.as_ptr().align_offset(4096);
    for (i, x) in vals.iter().enumerate() {
        v[page + at + 4 * i..][..4].copy_from_slice(&x.to_ne_bytes());
    }
    let bytes = bytes::Bytes::from(v).slice(page + at..page + at + 4 * vals.len());
    Tensor::from_blob(bytes, tinygrad::dtypes::FLOAT32, [vals.len()])
}

#[test]
fn from_blob_borrows_aligned_host_bytes_and_copies_the_rest() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let host = ["CPU", "PYTHON"].contains(&tinygrad::runtime::default_device().as_str());
    let vals = seq(256, 4.0);
    let want: Vec<f64> = vals.iter().map(|&v| v as f64 * 2.0 + 1.0).collect();
    // (at 0: aligned, its overread inside the page; at 2: misaligned for f32; at 4096-1024: the overread past
    // its end would cross into the next page)
    for (at, borrowed) in [(0, host), (2, false), (4096 - 1024, false)] {
        let t = blob_at(at, &vals);
        assert!(!t.is_borrowed(), "nothing is borrowed before the first realize");
        close(&run(&t.mul(2.0).add(1.0)).1, &want, 0.0);
        assert_eq!(t.is_borrowed(), borrowed, "bytes at offset {at}");
        assert_eq!(t.to_vec::<f32>().unwrap(), vals, "bytes at offset {at}");
    }
}

#[test]
fn assigning_a_borrowed_blob_moves_it_to_a_copy() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let vals = seq(64, 1.0);
    // a borrowed buffer, one not yet used, and a slice of one: each tensor takes the new values, the bytes keep theirs
    for used in [true, false] {
        let t = blob_at(0, &vals);
        if used {
            t.to_vec::<f32>().unwrap();
        }
        let before = Tensor::from_uop(t.uop());
        t.assign(t.add(1.0));
        assert_eq!(t.to_vec::<f32>().unwrap(), vals.iter().map(|v| v + 1.0).collect::<Vec<_>>(), "used first: {used}");
        assert!(!t.is_borrowed());
        assert_eq!(before.to_vec::<f32>().unwrap(), vals, "the blob itself is unchanged");
    }
    let t = blob_at(0, &vals).shrink(&[(8, 16)]);
    t.assign(Tensor::full([8], 5.0f32));
    assert_eq!(t.to_vec::<f32>().unwrap(), vec![5.0; 8]);
}

#[test]
fn from_host_takes_the_first_elements_of_its_bytes() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // (bytes running past the elements, as a numpy array's buffer may; that a write before the first realize shows
    // is python/tests/test_numpy.py's)
    let vals = seq(10, 3.0);
    let bytes: Vec<u8> = vals.iter().flat_map(|v| v.to_ne_bytes()).collect();
    let t = Tensor::from_host(bytes::Bytes::from(bytes), tinygrad::dtypes::FLOAT32, [2, 4]);
    assert_eq!(t.to_vec::<f32>().unwrap(), vals[..8]);
    assert!(!t.is_borrowed());
}

#[test]
fn big_reductions_side_by_side_get_kernels_of_their_own() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // (a @ b + c @ d: two reductions joined elementwise, as a residual join of two convolutions)
    for (n, apart) in [(32, false), (256, true)] {
        let (a, b, c, d) = (seq(n * n, 1.0), seq(n * n, 2.0), seq(n * n, 0.5), seq(n * n, 3.0));
        let t = |v: &[f32]| Tensor::from_slice(v, [n, n]);
        let mm = |x: &[f32], y: &[f32], i: usize, j: usize| (0..n).map(|q| x[i * n + q] as f64 * y[q * n + j] as f64).sum::<f64>();
        let want: Vec<f64> = (0..n * n).map(|e| mm(&a, &b, e / n, e % n) + mm(&c, &d, e / n, e % n)).collect();
        let (one, _) = run(&t(&a).matmul(&t(&b)));
        let (got_kernels, got) = run(&t(&a).matmul(&t(&b)).add(t(&c).matmul(&t(&d))));
        assert_eq!(got_kernels, if apart { 2 * one } else { one }, "{n}x{n}: one matmul takes {one} kernels");
        close(&got, &want, 1e-4);
    }
}
