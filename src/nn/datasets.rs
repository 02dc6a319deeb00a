//! Datasets: MNIST (tinygrad `nn/datasets.py`). Files are looked for in `$TINYGRAD_DATA_DIR/mnist/` (default
//! `~/.cache/tinygrad/data/mnist/`) and downloaded there when missing, from tinygrad's mirror (or
//! `$TINYGRAD_MNIST_URL`), with a progress bar; the decompressed bytes must match the standard SHA-256 sums.

use crate::dtype::dtypes;
use crate::error::{Error, Result};
use crate::Tensor;
use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::{Path, PathBuf};

/// tinygrad's MNIST mirror.
pub const MNIST_URL: &str = "https://storage.googleapis.com/cvdf-datasets/mnist/";

/// (file, SHA-256 of the decompressed bytes, IDX magic).
const MNIST_FILES: [(&str, &str, u32); 4] = [
    ("train-images-idx3-ubyte.gz", "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db", 2051),
    ("train-labels-idx1-ubyte.gz", "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5", 2049),
    ("t10k-images-idx3-ubyte.gz", "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7", 2051),
    ("t10k-labels-idx1-ubyte.gz", "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2", 2049),
];

/// Where datasets live: `$TINYGRAD_DATA_DIR`, else `~/.cache/tinygrad/data`.
pub fn data_dir() -> PathBuf {
    std::env::var_os("TINYGRAD_DATA_DIR").map(PathBuf::from).unwrap_or_else(|| crate::helpers::cache_dir().join("data"))
}

/// MNIST as tinygrad gives it: `(x_train, y_train, x_test, y_test)`, images uint8 `(N, 1, 28, 28)`, labels
/// uint8 `(N,)`, N = 60000 and 10000.
///
/// # Errors
/// If a file is missing and can't be downloaded, or is truncated, malformed or fails its checksum (the error
/// names the file and what to do).
pub fn mnist() -> Result<(Tensor, Tensor, Tensor, Tensor)> {
    let url = std::env::var("TINYGRAD_MNIST_URL").unwrap_or_else(|_| MNIST_URL.into());
    mnist_from(&data_dir().join("mnist"), &url)
}

/// [`mnist`] from the directory `dir`, downloading missing files from `base_url` (ending in `/`).
///
/// # Errors
/// As [`mnist`].
pub fn mnist_from(dir: &Path, base_url: &str) -> Result<(Tensor, Tensor, Tensor, Tensor)> {
    let mut out = MNIST_FILES.iter().map(|&(name, sha, magic)| {
        let path = dir.join(name);
        if !path.exists() {
            download(&format!("{base_url}{name}"), &path)?;
        }
        let (dims, data) = read_idx(&path, sha, magic)?;
        let shape = if magic == 2051 { vec![dims[0], 1, dims[1], dims[2]] } else { dims };
        Ok::<_, crate::Error>(Tensor::from_bytes(&data, dtypes::UINT8, shape))
    });
    let mut next = || out.next().expect("four files");
    Ok((next()?, next()?, next()?, next()?))
}

/// The dims and data of the gzipped IDX file `path`, checked against `sha` (of the decompressed bytes) and `magic`.
fn read_idx(path: &Path, sha: &str, magic: u32) -> Result<(Vec<usize>, Vec<u8>)> {
    let bad = |msg: String| Error::Format { path: path.into(), msg: format!("{msg}; delete it to download it again") };
    let file = std::fs::File::open(path).map_err(|source| Error::Io { path: path.into(), source })?;
    let mut bytes = Vec::new();
    flate2::read::GzDecoder::new(file).read_to_end(&mut bytes).map_err(|e| bad(format!("not a complete gzip file ({e})")))?;
    if bytes.len() < 8 || u32::from_be_bytes(bytes[0..4].try_into().unwrap()) != magic {
        return Err(bad(format!("not an IDX file with magic {magic}")));
    }
    let ndim = if magic == 2051 { 3 } else { 1 };
    let header = 4 + 4 * ndim;
    let dims: Vec<usize> = (0..ndim)
        .map(|i| bytes.get(4 + 4 * i..8 + 4 * i).map(|b| u32::from_be_bytes(b.try_into().unwrap()) as usize))
        .collect::<Option<_>>()
        .ok_or_else(|| bad("truncated IDX header".into()))?;
    if bytes.len() != header + dims.iter().product::<usize>() {
        return Err(bad(format!(
            "IDX data is {} bytes, the header says {:?}: truncated or padded",
            bytes.len().saturating_sub(header),
            dims
        )));
    }
    let got = format!("{:x}", Sha256::digest(&bytes));
    if got != sha {
        return Err(bad(format!("SHA-256 of the decompressed data is {got}, want {sha}")));
    }
    bytes.drain(..header);
    Ok((dims, bytes))
}

/// Downloads `url` to `path` with a progress bar, through `path.part` then a rename.
fn download(url: &str, path: &Path) -> Result<()> {
    let dl = |msg: String| Error::Download { url: url.into(), msg: format!("{msg}; or copy the file to {}", path.display()) };
    let io = |source| Error::Io { path: path.into(), source };
    std::fs::create_dir_all(path.parent().unwrap_or(Path::new("."))).map_err(io)?;
    let resp = ureq::get(url).timeout(std::time::Duration::from_secs(60)).call().map_err(|e| dl(e.to_string()))?;
    let len = resp.header("Content-Length").and_then(|l| l.parse().ok()).unwrap_or(0);
    let bar = indicatif::ProgressBar::new(len).with_message(url.rsplit('/').next().unwrap_or(url).to_string());
    bar.set_style(indicatif::ProgressStyle::with_template("{msg} {bar:30} {bytes}/{total_bytes} {bytes_per_sec}").expect("valid template"));
    let part = path.with_extension("part");
    let mut file = std::fs::File::create(&part).map_err(io)?;
    std::io::copy(&mut bar.wrap_read(resp.into_reader()), &mut file).map_err(|e| dl(e.to_string()))?;
    bar.finish_and_clear();
    std::fs::rename(&part, path).map_err(io)
}
