//! Symbolic variables end to end (tinygrad `Variable`): a bound variable flows from a tensor through the schedule
//! (kernels hold the unbound DEFINE_VAR) to the launch's values, on every device; graphs differing only in the
//! value schedule and compile once; a TinyJit replays with each call's value and schedules nothing.

use tinygrad::helpers::Context;
use tinygrad::schedule::schedule_count;
use tinygrad::{Tensor, TinyJit};

/// `table[pos]` read with a one-hot sum (a gather), and `pos + [0, 1, 2]`.
fn read_at(table: &Tensor, pos: &Tensor) -> (Tensor, Tensor) {
    let n = table.shape()[0];
    let hit = Tensor::arange(0.0, n as f64, 1.0).eq(pos).where_(table, 0.0f32).sum(..);
    (hit, Tensor::arange(0.0, 3.0, 1.0) + pos)
}

/// The tests of this file one at a time: `steps_compile_once` counts the kernels its device has compiled, which
/// another test compiling at the same time would add to.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn steps_compile_once(dev: &str) {
    let _serial = serial();
    let _dev = Context::new(&[]).dev(dev);
    let table = Tensor::from_slice(&(0..100).map(|i| (i * i) as f32).collect::<Vec<_>>(), [100]);
    table.realize().unwrap();
    let mut compiled = None;
    for pos in 0..100i64 {
        let (hit, next) = read_at(&table, &Tensor::bind_var("pos", 0, 99, pos));
        assert_eq!(hit.to_vec::<f32>().unwrap(), [(pos * pos) as f32], "{dev} pos {pos}");
        assert_eq!(next.to_vec::<i32>().unwrap(), [pos as i32, pos as i32 + 1, pos as i32 + 2], "{dev} pos {pos}");
        let n = tinygrad::engine::compiled_asts(dev).unwrap().len();
        assert!(compiled.is_none_or(|c| c == n), "{dev}: step {pos} compiled a new kernel ({compiled:?} -> {n})");
        compiled = Some(n);
    }
}

#[test]
fn a_hundred_steps_compile_once_on_the_cpu() {
    steps_compile_once("CPU");
}

#[test]
fn a_hundred_steps_compile_once_on_the_interpreter() {
    steps_compile_once("PYTHON");
}

#[test]
fn variables_on_opencl() {
    match tinygrad::runtime::cl::device() {
        Ok(_) => steps_compile_once("CL"),
        Err(e) => {
            assert!(std::env::var_os("CI").is_none(), "CI must have an OpenCL device (.ci/run installs PoCL): {e}");
            eprintln!("skipping: {e}");
        }
    }
}

#[test]
fn tinyjit_replays_with_each_calls_value() {
    let _serial = serial();
    let table = Tensor::from_slice(&(0..100).map(|i| (3 * i) as f32).collect::<Vec<_>>(), [100]);
    let mut jit = TinyJit::new(|x: &[Tensor]| {
        let (hit, next) = read_at(&x[0], &x[1]);
        Ok(vec![hit * 2.0f32, next])
    });
    for pos in 0..100i64 {
        let before = schedule_count();
        let out = jit.call(&[table.clone(), Tensor::bind_var("pos", 0, 99, pos)]).unwrap();
        if pos >= 2 {
            assert_eq!(schedule_count(), before, "replay {pos} scheduled");
        }
        assert_eq!(out[0].to_vec::<f32>().unwrap(), [(6 * pos) as f32], "pos {pos}");
        assert_eq!(out[1].to_vec::<i32>().unwrap(), [pos as i32, pos as i32 + 1, pos as i32 + 2], "pos {pos}");
    }
}

#[test]
#[should_panic(expected = "variable pos is bound to 1 and to 2")]
fn one_variable_bound_to_two_values_panics() {
    let _serial = serial();
    let a = Tensor::bind_var("pos", 0, 9, 1);
    let b = Tensor::bind_var("pos", 0, 9, 2);
    let _ = (a + b).to_vec::<i32>();
}

#[test]
fn a_replay_must_bind_the_captured_variables() {
    let _serial = serial();
    let table = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], [4]);
    let mut jit = TinyJit::new(|x: &[Tensor]| Ok(vec![read_at(&x[0], &x[1]).0]));
    for pos in 0..2 {
        jit.call(&[table.clone(), Tensor::bind_var("pos", 0, 3, pos)]).unwrap();
    }
    let err = jit.call(&[table.clone(), Tensor::bind_var("other", 0, 3, 1)]).map(drop).unwrap_err().to_string();
    assert!(err.contains("bound variables"), "{err}");
    // a variable named like the kernel's own names renders apart from them
    let vals = Tensor::bind_var("vals", 0, 3, 2);
    assert_eq!(read_at(&table, &vals).0.to_vec::<f32>().unwrap(), [3.0]);
}

/// `cache` (`[ctx, w]`) with rows `start..start + T` replaced by `x` (`[T, w]`) where they are in the cache: row `r`
/// takes `x`'s row `r - start` through a one-hot sum (how the LLM's prompt chunks enter their KV caches).
fn write_rows(cache: &Tensor, x: &Tensor, start: &Tensor) -> Tensor {
    let (ctx, t, w) = (cache.shape()[0], x.shape()[0], x.shape()[1]);
    let off = Tensor::arange(0.0, ctx as f64, 1.0).reshape([ctx, 1]).cast(tinygrad::dtypes::INT32) - start.reshape([1, 1]);
    let mask = off.ge(0).bitwise_and(off.lt(t as i32));
    let at = off.reshape([ctx, 1, 1]).eq(Tensor::arange(0.0, t as f64, 1.0).cast(tinygrad::dtypes::INT32).reshape([1, t, 1]));
    mask.where_(at.where_(x.reshape([1, t, w]), 0.0f32).sum(1), cache)
}

#[test]
fn rows_written_at_a_variable_position_loop_over_those_rows_only() {
    let _serial = serial();
    let (ctx, t, w) = (64usize, 4usize, 8usize);
    let old: Vec<f32> = (0..ctx * w).map(|i| i as f32).collect();
    let new: Vec<f32> = (0..t * w).map(|i| 1000.0 + i as f32).collect();
    let x = Tensor::from_slice(&new, [t, w]);
    // (62: the last two rows fall past the cache's end and are dropped)
    for start in [0usize, 5, 60, 62] {
        let cache = Tensor::from_slice(&old, [ctx, w]);
        cache.realize().unwrap();
        cache.assign(write_rows(&cache, &x, &Tensor::bind_var("start", 0, ctx as i64 - 1, start as i64)));
        let ren = tinygrad::renderer::Renderer::cpu();
        let sched = tinygrad::schedule::create_schedule(&[cache.uop()], &ren);
        let names: Vec<String> =
            sched.items.iter().map(|it| tinygrad::codegen::full_rewrite(&it.ast, &ren, Some(&[])).unwrap().name).collect();
        assert_eq!(names, [format!("E_{t}_{w}")], "start {start}: the store's loop covers the written rows only");
        let mut want = old.clone();
        for (r, row) in new.chunks(w).enumerate().filter(|(r, _)| start + r < ctx) {
            want[(start + r) * w..(start + r + 1) * w].copy_from_slice(row);
        }
        assert_eq!(cache.to_vec::<f32>().unwrap(), want, "start {start}");
    }
}

/// A store masked by loaded bools (no loop bound to a row or a window) writes where they are true and keeps the rest.
#[test]
fn a_store_masked_by_loaded_bools_writes_where_they_are_true() {
    let _serial = serial();
    let cache = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], [4]);
    let mask = Tensor::from_slice(&[true, false, true, false], [4]);
    tinygrad::Tensor::realize_all(&[&cache, &mask]).unwrap();
    cache.assign(mask.where_(Tensor::full([4], 9.0f32), &cache));
    assert_eq!(cache.to_vec::<f32>().unwrap(), [9.0, 2.0, 9.0, 4.0]);
}
