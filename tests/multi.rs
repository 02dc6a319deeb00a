//! Several devices in one process (issue 33): device instances (`CPU:1`), copies between them as captured items,
//! sharded tensors (tinygrad `shard`) against the same ops unsharded, forward and backward, and the allreduce's copy
//! counts as tinygrad's test/unit/test_allreduce.py has them. Values are from the unsharded run or hand-derived.

use tinygrad::engine::capture;
use tinygrad::helpers::{Context, RING};
use tinygrad::{dtypes, Tensor, TinyJit};

const CPUS: [&str; 4] = ["CPU", "CPU:1", "CPU:2", "CPU:3"];

fn close(a: &[f32], b: &[f32], tol: f32, what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: lengths");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!((x - y).abs() <= tol * (1.0 + y.abs()), "{what}: element {i}: {x} vs {y}");
    }
}

#[test]
fn device_instances_are_devices_of_their_own() {
    let _dev = Context::new(&[]).dev("cpu:1");
    let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0], [3]);
    assert_eq!(a.device(), "CPU:1");
    let b = a.to("CPU");
    assert_eq!(b.device(), "CPU");
    assert_eq!((&b * 2.0f32).to_vec::<f32>().unwrap(), [2.0, 4.0, 6.0]);
    assert_eq!((&a + 1.0f32).realize().unwrap().device(), "CPU:1");
    let mixed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        (&a + &Tensor::from_slice(&[1.0f32, 1.0, 1.0], [3]).to("CPU")).realize().map(drop)
    }));
    let msg = mixed.expect_err("a kernel on two devices").downcast::<String>().map(|s| *s).unwrap_or_default();
    assert!(msg.contains("CPU and on CPU:1"), "{msg}");
    let p = Tensor::from_slice(&[5i32, 6], [2]).to("PYTHON:1");
    assert_eq!((p.device(), (&p + 1).to_vec::<i32>().unwrap()), ("PYTHON:1".to_string(), vec![6, 7]));
}

#[test]
fn copies_are_captured_and_replayed() {
    let mut jit = TinyJit::new(|io: &[Tensor]| Ok(vec![(io[0].to("CPU:1") * 2.0f32 + 1.0f32).to("CPU:2").contiguous()]));
    for i in 0..4 {
        let x = Tensor::from_slice(&[i as f32, 10.0 + i as f32], [2]).contiguous();
        x.realize().unwrap();
        let out = jit.call(&[x]).unwrap().remove(0);
        assert_eq!(out.device(), "CPU:2");
        assert_eq!(out.to_vec::<f32>().unwrap(), [2.0 * i as f32 + 1.0, 21.0 + 2.0 * i as f32], "call {i}");
    }
    let x = Tensor::from_slice(&[1.0f32, 2.0], [2]).contiguous();
    x.realize().unwrap();
    let (_, k) = capture(|| (x.to("CPU:1") + 1.0f32).realize().map(drop).unwrap());
    assert_eq!((k.copies(), k.kernel_count()), (vec![("CPU".to_string(), "CPU:1".to_string())], 1));
}

/// `f` on `x` against `f` on `x` sharded over `devs` along each axis and replicated: values and `x`'s gradient.
fn check_sharded(name: &str, shape: &[usize], devs: &[&str], f: impl Fn(&Tensor) -> Tensor) {
    let n: usize = shape.iter().product();
    let data: Vec<f32> = (0..n).map(|i| ((i * 37 % 23) as f32 - 11.0) / 7.0).collect();
    let run = |shard: Option<Option<i64>>| {
        let x = Tensor::from_slice(&data, shape.to_vec()).requires_grad_(true).clone();
        let xs = match shard {
            Some(axis) => x.shard(devs, axis),
            None => x.clone(),
        };
        let v = f(&xs).to_vec::<f32>().unwrap();
        // a weight per output element, so the gradient tells the elements apart
        let out = f(&Tensor::from_slice(&data, shape.to_vec())).shape();
        let w = Tensor::arange(0.0, out.iter().product::<usize>() as f64, 1.0).cast(dtypes::FLOAT32).reshape(out);
        (f(&xs) * w).sum(..).backward();
        (v, x.grad().expect("a gradient").to_vec::<f32>().unwrap())
    };
    let (want, want_grad) = run(None);
    let axes = (0..shape.len()).filter(|&a| shape[a].is_multiple_of(devs.len())).map(|a| Some(a as i64));
    for axis in std::iter::once(None).chain(axes) {
        let (got, got_grad) = run(Some(axis));
        close(&got, &want, 1e-5, &format!("{name} sharded on {axis:?}"));
        close(&got_grad, &want_grad, 1e-5, &format!("{name}'s gradient sharded on {axis:?}"));
    }
}

#[test]
fn sharded_ops_match_unsharded_forward_and_backward() {
    let two = &CPUS[..2];
    check_sharded("mul_add", &[4, 6], two, |x| x * x * 0.5f32 + x);
    check_sharded("exp_where", &[4, 6], two, |x| x.gt(0.0f32).where_(x.exp(), x * 2.0f32));
    check_sharded("sum0", &[4, 6], two, |x| x.sum(0));
    check_sharded("sum1", &[4, 6], two, |x| x.sum(1));
    check_sharded("max1", &[4, 6], two, |x| x.max(1));
    check_sharded("mean_all", &[4, 6], two, |x| x.mean(..).reshape([1]));
    check_sharded("reshape", &[4, 6], two, |x| x.reshape([2, 2, 3, 2]) * 3.0f32);
    check_sharded("reshape_merge", &[4, 6], two, |x| x.reshape([24]).relu());
    check_sharded("permute", &[4, 6], two, |x| x.permute([1, 0]) - 1.0f32);
    check_sharded("expand", &[4, 1, 6], two, |x| x.expand([4, 3, 6]).sum(1));
    check_sharded("pad", &[4, 6], two, |x| x.pad(&[(1, 2), (0, 1)]));
    check_sharded("shrink", &[4, 6], two, |x| x.shrink(&[(1, 3), (2, 6)]));
    check_sharded("flip", &[4, 6], two, |x| x.flip([0, 1]));
    check_sharded("softmax", &[4, 6], two, |x| x.softmax(-1));
    check_sharded("matmul", &[4, 6], two, |x| x.matmul(&x.transpose(0, 1)));
    check_sharded("four_devices", &[8, 4], &CPUS, |x| (x * 2.0f32).sum(0) + x.max(..));
    let py = &["PYTHON", "PYTHON:1"][..];
    check_sharded("python_mul_add", &[4, 2], py, |x| x * x * 0.5f32 + x);
    check_sharded("python_sums", &[4, 2], py, |x| x.sum(0) * x.sum(1).sum(..));
    check_sharded("python_movement", &[4, 2], py, |x| x.reshape([2, 4]).permute([1, 0]).pad(&[(1, 0), (0, 1)]).flip([0]));
    check_sharded("python_softmax", &[4, 2], py, |x| x.softmax(0));
}

#[test]
fn sharded_tensors_gather_assign_and_reshard() {
    let x = Tensor::arange(0.0, 12.0, 1.0).cast(dtypes::FLOAT32).reshape([4, 3]).shard(&CPUS[..2], Some(0));
    assert_eq!(x.device(), "CPU,CPU:1");
    x.realize().unwrap();
    assert_eq!(x.to("CPU:3").to_vec::<f32>().unwrap(), (0..12).map(|i| i as f32).collect::<Vec<_>>());
    let y = x.shard(&CPUS[1..4], Some(1));
    assert_eq!(y.sum(1).to_vec::<f32>().unwrap(), [3.0, 12.0, 21.0, 30.0]);
    let w = Tensor::zeros([4, 3]).contiguous().shard(&CPUS[..2], None);
    w.realize().unwrap();
    w.assign(&x + 1.0f32);
    w.realize().unwrap();
    assert_eq!(w.to_vec::<f32>().unwrap(), (1..13).map(|i| i as f32).collect::<Vec<_>>());
    // an unsharded tensor assigned a sharded value gathers it; random draws like a sharded tensor are sharded
    let plain = Tensor::zeros([4, 3]).contiguous();
    plain.realize().unwrap();
    plain.assign(&x * 2.0f32);
    assert_eq!(plain.to_vec::<f32>().unwrap(), (0..12).map(|i| 2.0 * i as f32).collect::<Vec<_>>());
    let r = x.rand_like();
    assert!(r.is_sharded() && r.shape() == [4, 3]);
    assert!(r.to_vec::<f32>().unwrap().iter().all(|v| (0.0..1.0).contains(v)));
    // a slice of a sharded tensor assigned (across both shards, and off the sharded axis) writes its shards
    let xs = Tensor::arange(0.0, 12.0, 1.0).cast(dtypes::FLOAT32).reshape([4, 3]).contiguous().shard(&CPUS[..2], Some(0));
    xs.realize().unwrap();
    xs.shrink(&[(1, 3), (0, 3)]).assign(Tensor::full([2, 3], -1.0f32));
    xs.shrink(&[(0, 4), (2, 3)]).assign(Tensor::full([4, 1], 9.0f32));
    let want = [0.0, 1.0, 9.0, -1.0, -1.0, 9.0, -1.0, -1.0, 9.0, 9.0, 10.0, 9.0];
    assert_eq!(xs.to_vec::<f32>().unwrap(), want);
    assert_eq!(Tensor::from_uop(xs.uop().src[1].clone()).to_vec::<f32>().unwrap(), want[6..]);
    // shard_like of a sharded graph (not itself a MULTI) takes the sharding lowering gives it
    let like = Tensor::ones([4, 3]).shard_like(&(&x * 2.0f32).transpose(0, 1).transpose(0, 1));
    assert_eq!((like.uop().op, tinygrad::schedule::multi::multi_axis(&like.uop())), (tinygrad::uop::Ops::MULTI, Some(0)));
    // every replica holds the whole
    let shard1 = Tensor::from_uop(w.uop().src[1].clone());
    assert_eq!((shard1.device(), shard1.to_vec::<f32>().unwrap()), ("CPU:1".to_string(), (1..13).map(|i| i as f32).collect::<Vec<_>>()));
}

/// What the sum over the sharded axis of a (4, `cols`) tensor split over [`CPUS`] launches, under `RING=ring`.
fn allreduce_items(ring: i64, cols: usize) -> tinygrad::engine::Kernels {
    let _ring = Context::new(&[(&RING, ring)]);
    let t = Tensor::empty([4, cols], dtypes::FLOAT32).shard(&CPUS, Some(0));
    t.realize().unwrap();
    capture(|| t.sum(0).realize().map(drop).unwrap()).1
}

#[test]
fn ring_allreduce_copies_form_a_ring() {
    let pairs = allreduce_items(2, 400).copies();
    // N(N-1) in the reduce-scatter and N(N-1) in the all-gather, between N neighbouring pairs
    assert_eq!(pairs.len(), 4 * 3 * 2);
    let mut distinct = pairs.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 4, "{distinct:?}");
    let _ring = Context::new(&[(&RING, 2)]);
    let ones = Tensor::ones([4, 400]).contiguous().shard(&CPUS, Some(0));
    assert_eq!(ones.sum(0).to_vec::<f32>().unwrap(), vec![4.0; 400]);
}

#[test]
fn naive_allreduce_copies_every_shard_to_every_device() {
    let k = allreduce_items(0, 4096);
    let pairs = k.copies();
    assert_eq!(pairs.len(), 4 * 3);
    assert!(pairs.iter().all(|(from, to)| from != to));
    // tinygrad counts 2 kernels, each run on every device: here each device's run is a kernel
    assert_eq!(k.kernel_count(), 2 * 4);
}

#[test]
fn ring_and_naive_allreduce_agree() {
    let mut seed = 7u64;
    for (rows, cols) in [(4, 1000), (8, 333), (4, 7), (12, 65)] {
        let data: Vec<f32> = (0..rows * cols)
            .map(|_| {
                seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                ((seed >> 33) as f32 / (1u64 << 31) as f32) - 0.5
            })
            .collect();
        let sum = |ring: i64| {
            let _r = Context::new(&[(&RING, ring)]);
            Tensor::from_slice(&data, [rows, cols]).shard(&CPUS, Some(0)).sum(0).to_vec::<f32>().unwrap()
        };
        let (naive, ring) = (sum(0), sum(2));
        let err = naive.iter().zip(&ring).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
        assert!(err < 1e-6, "{rows}x{cols}: ring and naive differ by {err}");
    }
}

/// A Linear, BatchNorm (training statistics) and Linear network's loss on a batch, and its parameters.
fn net(seed: u64) -> (Vec<Tensor>, impl Fn(&Tensor, &Tensor, &[Tensor]) -> Tensor) {
    use tinygrad::nn::{BatchNorm, Linear};
    Tensor::manual_seed(seed);
    let (l1, bn, l2) = (Linear::new(6, 8, true), BatchNorm::new(8, 1e-5, true, false, 0.1), Linear::new(8, 3, true));
    let params = vec![
        l1.weight.clone(),
        l1.bias.clone().unwrap(),
        bn.weight.clone().unwrap(),
        bn.bias.clone().unwrap(),
        l2.weight.clone(),
        l2.bias.clone().unwrap(),
    ];
    Tensor::realize_all(&params.iter().collect::<Vec<_>>()).unwrap();
    let loss = |x: &Tensor, y: &Tensor, p: &[Tensor]| {
        let h = (x.matmul(&p[0].transpose(0, 1)) + &p[1]).relu();
        let (mean, var) = (h.mean(0), (&h - h.mean(0)).square().mean(0));
        let h = (&h - mean) / (var + 1e-5f32).sqrt() * &p[2] + &p[3];
        (h.matmul(&p[4].transpose(0, 1)) + &p[5]).sparse_categorical_crossentropy(y, -1, 0.0, tinygrad::tensor::Reduction::Mean)
    };
    (params, loss)
}

#[test]
fn a_data_parallel_step_has_the_single_device_gradients() {
    let x: Vec<f32> = (0..8 * 6).map(|i| ((i * 29 % 17) as f32 - 8.0) / 5.0).collect();
    let y: Vec<i32> = (0..8).map(|i| i % 3).collect();
    let grads = |devs: Option<&[&str]>| {
        let (params, loss) = net(3);
        params.iter().for_each(|p| _ = p.requires_grad_(true));
        let (mut xb, mut yb) = (Tensor::from_slice(&x, [8, 6]), Tensor::from_slice(&y, [8]));
        if let Some(d) = devs {
            params.iter().for_each(|p| _ = p.shard_(d, None));
            (xb, yb) = (xb.shard(d, Some(0)), yb.shard(d, Some(0)));
        }
        let l = loss(&xb, &yb, &params);
        l.backward();
        let mut out = vec![l.to_vec::<f32>().unwrap()];
        out.extend(params.iter().map(|p| p.grad().expect("a gradient").to_vec::<f32>().unwrap()));
        out
    };
    let one = grads(None);
    for devs in [&CPUS[..2], &CPUS[..]] {
        for (i, (a, b)) in grads(Some(devs)).iter().zip(&one).enumerate() {
            close(
                a,
                b,
                1e-5,
                &format!("{} devices: {}", devs.len(), if i == 0 { "loss".into() } else { format!("parameter {}'s gradient", i - 1) }),
            );
        }
    }
}

#[test]
fn opencl_and_cpu_shard_together() {
    if tinygrad::runtime::cl::device().is_err() {
        assert!(std::env::var_os("CI").is_none(), "CI must have an OpenCL device (.ci/run installs PoCL)");
        eprintln!("skipping the OpenCL case: no OpenCL device");
        return;
    }
    check_sharded("cl_and_cpu", &[4, 6], &["CL", "CPU"], |x| (x * x).sum(1) + x.max(0).sum(..));
}

#[test]
fn kernels_on_two_devices_run_at_the_same_time() {
    // two matmuls (interpreted, tens of ms each), one on each PYTHON instance, realized together: their launches
    // overlap in time on the profile, where one queue for both would run them one after the other
    let _profile = Context::new(&[(&tinygrad::helpers::PROFILE, 1)]);
    let devs = ["PYTHON:6", "PYTHON:7"];
    let xs: Vec<Tensor> =
        devs.iter().map(|d| Tensor::arange(0.0, 9216.0, 1.0).reshape([96, 96]).div(9216.0f32).to(d).realize().unwrap().clone()).collect();
    let ys: Vec<Tensor> = xs.iter().map(|x| x.matmul(x)).collect();
    Tensor::realize_all(&ys.iter().collect::<Vec<_>>()).unwrap();
    let want = (Tensor::arange(0.0, 9216.0, 1.0).reshape([96, 96]).div(9216.0f32))
        .matmul(&Tensor::arange(0.0, 9216.0, 1.0).reshape([96, 96]).div(9216.0f32));
    let want = want.to_vec::<f32>().unwrap();
    ys.iter().for_each(|y| close(&y.to_vec::<f32>().unwrap(), &want, 1e-5, "matmul"));
    let launches: Vec<(u64, u64)> = devs
        .iter()
        .map(|d| {
            let ev = tinygrad::profile::events();
            let l = ev.iter().rfind(|e| e.device == *d && e.kind == "launch").expect("a launch on each device");
            (l.start_ns, l.start_ns + l.dur_ns)
        })
        .collect();
    let (a, b) = (launches[0], launches[1]);
    assert!(a.0 < b.1 && b.0 < a.1, "the launches on {devs:?} did not overlap: {launches:?}");
}

/// A process group of two identical processes whose sums take `delay`: the sum is twice the buffer.
struct SlowPair(std::time::Duration);
impl tinygrad::engine::Collective for SlowPair {
    fn size(&self) -> usize {
        2
    }
    fn allreduce_sum(&self, src: &[u8], dst: &mut [u8], dtype: tinygrad::DType) -> tinygrad::Result<()> {
        assert_eq!(dtype, dtypes::FLOAT32);
        std::thread::sleep(self.0);
        for (d, s) in dst.chunks_exact_mut(4).zip(src.chunks_exact(4)) {
            d.copy_from_slice(&(2.0 * f32::from_le_bytes(s.try_into().unwrap())).to_le_bytes());
        }
        Ok(())
    }
}

#[test]
fn kernels_that_do_not_need_an_allreduce_run_during_it() {
    // a slow sum over processes and a matmul that does not read it, realized together on one device: the matmul runs
    // while the sum waits (as the remaining backward pass runs while the first gradient buckets are summed)
    let _on = (Context::new(&[(&tinygrad::helpers::PROFILE, 1)]), Context::new(&[]).dev("CPU:5"));
    tinygrad::engine::set_collective(Some(Box::new(SlowPair(std::time::Duration::from_millis(300)))));
    let x = Tensor::arange(0.0, 64.0, 1.0).cast(dtypes::FLOAT32).realize().unwrap().clone();
    let w = Tensor::arange(0.0, 4096.0, 1.0).reshape([64, 64]).div(4096.0f32).realize().unwrap().clone();
    let (sum, prod) = (x.allreduce_processes() + 1.0f32, w.matmul(&w));
    Tensor::realize_all(&[&sum, &prod]).unwrap();
    tinygrad::engine::set_collective(None);
    assert_eq!(sum.to_vec::<f32>().unwrap(), (0..64).map(|i| 2.0 * i as f32 + 1.0).collect::<Vec<_>>());
    let ev = tinygrad::profile::events();
    let on = |kind: &str| {
        let e = ev.iter().rfind(|e| e.device == "CPU:5" && e.kind == kind && (kind != "launch" || e.name.starts_with('r')));
        e.map(|e| (e.start_ns, e.start_ns + e.dur_ns)).unwrap_or_else(|| panic!("no {kind} on CPU:5"))
    };
    let (ar, mm) = (on("allreduce"), on("launch"));
    assert!(mm.0 > ar.0 && mm.1 < ar.1, "the matmul {mm:?} did not run during the allreduce {ar:?}");
}
