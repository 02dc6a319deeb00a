//! `#[derive(Module)]` state dicts, `load_state_dict` errors, and TinyJit capture and replay (with assigns).

use std::collections::BTreeMap;
use tinygrad::helpers::{Context, TRAINING};
use tinygrad::nn::{BatchNorm, Linear, Module};
use tinygrad::{Error, Tensor, TinyJit};

#[derive(Module)]
struct Net {
    l1: Linear,
    layers: Vec<Linear>,
    extra: Option<Tensor>,
    none: Option<Tensor>,
    #[module(skip)]
    _name: &'static str,
    scale: f64,
}

fn net() -> Net {
    Net {
        l1: Linear::new(3, 4, true),
        layers: vec![Linear::new(4, 4, false), Linear::new(4, 2, true)],
        extra: Some(Tensor::zeros([2])),
        none: None,
        _name: "n",
        scale: 1.0,
    }
}

#[test]
fn state_dict_names_follow_fields() {
    let n = net();
    let keys: Vec<String> = n.get_state_dict().into_keys().collect();
    assert_eq!(keys, ["extra", "l1.bias", "l1.weight", "layers.0.weight", "layers.1.bias", "layers.1.weight"]);
    assert_eq!(n.get_parameters().len(), 6);
    assert_eq!(n.scale, 1.0);
}

#[test]
fn load_state_dict_copies_and_reports_bad_keys() {
    let (a, b) = (net(), net());
    a.load_state_dict(&b.get_state_dict(), true).unwrap();
    assert_eq!(a.l1.weight.to_vec::<f32>().unwrap(), b.l1.weight.to_vec::<f32>().unwrap());
    let mut sd = b.get_state_dict();
    sd.insert("l1.weight".into(), Tensor::zeros([3, 4]));
    let err = a.load_state_dict(&sd, true).expect_err("wrong shape");
    assert!(matches!(err, Error::StateDict(_)) && err.to_string().contains("l1.weight: model [4, 3], file [3, 4]"), "{err}");
    let mut sd = b.get_state_dict();
    sd.remove("extra");
    sd.insert("bogus".into(), Tensor::zeros([1]));
    let msg = a.load_state_dict(&sd, true).expect_err("strict").to_string();
    assert!(msg.contains("\"extra\"") && msg.contains("\"bogus\""), "{msg}");
    a.load_state_dict(&sd, false).unwrap();
    let _ = BTreeMap::<String, Tensor>::new();
}

#[test]
fn jit_replays_with_new_inputs_and_checks_them() {
    let w = Tensor::from([1.0f32, 2.0, 3.0]);
    w.realize().unwrap();
    let mut jit = TinyJit::new(|x: &[Tensor]| {
        let y = (&x[0] * &w).sum(..) + 1.0;
        y.realize()?;
        Ok(vec![y])
    });
    for k in 0..5 {
        let x = Tensor::from([k as f32, 1.0, -1.0]);
        let y = jit.call(&[x]).unwrap()[0].item::<f32>().unwrap();
        assert_eq!(y, k as f32 + 2.0 - 3.0 + 1.0, "call {k}");
    }
    let err = jit.call(&[Tensor::from([1.0f32, 2.0])]).expect_err("other shape");
    assert!(matches!(err, Error::Jit(_)), "{err}");
}

#[test]
fn jit_captures_assigns_like_batchnorm_running_stats() {
    let bn = BatchNorm::new(2, 1e-5, true, true, 0.1);
    let rm = bn.running_mean.clone().unwrap();
    let mut jit = TinyJit::new(|x: &[Tensor]| {
        let _t = Context::new(&[(&TRAINING, 1)]);
        let y = bn.forward(&x[0]).sum(..);
        Tensor::realize_all(&[&y, &rm])?;
        Ok(vec![y])
    });
    let mut seen = vec![rm.to_vec::<f32>().unwrap()];
    for k in 0..6 {
        // a batch with channel means (k+1, -(k+1))
        let v = (k + 1) as f32;
        let x = Tensor::from([[[v, v]], [[-v, -v]]]).reshape([1, 2, 2]).permute([0, 1, 2]);
        jit.call(&[x.contiguous()]).unwrap();
        let now = rm.to_vec::<f32>().unwrap();
        let want: Vec<f32> = seen.last().unwrap().iter().zip([v, -v]).map(|(m, b)| 0.9 * m + 0.1 * b).collect();
        assert!(now.iter().zip(&want).all(|(a, b)| (a - b).abs() < 1e-6), "call {k}: running mean {now:?}, want {want:?}");
        seen.push(now);
    }
}
