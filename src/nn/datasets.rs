//! Datasets: MNIST (tinygrad `nn/datasets.py`). Files are looked for in `$TINYGRAD_DATA_DIR/mnist/` (default
//! `~/.cache/tinygrad/data/mnist/`) and downloaded there when missing, from tinygrad's mirror (or
//! `$TINYGRAD_MNIST_URL`), with a progress bar; the decompressed bytes must match the standard SHA-256 sums.

use crate::dtype::{dtypes, DType};
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

/// An array read from an IDX file (the MNIST format: bytes 0 and 0, a type code, the number of dims, each dim as
/// a big-endian u32, then the elements, big endian, row-major).
#[derive(Debug, Clone, PartialEq)]
pub struct Idx {
    /// The element type: uint8, int8, int16, int32, float32 or float64 (type codes 0x08, 0x09, 0x0B-0x0E).
    pub dtype: DType,
    /// The dims, as the header gives them.
    pub shape: Vec<usize>,
    /// The elements in native byte order, `shape.iter().product() * dtype.itemsize()` bytes.
    pub data: Vec<u8>,
}

/// The IDX array in the gzipped bytes `gz`; `name` (a file name) is for errors. Decompresses no more than the header
/// says the file holds, so a lying header or a gzip bomb allocates no more than the data really there.
///
/// # Errors
/// [`Error::Format`] naming `name` when `gz` is not a complete gzip stream (bad checksum included), or its contents
/// are not an IDX file whose data matches its header.
pub fn idx_from_gz(gz: &[u8], name: &str) -> Result<Idx> {
    let (dtype, shape, raw, header) = decode_idx(gz).map_err(|msg| Error::Format { path: name.into(), msg })?;
    let mut data = raw[header..].to_vec();
    if cfg!(target_endian = "little") {
        data.chunks_exact_mut(dtype.itemsize()).for_each(<[u8]>::reverse);
    }
    Ok(Idx { dtype, shape, data })
}

fn idx_dtype(code: u8) -> Option<DType> {
    Some(match code {
        0x08 => dtypes::UINT8,
        0x09 => dtypes::INT8,
        0x0B => dtypes::INT16,
        0x0C => dtypes::INT32,
        0x0D => dtypes::FLOAT32,
        0x0E => dtypes::FLOAT64,
        _ => return None,
    })
}

/// The element type, dims, decompressed bytes and header length of the IDX file `gz`, or what is wrong with it.
fn decode_idx(gz: &[u8]) -> std::result::Result<(DType, Vec<usize>, Vec<u8>, usize), String> {
    let mut dec = flate2::read::GzDecoder::new(gz);
    let mut raw = Vec::new();
    // reads up to n more bytes; what the stream really holds bounds the allocation
    let mut read =
        |raw: &mut Vec<u8>, n: usize| (&mut dec).take(n as u64).read_to_end(raw).map_err(|e| format!("not a complete gzip file ({e})"));
    read(&mut raw, 4)?;
    let dtype = match raw[..] {
        [0, 0, code, _] => idx_dtype(code).ok_or_else(|| format!("not an IDX file: unknown type code {code:#04x}"))?,
        _ => return Err(format!("not an IDX file: it starts with {:02x?}", raw)),
    };
    let header = 4 + 4 * usize::from(raw[3]);
    if read(&mut raw, header - 4)? < header - 4 {
        return Err("truncated IDX header".into());
    }
    let dims: Vec<usize> = raw[4..].chunks_exact(4).map(|d| u32::from_be_bytes(d.try_into().expect("4 bytes")) as usize).collect();
    // (a zero dim makes the product 0 even when the others overflow)
    let product = if dims.contains(&0) { Some(0) } else { dims.iter().try_fold(dtype.itemsize(), |n, &d| n.checked_mul(d)) };
    let size = product.ok_or_else(|| format!("IDX dims {dims:?} overflow"))?;
    let got = read(&mut raw, size)?;
    if got < size {
        return Err(format!("IDX data is {got} bytes, the header says {dims:?} of {dtype} ({size} bytes): truncated"));
    }
    // the end of the stream, where the gzip checksum is checked
    if read(&mut raw, 1)? != 0 {
        return Err(format!("IDX data is longer than the header's {dims:?} of {dtype}: padded"));
    }
    Ok((dtype, dims, raw, header))
}

/// The dims and data of the gzipped IDX file `path`, checked against `sha` (of the decompressed bytes) and `magic`.
fn read_idx(path: &Path, sha: &str, magic: u32) -> Result<(Vec<usize>, Vec<u8>)> {
    let bad = |msg: String| Error::Format { path: path.into(), msg: format!("{msg}; delete it to download it again") };
    let gz = std::fs::read(path).map_err(|source| Error::Io { path: path.into(), source })?;
    let (_, dims, mut raw, header) = decode_idx(&gz).map_err(bad)?;
    if u32::from_be_bytes(raw[..4].try_into().expect("4 bytes")) != magic {
        return Err(bad(format!("not an IDX file with magic {magic}")));
    }
    let got = format!("{:x}", Sha256::digest(&raw));
    if got != sha {
        return Err(bad(format!("SHA-256 of the decompressed data is {got}, want {sha}")));
    }
    raw.drain(..header);
    Ok((dims, raw))
}

/// Downloads `url` to `path` with a progress bar, through `path.part` then a rename.
pub(crate) fn download(url: &str, path: &Path) -> Result<()> {
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
