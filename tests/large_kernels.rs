//! Kernels at sizes that take the scheduler's target rewrites (packed matmul operands with 16- and 8-wide panels and
//! padded panels, convolution inputs padded into a buffer, split reductions), checked against host-computed f64
//! references; and which targets get them (kernel counts), with the user's graph free of them.

use tinygrad::tensor::Conv2dOpts;
use tinygrad::Tensor;

fn data(n: usize, salt: usize) -> Vec<f32> {
    (0..n).map(|i| ((i * 7919 + salt * 104_729) % 2003) as f32 / 1001.5 - 1.0).collect()
}

fn close(got: &[f32], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((*g as f64 - w).abs() <= 1e-4 * w.abs().max(1.0), "{what}: element {i} is {g}, want {w}");
    }
}

#[test]
fn matmuls_with_packed_operands() {
    // 16-wide panels, 8-wide panels (136 = 8 * 17), zero-padded panels (257 columns), and a batched operand
    for (b, m, k, n) in [(1, 96, 160, 256), (1, 64, 128, 136), (1, 70, 130, 257), (2, 64, 128, 128)] {
        let (x, w) = (data(b * m * k, 1), data(b * k * n, 2));
        let (xt, wt) = (Tensor::from_slice(&x, [b, m, k]), Tensor::from_slice(&w, [b, k, n]));
        let got: Vec<f32> = xt.matmul(&wt).to_vec().unwrap();
        let mut want = vec![0f64; b * m * n];
        for bi in 0..b {
            for i in 0..m {
                for j in 0..n {
                    want[(bi * m + i) * n + j] = (0..k).map(|q| x[(bi * m + i) * k + q] as f64 * w[(bi * k + q) * n + j] as f64).sum();
                }
            }
        }
        close(&got, &want, &format!("matmul ({b}, {m}, {k}) @ ({b}, {k}, {n})"));
    }
}

#[test]
fn vector_matrix_products_split_into_row_blocks() {
    // x @ W with W a row-major (K, N): the CPU sums blocks of 8-64 of W's rows, then the blocks; 1 and 2 rows, a 1-D x
    let (k, n) = (1024, 1032);
    let w = data(k * n, 2);
    let wt = Tensor::from_slice(&w, [k, n]);
    for rows in [1, 2] {
        let x = data(rows * k, rows);
        let want: Vec<f64> = (0..rows * n).map(|e| (0..k).map(|q| x[e / n * k + q] as f64 * w[q * n + e % n] as f64).sum()).collect();
        let xt = Tensor::from_slice(&x, [rows, k]);
        close(&xt.matmul(&wt).to_vec::<f32>().unwrap(), &want, &format!("({rows}, {k}) @ ({k}, {n})"));
        if rows == 1 {
            close(&xt.reshape([k]).matmul(&wt).to_vec::<f32>().unwrap(), &want, &format!("({k},) @ ({k}, {n})"));
        }
    }
}

#[test]
fn padded_conv_input_in_a_buffer() {
    let (bs, cin, cout, h, wd) = (2, 8, 4, 64, 64);
    let (x, w) = (data(bs * cin * h * wd, 3), data(cout * cin * 9, 4));
    let out =
        Tensor::from_slice(&x, [bs, cin, h, wd]).conv2d(&Tensor::from_slice(&w, [cout, cin, 3, 3]), Conv2dOpts::default().padding([1]));
    let got: Vec<f32> = out.to_vec().unwrap();
    let mut want = vec![0f64; bs * cout * h * wd];
    for b in 0..bs {
        for co in 0..cout {
            for y in 0..h {
                for xx in 0..wd {
                    let mut acc = 0f64;
                    for ci in 0..cin {
                        for ky in 0..3 {
                            for kx in 0..3 {
                                let (iy, ix) = (y as i64 + ky as i64 - 1, xx as i64 + kx as i64 - 1);
                                if (0..h as i64).contains(&iy) && (0..wd as i64).contains(&ix) {
                                    acc += x[((b * cin + ci) * h + iy as usize) * wd + ix as usize] as f64
                                        * w[((co * cin + ci) * 3 + ky) * 3 + kx] as f64;
                                }
                            }
                        }
                    }
                    want[((b * cout + co) * h + y) * wd + xx] = acc;
                }
            }
        }
    }
    close(&got, &want, "conv2d padding 1");
}

/// The kernels each target gets for `t` (realized inputs, one root).
fn kernels(t: &Tensor, ren: &tinygrad::renderer::Renderer) -> usize {
    tinygrad::schedule::create_schedule(&[t.uop()], ren).items.len()
}

#[test]
fn the_target_packs_pads_and_splits_not_the_tensor_graph() {
    use tinygrad::renderer::Renderer;
    let (cpu, gpu) = (Renderer::cpu(), Renderer::python());
    let input = |shape: &[usize], salt| Tensor::from_slice(&data(shape.iter().product(), salt), shape).realize().unwrap().clone();
    let in_graph = |t: &Tensor, op| t.uop().toposort().iter().any(|u| u.op == op);
    // a matmul: on the CPU its right operand is packed first (and its padded columns dropped by a copy), on a grid not
    let (x, w, w_odd) = (input(&[96, 160], 1), input(&[160, 256], 2), input(&[160, 257], 3));
    let (mm, mm_odd) = (x.matmul(&w), x.matmul(&w_odd));
    assert!(!in_graph(&mm, tinygrad::Ops::CONTIGUOUS) && !in_graph(&mm_odd, tinygrad::Ops::PAD), "the user's graph has no packing");
    assert_eq!([kernels(&mm, &cpu), kernels(&mm_odd, &cpu), kernels(&mm, &gpu), kernels(&mm_odd, &gpu)], [2, 3, 1, 1]);
    // a product broadcast like a matmul's but whose right side is a vector: not packed, and right
    let (a, v) = (input(&[64, 128], 8), input(&[128], 9));
    let p = (a.reshape([64, 1, 128]) * v.reshape([1, 128, 1])).sum(-1);
    assert_eq!(kernels(&p, &cpu), 1);
    let (av, vv) = (data(64 * 128, 8), data(128, 9));
    let want: Vec<f64> = (0..64 * 128).map(|e| vv[e % 128] as f64 * (0..128).map(|q| av[e / 128 * 128 + q] as f64).sum::<f64>()).collect();
    close(&p.to_vec::<f32>().unwrap(), &want, "a broadcast product that is no matmul");
    // a padded convolution input: in a buffer of its own on the CPU (the graph copies only the weight, channel
    // innermost, on every target)
    let conv = input(&[2, 8, 64, 64], 4).conv2d(&input(&[4, 8, 3, 3], 5), Conv2dOpts::default().padding([1]));
    let value = tinygrad::schedule::strip_custom_gradients(&[conv.uop()]).remove(0);
    let copies: Vec<Vec<usize>> =
        value.toposort().iter().filter(|u| u.op == tinygrad::Ops::CONTIGUOUS).map(|u| u.shape().unwrap().to_vec()).collect();
    assert_eq!(copies, [vec![72, 4]], "the user's graph copies only the weight");
    assert_eq!([kernels(&conv, &cpu), kernels(&conv, &gpu)], [3, 2]);
    // a vector-matrix product down W's columns: one kernel streaming W's rows into accumulators in memory on the CPU
    // (INNER), whole on a grid; two rows in blocks of rows (partial sums, then their sum); along W's rows whole
    let (v, w) = (input(&[1, 1024], 10), input(&[1024, 1024], 11));
    assert_eq!([kernels(&v.matmul(&w), &cpu), kernels(&v.matmul(&w), &gpu), kernels(&v.matmul(&w.transpose(0, 1)), &cpu)], [1, 1, 1]);
    assert_eq!(kernels(&input(&[2, 1024], 14).matmul(&w), &cpu), 2, "2 rows: blocks of rows");
    assert_eq!(kernels(&input(&[3, 1024], 12).matmul(&w), &cpu), 1, "3 rows: not split");
    let computed = (input(&[1 << 20], 13) * 2.0f32).reshape([1024, 1024]);
    assert_eq!(kernels(&v.matmul(&computed), &cpu), 1, "a computed matrix (its layout is the kernel's): not split");
    let hot = Tensor::arange(0.0, 1024.0, 1.0).eq(Tensor::from_slice(&[5i32], [1, 1])).cast(tinygrad::dtypes::FLOAT32);
    assert_eq!(kernels(&hot.matmul(&w), &cpu), 1, "a one-hot product is a gather, not split");
    // a long reduction: in two kernels on every target (tinygrad's split_reduceop)
    let sum = input(&[1 << 16], 6).sum(..);
    assert_eq!([kernels(&sum, &cpu), kernels(&sum, &gpu)], [2, 2]);
    let ctx = tinygrad::helpers::Context::new(&[(&tinygrad::helpers::SPLIT_REDUCEOP, 0)]);
    let sum = input(&[1 << 16], 7).sum(..);
    assert_eq!([kernels(&sum, &cpu), kernels(&sum, &gpu)], [1, 1]);
    drop(ctx);
}

/// A batched decode step's attention scores over a stack of separate float16 KV caches (4 sequences, 3 KV heads of
/// 64, 3 query heads a KV head, 128 keys): the stack is upcast whole, and the register tile's rows go to the query
/// heads of a group (each key row loaded and converted once for the three), not to the stack, whose loads are
/// another buffer each. With 32 vector registers of 16 floats the tile is 4 sequences x 3 heads x 2 registers; with
/// 16 registers of 8 there is room for the stack only.
#[test]
fn stacked_kv_caches_give_the_register_rows_to_the_query_heads() {
    use tinygrad::codegen::{opt::heuristic::hand_coded_optimizations, OptOps};
    let (s, h, g, n, d) = (4, 3, 3, 128, 64);
    let (qv, kv): (Vec<f32>, Vec<Vec<f32>>) = (data(s * h * g * d, 1), (0..s).map(|i| data(n * h * d, 2 + i)).collect());
    let keys: Vec<Tensor> =
        kv.iter().map(|k| Tensor::from_slice(k, [n, h * d]).cast(tinygrad::dtypes::FLOAT16).realize().unwrap().clone()).collect();
    let rows: Vec<Tensor> = keys.iter().map(|k| k.reshape([1, n, h, d]).cast(tinygrad::dtypes::FLOAT32)).collect();
    let k = rows[0].cat(&rows[1..].iter().collect::<Vec<_>>(), 0).permute([0, 2, 1, 3]).reshape([s, h, 1, n, d]);
    let scores = (Tensor::from_slice(&qv, [s, h, g, 1, d]) * k).sum(-1);
    // (the keys as float16 rounds them, as the cache does)
    let half = |x: f32| half::f16::from_f32(x).to_f64();
    let want: Vec<f64> = (0..s * h * g * n)
        .map(|e| {
            let (si, hi, gi, ni) = (e / (h * g * n), e / (g * n) % h, e / n % g, e % n);
            (0..d).map(|x| qv[((si * h + hi) * g + gi) * d + x] as f64 * half(kv[si][ni * h * d + hi * d + x])).sum()
        })
        .collect();
    let ast = tinygrad::schedule::create_schedule(&[scores.uop()], &tinygrad::renderer::Renderer::cpu()).items[0].ast.clone();
    close(&scores.to_vec::<f32>().unwrap(), &want, "stacked scores");
    let upcasts = |bytes, regs| {
        let ren = tinygrad::renderer::Renderer { vector_bytes: bytes, vector_registers: regs, ..tinygrad::renderer::Renderer::cpu() };
        let opts = hand_coded_optimizations(&tinygrad::codegen::kernel(&ast, &ren));
        opts.iter().filter(|o| o.op == OptOps::Upcast).map(|o| o.arg).collect::<Vec<_>>()
    };
    assert_eq!(upcasts(64, 32), [3, 4], "AVX-512: the group's heads, then the stack");
    assert_eq!(upcasts(32, 16), [4], "AVX2: the stack only");
}
