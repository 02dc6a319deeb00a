//! `tinygrad::onnx::OnnxRunner::from_bytes` on arbitrary bytes: it must return, never panic or read out of bounds.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = std::path::Path::new("fuzz.onnx");
    if let Ok(runner) = tinygrad::onnx::OnnxRunner::from_bytes(bytes::Bytes::copy_from_slice(data), path) {
        for (_, t) in runner.initializers() {
            assert_eq!(t.to_bytes().expect("a loaded tensor copies out").len(), t.numel() * t.dtype().itemsize());
        }
    }
});
