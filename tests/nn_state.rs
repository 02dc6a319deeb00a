//! safetensors: bit-exact round trips for every dtype, and clear errors for truncated or corrupt files.

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

/// a save that fails leaves the file saved before untouched (writes go to `path.tmp`, then a rename)
#[test]
fn failed_save_keeps_the_previous_file() {
    let path = tmp("atomic");
    let first = BTreeMap::from([("w".to_string(), Tensor::from_slice(&[1.0f32, 2.0], [2]))]);
    safe_save(&first, &path).unwrap();
    // the temporary file's path is taken by a directory, so the second save can't write it
    let blocker = path.with_extension("safetensors.tmp");
    std::fs::create_dir_all(&blocker).unwrap();
    let second = BTreeMap::from([("w".to_string(), Tensor::from_slice(&[9.0f32, 9.0], [2]))]);
    assert!(safe_save(&second, &path).is_err(), "saving over a blocked temporary file must fail");
    assert_eq!(safe_load(&path).unwrap()["w"].to_vec::<f32>().unwrap(), [1.0, 2.0]);
    std::fs::remove_dir(&blocker).unwrap();
}
