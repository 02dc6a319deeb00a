//! safetensors: bit-exact round trips for every dtype, clear errors for truncated or corrupt files, and a failed
//! save that leaves the previous file whole (saves write a temporary file, then rename it).

use std::collections::BTreeMap;
use tinygrad::dtype::dtypes;
use tinygrad::nn::state::{safe_load, safe_save};
use tinygrad::{Error, Tensor};

fn tmp(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("tinygrad-test-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join("model.safetensors")
}

#[test]
fn round_trip_is_bit_exact_for_every_dtype() {
    let mut saved = BTreeMap::new();
    for (i, dt) in dtypes::ALL.iter().enumerate() {
        // arbitrary bit patterns (bools must be 0/1), including NaN payloads and -0.0 for the floats
        let n = 6 * dt.itemsize();
        let bytes: Vec<u8> = (0..n).map(|j| if dt.is_bool() { (j % 2) as u8 } else { (j * 37 + i * 11 + 0x7b) as u8 }).collect();
        saved.insert(format!("t{i}.{}", dt.name()), Tensor::from_bytes(&bytes, *dt, [2, 3]));
    }
    let path = tmp("roundtrip");
    safe_save(&saved, &path).unwrap();
    let loaded = safe_load(&path).unwrap();
    assert_eq!(loaded.keys().collect::<Vec<_>>(), saved.keys().collect::<Vec<_>>());
    for (k, t) in &saved {
        let l = &loaded[k];
        assert_eq!((l.dtype(), l.shape()), (t.dtype(), t.shape()), "{k}");
        assert_eq!(l.to_bytes().unwrap(), t.to_bytes().unwrap(), "{k}");
    }
    assert!(!path.with_extension("safetensors.tmp").exists(), "the temporary file was renamed");
}

#[test]
fn truncated_or_corrupt_files_are_errors() {
    let path = tmp("truncated");
    let t = Tensor::from([[1.0f32, 2.0], [3.0, 4.0]]);
    safe_save(&BTreeMap::from([("w".to_string(), t)]), &path).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    for cut in [bytes.len() - 3, 20, 5, 0] {
        std::fs::write(&path, &bytes[..cut]).unwrap();
        let err = safe_load(&path).expect_err("a truncated file must not load");
        assert!(matches!(err, Error::Format { .. }), "{err}");
        assert!(err.to_string().contains("model.safetensors"), "{err}");
    }
    std::fs::write(&path, b"\xff\xff\xff\xff\xff\xff\xff\x7fgarbage").unwrap();
    assert!(matches!(safe_load(&path), Err(Error::Format { .. })));
    assert!(matches!(safe_load(path.with_extension("missing")), Err(Error::Io { .. })));
}

#[test]
fn a_failed_save_leaves_the_previous_file_whole() {
    let path = tmp("atomic");
    let old = Tensor::from([1.0f32, 2.0, 3.0]);
    safe_save(&BTreeMap::from([("w".to_string(), old)]), &path).unwrap();
    // a directory where the temporary file goes makes the next save fail before anything reaches `path`
    let blocker = path.with_extension("safetensors.tmp");
    std::fs::create_dir_all(&blocker).unwrap();
    let err = safe_save(&BTreeMap::from([("w".to_string(), Tensor::from([9.0f32; 5]))]), &path).expect_err("the write must fail");
    assert!(matches!(err, Error::Io { .. }) && err.to_string().contains("model.safetensors.tmp"), "{err}");
    std::fs::remove_dir(&blocker).unwrap();
    let back = safe_load(&path).unwrap();
    assert_eq!(back["w"].to_vec::<f32>().unwrap(), [1.0, 2.0, 3.0], "the previous file is intact");
}
