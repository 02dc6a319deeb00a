//! Einstein summation. In: a formula (`"ij,jk->ik"`, implicit outputs, `...`, repeated letters) and operands. Out:
//! a lazy tensor: operands permuted and broadcast to one layout, multiplied and summed (tinygrad `einsum`).

use super::movement::{pad_on, slice_dim, sq};
use super::Tensor;

impl Tensor {
    /// Einstein summation over `operands` (tinygrad `einsum`): `"ij,jk->ik"`, implicit outputs (`"ij,jk"`: the
    /// letters seen once, sorted), `...` for broadcast dims, and letters repeated in one operand (diagonals, so
    /// `"ii->i"` and `"ii->"` are the diagonal and the trace).
    ///
    /// # Panics
    /// If the operand count or a dim size doesn't match the formula.
    pub fn einsum(formula: &str, operands: &[&Tensor]) -> Tensor {
        let mut formula: String = formula.chars().filter(|c| !c.is_whitespace()).collect();
        let (lhs0, arrow) = formula.split_once("->").map_or((formula.clone(), None), |(l, r)| (l.to_string(), Some(r.to_string())));
        if formula.contains("...") {
            let ell: String = ('a'..='z').chain('A'..='Z').filter(|&c| !formula.contains(c)).collect();
            let parts: Vec<&str> = lhs0.split(',').collect();
            let n: Vec<usize> = parts
                .iter()
                .zip(operands)
                .map(|(s, x)| if s.contains("...") { (x.ndim() + 3).saturating_sub(s.len()) } else { 0 })
                .collect();
            let most = n.iter().copied().max().unwrap_or(0);
            let lhs: Vec<String> = parts.iter().zip(&n).map(|(s, &k)| s.replace("...", &ell[most - k..most])).collect();
            let rhs = match &arrow {
                Some(r) => r.replace("...", &ell[..most]),
                None => {
                    let mut auto: Vec<char> = lhs0.chars().filter(|&c| c.is_alphabetic() && lhs0.matches(c).count() == 1).collect();
                    auto.sort();
                    format!("{}{}", &ell[..most], auto.into_iter().collect::<String>())
                }
            };
            formula = format!("{}->{rhs}", lhs.join(","));
        }
        let (lhs, rhs) = match formula.split_once("->") {
            Some((l, r)) => (l.to_string(), r.to_string()),
            None => {
                let mut once: Vec<char> = formula.chars().filter(|&c| c.is_alphabetic() && formula.matches(c).count() == 1).collect();
                once.sort();
                (formula.clone(), once.into_iter().collect())
            }
        };
        let inputs: Vec<&str> = lhs.split(',').collect();
        assert_eq!(inputs.len(), operands.len(), "einsum: {formula:?} takes {} operands, got {}", inputs.len(), operands.len());
        let mut sz: std::collections::BTreeMap<char, usize> = Default::default();
        let mut xs = Vec::new();
        for (s, &x) in inputs.iter().zip(operands) {
            let (mut s, mut x): (Vec<char>, Tensor) = (s.chars().collect(), x.clone());
            assert_eq!(s.len(), x.ndim(), "einsum: {:?} doesn't fit an operand of shape {:?}", s.iter().collect::<String>(), x.shape());
            // a letter repeated in one operand: its diagonal, moved to the last dim
            while let Some((j, k)) = (0..s.len()).find_map(|j| s[j + 1..].iter().position(|&c| c == s[j]).map(|p| (j, j + 1 + p))) {
                let (shape, c) = (x.shape(), s[j]);
                let n = shape[j];
                assert_eq!(n, shape[k], "einsum: letter {c} has sizes {n} and {}", shape[k]);
                let perm: Vec<usize> = (0..x.ndim()).filter(|&i| i != j && i != k).chain([j, k]).collect();
                let flat = x.permute(perm).flatten(x.ndim() as i64 - 2);
                let nd = flat.ndim();
                let mut unflat = flat.shape();
                unflat.splice(nd - 1.., [n, n + 1]);
                x = sq(&slice_dim(&flat.pad(&pad_on(nd, nd - 1, (0, n as i64))).reshape(unflat), nd, 0, 1), nd);
                s = s.iter().enumerate().filter(|&(i, _)| i != j && i != k).map(|(_, &c)| c).chain([c]).collect();
            }
            for (&c, &n) in s.iter().zip(&x.shape()) {
                let old = *sz.entry(c).or_insert(n);
                assert!(old == n || old == 1 || n == 1, "einsum: letter {c} has sizes {old} and {n}");
                sz.insert(c, old.max(n));
            }
            xs.push((s, x));
        }
        let alpha: Vec<char> = sz.keys().copied().collect();
        let aligned: Vec<Tensor> = xs
            .iter()
            .map(|(s, x)| {
                let mut sorted = s.clone();
                sorted.sort();
                let perm: Vec<usize> = sorted.iter().map(|c| s.iter().position(|d| d == c).unwrap()).collect();
                let shape: Vec<usize> =
                    alpha.iter().map(|c| if s.contains(c) { x.shape()[s.iter().position(|d| d == c).unwrap()] } else { 1 }).collect();
                if s.is_empty() {
                    x.clone()
                } else {
                    x.permute(perm).reshape(shape)
                }
            })
            .collect();
        let prod = aligned[1..].iter().fold(aligned[0].clone(), |acc, x| acc.mul(x));
        let summed: Vec<usize> = alpha.iter().enumerate().filter(|(_, c)| !rhs.contains(**c)).map(|(i, _)| i).collect();
        let out = prod.sum(summed);
        let mut kept: Vec<char> = rhs.chars().collect();
        kept.sort();
        out.permute(
            rhs.chars().map(|c| kept.iter().position(|&k| k == c).expect("einsum: output letter not in inputs")).collect::<Vec<_>>(),
        )
    }
}
