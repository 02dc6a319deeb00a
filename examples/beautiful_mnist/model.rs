//! tinygrad's beautiful_mnist model (examples/beautiful_mnist.py): two 5x5 and two 3x3 convolutions with ReLU,
//! BatchNorm and max-pooling, then a linear layer to 10 classes. Shared by the example and tests/mnist_train.rs.

use tinygrad::helpers::{Context, TRAINING};
use tinygrad::nn::{optim::Optimizer, BatchNorm, Conv2d, Linear, Module};
use tinygrad::tensor::{Conv2dOpts, Pool2dOpts, Reduction};
use tinygrad::{Result, Tensor};

/// The model: input uint8 or float `(N, 1, 28, 28)`, output logits `(N, 10)`.
#[derive(Module)]
pub struct Model {
    c1: Conv2d,
    c2: Conv2d,
    bn1: BatchNorm,
    c3: Conv2d,
    c4: Conv2d,
    bn2: BatchNorm,
    l: Linear,
}

impl Model {
    /// Fresh weights, initialized as tinygrad initializes these layers.
    pub fn new() -> Model {
        let conv = |i, o, k| Conv2d::new(i, o, &[k, k], Conv2dOpts::default(), true);
        let bn = |c| BatchNorm::new(c, 1e-5, true, true, 0.1);
        Model {
            c1: conv(1, 32, 5),
            c2: conv(32, 32, 5),
            bn1: bn(32),
            c3: conv(32, 64, 3),
            c4: conv(64, 64, 3),
            bn2: bn(64),
            l: Linear::new(576, 10, true),
        }
    }
    /// The logits of a batch.
    pub fn forward(&self, x: &Tensor) -> Tensor {
        let pool = |x: Tensor| x.max_pool2d(Pool2dOpts::default());
        let x = pool(self.bn1.forward(&self.c2.forward(&self.c1.forward(x).relu()).relu()));
        let x = pool(self.bn2.forward(&self.c4.forward(&self.c3.forward(&x).relu()).relu()));
        self.l.forward(&x.flatten(1))
    }
    /// One training step in training mode: the cross-entropy loss of batch `x` (N, 1, 28, 28) against labels `y`
    /// (N,), its backward pass and the optimizer's update, all realized in one schedule (tinygrad's `train_step`).
    ///
    /// # Errors
    /// If a kernel fails to compile or run.
    pub fn train_step(&self, opt: &Optimizer, x: &Tensor, y: &Tensor) -> Result<Tensor> {
        let _training = Context::new(&[(&TRAINING, 1)]);
        opt.zero_grad();
        let loss = self.forward(x).sparse_categorical_crossentropy(y, -1, 0.0, Reduction::Mean);
        loss.backward();
        let mut ts = vec![loss.clone()];
        ts.extend(opt.schedule_step());
        Tensor::realize_all(&ts.iter().collect::<Vec<_>>())?;
        Ok(loss)
    }
}
