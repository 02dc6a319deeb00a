//! tinygrad's `test/unit/test_jit_footguns.py`, case by case, against our TinyJit. Where tinygrad's replay
//! silently returns something other than what running the function would, ours gives the function's result
//! or an `Error::Jit` naming what differs. Cases Rust rules out by its types (kwargs, non-tensor outputs,
//! a jit shared by all instances of a class) are ported as the nearest Rust pattern.

use std::cell::Cell;
use tinygrad::{dtypes, engine, Error, Tensor, TinyJit};

/// Tests that draw random numbers: the RNG is process-wide, and one compares a seeded sequence.
static RNG: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn t(v: &[f32]) -> Tensor {
    Tensor::from(v.to_vec())
}
fn vals(x: &Tensor) -> Vec<f32> {
    x.to_vec::<f32>().unwrap()
}
#[track_caller]
fn jit_err(r: tinygrad::Result<Vec<Tensor>>, says: &str) -> String {
    match r {
        Err(Error::Jit(m)) => {
            assert!(m.contains(says), "message {m:?} should say {says:?}");
            m
        }
        Err(e) => panic!("expected a TinyJit error, got {e}"),
        Ok(_) => panic!("expected a TinyJit error, got a result"),
    }
}

// tinygrad: r2 is overwritten by r3 (should be 4). Ours: right result, each replay writes new output buffers.
#[test]
fn output_buffer_reuse() {
    let mut f = TinyJit::new(|x: &[Tensor]| Ok(vec![x[0].sum(..)]));
    let r1 = f.call(&[t(&[1.0, 1.0])]).unwrap().remove(0);
    let r2 = f.call(&[t(&[2.0, 2.0])]).unwrap().remove(0);
    let r3 = f.call(&[t(&[3.0, 3.0])]).unwrap().remove(0);
    let r4 = f.call(&[t(&[4.0, 4.0])]).unwrap().remove(0);
    assert_eq!([r1, r2, r3, r4].map(|r| r.item::<f32>().unwrap()), [2.0, 4.0, 6.0, 8.0]);
}

// tinygrad: the workaround (.clone()) works. Ours: right result too.
#[test]
fn output_buffer_workaround() {
    let mut f = TinyJit::new(|x: &[Tensor]| Ok(vec![x[0].sum(..)]));
    let r: Vec<f32> = (1..=3).map(|i| (&f.call(&[t(&[i as f32; 2])]).unwrap()[0] * 1.0).item::<f32>().unwrap()).collect();
    assert_eq!(r, [2.0, 4.0, 6.0]);
}

// tinygrad: fixed bug (output fed back as input, then a new input). Ours: right result.
#[test]
fn graph_input_output_aliasing() {
    let mut step = TinyJit::new(|x: &[Tensor]| {
        let y = &x[0] + 1.0;
        y.realize()?;
        Ok(vec![&y * 2.0])
    });
    step.call(&[t(&[10.0])]).unwrap();
    let mut x = step.call(&[t(&[20.0])]).unwrap().remove(0);
    assert_eq!(vals(&x), [42.0]);
    for _ in 0..3 {
        x = step.call(&[x]).unwrap().remove(0);
    }
    assert_eq!(vals(&x), [350.0]);
    let mut y = t(&[100.0]);
    for _ in 0..3 {
        y = step.call(&[y]).unwrap().remove(0);
    }
    assert_eq!(vals(&y), [814.0]);
}

// tinygrad: handled by copying aliased inputs. Ours: right result.
#[test]
fn multiple_outputs_same_intermediate() {
    let mut f = TinyJit::new(|x: &[Tensor]| {
        let new_buf = x[0].shrink(&[(1, 3), (0, 1)]).cat(&[&x[1]], 0);
        Ok(vec![new_buf.contiguous(), new_buf.shrink(&[(0, 1), (0, 1)]).contiguous()])
    });
    let mut buf = Tensor::from([[0.0f32], [1.0], [2.0]]);
    for i in 0..4 {
        let expected_first = vals(&buf)[1];
        let mut out = f.call(&[buf, Tensor::from([[10.0 + i as f32]])]).unwrap();
        assert_eq!(vals(&out[1]), [expected_first], "call {i}");
        buf = out.remove(0);
    }
}

// tinygrad: handled by copying. Ours: right result (the output is a new buffer, never the input).
#[test]
fn intra_kernel_output_input_aliasing() {
    let n = 1usize << 12;
    let mut f = TinyJit::new(|x: &[Tensor]| Ok(vec![x[0].shrink(&[(n / 2, n)]).cat(&[&x[1]], 0)]));
    let mut buf = Tensor::from(vec![0i32; n]);
    for i in 0..10 {
        buf = f.call(&[buf, Tensor::from(vec![i + 1; n / 2])]).unwrap().remove(0);
        assert_eq!(buf.shrink(&[(0, n / 2)]).to_vec::<i32>().unwrap(), vec![i; n / 2], "call {i}");
    }
}

// tinygrad: slice assign inside the jit, position a bound Variable. Ours (no symbolic jit inputs): the
// position is a non-tensor argument (call_with), the slice assign writes through to the buffer: right result.
#[test]
fn slice_assign_works_without_realize() {
    let cache = Tensor::from(vec![0.0f32; 16]).reshape([4, 4]);
    cache.realize().unwrap();
    let mut f = TinyJit::with_args(|_: &[Tensor], &pos: &usize| {
        cache.shrink(&[(pos, pos + 1), (0, 4)]).assign(Tensor::ones([1, 4]));
        Ok(vec![cache.sum(..)])
    });
    for round in 0..2 {
        for i in 0..4 {
            cache.assign(Tensor::zeros([4, 4])).realize().unwrap();
            let s = f.call_with(&[], i).unwrap()[0].item::<f32>().unwrap();
            assert_eq!(s, 4.0, "round {round} pos {i}");
            let want: Vec<f32> = (0..16).map(|k| if k / 4 == i { 1.0 } else { 0.0 }).collect();
            assert_eq!(vals(&cache), want);
        }
    }
}

// tinygrad: a symbolic pad view freezes the bound value (2 nonzero instead of 4). Ours has no symbolic
// shapes: inputs of another width are another shape: error naming the input.
#[test]
fn symbolic_pad_view_frozen() {
    let _g = RNG.lock().unwrap_or_else(|e| e.into_inner());
    let a = Tensor::rand([3, 10]);
    a.realize().unwrap();
    let mut f = TinyJit::new(|x: &[Tensor]| Ok(vec![(&x[0] + 1.0).pad(&[(0, 0), (0, 10 - x[0].shape()[1] as i64)])]));
    for i in 1..3 {
        f.call(&[a.shrink(&[(0, 3), (0, i)])]).unwrap();
    }
    let m = jit_err(f.call(&[a.shrink(&[(0, 3), (0, 4)])]), "input 0 is [3, 4]");
    assert!(m.contains("[3, 2]"), "{m}");
}

// tinygrad: JitError for non-tensor outputs. Ours: the function returns Vec<Tensor>, a non-tensor output
// doesn't compile; a constant output (no buffer of its own) is realized and replayed: right result.
#[test]
fn non_tensor_outputs_error() {
    let mut f = TinyJit::new(|x: &[Tensor]| Ok(vec![&x[0] * 2.0, Tensor::full([2], 10.0f32)]));
    for i in 0..4 {
        let out = f.call(&[t(&[i as f32])]).unwrap();
        assert_eq!((vals(&out[0]), vals(&out[1])), (vec![2.0 * i as f32], vec![10.0, 10.0]));
    }
}

// tinygrad: JitError when the same tensor is passed twice. Ours: right result when the aliasing matches the
// capture's; an error naming the input when it doesn't.
#[test]
fn duplicate_inputs_fail() {
    let mut f = TinyJit::new(|x: &[Tensor]| Ok(vec![&x[0] + &x[1]]));
    let x = t(&[1.0, 2.0, 3.0]);
    for _ in 0..3 {
        assert_eq!(vals(&f.call(&[x.clone(), x.clone()]).unwrap()[0]), [2.0, 4.0, 6.0]);
    }
    let m = jit_err(f.call(&[t(&[1.0, 1.0, 1.0]), t(&[2.0, 2.0, 2.0])]), "input 1 is its own buffer but was input 0's buffer");
    assert!(m.contains("at capture"), "{m}");
    let mut g = TinyJit::new(|x: &[Tensor]| Ok(vec![&x[0] + &x[1]]));
    g.call(&[t(&[1.0]), t(&[2.0])]).unwrap();
    g.call(&[t(&[1.0]), t(&[2.0])]).unwrap();
    let y = t(&[5.0]);
    jit_err(g.call(&[y.clone(), y]), "input 1 is input 0's buffer");
}

// tinygrad: tensors in a list work. Ours: any number of inputs in the slice: right result.
#[test]
fn tensors_in_containers() {
    let mut f = TinyJit::new(|x: &[Tensor]| Ok(vec![&x[0] + &x[1]]));
    for i in 0..4 {
        let (a, b) = (t(&[1.0; 3]), t(&[i as f32; 3]));
        assert_eq!(vals(&f.call(&[a, b]).unwrap()[0]), [1.0 + i as f32; 3]);
    }
}

// tinygrad: a nested jit fails on the second call. Ours: the outer capture records the inner replay's
// kernels: right result.
#[test]
fn nested_jit_fails_on_second_call() {
    let mut inner = TinyJit::new(|x: &[Tensor]| Ok(vec![&x[0] + 1.0]));
    let mut outer = TinyJit::new(|x: &[Tensor]| Ok(vec![&inner.call(x)?[0] * 3.0]));
    for i in 1..6 {
        assert_eq!(vals(&outer.call(&[t(&[i as f32])]).unwrap()[0]), [(i as f32 + 1.0) * 3.0], "call {i}");
    }
}

// tinygrad: a tensor the function captures must be realized after each assign. Ours: its pending assign is
// run before a replay: right result with or without the realize.
#[test]
fn implicit_inputs_need_realize() {
    let x = t(&[0.0]);
    let mut f = TinyJit::new(|_: &[Tensor]| Ok(vec![&x * 2.0]));
    for i in 0..5 {
        x.assign(t(&[i as f32])).realize().unwrap();
        assert_eq!(vals(&f.call(&[]).unwrap()[0]), [i as f32 * 2.0], "realized, call {i}");
    }
    for i in 5..10 {
        x.assign(t(&[i as f32]));
        assert_eq!(vals(&f.call(&[]).unwrap()[0]), [i as f32 * 2.0], "pending, call {i}");
    }
    assert_eq!(vals(&x), [9.0]);
}

// tinygrad: JitError for views at different offsets. Ours: an input view is realized into its own buffer
// before the kernels run: right result.
#[test]
fn views_with_different_offsets_fail() {
    let base = Tensor::from((0..100).map(|v| v as f32).collect::<Vec<_>>()).reshape([10, 10]);
    let mut f = TinyJit::new(|x: &[Tensor]| Ok(vec![&x[0] + 1.0]));
    for i in 1..5 {
        let got = vals(&f.call(&[base.shrink(&[(0, 10), (i, i + 2)])]).unwrap()[0]);
        let want: Vec<f32> = (0..10).flat_map(|r| [(r * 10 + i) as f32 + 1.0, (r * 10 + i + 1) as f32 + 1.0]).collect();
        assert_eq!(got, want, "offset {i}");
    }
}

// tinygrad: JitError on a shape change. Ours: error naming the input, its shape and the captured one; also
// for another dtype, another device and another input count.
#[test]
fn shape_change_after_capture_fails() {
    let _g = RNG.lock().unwrap_or_else(|e| e.into_inner());
    let mut f = TinyJit::new(|x: &[Tensor]| Ok(vec![&x[0] + &x[1]]));
    f.call(&[Tensor::randn([10, 10]), Tensor::randn([10, 10])]).unwrap();
    f.call(&[Tensor::randn([10, 10]), Tensor::randn([10, 10])]).unwrap();
    jit_err(
        f.call(&[Tensor::randn([10, 10]), Tensor::randn([20, 20])]),
        "input 1 is [20, 20] dtypes.float32 on CPU, the captured call's was [10, 10] dtypes.float32",
    );
    jit_err(f.call(&[Tensor::randn([10, 10]).cast(dtypes::FLOAT16), Tensor::randn([10, 10])]), "input 0 is [10, 10] dtypes.float16");
    jit_err(f.call(&[Tensor::randn([10, 10])]), "1 inputs, the captured call had 2");
    // a tensor on another device (the interpreter)
    let other = Tensor::from_uop(engine::buffer_from_bytes(&[0u8; 400], dtypes::FLOAT32, 100, "PYTHON")).reshape([10, 10]);
    assert_eq!(other.device(), "PYTHON");
    jit_err(
        f.call(&[Tensor::randn([10, 10]), other]),
        "input 1 is [10, 10] dtypes.float32 on PYTHON, the captured call's was [10, 10] dtypes.float32 on CPU",
    );
    // the checks don't disturb the capture
    let out = f.call(&[t(&[1.0; 100]).reshape([10, 10]), t(&[2.0; 100]).reshape([10, 10])]).unwrap();
    assert_eq!(vals(&out[0]), [3.0; 100]);
}

// tinygrad: Python values read by the function are frozen at capture (20 instead of 30, 40). Ours: values
// that change are arguments (call_with), each value captured on its own: right result.
#[test]
fn python_constants_frozen() {
    let mut f = TinyJit::with_args(|x: &[Tensor], &mult: &i32| Ok(vec![&x[0] * mult as f32]));
    let r: Vec<f32> = (1..=5).map(|m| f.call_with(&[t(&[10.0])], m).unwrap()[0].item::<f32>().unwrap()).collect();
    assert_eq!(r, [10.0, 20.0, 30.0, 40.0, 50.0]);
    let r: Vec<f32> = (1..=5).rev().map(|m| f.call_with(&[t(&[10.0])], m).unwrap()[0].item::<f32>().unwrap()).collect();
    assert_eq!(r, [50.0, 40.0, 30.0, 20.0, 10.0]);
    // a value read through a Cell, not passed as an argument, is frozen as in tinygrad (documented on new)
    let mult = Cell::new(1.0f32);
    let mut g = TinyJit::new(|x: &[Tensor]| Ok(vec![&x[0] * mult.get()]));
    let r: Vec<f32> = (1..=3)
        .map(|m| {
            mult.set(m as f32);
            g.call(&[t(&[10.0])]).unwrap()[0].item::<f32>().unwrap()
        })
        .collect();
    assert_eq!(r, [10.0, 20.0, 20.0]);
}

// tinygrad: JitError for const inputs (no buffer). Ours: a constant input is realized into a buffer and
// swapped like any other: right result.
#[test]
fn unrealized_const_input_error() {
    let mut f = TinyJit::new(|x: &[Tensor]| Ok(vec![&x[0] * &x[1]]));
    for k in 1..5 {
        let out = f.call(&[t(&[1.0, 2.0, 3.0]), Tensor::full((), k as f32)]).unwrap();
        assert_eq!(vals(&out[0]), [k as f32, 2.0 * k as f32, 3.0 * k as f32]);
    }
}

// tinygrad: the branch taken at capture runs thereafter (6 instead of 9). Ours: the flag is an argument:
// right result.
#[test]
fn conditional_branches_frozen() {
    let mut f = TinyJit::with_args(|x: &[Tensor], &square: &bool| Ok(vec![if square { &x[0] * &x[0] } else { &x[0] * 2.0 }]));
    let r: Vec<f32> = [true, false, true, false, true, true, false]
        .iter()
        .map(|&b| f.call_with(&[t(&[3.0])], b).unwrap()[0].item::<f32>().unwrap())
        .collect();
    assert_eq!(r, [9.0, 6.0, 9.0, 6.0, 9.0, 9.0, 6.0]);
}

// tinygrad: positional vs keyword calls are rejected. Rust has no keyword arguments: nothing to port.

// tinygrad: a jitted method is shared by all instances (10 instead of 15). Ours: a TinyJit is a value each
// model owns: right result.
#[test]
fn class_method_shared_across_instances() {
    struct Model {
        scale: Tensor,
    }
    let (m1, m2) = (Model { scale: t(&[2.0]) }, Model { scale: t(&[3.0]) });
    let mut f1 = TinyJit::new(|x: &[Tensor]| Ok(vec![&x[0] * &m1.scale]));
    let mut f2 = TinyJit::new(|x: &[Tensor]| Ok(vec![&x[0] * &m2.scale]));
    for _ in 0..3 {
        assert_eq!(vals(&f1.call(&[t(&[5.0])]).unwrap()[0]), [10.0]);
        assert_eq!(vals(&f2.call(&[t(&[5.0])]).unwrap()[0]), [15.0]);
    }
}

// tinygrad and ours: the function body runs only on the first two calls (documented on TinyJit).
#[test]
fn side_effects_only_during_capture() {
    let count = Cell::new(0);
    let mut f = TinyJit::new(|x: &[Tensor]| {
        count.set(count.get() + 1);
        Ok(vec![&x[0] * 2.0])
    });
    for i in 1..=5 {
        assert_eq!(vals(&f.call(&[t(&[i as f32])]).unwrap()[0]), [2.0 * i as f32]);
    }
    assert_eq!(count.get(), 2);
}

// tinygrad: JitError when nothing is realized. Ours: error.
#[test]
fn nothing_realized_fails() {
    let mut f = TinyJit::new(|_: &[Tensor]| Ok(vec![]));
    f.call(&[t(&[1.0]), t(&[2.0])]).unwrap();
    jit_err(f.call(&[t(&[1.0]), t(&[2.0])]), "ran no kernel");
}

// tinygrad: .item() in a shape computation raises while capturing. Ours: error.
#[test]
fn item_creates_unrealized_return() {
    let mut f = TinyJit::new(|x: &[Tensor]| Ok(vec![Tensor::zeros([x[0].sum(..).item::<f32>()? as usize])]));
    assert_eq!(f.call(&[t(&[1.0, 1.0, 1.0])]).unwrap()[0].shape(), [3]);
    jit_err(f.call(&[t(&[1.0, 1.0, 1.0])]), "read while capturing");
}

// tinygrad: masked_select (which reads the mask) raises while capturing. Ours: error.
#[test]
fn item_bakes_in_values() {
    let mut f = TinyJit::new(|x: &[Tensor]| Ok(vec![x[0].masked_select(&x[1])?]));
    let args = || [t(&[1.0, 2.0, 3.0, 4.0]), Tensor::from([true, false, true, false])];
    assert_eq!(vals(&f.call(&args()).unwrap()[0]), [1.0, 3.0]);
    jit_err(f.call(&args()), "read while capturing");
}

// tinygrad: masked_select with a static size is jittable. Ours reads the mask to find the positions, so it
// is an error while capturing, not a stale result.
#[test]
fn masked_select_static_size_jittable() {
    let mut f = TinyJit::new(|x: &[Tensor]| Ok(vec![x[0].masked_select_size(&x[1], 4, -1.0)?]));
    let out = f.call(&[t(&[1.0, 2.0, 3.0, 4.0]), Tensor::from([true, false, true, false])]).unwrap();
    assert_eq!(vals(&out[0]), [1.0, 3.0, -1.0, -1.0]);
    jit_err(f.call(&[t(&[5.0, 6.0, 7.0, 8.0]), Tensor::from([false, true, true, true])]), "read while capturing");
}

// tinygrad: nonzero with a static size is jittable. Ours has no nonzero: nothing to port.

// tinygrad: .tolist() raises while capturing. Ours: to_vec is an error.
#[test]
fn tolist_bakes_in_values() {
    let mut f = TinyJit::new(|x: &[Tensor]| Ok(vec![Tensor::from(x[0].to_vec::<f32>()?)]));
    f.call(&[t(&[1.0, 2.0, 3.0])]).unwrap();
    jit_err(f.call(&[t(&[1.0, 2.0, 3.0])]), "read while capturing");
}

// tinygrad (correct behavior): random tensors regenerate each call. Ours too: a replay gives each draw the RNG's
// next counter, so the numbers continue the sequence the draws would make run as built.
#[test]
fn random_regenerates() {
    let _g = RNG.lock().unwrap_or_else(|e| e.into_inner());
    let mut f = TinyJit::new(|x: &[Tensor]| Ok(vec![&x[0] + Tensor::rand([3])]));
    Tensor::manual_seed(7);
    let jitted: Vec<Vec<f32>> = (0..5).map(|_| vals(&f.call(&[t(&[0.0; 3])]).unwrap()[0])).collect();
    Tensor::manual_seed(7);
    let plain: Vec<Vec<f32>> = (0..5).map(|_| vals(&Tensor::rand([3]))).collect();
    assert_eq!(jitted, plain);
    let mut seen = plain.clone();
    seen.sort_by(|a, b| a.partial_cmp(b).unwrap());
    seen.dedup();
    assert_eq!(seen.len(), 5);
}

// tinygrad (correct behavior): unrealized returns are realized. Ours: right result.
#[test]
fn unrealized_return_auto_realized() {
    let mut f = TinyJit::new(|x: &[Tensor]| Ok(vec![&x[0] + &x[1]]));
    for i in 0..5 {
        let (a, b): (Vec<f32>, Vec<f32>) = ((0..10).map(|k| (k * i) as f32).collect(), (0..10).map(|k| k as f32 - i as f32).collect());
        let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
        assert_eq!(vals(&f.call(&[t(&a), t(&b)]).unwrap()[0]), want);
    }
}

// tinygrad (correct behavior): keyword order doesn't matter. Rust has no keyword arguments: nothing to port.

/// A TinyJit that adds 1 to its input in place and returns it.
fn increments() -> TinyJit<impl FnMut(&[Tensor]) -> tinygrad::Result<Vec<Tensor>>> {
    TinyJit::new(|x: &[Tensor]| {
        x[0].assign(&x[0] + 1.0).realize()?;
        Ok(vec![x[0].clone()])
    })
}

// tinygrad (correct behavior): mutating an input by assign is consistent. Ours: right result.
#[test]
fn input_mutation_consistent() {
    let mut f = increments();
    let a = t(&[0.0]);
    for _ in 0..5 {
        f.call(std::slice::from_ref(&a)).unwrap();
    }
    assert_eq!(vals(&a), [5.0]);
}

// Ours: a replay whose kernels would write an input made by Tensor::from_blob (read-only host bytes, never used
// before) panics naming them, and the bytes stay as they were.
#[test]
fn replay_refuses_to_write_borrowed_bytes() {
    let mut f = increments();
    let a = t(&[0.0]);
    for _ in 0..3 {
        f.call(std::slice::from_ref(&a)).unwrap();
    }
    // (at the start of a page: the device borrows host bytes only where reading past them stays in their page)
    let mut backing = vec![0u8; 3 * 4096];
    let at = (4096 - backing.as_ptr() as usize % 4096) % 4096;
    backing[at..at + 4].copy_from_slice(&2.0f32.to_le_bytes());
    let bytes = bytes::Bytes::from(backing).slice(at..at + 4);
    let blob = Tensor::from_blob(bytes.clone(), tinygrad::dtypes::FLOAT32, [1]);
    assert_eq!(bytes.as_ptr() as usize % 4096, 0, "the bytes start a page");
    let err =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f.call(std::slice::from_ref(&blob)))).expect_err("writes host bytes");
    let msg = err.downcast_ref::<String>().cloned().or_else(|| err.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default();
    assert!(msg.contains("borrowed host bytes"), "{msg}");
    assert_eq!(&bytes[..], 2.0f32.to_le_bytes(), "the borrowed bytes changed");
}
