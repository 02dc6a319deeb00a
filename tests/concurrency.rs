//! Realizing from several threads at once: `Tensor` is `Send + Sync`, the engine's caches (schedules,
//! kernels, the allocator, the compiler's disk cache) are behind locks, and each buffer is locked while a
//! kernel reads (shared) or writes (exclusive) it, so 8 threads realizing different graphs get exactly the
//! values one thread gets.

use tinygrad::Tensor;

fn assert_send_sync<T: Send + Sync>() {}

/// Graph `k` of a few kinds (elementwise, reductions, matmul, sort, an assign into its own buffer), on data
/// seeded by `k`; its values, realized on this thread.
fn graph(k: usize) -> Vec<f32> {
    let n = 16 + 8 * (k % 4);
    let data: Vec<f32> = (0..n * n).map(|i| ((i * (k + 3)) % 17) as f32 - 8.0).collect();
    let x = Tensor::from(data).reshape([n, n]);
    let out = match k % 5 {
        0 => (&x * 2.0 + 1.0).exp2().sum(1),
        1 => x.matmul(&x.transpose(0, 1)).relu().max(0),
        2 => x.flatten(0).sort(0, k.is_multiple_of(2)).0,
        3 => x.softmax(-1).mean(0) * 100.0,
        _ => {
            let acc = Tensor::from(vec![0.0f32; n]);
            acc.realize().unwrap();
            for r in 0..3 {
                acc.assign(&acc + x.sum(0) * (r + 1) as f32);
            }
            acc
        }
    };
    out.to_vec::<f32>().unwrap()
}

#[test]
fn eight_threads_realize_what_one_thread_does() {
    assert_send_sync::<Tensor>();
    let want: Vec<Vec<f32>> = (0..16).map(graph).collect();
    for round in 0..3 {
        let got: Vec<Vec<f32>> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..8).map(|t| s.spawn(move || [graph(t), graph(t + 8)])).collect();
            let mut got = vec![Vec::new(); 16];
            for (t, h) in hs.into_iter().enumerate() {
                let [a, b] = h.join().unwrap();
                (got[t], got[t + 8]) = (a, b);
            }
            got
        });
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g, w, "round {round}, graph {k}");
        }
    }
}

#[test]
fn threads_sharing_a_tensor_read_it_while_one_assigns() {
    // one thread keeps adding 1 to a buffer; readers always see a whole number of additions in every element
    let acc = Tensor::from(vec![0.0f32; 4096]);
    acc.realize().unwrap();
    std::thread::scope(|s| {
        let w = s.spawn(|| {
            for _ in 0..50 {
                acc.assign(&acc + 1.0).realize().unwrap();
            }
        });
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..20 {
                    let v = (&acc * 1.0).to_vec::<f32>().unwrap();
                    assert!(v.iter().all(|&x| x == v[0]), "a read saw a half-written buffer");
                }
            });
        }
        w.join().unwrap();
    });
    let v = acc.to_vec::<f32>().unwrap();
    assert!(v.iter().all(|&x| x == 50.0), "each of the 50 assigns ran once: got {} (element 0)", v[0]);
}
