//! `tinygrad::nn::state::safe_load_bytes` on arbitrary bytes: it must return, never panic or read out of bounds.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(tensors) = tinygrad::nn::state::safe_load_bytes(data, "fuzz.safetensors") {
        for t in tensors.values() {
            assert_eq!(t.to_bytes().expect("a loaded tensor copies out").len(), t.numel() * t.dtype().itemsize());
        }
    }
});
