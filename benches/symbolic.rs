//! graph_rewrite with the symbolic rules over a ~100k-node random index-expression graph, in nodes per second.
//! The generator is the one in bench/symbolic_rewrite.py (which times tinygrad 0.14 on the same graph); run
//! both and compare: `cargo bench --bench symbolic [-- --n N --reps R --seed S]`.

use std::time::Instant;
use tinygrad::uop::{graph_rewrite, symbolic::SYMBOLIC, UOp};

fn build(n: usize, seed: u64) -> UOp {
    let mut s = seed;
    let mut r = |m: u64| {
        s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (s >> 33) % m
    };
    let mut pool = vec![UOp::variable("a", 0, 15), UOp::variable("b", 0, 31), UOp::variable("c", -16, 63)];
    for _ in 0..n {
        let (p, q) = (pool[r(pool.len() as u64) as usize].clone(), pool[r(pool.len() as u64) as usize].clone());
        let (k, m, t) = (r(7) as i64 + 1, [4i64, 16, 64, 256][r(4) as usize], r(8));
        let e = match t {
            0 => &p + &q,
            1 => &p * k + &q,
            2 => (&p * k + &q) / k,
            3 => (&p + k) % k,
            4 => (&p / k) * k + &p % k,
            5 => (&p % m) / k,
            6 => (&p * m + &q % m) % m,
            _ => &p + (-k),
        };
        pool.push(e % 4096);
    }
    UOp::sink(pool[3..].to_vec())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str, default: u64| args.iter().position(|a| a == name).map_or(default, |i| args[i + 1].parse().unwrap());
    let (n, reps, seed) = (arg("--n", 30000) as usize, arg("--reps", 5) as usize, arg("--seed", 12345));
    let (mut times, mut n_in, mut n_out) = (Vec::new(), 0, 0);
    for _ in 0..reps {
        let sink = build(n, seed);
        n_in = sink.toposort().len();
        let t = Instant::now();
        let out = graph_rewrite(&sink, &SYMBOLIC, &mut (), "bench");
        times.push(t.elapsed().as_secs_f64());
        n_out = out.toposort().len();
    }
    times.sort_by(f64::total_cmp);
    let median = times[times.len() / 2];
    println!(
        "{{\"impl\": \"tinygrad-rs\", \"input_nodes\": {n_in}, \"output_nodes\": {n_out}, \"median_s\": {median:.6}, \"nodes_per_s\": {:.0}, \"reps\": {reps}}}",
        n_in as f64 / median
    );
}
