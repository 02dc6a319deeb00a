use tinygrad::Tensor;
fn main() -> std::process::ExitCode {
    tinygrad::runtime::run_main(run)
}

fn run() -> tinygrad::Result<()> {
    tinygrad::runtime::check_env()?;
    let a = Tensor::from([1.0f32, -2.0, 3.0, -4.0]);
    let b = Tensor::from([0.5f32, 0.5, 0.5, 0.5]);
    let c = Tensor::from([2.0f32, 2.0, -1.0, 1.0]);
    println!("{:?}", ((&a + &b) * &c).relu().to_vec::<f32>()?);
    let m = Tensor::from([[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]]);
    println!("{:?}", m.sum(1).to_vec::<f32>()?);
    println!("{:?}", (m.sum_keepdim(1) * 2.0 + 1.0).to_vec::<f32>()?);
    println!("{:?}", m.softmax(1).to_vec::<f32>()?);
    println!("{:?}", m.permute([1, 0]).to_vec::<f32>()?);
    println!("{:?}", m.pad(&[(1, 0), (0, 2)]).to_vec::<f32>()?);
    println!("{:?}", Tensor::arange(0.0, 5.0, 1.0).to_vec::<i32>()?);
    Ok(())
}
