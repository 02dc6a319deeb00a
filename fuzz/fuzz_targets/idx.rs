//! `tinygrad::nn::datasets::idx_from_gz` on arbitrary bytes: it must return, never panic or read out of bounds.
//! An odd first byte gzips the rest first, so most inputs reach the IDX parser instead of failing in gzip.
#![no_main]

use flate2::{write::GzEncoder, Compression};
use libfuzzer_sys::fuzz_target;
use std::io::Write;

fuzz_target!(|data: &[u8]| {
    let gz = match data.split_first() {
        Some((flag, raw)) if flag & 1 == 1 => {
            let mut enc = GzEncoder::new(Vec::new(), Compression::fast());
            enc.write_all(raw).expect("writing to a Vec");
            enc.finish().expect("writing to a Vec")
        }
        _ => data.to_vec(),
    };
    if let Ok(idx) = tinygrad::nn::datasets::idx_from_gz(&gz, "fuzz.gz") {
        // (a zero dim makes the array empty however large the others are)
        let numel = if idx.shape.contains(&0) { 0 } else { idx.shape.iter().product::<usize>() };
        assert_eq!(idx.data.len(), numel * idx.dtype.itemsize());
    }
});
