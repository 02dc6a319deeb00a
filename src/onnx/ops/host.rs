//! Handlers whose output shape depends on the input's values, computed on the host from the realized inputs
//! (as tinygrad's `NonZero` and `Compress` read theirs): `NonMaxSuppression`, `Unique` and `TfIdfVectorizer`.

use super::{arg, axis_of, floats, one, opt, values, Node, Outputs};
use crate::dtype::dtypes;
use crate::tensor::{Index, Tensor};
use std::collections::HashMap;

/// `NonMaxSuppression(boxes, scores, max_output_boxes_per_class, iou_threshold, score_threshold)`: per batch and
/// class, boxes by descending score (above the score threshold), each kept unless its IoU with a kept one exceeds
/// the threshold, at most `max` per class; rows `[batch, class, box]` as int64.
pub(super) fn non_max_suppression(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let (boxes, scores) = (floats(arg(a, 0)?)?, floats(arg(a, 1)?)?);
    let (nb, nc, nbox) = (arg(a, 1)?.shape()[0], arg(a, 1)?.shape()[1], arg(a, 1)?.shape()[2]);
    let max = opt(a, 2).map(values).transpose()?.map_or(0, |v| v[0].max(0)) as usize;
    let iou = opt(a, 3).map(floats).transpose()?.map_or(0.0, |v| v[0]);
    let threshold = opt(a, 4).map(floats).transpose()?.map(|v| v[0]);
    let center = n.int("center_point_box", 0) != 0;
    let corners = |b: usize, i: usize| {
        let v = &boxes[(b * nbox + i) * 4..(b * nbox + i) * 4 + 4];
        if center {
            [v[1] - v[3] / 2.0, v[0] - v[2] / 2.0, v[1] + v[3] / 2.0, v[0] + v[2] / 2.0]
        } else {
            [v[0].min(v[2]), v[1].min(v[3]), v[0].max(v[2]), v[1].max(v[3])]
        }
    };
    let overlaps = |p: [f64; 4], q: [f64; 4]| {
        let (iy, ix) = (p[2].min(q[2]) - p[0].max(q[0]), p[3].min(q[3]) - p[1].max(q[1]));
        if iy <= 0.0 || ix <= 0.0 {
            return false;
        }
        let inter = iy * ix;
        let union = (p[2] - p[0]) * (p[3] - p[1]) + (q[2] - q[0]) * (q[3] - q[1]) - inter;
        union > 0.0 && inter / union > iou
    };
    let mut rows: Vec<i64> = Vec::new();
    for b in 0..nb {
        for c in 0..nc {
            let s = &scores[(b * nc + c) * nbox..(b * nc + c + 1) * nbox];
            let mut order: Vec<usize> = (0..nbox).filter(|&i| threshold.is_none_or(|t| s[i] > t)).collect();
            order.sort_by(|&i, &j| s[j].total_cmp(&s[i]).then(i.cmp(&j)));
            let mut kept: Vec<usize> = Vec::new();
            for i in order {
                if kept.len() >= max {
                    break;
                }
                if kept.iter().all(|&k| !overlaps(corners(b, i), corners(b, k))) {
                    kept.push(i);
                    rows.extend([b as i64, c as i64, i as i64]);
                }
            }
        }
    }
    one(Tensor::from_slice(&rows, [rows.len() / 3, 3]))
}

/// `Unique(X)`: the distinct elements (or slices along `axis`), sorted (or in first-seen order without
/// `sorted`), with the int64 first indices, inverse indices and counts.
pub(super) fn unique(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let x = arg(a, 0)?;
    let (x, axis) = match n.attr("axis") {
        Some(_) => (x.clone(), axis_of(n.int("axis", 0), x.ndim())),
        None => (x.flatten(0), 0),
    };
    let moved = x.transpose(0, axis);
    let rows = moved.shape()[0];
    let v = floats(&moved.reshape([rows as i64, -1]))?;
    let width = v.len() / rows.max(1);
    let row = |i: usize| &v[i * width..(i + 1) * width];
    let cmp = |i: usize, j: usize| {
        row(i).iter().zip(row(j)).map(|(p, q)| p.total_cmp(q)).find(|o| o.is_ne()).unwrap_or(std::cmp::Ordering::Equal)
    };
    let mut order: Vec<usize> = (0..rows).collect();
    order.sort_by(|&i, &j| cmp(i, j).then(i.cmp(&j)));
    // groups of equal rows, each by its first index
    let mut firsts: Vec<usize> = Vec::new();
    let mut counts: Vec<i64> = Vec::new();
    let mut inverse = vec![0i64; rows];
    for &i in &order {
        if firsts.last().is_none_or(|&f| cmp(f, i).is_ne()) {
            firsts.push(i);
            counts.push(0);
        }
        *counts.last_mut().expect("pushed") += 1;
        inverse[i] = firsts.len() as i64 - 1;
    }
    if n.int("sorted", 1) == 0 {
        let mut perm: Vec<usize> = (0..firsts.len()).collect();
        perm.sort_by_key(|&u| firsts[u]);
        let mut rank = vec![0i64; perm.len()];
        perm.iter().enumerate().for_each(|(r, &u)| rank[u] = r as i64);
        inverse.iter_mut().for_each(|i| *i = rank[*i as usize]);
        (firsts, counts) = (perm.iter().map(|&u| firsts[u]).collect(), perm.iter().map(|&u| counts[u]).collect());
    }
    let idx: Vec<i64> = firsts.iter().map(|&f| f as i64).collect();
    let picked = moved.getitem(&[Index::Tensor(Tensor::from_slice(&idx, [idx.len()]))]).transpose(0, axis);
    let vec1 = |v: &[i64]| Tensor::from_slice(v, [v.len()]);
    Ok(vec![picked, vec1(&idx), vec1(&inverse), vec1(&counts)])
}

/// `TfIdfVectorizer(X)`: counts of the pool's n-grams (lengths `min_gram_length..=max_gram_length`, items up to
/// `max_skip_count` apart) in each row of int `X`, weighted by `mode` (`TF`, `IDF`, `TFIDF` with `weights`),
/// float32 `(rows, max(ngram_indexes) + 1)`.
pub(super) fn tfidf_vectorizer(n: &Node, a: &[Option<Tensor>]) -> Outputs {
    let x = arg(a, 0)?;
    let (lo, hi, skip) = (n.int("min_gram_length", 1) as usize, n.int("max_gram_length", 1) as usize, n.int("max_skip_count", 0) as usize);
    let counts = n.ints("ngram_counts").unwrap_or_default();
    let indexes = n.ints("ngram_indexes").unwrap_or_default();
    let pool = n.ints("pool_int64s").ok_or("TfIdfVectorizer over strings is not supported")?;
    let weights = n.floats("weights");
    // each pooled n-gram (of an allowed length) to its output column
    let mut grams: HashMap<Vec<i64>, usize> = HashMap::new();
    let mut ordinal = 0;
    for (size, &start) in counts.iter().enumerate() {
        let size = size + 1;
        let end = counts.get(size).map_or(pool.len(), |&e| e as usize);
        for g in pool[start as usize..end].chunks(size) {
            if (lo..=hi).contains(&size) {
                grams.insert(g.to_vec(), indexes[ordinal] as usize);
            }
            ordinal += 1;
        }
    }
    let cols = indexes.iter().max().map_or(0, |&m| m as usize + 1);
    let (batched, v) = (x.ndim() == 2, values(x)?);
    let width = *x.shape().last().unwrap_or(&1);
    let rows = if batched { x.shape()[0] } else { 1 };
    let mut freq = vec![0.0f32; rows * cols];
    for r in 0..rows {
        let row = &v[r * width..(r + 1) * width];
        for len in lo.max(1)..=hi {
            for d in 1..=skip + 1 {
                if len == 1 && d > 1 {
                    break;
                }
                for s in 0..width {
                    let end = s + d * (len - 1);
                    if end >= width {
                        break;
                    }
                    let g: Vec<i64> = (0..len).map(|j| row[s + j * d]).collect();
                    if let Some(&col) = grams.get(&g) {
                        freq[r * cols + col] += 1.0;
                    }
                }
            }
        }
    }
    let w = |c: usize| weights.as_ref().map_or(1.0, |w| w[c]);
    let out: Vec<f32> = freq
        .iter()
        .enumerate()
        .map(|(i, &f)| match n.string("mode", "TF").as_str() {
            "IDF" => {
                if f > 0.0 {
                    w(i % cols)
                } else {
                    0.0
                }
            }
            "TFIDF" => w(i % cols) * f,
            _ => f,
        })
        .collect();
    let t = Tensor::from_slice(&out, [rows, cols]);
    one(if batched { t } else { t.reshape([cols]) }.cast(dtypes::FLOAT32))
}
