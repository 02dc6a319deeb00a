//! Layered graph layout for the viewer, left to right as tinygrad's (dagre's `rankdir: LR`). In: a DAG's node sizes
//! and, per node, its sources. Out: each node's centre. Sugiyama's method in its plainest form, linear in the graph
//! per sweep: a node's layer is its longest path to the root (so a constant sits beside its user), layers are ordered
//! by barycenter sweeps, and nodes are placed at their neighbours' mean height without overlapping.
//!
//! Written here because the kept layout crates don't scale to the graphs a kernel makes: rust-sugiyama 0.4 took
//! 1.4 s at 500 nodes and 43 s at 5,000 (network-simplex ranking), dagre.js is the same method and freezes
//! tinygrad's page on big graphs; this takes milliseconds at 5,000 nodes.

/// Horizontal gap between layers and vertical gap between nodes, in pixels.
const GAP: (f64, f64) = (40.0, 10.0);
/// Barycenter sweeps (each down and up the layers).
const SWEEPS: usize = 4;

/// Where a node would sit given the current positions.
type Want<'a> = dyn Fn(usize, &Vec<(f64, f64)>) -> f64 + 'a;

/// A laid-out graph: node centres (same order as the input) and the drawing's size.
#[derive(Debug, Clone, PartialEq)]
pub struct Layout {
    /// Each node's centre (x, y), pixels from the top left.
    pub pos: Vec<(f64, f64)>,
    /// The drawing's width, pixels.
    pub width: f64,
    /// The drawing's height, pixels.
    pub height: f64,
}

/// Lays out nodes of `size` (width, height) with sources `src` (indices, each a node before its users: a
/// toposort), the last node the root. Nodes no path joins to the root are placed as if they fed it.
pub fn layout(size: &[(f64, f64)], src: &[Vec<usize>]) -> Layout {
    let n = size.len();
    if n == 0 {
        return Layout { pos: vec![], width: 0.0, height: 0.0 };
    }
    // height above the root: longest path to it (users come after their sources)
    let mut users = vec![vec![]; n];
    for (u, s) in src.iter().enumerate() {
        for &x in s {
            users[x].push(u);
        }
    }
    let mut dist = vec![0usize; n];
    for u in (0..n).rev() {
        dist[u] = users[u].iter().map(|&v| dist[v] + 1).max().unwrap_or(0);
    }
    let depth = dist.iter().copied().max().unwrap_or(0);
    let mut layers: Vec<Vec<usize>> = vec![vec![]; depth + 1];
    for u in 0..n {
        layers[depth - dist[u]].push(u);
    }
    // orders: the barycenter of the neighbours' positions on the side swept from
    let mut at = vec![0f64; n];
    let place = |layers: &Vec<Vec<usize>>, at: &mut Vec<f64>| {
        for l in layers {
            for (i, &u) in l.iter().enumerate() {
                at[u] = i as f64;
            }
        }
    };
    place(&layers, &mut at);
    for sweep in 0..SWEEPS * 2 {
        let down = sweep % 2 == 0;
        let range: Vec<usize> = if down { (1..layers.len()).collect() } else { (0..layers.len().saturating_sub(1)).rev().collect() };
        for li in range {
            let key = |u: usize| {
                let nb = if down { &src[u] } else { &users[u] };
                if nb.is_empty() {
                    at[u]
                } else {
                    nb.iter().map(|&v| at[v]).sum::<f64>() / nb.len() as f64
                }
            };
            let mut keyed: Vec<(f64, usize)> = layers[li].iter().map(|&u| (key(u), u)).collect();
            keyed.sort_by(|a, b| a.0.total_cmp(&b.0));
            layers[li] = keyed.into_iter().map(|(_, u)| u).collect();
            for (i, &u) in layers[li].iter().enumerate() {
                at[u] = i as f64;
            }
        }
    }
    // x: layer columns as wide as their widest node; y: stacked in order, then pulled toward the neighbours' mean
    let mut pos = vec![(0f64, 0f64); n];
    let mut x = 0.0;
    for l in &layers {
        let w = l.iter().map(|&u| size[u].0).fold(0.0, f64::max);
        for &u in l {
            pos[u].0 = x + w / 2.0;
        }
        x += w + GAP.0;
    }
    let stack = |l: &[usize], pos: &mut Vec<(f64, f64)>, want: &Want| {
        let mut floor = f64::NEG_INFINITY;
        for &u in l {
            let y = want(u, pos).max(floor + size[u].1 / 2.0);
            pos[u].1 = y;
            floor = y + size[u].1 / 2.0 + GAP.1;
        }
    };
    for l in &layers {
        stack(l, &mut pos, &|_, _| 0.0);
    }
    for sweep in 0..SWEEPS {
        let down = sweep % 2 == 0;
        let order: Vec<usize> = if down { (0..layers.len()).collect() } else { (0..layers.len()).rev().collect() };
        for li in order {
            let want = |u: usize, pos: &Vec<(f64, f64)>| {
                let nb: Vec<usize> = src[u].iter().chain(&users[u]).copied().collect();
                if nb.is_empty() {
                    pos[u].1
                } else {
                    nb.iter().map(|&v| pos[v].1).sum::<f64>() / nb.len() as f64
                }
            };
            stack(&layers[li], &mut pos, &want);
        }
    }
    let top = pos.iter().zip(size).map(|(p, s)| p.1 - s.1 / 2.0).fold(f64::INFINITY, f64::min);
    for p in &mut pos {
        p.1 -= top;
    }
    let height = pos.iter().zip(size).map(|(p, s)| p.1 + s.1 / 2.0).fold(0.0, f64::max);
    Layout { pos, width: x - GAP.0, height }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layers_follow_the_longest_path_and_nodes_never_overlap() {
        // a + (b * c) with a constant feeding the add: 0=a, 1=b, 2=c, 3=mul, 4=add(root)
        let src = vec![vec![], vec![], vec![], vec![1, 2], vec![0, 3]];
        let l = layout(&[(20.0, 10.0); 5], &src);
        let col = |u: usize| l.pos[u].0;
        assert!(col(1) < col(3) && col(3) < col(4));
        assert_eq!(col(1), col(2));
        assert_eq!(col(0), col(3), "a node sits one layer before its user");
        for i in 0..5 {
            for j in i + 1..5 {
                let (a, b) = (l.pos[i], l.pos[j]);
                assert!(a.0 != b.0 || (a.1 - b.1).abs() >= 10.0, "{i} and {j} overlap: {a:?} {b:?}");
            }
        }
    }
}
