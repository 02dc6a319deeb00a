//! Tensor-by-tensor indexing compiles to a gather (codegen's reduce collapse): values of `x[idx]`, `gather` and
//! `Embedding` against host references (repeated, negative and out-of-range indices), and kernels that no longer
//! loop over the indexed rows.

use rand::{rngs::StdRng, Rng, SeedableRng};
use tinygrad::codegen::full_rewrite;
use tinygrad::nn::Embedding;
use tinygrad::renderer::Renderer;
use tinygrad::schedule::create_schedule;
use tinygrad::tensor::Index;
use tinygrad::{dtypes, Ops, Tensor};

/// `n` seeded pseudo-random ints in `[lo, hi)`.
fn ints(n: usize, lo: i32, hi: i32, seed: u64) -> Vec<i32> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n).map(|_| rng.random_range(lo..hi)).collect()
}

/// `x[idx]` rows of a row-major `(n, w)` host array, with tinygrad's semantics: negative indices count from the end,
/// the rest out of range give zeros.
fn rows(x: &[f32], w: usize, idx: &[i32]) -> Vec<f32> {
    let n = (x.len() / w) as i32;
    idx.iter()
        .flat_map(|&i| {
            let i = if i < 0 { i + n } else { i };
            (0..w).map(move |c| if (0..n).contains(&i) { x[i as usize * w + c] } else { 0.0 })
        })
        .collect()
}

/// The most loop iterations any kernel computing `t` runs (the product of its loop sizes).
fn max_iterations(t: &Tensor) -> i128 {
    let s = create_schedule(&[t.uop()], &tinygrad::renderer::Renderer::cpu());
    let loops = |ast| {
        full_rewrite(ast, &Renderer::cpu(), None)
            .unwrap()
            .uops
            .iter()
            .filter(|u| u.op == Ops::RANGE)
            .map(|r| r.src[0].const_int().unwrap())
            .product()
    };
    s.items.iter().map(|it| loops(&it.ast)).max().unwrap()
}

#[test]
fn getitem_by_int_tensor_matches_host() {
    let xs: Vec<f32> = (0..7000).map(|i| (i as f32) * 0.25 - 100.0).collect();
    let x = Tensor::from_slice(&xs, [1000, 7]);
    let mut idx = ints(300, 0, 1000, 0x9E37_79B9_7F4A_7C15);
    idx.extend([5, 5, 5, 999, 0, -1, -1000, 1000, -1001, 123_456]); // repeats, negatives, out of range
    let got = x.getitem(&[Tensor::from_slice(&idx, [idx.len()]).into()]).to_vec::<f32>().unwrap();
    assert_eq!(got, rows(&xs, 7, &idx));
    // rows of an expression (0 where the index is out of range, not the expression at a clamped row)
    let got = (x.mul(2.0).add(1.0)).getitem(&[Tensor::from_slice(&idx, [idx.len()]).into()]).to_vec::<f32>().unwrap();
    let want: Vec<f32> =
        rows(&xs, 7, &idx).iter().zip(rows(&[1.0; 7000], 7, &idx)).map(|(v, ok)| if ok == 0.0 { 0.0 } else { v * 2.0 + 1.0 }).collect();
    assert_eq!(got, want);
    // a 2-d index and an index into the second dim
    let i2 = Tensor::from_slice(&idx[..20], [4, 5]);
    assert_eq!(x.getitem(&[i2.into()]).shape(), vec![4, 5, 7]);
    let cols = ints(9, -7, 7, 42);
    let got = x.getitem(&[Index::from(3), Tensor::from_slice(&cols, [9]).into()]).to_vec::<f32>().unwrap();
    assert_eq!(got, rows(&xs[21..28], 1, &cols));
}

#[test]
fn two_index_tensors_and_gather() {
    let xs: Vec<f32> = (0..60).map(|i| i as f32).collect();
    let x = Tensor::from_slice(&xs, [6, 10]);
    let (i, j) = (ints(8, 0, 6, 1), ints(8, 0, 10, 2));
    let got = x.getitem(&[Tensor::from_slice(&i, [8]).into(), Tensor::from_slice(&j, [8]).into()]).to_vec::<f32>().unwrap();
    let want: Vec<f32> = i.iter().zip(&j).map(|(&a, &b)| xs[a as usize * 10 + b as usize]).collect();
    assert_eq!(got, want);
    // a one-hot product: sum over rows of cast(row == i) * x
    let hot = Tensor::arange(0.0, 6.0, 1.0).eq(Tensor::from_slice(&i, [8, 1])).cast(dtypes::FLOAT32);
    let t = hot.unsqueeze(-1).mul(&x).sum(1);
    assert!(max_iterations(&t) <= t.numel() as i128, "the one-hot product still reduces over the rows");
    assert_eq!(t.to_vec::<f32>().unwrap(), rows(&xs, 10, &i));
    // gather along dim 1: out[r][c] = x[r][index[r][c]]
    let gi = ints(18, 0, 10, 3);
    let got = x.gather(1, &Tensor::from_slice(&gi, [6, 3])).to_vec::<f32>().unwrap();
    let want: Vec<f32> = gi.iter().enumerate().map(|(k, &c)| xs[k / 3 * 10 + c as usize]).collect();
    assert_eq!(got, want);
}

#[test]
fn embedding_and_uint8_rows() {
    let e = Embedding::new(50, 4);
    let ws: Vec<f32> = (0..200).map(|i| i as f32 * 0.5).collect();
    e.weight.assign(Tensor::from_slice(&ws, [50, 4]));
    let idx = ints(12, 0, 50, 7);
    let got = e.forward(&Tensor::from_slice(&idx, [3, 4])).to_vec::<f32>().unwrap();
    assert_eq!(got, rows(&ws, 4, &idx));
    // uint8 rows (summed in a wider dtype by the compare-and-sum form), as MNIST pixels
    let px: Vec<u8> = (0..300).map(|i| (i * 7 % 256) as u8).collect();
    let x = Tensor::from_bytes(&px, dtypes::UINT8, [100, 3]);
    let idx = ints(40, 0, 100, 11);
    let got = x.getitem(&[Tensor::from_slice(&idx, [40]).into()]).to_bytes().unwrap();
    let want: Vec<u8> = idx.iter().flat_map(|&i| px[i as usize * 3..i as usize * 3 + 3].to_vec()).collect();
    assert_eq!(got, want);
}

#[test]
fn indexing_kernels_do_not_loop_over_rows() {
    // MNIST's batch: pixels and labels of 60000 rows, picked by 512 random indices (SPLIT_REDUCEOP, on by default,
    // must leave the one-hot sum whole for codegen to see it)
    let (x, y) = (Tensor::empty([60000, 784], dtypes::UINT8), Tensor::empty([60000], dtypes::UINT8));
    let samples = Tensor::randint([512], 0, 60000);
    let idx = Tensor::empty([512], dtypes::INT32);
    for t in [x.getitem(&[(&samples).into()]), y.getitem(&[(&samples).into()]), x.getitem(&[idx.into()])] {
        let n = max_iterations(&t);
        assert!(n <= t.numel() as i128, "a kernel of x[idx] {:?} runs {n} iterations: it loops over the rows", t.shape());
    }
    let e = Embedding { weight: Tensor::empty([30000, 64], dtypes::FLOAT32) };
    let t = e.forward(&Tensor::empty([2, 16], dtypes::INT32));
    assert!(max_iterations(&t) <= t.numel() as i128, "the embedding loops over the vocabulary");
    // a prompt's 128 tokens as an LLM embeds them (a one-hot matmul): big enough for the CPU's matmul packing, which
    // must leave a gather alone (it copied the whole table into panels first)
    let ids = Tensor::empty([128, 1], dtypes::INT32);
    let onehot = ids.eq(Tensor::arange(0.0, 30000.0, 1.0).cast(dtypes::INT32).reshape([1, 30000]));
    let t = onehot.cast(dtypes::FLOAT32).matmul(&Tensor::empty([30000, 256], dtypes::FLOAT32));
    assert!(max_iterations(&t) <= t.numel() as i128, "the one-hot matmul of 128 tokens packs the table");
    // an attention mask built from an arange is no one-hot: its product is packed as any matmul (a panel copy first)
    let (i, j) = (Tensor::arange(0.0, 128.0, 1.0).reshape([128, 1]), Tensor::arange(0.0, 256.0, 1.0).reshape([1, 256]));
    let p = j.le(&i).where_(Tensor::empty([128, 256], dtypes::FLOAT32), 0.0f32);
    let t = p.matmul(&Tensor::empty([256, 256], dtypes::FLOAT32));
    assert_eq!(create_schedule(&[t.uop()], &tinygrad::renderer::Renderer::cpu()).items.len(), 2, "the masked product's panels");
}

#[test]
fn a_big_sum_of_gathered_rows_still_splits() {
    // the one-hot sum of the gather is left whole, but the sum over the gathered batch is split in two kernels
    // (SPLIT_REDUCEOP), as a weight gradient summed over a gathered batch is in beautiful_mnist
    let x: Vec<f32> = (0..1000 * 64).map(|i| (i % 17) as f32 - 8.0).collect();
    let idx = ints(512, 0, 1000, 7);
    let t = Tensor::from_slice(&x, [1000, 64]).getitem(&[Tensor::from_slice(&idx, [512]).into()]).sum(..);
    let kernels = create_schedule(&[t.uop()], &tinygrad::renderer::Renderer::cpu()).items.len();
    assert_eq!(kernels, 3, "the gather, then the sum over its 32768 values in two kernels");
    assert_eq!(t.item::<f32>().unwrap(), rows(&x, 64, &idx).iter().sum::<f32>());
}
