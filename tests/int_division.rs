//! Integer division and remainder are defined for every input on every device and int dtype, as numpy defines
//! them: `x / 0 = x // 0 = x % 0 = fmod(x, 0) = 0`, `MIN / -1 = MIN // -1 = MIN` (it wraps) and `MIN % -1 = 0`; no
//! trap, no undefined behaviour. Each case against values worked out here in i128, on the CPU (and again under
//! gcc and under clang, in child processes), the interpreter and OpenCL (required under CI). And two silent wrong
//! answers of the same family: a sum of 2^33 ones.

mod common;

use tinygrad::dtype::Element;
use tinygrad::helpers::Context;
use tinygrad::Tensor;

/// The documented values, in i128 before wrapping to the dtype: (trunc div, floor div, floor mod, trunc mod).
fn want(a: i128, b: i128) -> [i128; 4] {
    if b == 0 {
        return [0; 4];
    }
    let (q, r) = (a / b, a % b);
    let f = q - i128::from(r != 0 && (a < 0) != (b < 0));
    [q, f, a - f * b, r]
}

/// The failures of `div_trunc`, `div_floor`, `mod_` and `fmod` on the dividends `a` and divisors `b` of one dtype
/// (converted by `to`/`from`), on the default device.
fn check<T: Element + std::fmt::Debug + PartialEq>(a: &[T], b: &[T], to: fn(T) -> i128, from: fn(i128) -> T) -> Vec<String> {
    let (x, y) = (Tensor::from_slice(a, [a.len()]), Tensor::from_slice(b, [b.len()]));
    let got = [x.div_trunc(&y), x.div_floor(&y), x.mod_(&y), x.fmod(&y)];
    let mut failures = Vec::new();
    for (k, (name, t)) in ["div_trunc", "div_floor", "mod", "fmod"].iter().zip(got).enumerate() {
        let got = t.to_vec::<T>().unwrap();
        for i in 0..a.len() {
            let w = from(want(to(a[i]), to(b[i]))[k]);
            if got[i] != w {
                failures.push(format!("{} {name}({:?}, {:?}) = {:?}, want {w:?}", T::DTYPE, a[i], b[i], got[i]));
            }
        }
    }
    failures
}

macro_rules! signed {
    ($t:ty) => {{
        let (min, max) = (<$t>::MIN, <$t>::MAX);
        let a: Vec<$t> = vec![min, min, min, 7, -7, 0, 5, max, max, -1, 100, -100, 7, min + 1, 1, -1, 1, -1];
        let b: Vec<$t> = vec![-1, 0, 1, 0, 0, 0, 2, -1, 0, 3, -7, 7, -2, -1, max, max, min, min];
        check::<$t>(&a, &b, |v| v as i128, |v| v as $t)
    }};
}
macro_rules! unsigned {
    ($t:ty) => {{
        let max = <$t>::MAX;
        let a: Vec<$t> = vec![max, 7, 0, 5, 200, max, 1];
        let b: Vec<$t> = vec![0, 0, 0, 2, 7, 1, max];
        check::<$t>(&a, &b, |v| v as i128, |v| v as $t)
    }};
}

/// Every dtype's failures on the default device.
fn all_dtypes() -> Vec<String> {
    [signed!(i8), signed!(i16), signed!(i32), signed!(i64), unsigned!(u8), unsigned!(u16), unsigned!(u32), unsigned!(u64)].concat()
}

#[track_caller]
fn assert_none(failures: Vec<String>, on: &str) {
    assert!(failures.is_empty(), "{} wrong on {on}:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn the_issue_programs_finish_with_the_documented_values() {
    let x = Tensor::from_slice(&[1i32, 2, 3, 4], [4]);
    assert_eq!(x.div_trunc(Tensor::from_slice(&[1i32, 0, 2, 0], [4])).to_vec::<i32>().unwrap(), [1, 0, 1, 0]);
    let x = Tensor::from_slice(&[i32::MIN, 5], [2]);
    assert_eq!(x.div_trunc(Tensor::from_slice(&[-1i32, 1], [2])).to_vec::<i32>().unwrap(), [i32::MIN, 5]);
}

#[test]
fn every_int_dtype_divides_by_anything_on_the_cpu() {
    assert_none(all_dtypes(), &format!("CPU ({})", tinygrad::runtime::cpu::device().cc().unwrap().cc()));
}

#[test]
fn every_int_dtype_divides_by_anything_on_the_cpu_under_gcc_and_clang() {
    for cc in ["gcc", "clang"] {
        if common::have(&[cc], "division under that compiler") {
            common::rerun("every_int_dtype_divides_by_anything_on_the_cpu", &[("CC", cc)]);
        }
    }
}

#[test]
fn every_int_dtype_divides_by_anything_on_the_interpreter() {
    let _dev = Context::new(&[]).dev("PYTHON");
    assert_none(all_dtypes(), "PYTHON");
}

#[test]
fn every_int_dtype_divides_by_anything_on_opencl() {
    match tinygrad::runtime::cl::device() {
        Ok(_) => {
            let _dev = Context::new(&[]).dev("CL");
            assert_none(all_dtypes(), "CL");
        }
        Err(e) => {
            assert!(std::env::var_os("CI").is_none(), "CI must have an OpenCL device (.ci/run installs PoCL): {e}");
            eprintln!("skipping: {e}");
        }
    }
}

#[test]
fn a_constant_divisor_needs_no_guard() {
    use tinygrad::renderer::{cstyle, Renderer};
    let x = Tensor::from_slice(&[7i32, -7, 100], [3]).realize().unwrap().clone();
    let src = |t: &Tensor| {
        let sched = tinygrad::schedule::create_schedule(&[t.uop()], &tinygrad::renderer::Renderer::cpu());
        let k = tinygrad::codegen::full_rewrite(&sched.items[0].ast, &Renderer::cpu(), None).unwrap();
        cstyle::render(&k)
    };
    let guarded = src(&x.div_trunc(&x));
    assert!(guarded.contains("==0)?"), "a divisor that may be 0 is guarded:\n{guarded}");
    for t in [x.div_trunc(3), x.div_floor(-3), x.mod_(5), x.fmod(7)] {
        let s = src(&t);
        assert!(!s.contains("==0)?") && !s.contains("==-1)?"), "a constant divisor divides plainly:\n{s}");
    }
}

#[test]
fn a_sum_of_two_to_the_33_ones_is_exact() {
    // (a float32 accumulator stalls at 2^24: a sum over a range its value does not depend on is a multiply)
    assert_eq!(Tensor::ones([1usize << 33]).sum(..).item::<f32>().unwrap(), 8589934592.0);
    assert_eq!(Tensor::ones([1usize << 23, 1024]).sum(..).item::<f32>().unwrap(), 8589934592.0);
    assert_eq!(Tensor::full([1usize << 20, 4096], 3i32).sum(..).item::<i32>().unwrap(), (3i64 << 32) as i32);
    assert_eq!(Tensor::ones([3usize << 30]).cast(tinygrad::dtypes::INT64).sum(..).item::<i64>().unwrap(), 3 << 30);
}
