//! GGUF files (tinygrad `llm/gguf.py`: `gguf_load`, `ggml_data_to_tensor`). In: a `.gguf` file, or the parts of
//! a split one. Out: its metadata as [`GgufValue`]s and its tensors, uploaded as raw bytes and dequantized on the
//! device by tensor ops ([`dequantize`]), lazily, so a dequantization can fuse into the kernel that reads it.
//!
//! The reader trusts nothing in the file: every count, length, dimension and offset is checked against the bytes
//! that are there (with checked arithmetic) before anything is allocated or read, so a truncated or corrupt file is
//! an [`Error::Format`] naming the file and the key or tensor, never a panic or a huge allocation. GGUF v2 and v3,
//! little endian, as llama.cpp writes them; tensor data is read in the host's byte order (little endian on every
//! target this crate builds for).

use crate::dtype::{dtypes, DType};
use crate::error::{Error, Result};
use crate::renderer::CpuFeatures;
use crate::{engine, Tensor};
use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::path::{Path, PathBuf};

/// A metadata value (GGUF value types 0 to 12). Arrays hold values of one type; arrays of arrays nest.
#[derive(Clone, Debug, PartialEq)]
pub enum GgufValue {
    /// Type 0.
    U8(u8),
    /// Type 1.
    I8(i8),
    /// Type 2.
    U16(u16),
    /// Type 3.
    I16(i16),
    /// Type 4.
    U32(u32),
    /// Type 5.
    I32(i32),
    /// Type 6.
    F32(f32),
    /// Type 7 (a byte: 0 is false, anything else true).
    Bool(bool),
    /// Type 8: UTF-8 text.
    Str(String),
    /// Type 9: values of one type.
    Array(Vec<GgufValue>),
    /// Type 10.
    U64(u64),
    /// Type 11.
    I64(i64),
    /// Type 12.
    F64(f64),
}

impl GgufValue {
    /// An integer of any width as `i128` (every GGUF integer fits).
    fn as_i128(&self) -> Option<i128> {
        use GgufValue::*;
        Some(match *self {
            U8(v) => v.into(),
            I8(v) => v.into(),
            U16(v) => v.into(),
            I16(v) => v.into(),
            U32(v) => v.into(),
            I32(v) => v.into(),
            U64(v) => v.into(),
            I64(v) => v.into(),
            _ => return None,
        })
    }
    /// An integer of any type that fits a `u64` (a negative one is `None`).
    pub fn as_u64(&self) -> Option<u64> {
        self.as_i128().and_then(|v| u64::try_from(v).ok())
    }
    /// An integer of any type that fits an `i64`.
    pub fn as_i64(&self) -> Option<i64> {
        self.as_i128().and_then(|v| i64::try_from(v).ok())
    }
    /// An integer of any type that fits a `usize` (a count or a size).
    pub fn as_usize(&self) -> Option<usize> {
        self.as_i128().and_then(|v| usize::try_from(v).ok())
    }
    /// Any number (an integer or a float) as `f64`.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            GgufValue::F32(v) => Some(v.into()),
            GgufValue::F64(v) => Some(v),
            _ => self.as_i128().map(|v| v as f64),
        }
    }
    /// Any number as `f32` (rounded; llama.cpp writes epsilons and rope bases as float32).
    pub fn as_f32(&self) -> Option<f32> {
        self.as_f64().map(|v| v as f32)
    }
    /// A bool.
    pub fn as_bool(&self) -> Option<bool> {
        if let GgufValue::Bool(b) = self {
            Some(*b)
        } else {
            None
        }
    }
    /// A string.
    pub fn as_str(&self) -> Option<&str> {
        if let GgufValue::Str(s) = self {
            Some(s)
        } else {
            None
        }
    }
    /// An array's values.
    pub fn as_array(&self) -> Option<&[GgufValue]> {
        if let GgufValue::Array(a) = self {
            Some(a)
        } else {
            None
        }
    }
    /// The GGUF type name (`u8`, `string`, `array`, ...), for messages.
    pub fn type_name(&self) -> &'static str {
        use GgufValue::*;
        match self {
            U8(_) => "u8",
            I8(_) => "i8",
            U16(_) => "u16",
            I16(_) => "i16",
            U32(_) => "u32",
            I32(_) => "i32",
            F32(_) => "f32",
            Bool(_) => "bool",
            Str(_) => "string",
            Array(_) => "array",
            U64(_) => "u64",
            I64(_) => "i64",
            F64(_) => "f64",
        }
    }
}

macro_rules! ggml_types {
    ($($name:ident = $id:literal: $blck:literal values in $size:literal bytes;)*) => {
        /// A ggml tensor type (`enum ggml_type` in llama.cpp's `ggml.h`): plain numbers, or blocks of quantized values
        /// with their scales. [`GgmlType::can_dequantize`] says which [`dequantize`] supports.
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum GgmlType { $(#[doc = concat!("ggml type ", $id, ": ", $blck, " values in ", $size, " bytes.")] $name = $id),* }
        impl GgmlType {
            /// Every type this reader knows (the ids ggml has retired are absent).
            pub const ALL: &[GgmlType] = &[$(GgmlType::$name),*];
            /// The type with ggml id `id`.
            pub fn from_id(id: u32) -> Option<GgmlType> { match id { $($id => Some(GgmlType::$name),)* _ => None } }
            /// Values per block (1 for plain numbers).
            pub fn block_size(self) -> usize { match self { $(GgmlType::$name => $blck),* } }
            /// Bytes per block.
            pub fn type_size(self) -> usize { match self { $(GgmlType::$name => $size),* } }
            /// ggml's name for it (`Q4_K`).
            pub fn name(self) -> &'static str { match self { $(GgmlType::$name => stringify!($name)),* } }
        }
    };
}
ggml_types! {
    F32 = 0: 1 values in 4 bytes;
    F16 = 1: 1 values in 2 bytes;
    Q4_0 = 2: 32 values in 18 bytes;
    Q4_1 = 3: 32 values in 20 bytes;
    Q5_0 = 6: 32 values in 22 bytes;
    Q5_1 = 7: 32 values in 24 bytes;
    Q8_0 = 8: 32 values in 34 bytes;
    Q8_1 = 9: 32 values in 36 bytes;
    Q2_K = 10: 256 values in 84 bytes;
    Q3_K = 11: 256 values in 110 bytes;
    Q4_K = 12: 256 values in 144 bytes;
    Q5_K = 13: 256 values in 176 bytes;
    Q6_K = 14: 256 values in 210 bytes;
    Q8_K = 15: 256 values in 292 bytes;
    IQ2_XXS = 16: 256 values in 66 bytes;
    IQ2_XS = 17: 256 values in 74 bytes;
    IQ3_XXS = 18: 256 values in 98 bytes;
    IQ1_S = 19: 256 values in 50 bytes;
    IQ4_NL = 20: 32 values in 18 bytes;
    IQ3_S = 21: 256 values in 110 bytes;
    IQ2_S = 22: 256 values in 82 bytes;
    IQ4_XS = 23: 256 values in 136 bytes;
    I8 = 24: 1 values in 1 bytes;
    I16 = 25: 1 values in 2 bytes;
    I32 = 26: 1 values in 4 bytes;
    I64 = 27: 1 values in 8 bytes;
    F64 = 28: 1 values in 8 bytes;
    IQ1_M = 29: 256 values in 56 bytes;
    BF16 = 30: 1 values in 2 bytes;
    TQ1_0 = 34: 256 values in 54 bytes;
    TQ2_0 = 35: 256 values in 66 bytes;
    MXFP4 = 39: 32 values in 17 bytes;
    NVFP4 = 40: 64 values in 36 bytes;
    Q1_0 = 41: 128 values in 18 bytes;
}

impl GgmlType {
    /// The dtype of a plain (unquantized) type, which [`dequantize`] returns as is (tinygrad `_GGML_NATIVE`).
    pub fn native_dtype(self) -> Option<DType> {
        use GgmlType::*;
        Some(match self {
            F32 => dtypes::FLOAT32,
            F16 => dtypes::FLOAT16,
            BF16 => dtypes::BFLOAT16,
            F64 => dtypes::FLOAT64,
            I8 => dtypes::INT8,
            I16 => dtypes::INT16,
            I32 => dtypes::INT32,
            I64 => dtypes::INT64,
            _ => return None,
        })
    }
    /// Whether [`dequantize`] supports this type: the plain ones, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K and
    /// MXFP4.
    pub fn can_dequantize(self) -> bool {
        use GgmlType::*;
        self.native_dtype().is_some() || matches!(self, Q4_0 | Q4_1 | Q5_0 | Q5_1 | Q8_0 | Q4_K | Q5_K | Q6_K | MXFP4)
    }
    /// The dtype [`dequantize`] gives: the plain dtype, else float32.
    pub fn output_dtype(self) -> DType {
        self.native_dtype().unwrap_or(dtypes::FLOAT32)
    }
    /// The bytes of `numel` values: `numel / block_size * type_size`; `None` when `numel` is not a whole number of
    /// blocks or the size overflows.
    pub fn nbytes(self, numel: usize) -> Option<usize> {
        if !numel.is_multiple_of(self.block_size()) {
            return None;
        }
        (numel / self.block_size()).checked_mul(self.type_size())
    }
}

// ---------------------------------------------------------------------------------------------------------------
// dequantization, as tensor ops

/// Columns `a..b` of the last dim.
fn cols(t: &Tensor, a: usize, b: usize) -> Tensor {
    let s = t.shape();
    let bounds: Vec<(usize, usize)> = s.iter().enumerate().map(|(i, &d)| if i + 1 == s.len() { (a, b) } else { (0, d) }).collect();
    t.shrink(&bounds)
}

/// The `k` bytes of the last dim (`k` = `dt`'s size), little endian, as one value of `dt`: `(..., k) uint8 -> (...)`.
fn le(t: &Tensor, dt: DType) -> Tensor {
    let k = dt.itemsize();
    let ut = match k {
        1 => dtypes::UINT8,
        2 => dtypes::UINT16,
        4 => dtypes::UINT32,
        _ => dtypes::UINT64,
    };
    let s = t.shape();
    assert_eq!(s.last(), Some(&k), "gguf: {k} bytes make a {dt}, got shape {s:?}");
    let word = (1..k).fold(cols(t, 0, 1).cast(ut), |w, i| w.bitwise_or(cols(t, i, i + 1).cast(ut).lshift(8 * i as i64)));
    word.bitcast(dt).reshape(s[..s.len() - 1].to_vec())
}

/// The float16 at byte `off` of each block, as float32: `(nb, size) -> (nb, 1)`.
fn f16_at(blocks: &Tensor, off: usize) -> Tensor {
    le(&cols(blocks, off, off + 2), dtypes::FLOAT16).cast(dtypes::FLOAT32).unsqueeze(-1)
}

/// The `8/bits` fields of `bits` bits in each byte, lowest first, stacked on a new axis at `dim`: `(..., k) uint8`
/// -> one more dim of size `8/bits` (tinygrad `q_to_uint8`, which puts it second to last).
fn fields(t: &Tensor, bits: usize, dim: i64) -> Tensor {
    let x = t.unsqueeze(dim);
    let d = if dim < 0 { x.ndim() as i64 + dim } else { dim } as usize;
    // (a broadcast shift by [0, bits, 2*bits, ...] on the new axis, not a stack: a stack is a sum of padded parts,
    // whose masked loads a fused matmul would all execute)
    let shape: Vec<usize> = (0..x.ndim()).map(|i| if i == d { 8 / bits } else { 1 }).collect();
    let shifts = Tensor::arange(0.0, 8.0, bits as f64).cast(dtypes::UINT8).reshape(shape);
    x.rshift(&shifts).bitwise_and((1i64 << bits) - 1)
}

/// The low nibbles of each block's bytes `a..b`, then the high ones: `(nb, size) -> (nb, 2*(b-a))` uint8.
fn nibbles(blocks: &Tensor, a: usize, b: usize) -> Tensor {
    fields(&cols(blocks, a, b), 4, 1).flatten(1)
}

/// The 5-bit quants of Q5_0/Q5_1: nibbles at `qs`, high bits in the 4 bytes at `qh` (bit `j` for value `j`).
fn q5(blocks: &Tensor, qh: usize, qs: usize) -> Tensor {
    let hi = fields(&cols(blocks, qh, qh + 4), 1, -1).flatten(1);
    nibbles(blocks, qs, qs + 16).bitwise_or(hi.lshift(4))
}

/// The fifth bits of blocks of 32 quants (`bits`: `(m, 32)` zeros and ones in quant order) as one int32 a block, for
/// [`QuantMatrix`]: bit `i` of byte `b` is quant `4i + b`'s, so quant word `i` finds its four at bit 4 of each byte
/// after a shift by `4 - i`: `(m, 32) -> (m, 1)` int32.
fn fifth_bits(bits: &Tensor) -> Tensor {
    let m = bits.shape()[0];
    let at = Tensor::arange(0.0, 8.0, 1.0).cast(dtypes::UINT8).reshape([1, 1, 8]);
    let bytes = bits.reshape([m, 8, 4]).permute([0, 2, 1]).lshift(&at).sum(-1).cast(dtypes::UINT8);
    le(&bytes, dtypes::INT32).reshape([m, 1])
}

/// The high two bits of blocks of 32 quants (`hi`: `(m, 2, 4, 4)` values 0..=3 in quant order, quant `16h + 4j + b`
/// at `[h, j, b]`) as two int32 a block, for [`QuantMatrix`]: bits `2j..2j+2` of byte `b` of word `h` are quant `16h +
/// 4j + b`'s, so quant word `4h + j` finds its four at bits 4 and 5 of each byte after a shift by `4 - 2j`: `(m, 2)`.
fn sixth_bits(hi: &Tensor) -> Tensor {
    let m = hi.shape()[0];
    let at = Tensor::arange(0.0, 8.0, 2.0).cast(dtypes::UINT8).reshape([1, 1, 1, 4]);
    let bytes = hi.permute([0, 1, 3, 2]).lshift(&at).sum(-1).cast(dtypes::UINT8);
    le(&bytes, dtypes::INT32).reshape([m, 2])
}

/// The 6-bit quants of Q6_K super-blocks, unsigned (0..=63), in value order: low nibbles at 0, two high bits each at
/// 128 (ggml's `dequantize_row_q6_K` layout): `(nb, 210) -> (nb, 256)` uint8.
fn q6(blocks: &Tensor) -> Tensor {
    let nb = blocks.shape()[0];
    let ql = fields(&cols(blocks, 0, 128).reshape([nb, 2, 64]), 4, 2).reshape([nb, 8, 32]);
    let qh = fields(&cols(blocks, 128, 192).reshape([nb, 2, 32]), 2, 2).reshape([nb, 8, 32]);
    ql.bitwise_or(qh.lshift(4)).reshape([nb, 256])
}

/// The 6-bit sub-block scales and mins of Q4_K/Q5_K from the 12 bytes at 4: `(nb, 8)` each, uint8.
fn k_scales(blocks: &Tensor) -> (Tensor, Tensor) {
    let (a, b, c) = (cols(blocks, 4, 8), cols(blocks, 8, 12), cols(blocks, 12, 16));
    let sc = a.bitwise_and(63).cat(&[&c.bitwise_and(15).bitwise_or(a.rshift(6).lshift(4))], -1);
    let mn = b.bitwise_and(63).cat(&[&c.rshift(4).bitwise_or(b.rshift(6).lshift(4))], -1);
    (sc, mn)
}

/// The values of a ggml tensor from its bytes (tinygrad `ggml_data_to_tensor`, then `reshape(shape)`): `raw` is a
/// uint8 tensor of the `ty.nbytes(numel)` bytes (any shape), the result has `shape`. Plain types keep their dtype
/// (float16 stays float16, bfloat16 bfloat16, as in tinygrad); quantized ones give float32, computed in the same
/// order as llama.cpp's `gguf-py` (`gguf.quants.dequantize`), so the values are bit for bit its values except where
/// the device contracts a multiply-add into an FMA (the affine types Q4_1, Q5_1, Q4_K, Q5_K: there within one float32
/// spacing of the block's largest term). Only tensor ops: nothing runs until the result is realized, on `raw`'s device.
///
/// # Panics
/// If `raw` is not uint8 with exactly `ty.nbytes(numel)` elements, `shape`'s size is not a whole number of blocks,
/// or `ty` is not one [`GgmlType::can_dequantize`] accepts.
pub fn dequantize(raw: &Tensor, ty: GgmlType, shape: &[usize]) -> Tensor {
    use GgmlType::*;
    let n: usize = shape.iter().product();
    let nbytes = ty.nbytes(n).unwrap_or_else(|| panic!("dequantize: {n} values of {shape:?} are not whole {} blocks", ty.name()));
    assert!(
        raw.dtype() == dtypes::UINT8 && raw.numel() == nbytes,
        "dequantize: {} needs {nbytes} uint8 bytes for {shape:?}, got {} x {}",
        ty.name(),
        raw.numel(),
        raw.dtype()
    );
    assert!(ty.can_dequantize(), "dequantize: ggml type {} is not supported (see GgmlType::can_dequantize)", ty.name());
    if n == 0 {
        return Tensor::full_dtype(shape.to_vec(), 0, ty.output_dtype());
    }
    if let Some(dt) = ty.native_dtype() {
        return le(&raw.reshape([n, dt.itemsize()]), dt).reshape(shape.to_vec());
    }
    let blocks = raw.reshape([n / ty.block_size(), ty.type_size()]);
    let nb = n / ty.block_size();
    let f32_ = |t: Tensor| t.cast(dtypes::FLOAT32);
    let i8_ = |t: Tensor| t.bitcast(dtypes::INT8);
    let out = match ty {
        // d * (q - 8), q the nibbles
        Q4_0 => f16_at(&blocks, 0).mul(f32_(i8_(nibbles(&blocks, 2, 18)).sub(8))),
        // d * q + m
        Q4_1 => f16_at(&blocks, 0).mul(f32_(nibbles(&blocks, 4, 20))).add(f16_at(&blocks, 2)),
        // d * (q - 16), q five bits
        Q5_0 => f16_at(&blocks, 0).mul(f32_(i8_(q5(&blocks, 2, 6)).sub(16))),
        // d * q + m, q five bits
        Q5_1 => f16_at(&blocks, 0).mul(f32_(q5(&blocks, 4, 8))).add(f16_at(&blocks, 2)),
        // q * d, q int8
        Q8_0 => f32_(i8_(cols(&blocks, 2, 34))).mul(f16_at(&blocks, 0)),
        // 8 sub-blocks of 32: (d * scale) * q - (dmin * min), q 4 or 5 bits
        Q4_K | Q5_K => {
            let (sc, mn) = k_scales(&blocks);
            let dsc = f16_at(&blocks, 0).mul(f32_(sc)).unsqueeze(-1);
            let dmn = f16_at(&blocks, 2).mul(f32_(mn)).unsqueeze(-1);
            let qs = if ty == Q4_K { 16 } else { 48 };
            let mut q = fields(&cols(&blocks, qs, qs + 128).reshape([nb, 4, 32]), 4, 2).reshape([nb, 8, 32]);
            if ty == Q5_K {
                q = q.bitwise_or(fields(&cols(&blocks, 16, 48), 1, 1).lshift(4));
            }
            dsc.mul(f32_(q)).sub(dmn)
        }
        // 16 sub-blocks of 16: (d * scale) * (q - 32), q = 4 low bits | 2 high bits << 4
        Q6_K => {
            let q = f32_(i8_(q6(&blocks)).sub(32)).reshape([nb, 16, 16]);
            let dsc = f16_at(&blocks, 208).mul(f32_(i8_(cols(&blocks, 192, 208)))).unsqueeze(-1);
            dsc.mul(q)
        }
        // d * v: d a power of two from the e8m0 byte (halved, as ggml's E8M0_TO_FP32_HALF), v the doubled e2m1 value
        // of each nibble (0, 1, 2, 3, 4, 6, 8, 12 and their negatives)
        MXFP4 => {
            let e = cols(&blocks, 0, 1).cast(dtypes::UINT32);
            let d = e.lt(2).where_(e.add(1).mul(0x0020_0000), e.sub(1).lshift(23)).bitcast(dtypes::FLOAT32);
            let c = nibbles(&blocks, 1, 17);
            let (m, mant) = (c.bitwise_and(7), c.bitwise_and(1));
            let ex = m.rshift(1);
            let mag = ex.eq(0).where_(&mant, mant.add(2).lshift(&ex).rshift(1)).cast(dtypes::INT8);
            let v = c.rshift(3).eq(1).where_(mag.neg(), &mag);
            d.mul(f32_(v))
        }
        _ => unreachable!("checked by can_dequantize"),
    };
    out.reshape(shape.to_vec())
}

// ---------------------------------------------------------------------------------------------------------------
// integer dot products (llama.cpp's `ggml_vec_dot_q4_0_q8_0` and kin), as tensor ops

/// A `[rows, cols]` GGUF matrix of Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K or Q6_K blocks repacked for
/// [`Tensor::dp4a`] with rows in the vector lanes (llama.cpp's interleaved `block_q4_0x8` repacking): each tile of
/// `lanes` rows holds, block by block, each quant word of its rows side by side, then their scales `d` and the offsets
/// `m` the quants are shifted by (Q4_1's and Q5_1's min; `-8d` for Q4_0, `-16d` for Q5_0, `-128d` for Q8_0; Q4_K's
/// and Q5_K's 32-value sub-blocks as Q4_1/Q5_1 blocks of scale `d·sc` and offset `-dmin·mn`) as float16. A word is
/// four unsigned byte quants: 4-bit ones packed (word `w` holds quants `4w..4w+4` in its low nibbles and `16+4w..` in
/// its high ones), 5-bit ones as 4-bit words of their low bits and a fifth word of their high bits ([`fifth_bits`]),
/// 6-bit ones as 4-bit words and two words of their high two bits ([`sixth_bits`]), Q8_0's signed bytes as they are
/// for [`Tensor::dp4a_signed`] where the host lacks VNNI (`d` alone, no offset), else offset by 128. Q6_K's 32-value
/// blocks are two sub-blocks of 16 with int8 scales: it keeps three float16 a block, the super-block's `d` and the two
/// scales (all exact), and its quants' offset of 32 is taken off in integers. A kernel then reads each tile as one
/// stream and takes a vector of rows' dot products per instruction. The bytes read per block are the file's for 4- and
/// 8-bit types (Q4_K's 18 a block become 20), 24 for the 5-bit ones' 22-24, 30 for Q6_K's 26.25.
#[derive(Clone, Debug)]
pub struct QuantMatrix {
    /// The file's type.
    pub ty: GgmlType,
    /// `[rows / lanes, cols / 32, w, lanes]` int32: `w` words a block, 4 for 4-bit types, 5 for 5-bit ones, 6 for
    /// Q6_K, 8 for Q8_0.
    words: Tensor,
    /// `[rows / lanes, cols / 32, 2, lanes]` float16: `d`, then `m` (Q6_K: `[.., 3, lanes]`, `d` and the two scales;
    /// signed Q8_0: `[.., 1, lanes]`, `d`).
    dm: Tensor,
}

impl QuantMatrix {
    /// `raw` (uint8, `ty.nbytes(rows * cols)` bytes) repacked into tiles of `lanes` rows, lazily; None for types other
    /// than Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K and Q6_K, or rows not a multiple of `lanes`.
    ///
    /// # Panics
    /// If `raw` is not the bytes of `shape` (cols whole blocks).
    pub fn new(raw: &Tensor, ty: GgmlType, shape: &[usize], lanes: usize) -> Option<QuantMatrix> {
        use GgmlType::*;
        if !matches!(ty, Q4_0 | Q4_1 | Q5_0 | Q5_1 | Q8_0 | Q4_K | Q5_K | Q6_K) || shape.len() != 2 || !shape[0].is_multiple_of(lanes) {
            return None;
        }
        let (rows, nb) = (shape[0], shape[1] / 32);
        let nbytes = ty.nbytes(rows * shape[1]);
        assert!(nbytes == Some(raw.numel()), "QuantMatrix: {} bytes for {} {shape:?}", raw.numel(), ty.name());
        let blocks = raw.reshape([raw.numel() / ty.type_size(), ty.type_size()]);
        let half = |off: usize| le(&cols(&blocks, off, off + 2), dtypes::FLOAT16);
        let words = |off: usize, n: usize| le(&cols(&blocks, off, off + 4 * n).reshape([rows * nb, n, 4]), dtypes::INT32);
        let f16 = |t: Tensor| t.cast(dtypes::FLOAT16).reshape([rows * nb, 1]);
        // 5-bit quants as 4-bit words and a word of fifth bits; 4-bit values `(rows * nb, 2, 16)` (a block's first 16,
        // then its last) packed as Q4_0's words, the first half in the low nibbles: `(rows * nb, 4)` int32
        let nibble_words = |q: &Tensor| {
            let part = |h: usize| q.shrink(&[(0, rows * nb), (h, h + 1), (0, 16)]).reshape([rows * nb, 4, 4]);
            le(&part(0).bitwise_or(part(1).lshift(4)), dtypes::INT32)
        };
        let five = |lo: Tensor, qh: usize| lo.cat(&[&fifth_bits(&fields(&cols(&blocks, qh, qh + 4), 1, -1).flatten(1))], -1);
        let dm = |d: Tensor, m: Tensor| d.reshape([rows * nb, 1]).cat(&[&m.reshape([rows * nb, 1])], -1);
        let (words, dm) = match ty {
            Q4_0 => (words(2, 4), dm(half(0), f16(half(0).cast(dtypes::FLOAT32).mul(-8.0)))),
            Q4_1 => (words(4, 4), dm(half(0), half(2))),
            // (signed bytes where DP4AS is the faster product: AVX2 without VNNI, whose DP4A of bytes over 127 takes
            // eight instructions)
            Q8_0 if !CpuFeatures::host().vnni => (words(2, 8), half(0).reshape([rows * nb, 1])),
            Q8_0 => (words(2, 8).bitwise_xor((0x8080_8080u32 as i32) as i64), dm(half(0), f16(half(0).cast(dtypes::FLOAT32).mul(-128.0)))),
            Q5_0 => (five(words(6, 4), 2), dm(half(0), f16(half(0).cast(dtypes::FLOAT32).mul(-16.0)))),
            Q5_1 => (five(words(8, 4), 4), dm(half(0), half(2))),
            // a super-block's d for each of its 8 blocks, then the block's two int8 scales
            // (the quants' low nibbles packed as Q4_0's, their high two bits in two more words, [`sixth_bits`])
            Q6_K => {
                let d = half(208).reshape([rows * nb / 8, 1, 1]).expand([rows * nb / 8, 8, 1]).reshape([rows * nb, 1]);
                let sc = cols(&blocks, 192, 208).bitcast(dtypes::INT8).cast(dtypes::FLOAT16).reshape([rows * nb, 2]);
                let q = q6(&blocks).reshape([rows * nb, 2, 16]);
                let hi = sixth_bits(&q.rshift(4).reshape([rows * nb, 2, 4, 4]));
                (nibble_words(&q.bitwise_and(15)).cat(&[&hi], -1), d.cat(&[&sc], -1))
            }
            // 8 sub-blocks of 32 a super-block: scale d*sc and offset -dmin*mn each (rounded to float16); Q4_K's
            // nibbles (low ones of 32 bytes, then the high ones) packed again as Q4_0's, Q5_K's fifth bits beside them
            _ => {
                let (sc, mn) = k_scales(&blocks);
                let d = f16(half(0).cast(dtypes::FLOAT32).unsqueeze(-1).mul(sc.cast(dtypes::FLOAT32)));
                let m = f16(half(2).cast(dtypes::FLOAT32).unsqueeze(-1).mul(mn.cast(dtypes::FLOAT32)).neg());
                let qs = if ty == Q4_K { 16 } else { 48 };
                let q = fields(&cols(&blocks, qs, qs + 128).reshape([rows * nb / 8, 4, 32]), 4, 2).reshape([rows * nb, 2, 16]);
                let nibbles = nibble_words(&q);
                if ty == Q5_K {
                    let hi = fifth_bits(&fields(&cols(&blocks, 16, 48), 1, 1).reshape([rows * nb, 32]));
                    (nibbles.cat(&[&hi], -1), dm(d, m))
                } else {
                    (nibbles, dm(d, m))
                }
            }
        };
        let tiles = |t: Tensor, k: usize| t.reshape([rows / lanes, lanes, nb, k]).permute([0, 2, 3, 1]);
        let (w, k) = (words.shape()[1], dm.shape()[1]);
        Some(QuantMatrix { ty, words: tiles(words, w), dm: tiles(dm, k) })
    }

    /// `parts`' rows stacked in order (lazily; [`QuantMatrix::realize`] makes it one buffer): one product computes
    /// theirs side by side, a launch and a weight stream where there were several. None when the parts' types,
    /// columns or tiles differ.
    pub fn cat(parts: &[&QuantMatrix]) -> Option<QuantMatrix> {
        let (first, rest) = parts.split_first()?;
        let fits = |a: &Tensor, b: &Tensor| a.shape()[1..] == b.shape()[1..];
        if !rest.iter().all(|p| p.ty == first.ty && fits(&p.words, &first.words) && fits(&p.dm, &first.dm)) {
            return None;
        }
        let all = |f: fn(&QuantMatrix) -> &Tensor| f(first).cat(&rest.iter().map(|p| f(p)).collect::<Vec<_>>(), 0);
        Some(QuantMatrix { ty: first.ty, words: all(|p| &p.words), dm: all(|p| &p.dm) })
    }

    /// The matrix's rows.
    pub fn rows(&self) -> usize {
        self.words.shape()[0] * self.words.shape()[3]
    }

    /// The repacked tensors, realized once (a model's weights, before its first step).
    ///
    /// # Errors
    /// Realize errors.
    pub fn realize(&mut self) -> Result<()> {
        (self.words, self.dm) = (self.words.contiguous(), self.dm.contiguous());
        Tensor::realize_all(&[&self.words, &self.dm])
    }

    /// `x @ self.T` for `x` `[n, cols]` quantized by [`QuantRows::new`]: `[n, rows]` float32. It differs from the float
    /// product by that quantization's rounding (as llama.cpp's).
    ///
    /// # Panics
    /// If `x` does not have `cols` columns.
    pub fn matmul_t(&self, x: &QuantRows) -> Tensor {
        let s = self.words.shape();
        let (tiles, nb, w, lanes) = (s[0], s[1], s[2], s[3]);
        let n = x.words.shape()[0];
        assert_eq!(
            x.words.shape(),
            [n, nb, 8],
            "QuantMatrix::matmul_t: x of {:?} words for a [{}, {}] matrix",
            x.words.shape(),
            tiles * lanes,
            nb * 32
        );
        let (xw, dx, sx) = (x.words.clone(), x.sum(0), x.sum(1));
        // 4-bit words: the low nibbles of the 4 words, then the high ones, as x's 8 words of a block are ordered; a
        // fifth word's bits moved to bit 4 of each quant (word i's at bit i of each byte)
        let part_w = |a: usize, b: usize| self.words.shrink(&[(0, tiles), (0, nb), (a, b), (0, lanes)]);
        let q = if w == 4 || w == 5 || w == 6 {
            let sh = Tensor::arange(0.0, 8.0, 4.0).cast(dtypes::INT32).reshape([1, 1, 2, 1, 1]);
            let lo = part_w(0, 4).reshape([tiles, nb, 1, 4, lanes]).rshift(&sh).bitwise_and(0x0f0f_0f0f).reshape([tiles, nb, 8, lanes]);
            if w == 5 {
                let i = Tensor::arange(0.0, 8.0, 1.0).cast(dtypes::INT32).reshape([1, 1, 8, 1]);
                let hi = part_w(4, 5).lshift(i.neg().add(4).maximum(0)).rshift(i.sub(4).maximum(0));
                lo.bitwise_or(hi.bitwise_and(0x1010_1010))
            } else if w == 6 {
                // (Q6_K: two words of high bits, word h's bits 2j.. to bits 4 and 5 of quant word 4h + j; the masks
                // tell the renderer the bytes are under 64, whose AVX2 DP4A is then two instructions instead of eight)
                let j = Tensor::arange(0.0, 8.0, 2.0).cast(dtypes::INT32).reshape([1, 1, 1, 4, 1]);
                let hi = part_w(4, 6).reshape([tiles, nb, 2, 1, lanes]).lshift(j.neg().add(4).maximum(0)).rshift(j.sub(4).maximum(0));
                lo.bitwise_or(hi.reshape([tiles, nb, 8, lanes]).bitwise_and(0x3030_3030))
            } else {
                lo
            }
        } else {
            self.words.clone()
        };
        let dm = self.dm.cast(dtypes::FLOAT32);
        let part = |i: usize| dm.shrink(&[(0, tiles), (0, nb), (i, i + 1), (0, lanes)]).reshape([1, tiles, nb, lanes]);
        let (dx, sx) = (dx.reshape([n, 1, nb, 1]), sx.reshape([n, 1, nb, 1]));
        // a block's 8 words chained through DP4A's int32 accumulator: exact, so the one float reduction (over blocks)
        // is the only rounding, in an order no unrolling of the words can change
        let (q, xw) = (q.reshape([1, tiles, nb, 8, lanes]), xw.reshape([n, 1, nb, 8, 1]));
        let word = |t: &Tensor, i: usize| {
            let s = t.shape();
            t.shrink(&[(0, s[0]), (0, s[1]), (0, nb), (i, i + 1), (0, s[4])]).reshape([s[0], s[1], nb, s[4]])
        };
        // (Q8_0's signed bytes, `dm` just `d`, by DP4AS: no offset)
        let signed = self.ty == GgmlType::Q8_0 && self.dm.shape()[2] == 1;
        let dot = |i: usize, acc: Tensor| match signed {
            true => word(&q, i).dp4a_signed(&word(&xw, i), acc),
            false => word(&q, i).dp4a(&word(&xw, i), acc),
        };
        let dots = |a: usize, b: usize| (a..b).fold(Tensor::full((), 0i32), |acc, i| dot(i, acc));
        if self.ty == GgmlType::Q6_K {
            // each 16-value sub-block's quants less 32, in integers, times its scale: sc_a·(Σqx - 32Σx) + sc_b·(..)
            // (the halves' sums as float32, exact: integers under 2^24 whose differences are too)
            let sub = |h: usize| {
                let sum16 = x.sum(2 + h).reshape([n, 1, nb, 1]);
                (&dots(4 * h, 4 * h + 4).cast(dtypes::FLOAT32) - &(&sum16 * 32.0f32)) * &part(1 + h)
            };
            return (&(&sub(0) + &sub(1)) * &(&part(0) * &dx)).sum(2).reshape([n, tiles * lanes]);
        }
        let scaled = dots(0, 8).cast(dtypes::FLOAT32) * &(&part(0) * &dx);
        match signed {
            true => scaled.sum(2).reshape([n, tiles * lanes]),
            false => (&scaled + &part(1) * &sx).sum(2).reshape([n, tiles * lanes]),
        }
    }
}

/// Rows of activations quantized per 32 values as llama.cpp's Q8 blocks, for [`QuantMatrix::matmul_t`]: each block's
/// 8 words of four byte quants (`[n, k/32, 8]` int32), and its float32 scale `dx`, `dx * Σq` (Q8_1's `s`) and `Σq` of
/// its two halves of 16 (for Q6_K's sub-blocks) (`[n, k/32, 4]` float32), made by four kernels. (Two tensors: one
/// `[n, k/32, 12]` of both, its floats' bits in words, was a kernel of lane-by-lane selects, 4 us for four rows.)
#[derive(Clone, Debug)]
pub struct QuantRows {
    words: Tensor,
    sums: Tensor,
}

impl QuantRows {
    /// `x` (`[n, k]` float32, `k` a multiple of 32) quantized: `q = round(x / dx)` in -127..=127 with `dx = max|x| /
    /// 127` per block of 32.
    ///
    /// # Panics
    /// If `x` is not 2-D with a multiple of 32 columns.
    pub fn new(x: &Tensor) -> QuantRows {
        let s = x.shape();
        assert!(s.len() == 2 && s[1].is_multiple_of(32), "QuantRows: needs [n, k] with k a multiple of 32, got {s:?}");
        let (n, nb) = (s[0], s[1] / 32);
        let xb = x.cast(dtypes::FLOAT32).reshape([n, nb, 32]);
        // (each reduction its own kernel, with what follows it per block: the quantization after them is then one
        // elementwise kernel)
        let amax = xb.abs().max_keepdim(-1);
        let inv = amax.gt(0.0f32).where_(amax.reciprocal() * 127.0f32, 0.0f32).contiguous();
        // (rounded half to even by the float adder: 1.5 * 2^23 + y for |y| < 2^22 holds round(y) in its low mantissa
        // bits, read by a bitcast; a vector add, where Tensor::round's trunc and compares stayed scalar)
        let q = ((&xb * &inv) + 12582912.0f32).bitcast(dtypes::INT32) - 0x4B40_0000;
        let q = q.reshape([n, nb, 8, 4]);
        let byte = |i: usize| q.shrink(&[(0, n), (0, nb), (0, 8), (i, i + 1)]).reshape([n, nb, 8]);
        let words = (1..4).fold(byte(0).bitwise_and(255), |w, i| w.bitwise_or(byte(i).bitwise_and(255).lshift(8 * i as i64)));
        let dx = inv.gt(0.0f32).where_(inv.reciprocal(), 0.0f32);
        let halves = q.reshape([n, nb, 2, 16]).sum(-1).contiguous();
        // (dx * Σq, not Σx: the offsets' term must see the quants the dot products see, or an offset as large as Q8_0's
        // 128 multiplies their rounding; the two halves added, not summed: a reduction would be a kernel of its own)
        let half = |h: usize| halves.shrink(&[(0, n), (0, nb), (h, h + 1)]);
        let sx = (&half(0) + &half(1)).cast(dtypes::FLOAT32) * &dx;
        let sums = dx.cat(&[&sx, &halves.cast(dtypes::FLOAT32)], -1).contiguous();
        QuantRows { words: words.contiguous(), sums }
    }
    /// Column `i` of each block's sums: `dx`, `dx * Σq`, `Σq` of the first half, of the second (`[n, k/32, 1]`).
    fn sum(&self, i: usize) -> Tensor {
        let s = self.sums.shape();
        self.sums.shrink(&[(0, s[0]), (0, s[1]), (i, i + 1)])
    }
}

// ---------------------------------------------------------------------------------------------------------------
// the file

/// A tensor file's stored bytes as a uint8 tensor on `device` (canonical name), one element a byte.
fn bytes_on(raw: &[u8], device: &str) -> Tensor {
    Tensor::from_uop(engine::buffer_from_bytes(raw, dtypes::UINT8, raw.len(), device))
}

/// One tensor's entry in the file.
#[derive(Clone, Debug, PartialEq)]
pub struct GgufTensorInfo {
    /// Its name (`blk.0.attn_q.weight`).
    pub name: String,
    /// Its shape, slowest dim first (the reverse of the file's `ne`, which lists the fastest first).
    pub shape: Vec<usize>,
    /// How its values are stored.
    pub ggml_type: GgmlType,
    /// Which file of a split model holds it (0 for a single file).
    pub part: usize,
    /// Its offset in its file's data section, as written.
    pub offset: u64,
    /// Its bytes in its file (already checked to lie inside it).
    pub range: Range<usize>,
}

impl GgufTensorInfo {
    /// The number of values.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
}

/// The bytes of one file: memory-mapped, or owned (for [`GgufFile::from_bytes`]).
enum Bytes {
    Map(memmap2::Mmap),
    Owned(Vec<u8>),
}
impl std::ops::Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Map(m) => m,
            Bytes::Owned(v) => v,
        }
    }
}

/// A GGUF model: the metadata of its (first) file and the tensors of all its parts, whose bytes stay in the
/// memory-mapped files until [`GgufFile::tensor`] uploads them (tinygrad `gguf_load` reads the same things).
pub struct GgufFile {
    /// The file opened (the first part of a split model).
    pub path: PathBuf,
    /// The GGUF version, 2 or 3.
    pub version: u32,
    /// The metadata of the first file, by key.
    pub metadata: BTreeMap<String, GgufValue>,
    /// The tensors, in file order (the parts' in part order).
    pub tensors: Vec<GgufTensorInfo>,
    parts: Vec<(PathBuf, Bytes)>,
    index: HashMap<String, usize>,
}

impl std::fmt::Debug for GgufFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GgufFile").field("path", &self.path).field("version", &self.version).field("parts", &self.parts.len()).finish()
    }
}

/// Nesting deeper than this is refused (real files nest arrays once or twice; a deep nest would exhaust the stack).
const MAX_DEPTH: usize = 16;
/// ggml's `GGML_MAX_DIMS`.
const MAX_DIMS: usize = 4;

/// A cursor over a file's bytes that fails, naming the file and what it read, instead of reading past the end.
struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
    path: &'a Path,
}

impl<'a> Reader<'a> {
    fn err(&self, msg: impl std::fmt::Display) -> Error {
        Error::Format { path: self.path.into(), msg: format!("{msg}; the GGUF file is corrupt or truncated (download it again)") }
    }
    fn left(&self) -> usize {
        self.b.len() - self.pos
    }
    fn take(&mut self, n: usize, what: &dyn Fn() -> String) -> Result<&'a [u8]> {
        if n > self.left() {
            return Err(self.err(format!(
                "{}: {n} bytes at offset {} run past the end of the file ({} bytes)",
                what(),
                self.pos,
                self.b.len()
            )));
        }
        let s = &self.b[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    fn array<const N: usize>(&mut self, what: &dyn Fn() -> String) -> Result<[u8; N]> {
        Ok(self.take(N, what)?.try_into().expect("took N bytes"))
    }
    fn u32(&mut self, what: &dyn Fn() -> String) -> Result<u32> {
        self.array(what).map(u32::from_le_bytes)
    }
    fn u64(&mut self, what: &dyn Fn() -> String) -> Result<u64> {
        self.array(what).map(u64::from_le_bytes)
    }
    /// A count of items at least `min_size` bytes each: more than the rest of the file could hold is an error.
    fn count(&mut self, min_size: usize, what: &dyn Fn() -> String) -> Result<usize> {
        let n = self.u64(what)?;
        match usize::try_from(n) {
            Ok(c) if c.checked_mul(min_size).is_some_and(|b| b <= self.left()) => Ok(c),
            _ => Err(self.err(format!("{}: count {n} is more than the {} bytes left in the file can hold", what(), self.left()))),
        }
    }
    fn string(&mut self, what: &dyn Fn() -> String) -> Result<String> {
        let n = self.count(1, what)?;
        let bytes = self.take(n, what)?;
        String::from_utf8(bytes.to_vec()).map_err(|e| self.err(format!("{}: the string is not UTF-8 ({e})", what())))
    }
    /// The smallest encoding of a value of type `ty`, or `None` for an unknown type.
    fn min_size(ty: u32) -> Option<usize> {
        Some(match ty {
            0 | 1 | 7 => 1,
            2 | 3 => 2,
            4..=6 => 4,
            8 | 10..=12 => 8,
            9 => 12,
            _ => return None,
        })
    }
    fn value(&mut self, ty: u32, depth: usize, what: &dyn Fn() -> String) -> Result<GgufValue> {
        use GgufValue::*;
        Ok(match ty {
            0 => U8(self.array::<1>(what)?[0]),
            1 => I8(i8::from_le_bytes(self.array(what)?)),
            2 => U16(u16::from_le_bytes(self.array(what)?)),
            3 => I16(i16::from_le_bytes(self.array(what)?)),
            4 => U32(self.u32(what)?),
            5 => I32(i32::from_le_bytes(self.array(what)?)),
            6 => F32(f32::from_le_bytes(self.array(what)?)),
            7 => Bool(self.array::<1>(what)?[0] != 0),
            8 => Str(self.string(what)?),
            9 => {
                if depth >= MAX_DEPTH {
                    return Err(self.err(format!("{}: arrays nested more than {MAX_DEPTH} deep", what())));
                }
                let ety = self.u32(what)?;
                let min = Self::min_size(ety).ok_or_else(|| self.err(format!("{}: unknown array element type {ety}", what())))?;
                let n = self.count(min, what)?;
                let mut v = Vec::with_capacity(n);
                for _ in 0..n {
                    v.push(self.value(ety, depth + 1, what)?);
                }
                Array(v)
            }
            10 => U64(self.u64(what)?),
            11 => I64(i64::from_le_bytes(self.array(what)?)),
            12 => F64(f64::from_le_bytes(self.array(what)?)),
            _ => return Err(self.err(format!("{}: unknown value type {ty}", what()))),
        })
    }
}

/// What one file holds: version, metadata, tensors (ranges within this file).
struct Parsed {
    version: u32,
    metadata: BTreeMap<String, GgufValue>,
    tensors: Vec<GgufTensorInfo>,
}

/// Reads and checks the header, metadata and tensor infos of the GGUF bytes `b` (the file `path`).
fn parse(b: &[u8], path: &Path, part: usize) -> Result<Parsed> {
    let mut r = Reader { b, pos: 0, path };
    let magic = r.array::<4>(&|| "magic".into())?;
    if &magic != b"GGUF" {
        return Err(Error::Format { path: path.into(), msg: format!("not a GGUF file (magic {magic:02x?}, expected \"GGUF\")") });
    }
    let version = r.u32(&|| "version".into())?;
    match version {
        2 | 3 => {}
        1 => return Err(r.err("GGUF version 1 is not supported; convert the model again with a current llama.cpp")),
        v if v.swap_bytes() == 2 || v.swap_bytes() == 3 => return Err(r.err("big-endian GGUF files are not supported")),
        v => return Err(r.err(format!("unknown GGUF version {v} (2 and 3 are supported)"))),
    }
    // the smallest tensor info: name length, dim count, type, offset; the smallest key/value: key length, type, a byte
    let n_tensors = r.count(24, &|| "tensor count".into())?;
    let n_kv = r.count(13, &|| "metadata count".into())?;
    let mut metadata = BTreeMap::new();
    for i in 0..n_kv {
        let key = r.string(&|| format!("metadata key #{i}"))?;
        let what = || format!("metadata key `{key}`");
        let ty = r.u32(&what)?;
        let v = r.value(ty, 0, &what)?;
        if metadata.insert(key.clone(), v).is_some() {
            return Err(r.err(format!("{} appears twice", what())));
        }
    }
    let mut infos = Vec::with_capacity(n_tensors);
    for i in 0..n_tensors {
        let name = r.string(&|| format!("tensor info #{i}"))?;
        let what = || format!("tensor `{name}`");
        let nd = r.u32(&what)? as usize;
        if nd > MAX_DIMS {
            return Err(r.err(format!("{}: {nd} dims (ggml allows at most {MAX_DIMS})", what())));
        }
        let mut ne = Vec::with_capacity(nd);
        for _ in 0..nd {
            let d = r.u64(&what)?;
            ne.push(
                usize::try_from(d)
                    .ok()
                    .filter(|&d| i64::try_from(d).is_ok())
                    .ok_or_else(|| r.err(format!("{}: dim {d} is too large", what())))?,
            );
        }
        let id = r.u32(&what)?;
        let ty = GgmlType::from_id(id).ok_or_else(|| r.err(format!("{}: unknown ggml type {id}", what())))?;
        let offset = r.u64(&what)?;
        infos.push((name, ne, ty, offset));
    }
    let alignment = match metadata.get("general.alignment") {
        None => 32,
        Some(v) => v
            .as_usize()
            .filter(|a| a.is_power_of_two() && *a <= 1 << 30)
            .ok_or_else(|| r.err(format!("general.alignment {v:?} is not a power of two")))?,
    };
    let data_start = r.pos.div_ceil(alignment) * alignment; // pos <= len < usize::MAX / 2, alignment <= 2^30: no overflow
    let data_len = b.len().saturating_sub(data_start);
    let mut tensors = Vec::with_capacity(infos.len());
    for (name, ne, ty, offset) in infos {
        let bad = |msg: String| r.err(format!("tensor `{name}`: {msg}"));
        let numel = ne.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).ok_or_else(|| bad(format!("dims {ne:?} overflow")))?;
        if ne.first().is_some_and(|&d0| !d0.is_multiple_of(ty.block_size())) {
            return Err(bad(format!("first dim {} is not a multiple of {}'s block of {}", ne[0], ty.name(), ty.block_size())));
        }
        let nbytes = ty.nbytes(numel).ok_or_else(|| bad(format!("{numel} values are not whole {} blocks, or overflow", ty.name())))?;
        let start = usize::try_from(offset).ok().filter(|&o| o <= data_len);
        match start.and_then(|s| s.checked_add(nbytes)) {
            Some(end) if end <= data_len => {
                let s = data_start + start.expect("checked");
                tensors.push(GgufTensorInfo {
                    name,
                    shape: ne.iter().rev().copied().collect(),
                    ggml_type: ty,
                    part,
                    offset,
                    range: s..s + nbytes,
                })
            }
            _ => return Err(bad(format!("{nbytes} bytes at data offset {offset} run past the {data_len} bytes of tensor data"))),
        }
    }
    Ok(Parsed { version, metadata, tensors })
}

/// `(prefix, NNNNN)` of a split model's first file, `prefix-00001-of-NNNNN.gguf`.
fn split_name(path: &Path) -> Option<(String, usize)> {
    let s = path.to_str()?.strip_suffix(".gguf")?;
    let (head, total) = s.rsplit_once("-of-")?;
    let prefix = head.strip_suffix("-00001")?;
    (total.len() == 5 && total.bytes().all(|c| c.is_ascii_digit())).then(|| (prefix.to_string(), total.parse().expect("5 digits")))
}

fn map_file(path: &Path) -> Result<Bytes> {
    let io = |source| Error::Io { path: path.into(), source };
    let file = std::fs::File::open(path).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(Error::Format { path: path.into(), msg: "not a file; give the path of a .gguf file".into() });
    }
    if meta.len() == 0 {
        return Err(Error::Format { path: path.into(), msg: "empty file; the GGUF file is truncated (download it again)".into() });
    }
    // SAFETY: the map is read-only and lives as long as the GgufFile; every read of it is bounds-checked against its
    // length. Another process truncating the file while it is mapped could fault, as with any mmap of a file.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(io)?;
    Ok(Bytes::Map(map))
}

impl GgufFile {
    /// Opens the GGUF file `path`, memory-mapped, reading its metadata and tensor infos (tinygrad `gguf_load`'s
    /// parse). A split model (`split.count` > 1, or a name `NAME-00001-of-NNNNN.gguf`) is opened from its first file
    /// and brings in every part, `NAME-0000i-of-NNNNN.gguf`, with the tensors of all of them.
    ///
    /// # Errors
    /// [`Error::Io`] when a file can't be opened; [`Error::Format`] naming the file, and the key or tensor, when it is
    /// not GGUF v2/v3, is truncated or corrupt (a count, length, dimension or offset beyond its bytes, an unknown
    /// value or ggml type), a split part is missing or out of order, or two tensors share a name.
    pub fn open(path: impl AsRef<Path>) -> Result<GgufFile> {
        let path = path.as_ref();
        let first = map_file(path)?;
        let parsed = parse(&first, path, 0)?;
        let bad = |msg: String| Error::Format { path: path.into(), msg };
        let count = match parsed.metadata.get("split.count") {
            Some(v) => v.as_usize().filter(|&c| c >= 1).ok_or_else(|| bad(format!("split.count {v:?} is not a positive integer")))?,
            None => split_name(path).map_or(1, |(_, n)| n),
        };
        let mut file = GgufFile::assemble(path, parsed, first)?;
        if count > 1 {
            if file.metadata.get("split.no").and_then(GgufValue::as_u64).unwrap_or(0) != 0 {
                return Err(bad("this is not the first file of a split model; open the one named ...-00001-of-NNNNN.gguf".into()));
            }
            let (prefix, total) = split_name(path)
                .ok_or_else(|| bad(format!("split.count is {count}, so the file name must end in -00001-of-{count:05}.gguf")))?;
            if total != count {
                return Err(bad(format!("split.count is {count} but the file name says {total} parts")));
            }
            for i in 1..count {
                let p = PathBuf::from(format!("{prefix}-{:05}-of-{count:05}.gguf", i + 1));
                let bytes = map_file(&p)?;
                let parsed = parse(&bytes, &p, i)?;
                if let Some(no) = parsed.metadata.get("split.no").and_then(GgufValue::as_usize).filter(|&no| no != i) {
                    return Err(Error::Format { path: p, msg: format!("split.no is {no}, expected {i}; the parts are mixed up") });
                }
                file.add_part(p, parsed, bytes)?;
            }
        }
        Ok(file)
    }

    /// Reads GGUF bytes held in memory (one file; no split parts). `name` names it in errors.
    ///
    /// # Errors
    /// As [`GgufFile::open`].
    pub fn from_bytes(bytes: Vec<u8>, name: impl Into<PathBuf>) -> Result<GgufFile> {
        let path = name.into();
        let parsed = parse(&bytes, &path, 0)?;
        GgufFile::assemble(&path, parsed, Bytes::Owned(bytes))
    }

    fn assemble(path: &Path, parsed: Parsed, bytes: Bytes) -> Result<GgufFile> {
        let mut f = GgufFile {
            path: path.into(),
            version: parsed.version,
            metadata: parsed.metadata,
            tensors: Vec::new(),
            parts: Vec::new(),
            index: HashMap::new(),
        };
        f.add_part(path.into(), Parsed { metadata: BTreeMap::new(), ..parsed }, bytes)?;
        Ok(f)
    }

    fn add_part(&mut self, path: PathBuf, parsed: Parsed, bytes: Bytes) -> Result<()> {
        for t in parsed.tensors {
            if self.index.insert(t.name.clone(), self.tensors.len()).is_some() {
                return Err(Error::Format { path, msg: format!("tensor `{}` appears twice; the GGUF file is corrupt", t.name) });
            }
            self.tensors.push(t);
        }
        self.parts.push((path, bytes));
        Ok(())
    }

    /// The tensor named `name`.
    pub fn info(&self, name: &str) -> Option<&GgufTensorInfo> {
        self.index.get(name).map(|&i| &self.tensors[i])
    }

    fn get(&self, name: &str) -> Result<(&GgufTensorInfo, &[u8])> {
        let t = self.info(name).ok_or_else(|| Error::Format { path: self.path.clone(), msg: format!("no tensor named `{name}`") })?;
        let (path, bytes) = &self.parts[t.part];
        let raw = bytes.get(t.range.clone()).ok_or_else(|| Error::Format {
            path: path.clone(),
            msg: format!("tensor `{name}`: bytes {:?} lie outside the file", t.range),
        })?;
        Ok((t, raw))
    }

    /// The stored bytes of tensor `name` (its blocks, as in the file).
    ///
    /// # Errors
    /// [`Error::Format`] when there is no such tensor.
    pub fn raw(&self, name: &str) -> Result<&[u8]> {
        self.get(name).map(|(_, raw)| raw)
    }

    /// Tensor `name` on `device` (tinygrad `ggml_data_to_tensor(...).reshape(...)`): its bytes are copied to the
    /// device at the first realize, plain types directly as their dtype, quantized ones as uint8 that [`dequantize`]
    /// turns into float32 by tensor ops, lazily.
    ///
    /// # Errors
    /// [`Error::Format`] when there is no such tensor, or its ggml type is one [`dequantize`] does not support.
    ///
    /// # Panics
    /// If `device` is not a device of this build (as [`Tensor::to`]).
    pub fn tensor(&self, name: &str, device: &str) -> Result<Tensor> {
        let (t, raw) = self.get(name)?;
        let ty = t.ggml_type;
        if !ty.can_dequantize() {
            let path = self.parts[t.part].0.clone();
            return Err(Error::Format { path, msg: format!("tensor `{name}`: ggml type {} can't be dequantized yet", ty.name()) });
        }
        let device = crate::runtime::canonicalize_device(device);
        assert!(crate::runtime::parse_device(&device).is_some(), "GgufFile::tensor: unknown device {device:?}");
        if t.numel() == 0 {
            return Ok(Tensor::full_dtype(t.shape.clone(), 0, ty.output_dtype()).to(&device));
        }
        Ok(match ty.native_dtype() {
            Some(dt) => Tensor::from_uop(engine::buffer_from_bytes(raw, dt, t.numel(), &device)).reshape(t.shape.clone()),
            None => dequantize(&bytes_on(raw, &device), ty, &t.shape),
        })
    }

    /// Matrix `name` repacked for integer dot products ([`QuantMatrix`], tiles of `lanes` rows) on `device`, realized;
    /// None when its type has no repacking (anything but Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K) or it is not a
    /// matrix of whole tiles.
    ///
    /// # Errors
    /// [`Error::Format`] when there is no such tensor; realize errors.
    pub fn quant_matrix(&self, name: &str, device: &str, lanes: usize) -> Result<Option<QuantMatrix>> {
        let (t, raw) = self.get(name)?;
        let raw = || bytes_on(raw, &crate::runtime::canonicalize_device(device));
        let Some(mut q) = (t.shape.len() == 2).then(|| QuantMatrix::new(&raw(), t.ggml_type, &t.shape, lanes)).flatten() else {
            return Ok(None);
        };
        q.realize()?;
        Ok(Some(q))
    }

    /// Every tensor on `device`, by name (lazy: see [`GgufFile::tensor`]).
    ///
    /// # Errors
    /// As [`GgufFile::tensor`], for the first tensor that fails.
    pub fn state_dict(&self, device: &str) -> Result<BTreeMap<String, Tensor>> {
        self.tensors.iter().map(|t| Ok((t.name.clone(), self.tensor(&t.name, device)?))).collect()
    }
}

/// The metadata and the tensors of the GGUF model `path` (a split model from its first file), the tensors on the
/// default device and lazily dequantized (tinygrad `gguf_load`): `(kv_data, state_dict)`.
///
/// # Errors
/// As [`GgufFile::open`] and [`GgufFile::tensor`].
pub fn gguf_load(path: impl AsRef<Path>) -> Result<(BTreeMap<String, GgufValue>, BTreeMap<String, Tensor>)> {
    let f = GgufFile::open(path)?;
    let sd = f.state_dict(&crate::runtime::default_device())?;
    Ok((f.metadata, sd))
}
