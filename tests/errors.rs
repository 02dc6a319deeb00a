//! Errors from the outside world come back as `Error`s that say what to do (one test: it sets CC for the
//! whole process before the first compile).

use tinygrad::{Error, Tensor};

#[test]
fn missing_compiler_is_an_error_that_says_to_install_clang() {
    // set before anything in this process compiles a kernel
    std::env::set_var("CC", "/nonexistent/cc");
    let t = Tensor::from([1.0f32, 2.0]) + 1.0;
    let err = t.realize().expect_err("realizing without a compiler must fail");
    assert!(matches!(err, Error::NoCompiler { .. }), "{err}");
    let msg = err.to_string();
    assert!(msg.contains("install clang") && msg.contains("CC"), "{msg}");
}
