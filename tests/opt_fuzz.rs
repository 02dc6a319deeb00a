//! Opts never change results (tinygrad `test/external/fuzz_linearizer.py`): every kernel of a set of workloads
//! (matmuls of prime sizes, a convolution with both gradients, reductions over each axis, broadcasts, softmax)
//! runs with random legal opt sequences drawn from BEAM's action list, each result checked against the same
//! kernel run with no opts. Also: the hand-coded opts on a conv weight gradient (their gathered-vector tile) against
//! no opts, illegal opts are refused with a `KernelOptError`, and the hand-coded register tiles leave registers for
//! the loads the compiler holds beside their accumulators.

use rand::{rngs::StdRng, Rng, SeedableRng};
use tinygrad::codegen::opt::heuristic::hand_coded_optimizations;
use tinygrad::codegen::opt::search::get_kernel_actions;
use tinygrad::codegen::{kernel, Opt, OptOps};
use tinygrad::engine::{copyout, run_with_opts};
use tinygrad::renderer::Renderer;
use tinygrad::schedule::create_schedule;
use tinygrad::tensor::Conv2dOpts;
use tinygrad::uop::Ops;
use tinygrad::{dtypes, Tensor};

fn values(bytes: &[u8], float: bool) -> Vec<f64> {
    if float {
        bytes.chunks_exact(4).map(|c| f32::from_ne_bytes(c.try_into().unwrap()) as f64).collect()
    } else {
        bytes.chunks_exact(4).map(|c| i32::from_ne_bytes(c.try_into().unwrap()) as f64).collect()
    }
}

/// Runs every kernel that computes `roots` with no opts, then each `trials` times with random opts.
fn fuzz(name: &str, roots: &[Tensor], seed: u64, trials: usize) {
    let sched = create_schedule(&roots.iter().map(|t| t.uop()).collect::<Vec<_>>(), &tinygrad::renderer::Renderer::cpu());
    let ren = Renderer::cpu();
    let mut rng = StdRng::seed_from_u64(seed);
    for (i, item) in sched.items.iter().enumerate() {
        run_with_opts(&item.ast, &item.bufs, &[]).unwrap();
        let out = &item.bufs[0];
        let (dt, float) = (out.dtype, out.dtype.is_float());
        if dt.itemsize() != 4 {
            continue;
        }
        let want = values(&copyout(out).unwrap(), float);
        for t in 0..trials {
            let mut k = kernel(&item.ast, &ren);
            let mut opts: Vec<Opt> = Vec::new();
            for _ in 0..1 + rng.random_range(0..4) {
                let mut acts = get_kernel_actions(&k);
                if acts.is_empty() {
                    break;
                }
                let (o, k2) = acts.swap_remove(rng.random_range(0..acts.len()));
                opts.push(o);
                k = k2;
            }
            if std::env::var("FUZZ_VERBOSE").is_ok() {
                eprintln!("{name} kernel {i} trial {t}: {opts:?}");
            }
            run_with_opts(&item.ast, &item.bufs, &opts).unwrap_or_else(|e| panic!("{name} kernel {i} seed {seed} trial {t} {opts:?}: {e}"));
            let got = values(&copyout(out).unwrap(), float);
            for (j, (g, w)) in got.iter().zip(&want).enumerate() {
                let ok = if float { (g - w).abs() <= 1e-4 * w.abs().max(1.0) || (g.is_nan() && w.is_nan()) } else { g == w };
                assert!(
                    ok,
                    "{name} kernel {i} ({}) with opts {opts:?} (seed {seed}, trial {t}): element {j} is {g}, want {w}",
                    k.names().0
                );
            }
        }
    }
}

/// A realized tensor of `shape` with deterministic values in [-1, 1).
fn input(shape: &[usize], salt: usize) -> Tensor {
    let n: usize = shape.iter().product();
    Tensor::from_slice(&(0..n).map(|i| ((i * 7919 + salt * 104729) % 2003) as f32 / 1001.5 - 1.0).collect::<Vec<_>>(), shape)
        .realize()
        .unwrap()
        .clone()
}

#[test]
fn matmuls_of_odd_sizes() {
    for (seed, (m, k, n)) in [(1, (13, 17, 29)), (2, (64, 48, 40)), (3, (7, 96, 24))] {
        fuzz(&format!("matmul {m}x{k}x{n}"), &[input(&[m, k], 1).matmul(&input(&[k, n], 2))], seed, 12);
    }
}

#[test]
fn conv_and_both_gradients() {
    let (x, w) = (input(&[2, 3, 9, 9], 3), input(&[4, 3, 3, 3], 4));
    x.requires_grad_(true);
    w.requires_grad_(true);
    let out = x.conv2d(&w, Conv2dOpts::default().padding([1]));
    (&out * &out).sum(..).backward();
    fuzz("conv2d", &[out, x.grad().unwrap(), w.grad().unwrap()], 5, 6);
}

#[test]
fn reductions_over_each_axis_and_broadcasts() {
    let x = input(&[5, 12, 8], 5);
    for (seed, axis) in [(6, 0), (7, 1), (8, 2)] {
        fuzz(&format!("sum axis {axis}"), &[x.sum(axis)], seed, 10);
        fuzz(&format!("max axis {axis}"), &[x.max(axis)], seed + 10, 6);
    }
    let (a, b) = (input(&[3, 1, 8], 6), input(&[1, 5, 8], 7));
    fuzz("broadcast", &[((&a + &b) * 2.0).relu()], 9, 10);
    fuzz("softmax", &[input(&[6, 33], 8).softmax(-1)], 10, 8);
    fuzz("int", &[input(&[4, 16], 9).cast(dtypes::INT32) * 3], 11, 6);
}

#[test]
fn illegal_opts_are_errors() {
    let t = input(&[8, 12], 1).matmul(&input(&[12, 16], 2));
    let ast = create_schedule(&[t.uop()], &tinygrad::renderer::Renderer::cpu()).items[0].ast.clone();
    let mut ren = Renderer::cpu();
    ren.threads = 2;
    let k = kernel(&ast, &ren);
    assert_eq!(k.full_shape(), vec![8, 16, 12]);
    let refused = |o: Opt, why: &str| {
        let e = k.clone().apply_opt(o).expect_err(&format!("{o} should be refused"));
        assert!(e.msg.contains(why), "{o}: {}", e.msg);
    };
    refused(Opt::new(OptOps::Upcast, 0, 3), "divide");
    refused(Opt::new(OptOps::Upcast, 2, 4), "wrong kind");
    refused(Opt::new(OptOps::Unroll, 1, 4), "no such reduce axis");
    refused(Opt::new(OptOps::Local, 0, 2), "no workgroups");
    refused(Opt::new(OptOps::GroupTop, 0, 4), "no shared memory");
    refused(Opt::new(OptOps::Upcast, 7, 2), "out of range");
    refused(Opt::new(OptOps::Padto, 1, 16), "no-op");
    let mut k2 = k.clone();
    k2.apply_opt(Opt::new(OptOps::Thread, 0, 2)).unwrap();
    assert_eq!(k2.apply_opt(Opt::new(OptOps::Thread, 1, 2)).unwrap_err().msg, "already threaded");
    k2.apply_opt(Opt::new(OptOps::Upcast, 2, 4)).unwrap();
    k2.apply_opt(Opt::new(OptOps::Unroll, 0, 4)).unwrap();
    assert_eq!(k2.names().0, "r_2_4_4_4_3_4");
}

#[test]
fn hand_coded_tiles_of_a_conv_weight_gradient() {
    // beautiful_mnist's shape, smaller: relu(x + bias) into a 5x5 conv, whose weight gradient sums 20-wide rows
    // over a long reduction (the hand-coded opts gather full vectors along input channels, rows along outputs)
    let (x, b, w) = (input(&[4, 32, 24, 24], 12), input(&[32], 13), input(&[32, 32, 5, 5], 14));
    w.requires_grad_(true);
    let out = (&x + &b.reshape([1, 32, 1, 1])).relu().conv2d(&w, Conv2dOpts::default());
    (&out * &out).sum(..).backward();
    let grad = w.grad().unwrap();
    let sched = create_schedule(&[grad.uop()], &tinygrad::renderer::Renderer::cpu());
    let ren = Renderer::cpu();
    for item in &sched.items {
        run_with_opts(&item.ast, &item.bufs, &[]).unwrap();
        let want = values(&copyout(&item.bufs[0]).unwrap(), true);
        let opts = hand_coded_optimizations(&kernel(&item.ast, &ren));
        run_with_opts(&item.ast, &item.bufs, &opts).unwrap();
        let got = values(&copyout(&item.bufs[0]).unwrap(), true);
        for (j, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!((g - w).abs() <= 1e-4 * w.abs().max(1.0), "{opts:?}: element {j} is {g}, want {w}");
        }
    }
}

/// The UPCAST amounts, by axis (batch, output channel, output row, output column first), that the hand-coded opts
/// give the convolution of an `x`-shaped input with `w` on a 32-register AVX-512 target.
fn avx512_upcasts(x: &[usize], w: &Tensor, opts: Conv2dOpts) -> Vec<usize> {
    let ren = Renderer { vector_bytes: 64, vector_registers: 32, threads: 2, overread: 64, mulacc: true, ..Renderer::cpu() };
    let y = Tensor::empty(x.to_vec(), dtypes::FLOAT32).conv2d(w, opts);
    let sched = create_schedule(&[y.uop()], &ren);
    let ast = &sched.items.iter().find(|i| i.ast.toposort().iter().any(|u| u.op == Ops::REDUCE)).expect("a reduction").ast;
    let k = kernel(ast, &ren);
    let mut ups = vec![1; k.full_shape().len()];
    for o in hand_coded_optimizations(&k).iter().filter(|o| o.op == OptOps::Upcast) {
        ups[o.axis.expect("an axis")] *= o.arg;
    }
    ups
}

/// A weight of shape `s` stored output channel innermost, as the ONNX Conv handler packs it.
fn packed(s: [usize; 4]) -> Tensor {
    Tensor::empty([s[1], s[2], s[3], s[0]], dtypes::FLOAT32).permute([3, 0, 1, 2])
}

#[test]
fn register_tiles_leave_registers_for_the_loads_they_hold() {
    // a stride-2 3x3 convolution: vectors of output channels, rows along the output width reading x[2*ox + kx],
    // whose values the compiler keeps across the unrolled kx steps: accumulators + a row's vectors + the rows fit
    // in 32 registers (14 rows of 2 vectors spilled)
    let u = avx512_upcasts(&[8, 256, 28, 28], &packed([256, 256, 3, 3]), Conv2dOpts::default().stride([2]).padding([1]));
    let (vregs, rows) = (u[1] / 16, u[3]);
    assert!(rows > 1 && vregs * rows + vregs + rows <= 32, "{u:?}");
    // a 3x3 convolution over 14x14 images: vectors along the (padded) rows, a tile of output channels by image
    // rows: accumulators + a step's vectors and broadcasts fit (4 x 7, 28 + 11, did not)
    let u = avx512_upcasts(&[8, 256, 14, 14], &packed([256, 256, 3, 3]), Conv2dOpts::default().padding([1]));
    assert!(u[1] > 1 && u[2] > 1 && u[1] * u[2] + u[1] + u[2] <= 32, "{u:?}");
    // a 1x1 convolution has no window: its rows fill the registers, each broadcast folded into its multiply-adds
    let u = avx512_upcasts(&[8, 512, 7, 7], &packed([2048, 512, 1, 1]), Conv2dOpts::default());
    assert!(u.iter().product::<usize>() / 16 >= 24, "{u:?}");
}

/// Wherever `Renderer::matvec_chunks` says a C target streams a vector-matrix product's rows (so the scheduler leaves
/// it whole), the hand-coded opts do take INNER, whatever the threads, vector width, shape and dtype; and never where
/// it says not (then the scheduler splits the rows into blocks first).
#[test]
fn streamed_matrix_vector_products_always_take_inner() {
    for (threads, vb) in [(1, 32), (2, 32), (2, 64), (6, 64), (16, 32), (16, 64)] {
        let ren = Renderer { threads, vector_bytes: vb, vector_registers: vb / 2, overread: 64, mulacc: true, ..Renderer::cpu() };
        for (k, n, dt) in [
            (4096, 4096, dtypes::FLOAT32),
            (1024, 1024, dtypes::FLOAT32),
            (2048, 1024, dtypes::FLOAT16),
            (1024, 32000, dtypes::FLOAT32),
            (8192, 576, dtypes::FLOAT32),
            (1024, 1000, dtypes::FLOAT32),
        ] {
            let y = Tensor::empty([1, k], dt).matmul(&Tensor::empty([k, n], dt));
            let sched = create_schedule(&[y.uop()], &ren);
            let red = sched.items.iter().find(|i| i.ast.toposort().iter().any(|u| u.op == Ops::REDUCE)).expect("a reduction");
            let acc = red.ast.toposort().into_iter().find(|u| u.op == Ops::REDUCE).unwrap().dtype.itemsize();
            let streamed = ren.matvec_chunks(k, n, acc).is_some();
            let opts = hand_coded_optimizations(&kernel(&red.ast, &ren));
            let what = format!("{threads} threads, {vb}-byte vectors, ({k}, {n}) {dt:?}: {opts:?}");
            assert_eq!(opts.iter().any(|o| o.op == OptOps::Inner), streamed, "{what}");
            assert!(!streamed || sched.items.len() == 1, "{what}: not one kernel");
        }
    }
}
