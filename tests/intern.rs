//! Hash-consing: equal graphs are the same nodes, and nodes leave the interner when dropped (one test in this
//! binary, so no other test's nodes are alive while it counts).

use tinygrad::uop::{interned_count, UOp};

fn graph(n: usize) -> UOp {
    let x = UOp::variable("x", 0, 1000);
    let mut nodes = vec![x.clone()];
    while nodes.len() < n {
        let i = nodes.len();
        let (a, b) = (&nodes[(i * 7919 + 13) % i], &nodes[(i * 104_729 + 7) % i]);
        nodes.push(if i % 3 == 0 {
            a + b * (i as i64)
        } else if i % 3 == 1 {
            a * (i as i64)
        } else {
            a / 7 + b
        });
    }
    UOp::sink(nodes)
}

#[test]
fn interning_shares_and_frees_nodes() {
    assert_eq!(interned_count(), 0);
    let (g1, g2) = (graph(1000), graph(1000));
    assert_eq!(g1, g2, "the same graph built twice is the same node");
    assert!(g1.toposort().len() >= 1000);
    drop((g1, g2));
    assert_eq!(interned_count(), 0);

    // a million nodes, as one deep chain, dropped at once: no stack overflow, nothing left behind
    let x = UOp::variable("x", 0, 10);
    let mut chain = x.clone();
    for i in 0..500_000i64 {
        chain = &chain + &x.const_like(i);
    }
    assert!(interned_count() >= 1_000_000);
    drop((chain, x));
    assert_eq!(interned_count(), 0);

    // concurrent building of the same nodes gives one node
    let roots: Vec<UOp> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..4).map(|_| s.spawn(|| graph(2000))).collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(roots.windows(2).all(|w| w[0] == w[1]));
    drop(roots);
    assert_eq!(interned_count(), 0);
}
