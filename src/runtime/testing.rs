//! What the devices' tests share. In: a device's allocator, and a program of its `axpb` kernel (`out[i] = a[i] * 2
//! + b` over buffers `out`, `a` and value `b`, one work item per element). Out: panics where they go wrong.

use super::{Allocator, Program, RawBuffer};

/// `b` as native-endian f32s.
pub fn f32s(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4).map(|c| f32::from_ne_bytes(c.try_into().unwrap())).collect()
}

/// Bytes round-trip through a buffer, a freed buffer is reused for its size, and an empty buffer allocates.
pub fn copy_round_trip(a: &dyn Allocator) {
    let src: Vec<u8> = (0..1000).map(|i| (i * 7 % 256) as u8).collect();
    let b = a.alloc(1000).unwrap();
    a.copyin(&b, &src).unwrap();
    let mut dst = vec![0u8; 1000];
    a.copyout(&mut dst, &b).unwrap();
    assert_eq!(dst, src);
    let p = b.as_ptr();
    a.free(b);
    assert_eq!(a.alloc(1000).unwrap().as_ptr(), p, "same size reuses the freed buffer");
    a.alloc(0).unwrap(); // an empty buffer is a real allocation (1 byte on a GPU)
}

/// `prog` (axpb) launched as 4 workgroups of 2 computes its 8 elements, and launches from several threads at once
/// each get their own arguments.
pub fn launch_axpb(a: &dyn Allocator, prog: &dyn Program) {
    let input: Vec<f32> = (0..8).map(|i| i as f32 * 0.5 - 1.0).collect();
    let (out, inp) = (a.alloc(32).unwrap(), a.alloc(32).unwrap());
    a.copyin(&inp, &input.iter().flat_map(|x| x.to_ne_bytes()).collect::<Vec<_>>()).unwrap();
    prog.launch(&[out.as_ptr(), inp.as_ptr()], &[7], [4, 1, 1], [2, 1, 1]).unwrap();
    let mut bytes = vec![0u8; 32];
    a.copyout(&mut bytes, &out).unwrap();
    assert_eq!(f32s(&bytes), [5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0]);
    let outs: Vec<RawBuffer> = (0..4).map(|_| a.alloc(32).unwrap()).collect();
    std::thread::scope(|s| {
        for (b, o) in outs.iter().enumerate() {
            let inp = &inp;
            s.spawn(move || {
                for _ in 0..20 {
                    prog.launch(&[o.as_ptr(), inp.as_ptr()], &[b as i32], [4, 1, 1], [2, 1, 1]).unwrap();
                }
            });
        }
    });
    for (b, o) in outs.iter().enumerate() {
        a.copyout(&mut bytes, o).unwrap();
        assert_eq!(f32s(&bytes), input.iter().map(|x| x * 2.0 + b as f32).collect::<Vec<_>>(), "thread {b}");
    }
}
