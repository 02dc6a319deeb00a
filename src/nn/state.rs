//! Saving and loading tensors: safetensors files (memory-mapped when read; written to a temporary file, then
//! renamed, so a crash never leaves a half-written file where a good one was). Follows tinygrad
//! `nn/state.py` (`safe_save`, `safe_load`).

use crate::dtype::{dtypes, DType};
use crate::error::{Error, Result};
use crate::Tensor;
use safetensors::tensor::{Metadata, TensorView};
use safetensors::{Dtype as St, SafeTensors};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::Path;

fn to_st(dt: DType) -> St {
    match dt {
        dtypes::BOOL => St::BOOL,
        dtypes::INT8 => St::I8,
        dtypes::INT16 => St::I16,
        dtypes::INT32 => St::I32,
        dtypes::INT64 => St::I64,
        dtypes::UINT8 => St::U8,
        dtypes::UINT16 => St::U16,
        dtypes::UINT32 => St::U32,
        dtypes::UINT64 => St::U64,
        dtypes::FLOAT16 => St::F16,
        dtypes::BFLOAT16 => St::BF16,
        dtypes::FLOAT32 => St::F32,
        dtypes::FLOAT64 => St::F64,
        d => panic!("safe_save: no safetensors dtype for {d}"),
    }
}

fn from_st(dt: St) -> Option<DType> {
    Some(match dt {
        St::BOOL => dtypes::BOOL,
        St::I8 => dtypes::INT8,
        St::I16 => dtypes::INT16,
        St::I32 => dtypes::INT32,
        St::I64 => dtypes::INT64,
        St::U8 => dtypes::UINT8,
        St::U16 => dtypes::UINT16,
        St::U32 => dtypes::UINT32,
        St::U64 => dtypes::UINT64,
        St::F16 => dtypes::FLOAT16,
        St::BF16 => dtypes::BFLOAT16,
        St::F32 => dtypes::FLOAT32,
        St::F64 => dtypes::FLOAT64,
        _ => return None,
    })
}

/// Writes `tensors` (realizing them) to the safetensors file `path` (tinygrad `safe_save`), atomically: the
/// bytes go to `path.tmp` first, which is then renamed over `path`.
///
/// # Errors
/// If a tensor fails to realize or the file can't be written.
///
/// # Panics
/// If a tensor's dtype has no safetensors counterpart (void or a weak constant dtype; a programmer error).
pub fn safe_save(tensors: &BTreeMap<String, Tensor>, path: impl AsRef<Path>) -> Result<()> {
    let path = path.as_ref();
    let data: Vec<(String, DType, Vec<usize>, Vec<u8>)> =
        tensors.iter().map(|(k, t)| Ok((k.clone(), t.dtype(), t.shape(), t.to_bytes()?))).collect::<Result<_>>()?;
    let views: Vec<(String, TensorView)> = data
        .iter()
        .map(|(k, dt, shape, bytes)| (k.clone(), TensorView::new(to_st(*dt), shape.clone(), bytes).expect("consistent tensor view")))
        .collect();
    let bytes = safetensors::serialize(views, &None).map_err(|e| Error::Format { path: path.into(), msg: e.to_string() })?;
    let tmp = path.with_extension("safetensors.tmp");
    let io = |p: &Path| {
        let p = p.to_path_buf();
        move |source| Error::Io { path: p, source }
    };
    std::fs::write(&tmp, bytes).map_err(io(&tmp))?;
    std::fs::rename(&tmp, path).map_err(io(path))
}

/// The tensors of the safetensors file `path` (tinygrad `safe_load`), read through a memory map and copied to
/// the default device, by name.
///
/// # Errors
/// If the file can't be opened, or is truncated or corrupt (the error names the file and the problem).
pub fn safe_load(path: impl AsRef<Path>) -> Result<BTreeMap<String, Tensor>> {
    let path = path.as_ref();
    let file = std::fs::File::open(path).map_err(|source| Error::Io { path: path.into(), source })?;
    // SAFETY: the map is read-only and dropped before this function returns; the tensors copy their bytes out
    // of it. A file truncated by another process while mapped could fault, as with any mmap of a file.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|source| Error::Io { path: path.into(), source })?;
    safe_load_bytes(&map, &path.to_string_lossy())
}

/// The tensors of the safetensors file whose bytes are `bytes`, copied to the default device, by name; `name` (a
/// file name) is for errors. Every header field is checked against the bytes before anything is allocated.
///
/// # Errors
/// [`Error::Format`] naming `name` when `bytes` are truncated or corrupt: a header length, JSON, dtype, shape or
/// data offsets that do not describe the data.
pub fn safe_load_bytes(bytes: &[u8], name: &str) -> Result<BTreeMap<String, Tensor>> {
    let bad = |msg: String| Error::Format { path: name.into(), msg };
    if let Some((tensor, offsets, data_len)) = offset_past_end(bytes) {
        return Err(bad(format!("tensor {tensor}: data_offsets {offsets:?} reach past the {data_len} bytes of data; was it truncated?")));
    }
    let st = SafeTensors::deserialize(bytes).map_err(|e| bad(format!("not a valid safetensors file ({e}); was it truncated?")))?;
    st.tensors()
        .into_iter()
        .map(|(name, view)| {
            let dt = from_st(view.dtype()).ok_or_else(|| bad(format!("tensor {name}: unsupported dtype {:?}", view.dtype())))?;
            // the crate checked that the shape's bytes are the data's; a tensor with no elements can still claim
            // a dim too large for a shape
            if let Some(d) = view.shape().iter().find(|&&d| i64::try_from(d).is_err()) {
                return Err(bad(format!("tensor {name}: dim {d} of shape {:?} is too large", view.shape())));
            }
            // C kernels assume a bool byte is 0 or 1: any other value is read as 1 (true)
            let data = match view.data() {
                d if dt == dtypes::BOOL && d.iter().any(|&b| b > 1) => d.iter().map(|&b| u8::from(b != 0)).collect(),
                d => Cow::Borrowed(d),
            };
            Ok((name, Tensor::from_bytes(&data, dt, view.shape().to_vec())))
        })
        .collect()
}

/// A tensor whose data offsets reach past the end of the file, with them and the data length. The safetensors crate
/// checks this as `last offset + header length == data length`, which overflows (a panic in debug builds) when a
/// header claims an offset near `u64::MAX`; this check comes first. `None` also when the header does not parse
/// (the crate reports that).
fn offset_past_end(bytes: &[u8]) -> Option<(String, (usize, usize), usize)> {
    let n = usize::try_from(u64::from_le_bytes(bytes.get(..8)?.try_into().ok()?)).ok()?;
    let header = bytes.get(8..n.checked_add(8)?)?;
    let data_len = bytes.len() - 8 - n;
    let meta: Metadata = serde_json::from_slice(header).ok()?;
    meta.tensors().into_iter().find(|(_, info)| info.data_offsets.1 > data_len).map(|(name, info)| (name, info.data_offsets, data_len))
}
