//! Known simplifications of the symbolic rules: each case's result must be the node its simplified expected
//! form is (hash-consing makes that pointer equality).

use tinygrad::dtype::{dtypes, ConstValue};
use tinygrad::uop::{exec_alu, Ops, UOp};

fn vars() -> (UOp, UOp, UOp, UOp) {
    (UOp::variable("x", 0, 100), UOp::variable("y", 0, 3), UOp::variable("z", -10, 10), UOp::variable("w", 0, 7))
}

#[track_caller]
fn check(expr: UOp, want: UOp) {
    let (got, want_s) = (expr.simplify(), want.simplify());
    assert_eq!(got, want_s, "{expr} simplified to {got}, want {want_s}");
}

#[track_caller]
fn check_render(expr: UOp, want: &str) {
    assert_eq!(expr.simplify().render(), want, "simplifying {expr}");
}

#[test]
fn div_mod_folding() {
    let (x, y, z, w) = vars();
    check((&x * 4 + &y) / 4, x.clone()); // (x*4+y)//4 -> x + y//4 -> x, for 0 <= y < 4
    check((&x * 4 + &y) % 4, y.clone()); // (x*4+y)%4 -> y
    check((&x + 3) % 3, &x % 3); // (x+3)%3 -> x%3
    check((&x / 2) * 2 + &x % 2, x.clone()); // (x//2)*2 + x%2 -> x
    check((&x / 16) * 16 + &w * 640 + &x % 16, &x + &w * 640); // (x//16)*16 + y + x%16 -> x + y (a tile's row index)
    check((&x % 6) % 6, &x % 6); // (x%6)%6 -> x%6
    check((&x / 2) / 3, &x / 6); // (x//2)//3 -> x//6
    check((&x % 12) / 4, (&x / 4) % 3); // (x%12)//4 -> (x//4)%3
    check((&x % 12) % 4, &x % 4); // (x%12)%4 -> x%4
    check(&y / 4, x.const_like(0)); // y//4 -> 0 by bounds
    check(&y % 4, y.clone()); // y%4 -> y by bounds
    check((&x * 6 + 4) / 2, &x * 3 + 2); // (6x+4)//2 -> 3x+2
    check((&x * 6 + 4) % 2, x.const_like(0)); // (6x+4)%2 -> 0
    check((&x + 5) / 5, &x / 5 + 1); // (x+5)//5 -> x//5 + 1
    check((&x * 4 + &w * 2 + 1) % 2, x.const_like(1)); // odd%2 -> 1
    check((&x * 8 + &w) / 8, x.clone()); // nested: w < 8
    check(((&x * 8 + &w) / 4) % 2, &w / 4); // the w//4 bit of 8x+w
    check((&z + 16) % 4, &z % 4); // constant multiple of the divisor drops
    check(&x / 1, x.clone()); // x//1 -> x
}

#[test]
fn identities_and_terms() {
    let (x, y, z, _) = vars();
    check(&x * x.const_like(0), x.const_like(0)); // x*0 -> 0
    check(&x + 0, x.clone()); // x+0 -> x
    check(&x * 1, x.clone()); // x*1 -> x
    check(&x + &x, &x * 2); // x+x -> x*2
    check(&x * 3 + &x * 5, &x * 8); // x*3 + x*5 -> x*8
    check(&x - &x, x.const_like(0)); // x-x -> 0
    check((&x + 2) + 3, &x + 5); // (x+2)+3 -> x+5
    check((&x * 2) * 3, &x * 6); // (x*2)*3 -> x*6
    check(((&x + 1) + &y) + 2, (&x + &y) + 3); // constants gather at the end
    check((&x ^ &y) ^ &y, x.clone()); // (x^y)^y -> x
    check(-(&x + 3), -&x - 3); // -(x+3) -> -x + -3
    check(x.maximum(&y - 10), x.clone()); // max by bounds
    check(z.maximum(&z), z.clone()); // max(x,x) -> x
    check(x.const_like(3) + 4, x.const_like(7)); // constant folding
    check(x.alu(Ops::POW, &[&x.const_like(3)]), &(&x * &x) * &x); // x**3 -> x*x*x
    check(x.alu(Ops::POW, &[&x.const_like(4)]), {
        let x2 = &x * &x;
        &x2 * &x2
    }); // x**4 -> (x*x)*(x*x)
    check(x.alu(Ops::POW, &[&x.const_like(0)]), x.const_like(1)); // x**0 -> 1
}

#[test]
fn comparisons() {
    let (x, y, z, _) = vars();
    let f = UOp::const_(dtypes::BOOL, false);
    let t = UOp::const_(dtypes::BOOL, true);
    check(x.cmplt(&x), f.clone()); // x<x -> false
    check(x.cmpne(&x), f.clone()); // x!=x -> false
    check(x.cmplt(101), t.clone()); // by bounds
    check(x.cmplt(0), f.clone()); // by bounds
    check((&z * -1).cmplt(&y * -1), y.cmplt(&z)); // -z < -y -> y < z
    check((&x * 2).cmplt(7), x.cmplt(4)); // 2x < 7 -> x < 4
    check((&x / 4).cmplt(3), x.cmplt(12)); // x//4 < 3 -> x < 12
    check((&x + 3).cmplt(10), x.cmplt(7)); // x+3 < 10 -> x < 7
    let b = x.cmplt(&y);
    check(b.logical_not().logical_not(), b.clone()); // !!b -> b
    check(b.where_(&x, &x), x.clone()); // c?x:x -> x
    check(t.where_(&x, &y), x.clone()); // true?x:y -> x
    check(b.logical_not().where_(&x, &y), b.where_(&y, &x)); // !c?x:y -> c?y:x
    check(&b & &t, b.clone()); // b&true -> b
    check(&b | &t, t.clone()); // b|true -> true
}

#[test]
fn constant_folding_has_c_semantics() {
    let i32max = UOp::const_(dtypes::INT32, i32::MAX);
    check(&i32max + 1, UOp::const_(dtypes::INT32, i32::MIN)); // wraps
    check(UOp::const_(dtypes::INT32, -7).cdiv(2), UOp::const_(dtypes::INT32, -3)); // truncates
    check(UOp::const_(dtypes::INT32, -7).cmod(2), UOp::const_(dtypes::INT32, -1));
    check(UOp::const_(dtypes::WEAKINT, -7) / 2, UOp::const_(dtypes::WEAKINT, -4)); // floors
    check(UOp::const_(dtypes::UINT8, 200) * 2, UOp::const_(dtypes::UINT8, 144));
    check(UOp::const_(dtypes::FLOAT32, 1.0).unary(Ops::RECIPROCAL) * 3.0, UOp::const_(dtypes::FLOAT32, 3.0));
    check(UOp::const_(dtypes::FLOAT32, 16777216.0) + 1.0, UOp::const_(dtypes::FLOAT32, 16777216.0)); // f32 rounding
    check(UOp::const_(dtypes::INT32, 300).cast(dtypes::UINT8), UOp::const_(dtypes::UINT8, 44));
    check(UOp::const_(dtypes::FLOAT32, 1.0).bitcast(dtypes::INT32), UOp::const_(dtypes::INT32, 0x3f80_0000));
    check(UOp::const_(dtypes::FLOAT32, f64::INFINITY) * 0.0, UOp::const_(dtypes::FLOAT32, f64::NAN));
    assert_eq!(exec_alu(Ops::SHL, dtypes::INT16, &[ConstValue::Int(1), ConstValue::Int(15)]), ConstValue::Int(-32768));
}

#[test]
fn renders() {
    let (x, y, _, _) = vars();
    check_render((&x * 4 + &y) / 4, "x");
    check_render(&x * 3 + &x * 5, "(x*8)");
    check_render((&x + 2) + 3, "(x+5)");
}

#[test]
fn a_gated_address_folds_its_divisions_given_the_gate() {
    use tinygrad::dtype::AddrSpace;
    use tinygrad::uop::Arg;
    // col2im: output column i reads window k at (i + 24k) % 25, valid where that is < 20 (and i + 24k < 125)
    let (i, k) = (UOp::variable("i", 0, 23), UOp::variable("k", 0, 5));
    let x = &i + &(&k * 24);
    let gate = &x.cmplt(125) & &(&x % 25).cmplt(20);
    let buf = UOp::new(Ops::DEFINE_GLOBAL, dtypes::FLOAT32.ptr(2500, AddrSpace::Global), [], Arg::Int(0));
    let addr = &(&x % 25) * 100 + &(&(&x / 25) % 5) * 5;
    let got = UOp::new(Ops::INDEX, buf.dtype, [buf.clone(), addr.clone(), gate.clone()], Arg::None).simplify();
    let uses_x = |u: &UOp| u.toposort().iter().any(|d| matches!(d.op, Ops::FLOORMOD | Ops::FLOORDIV) && d.src[0].op == Ops::ADD);
    assert!(uses_x(&addr) && !uses_x(&got.src[1]), "{} still divides i + 24k", got.src[1]);
    let at = |u: &UOp, a: i64, b: i64| {
        let map = [(i.clone(), i.const_like(a)), (k.clone(), k.const_like(b))].into_iter().collect();
        u.substitute(&map).simplify().const_value().unwrap()
    };
    for (a, b) in (0..24).flat_map(|a| (0..6).map(move |b| (a, b))) {
        assert_eq!(at(&got.src[2], a, b), at(&gate, a, b), "gate at i={a} k={b}");
        if at(&gate, a, b) == ConstValue::Bool(true) {
            assert_eq!(at(&got.src[1], a, b), at(&addr, a, b), "address at i={a} k={b}");
        }
    }
}
