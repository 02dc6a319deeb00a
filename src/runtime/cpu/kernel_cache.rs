//! The CPU's kernel cache on disk (tinygrad's `diskcache` of compiled kernels), content-addressed by SHA-256. In:
//! an object file the compiler just wrote, and the keys it was compiled for (each the SHA-256 of a compiler, its
//! flags and one kernel's source: [`key`]). Out: the object stored at `cache_dir()/kernels/<key>.o` under every key
//! (hard links), and on a later read of a key the object bytes, when the entry there is whole and made for that key.
//!
//! An entry is the object followed by a trailer ([`trailer`]) holding the keys and the object's SHA-256. A file
//! that is truncated, corrupt or made for another key reads as a miss, with a warning on stderr at `DEBUG>=1`, so a
//! damaged cache never reaches the loader. Files are written to a name unique to the compile and renamed into
//! place, so concurrent writers of a key (threads or processes) each succeed and a reader never sees a partial file.

use crate::error::Result;
use crate::helpers::{cache_dir, CACHELEVEL, DEBUG};
use crate::runtime::{hex, io_err};
use sha2::{Digest, Sha256};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// A cache key: a SHA-256.
pub(super) type Key = [u8; 32];

/// SHA-256 of the parts, each followed by a 0 byte (so `["ab", "c"]` and `["a", "bc"]` differ).
pub(super) fn key(parts: &[&str]) -> Key {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update([0]);
    }
    h.finalize().into()
}

/// Where the entry for `key` is.
pub(super) fn path(key: &Key) -> PathBuf {
    cache_dir().join("kernels").join(format!("{}.o", hex(key)))
}

/// The object cached for `key`, if a good one is there (never under CACHELEVEL=0).
pub(super) fn read(key: &Key) -> Option<Vec<u8>> {
    let path = path(key);
    if CACHELEVEL.value() == 0 {
        return None;
    }
    let why = match std::fs::read(&path) {
        Ok(mut file) => match entry_object(&file, key) {
            Ok(len) => {
                file.truncate(len);
                return Some(file);
            }
            // replaced by an atomic rename when recompiled, so a concurrent reader sees the old file or the new one
            Err(why) => why.to_string(),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => format!("unreadable ({e})"),
    };
    if DEBUG.value() >= 1 {
        eprintln!("kernel cache: {} is {why}; recompiling", path.display());
    }
    None
}

/// Seals the object in `tmp` (compiled for `keys`) with its trailer and renames it into the cache under the first
/// key, then links it under the others. `tmp` is consumed. Returns the object.
pub(super) fn store(keys: &[Key], tmp: &Path) -> Result<Vec<u8>> {
    let first = path(&keys[0]);
    let sealed = std::fs::read(tmp).and_then(|object| {
        std::fs::OpenOptions::new().append(true).open(tmp)?.write_all(&trailer(keys, &object))?;
        std::fs::rename(tmp, &first).map(|_| object)
    });
    if sealed.is_err() {
        let _ = std::fs::remove_file(tmp);
    }
    let object = sealed.map_err(io_err(&first))?;
    for key in &keys[1..] {
        let (link, path) = (scratch("link")?, path(key));
        std::fs::hard_link(&first, &link).or_else(|_| std::fs::copy(&first, &link).map(|_| ())).map_err(io_err(&link))?;
        std::fs::rename(&link, &path).map_err(io_err(&path))?;
    }
    Ok(object)
}

/// A path unique to this compile in the kernel cache directory (created), for `what`.
pub(super) fn scratch(what: &str) -> Result<PathBuf> {
    static TMP_ID: AtomicU64 = AtomicU64::new(0);
    let dir = cache_dir().join("kernels");
    std::fs::create_dir_all(&dir).map_err(io_err(&dir))?;
    Ok(dir.join(format!("{what}.{}.{}.tmp", std::process::id(), TMP_ID.fetch_add(1, Relaxed))))
}

/// Ends every trailer, naming its format.
const ENTRY_MAGIC: &[u8; 8] = b"TGKCv2\0\0";
/// Bytes a cache entry's trailer has besides its keys: the key count (8, little endian), SHA-256 of the object
/// (32), the object's length (8), [`ENTRY_MAGIC`] (8). The keys (32 bytes each) come first.
pub(super) const TRAILER_FIXED: usize = 56;

/// The trailer of a cache entry for `object`, compiled for `keys`.
fn trailer(keys: &[Key], object: &[u8]) -> Vec<u8> {
    let digest: [u8; 32] = Sha256::digest(object).into();
    [keys.concat().as_slice(), &(keys.len() as u64).to_le_bytes(), &digest, &(object.len() as u64).to_le_bytes(), ENTRY_MAGIC].concat()
}

/// The length of the object at the start of cache entry `file` when it is a good one for `key`, else why not.
fn entry_object(file: &[u8], key: &Key) -> std::result::Result<usize, &'static str> {
    let Some(fixed) = file.len().checked_sub(TRAILER_FIXED) else {
        return Err("truncated");
    };
    let (head, tail) = file.split_at(fixed);
    let u64_at = |b: &[u8]| u64::from_le_bytes(b.try_into().expect("8 bytes"));
    let (nkeys, len) = (u64_at(&tail[..8]), u64_at(&tail[40..48]));
    let keys_at =
        usize::try_from(len).ok().filter(|&l| l <= head.len()).and_then(|l| Some((l, usize::try_from(nkeys).ok()?.checked_mul(32)?)));
    let Some((len, keys_len)) = keys_at.filter(|&(l, k)| &tail[48..] == ENTRY_MAGIC && l.checked_add(k) == Some(head.len())) else {
        return Err("truncated or not a tinygrad kernel cache entry");
    };
    let (object, keys) = head.split_at(len);
    debug_assert_eq!(keys.len(), keys_len);
    if !keys.chunks_exact(32).any(|k| k == key) {
        Err("made for another kernel, compiler or CPU")
    } else if tail[8..40] != Sha256::digest(object)[..] {
        Err("corrupt (its content hash does not match)")
    } else {
        Ok(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_stable() {
        // sha256("a\0") from Python's hashlib
        assert_eq!(key(&["a"])[..4], [0xff, 0xe9, 0xaa, 0xea]);
        assert_ne!(key(&["ab", "c"]), key(&["a", "bc"]), "parts are separated");
    }

    #[test]
    fn entries_are_checked() {
        let (k, other) = (key(&["k"]), key(&["other"]));
        let object = b"an object".to_vec();
        let good = [object.clone(), trailer(&[other, k], &object)].concat();
        assert_eq!(entry_object(&good, &k), Ok(object.len()));
        assert_eq!(entry_object(&good, &other), Ok(object.len()), "a batch's object serves each of its keys");
        assert_eq!(entry_object(&good[..good.len() - 1], &k), Err("truncated or not a tinygrad kernel cache entry"));
        assert_eq!(entry_object(&good[1..], &k), Err("truncated or not a tinygrad kernel cache entry"));
        assert_eq!(entry_object(&good[..10], &k), Err("truncated"));
        assert_eq!(entry_object(&good, &key(&["third"])), Err("made for another kernel, compiler or CPU"));
        let mut flipped = good.clone();
        flipped[3] ^= 1;
        assert_eq!(entry_object(&flipped, &k), Err("corrupt (its content hash does not match)"));
        assert_eq!(entry_object(&object, &k), Err("truncated"));
    }
}
