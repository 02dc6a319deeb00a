//! MNIST: tinygrad's shapes and dtypes from the shared files, the download path against a local HTTP server
//! serving those files, and errors for truncated and malformed files.

use std::io::{Read, Write};
use std::path::PathBuf;
use tinygrad::dtype::dtypes;
use tinygrad::nn::datasets::mnist_from;
use tinygrad::Error;

fn shared() -> PathBuf {
    std::env::var_os("TINYGRAD_DATA_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/datasets").into())
        .join("mnist")
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tinygrad-mnist-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn shapes_dtypes_and_first_labels() {
    let (xt, yt, xv, yv) = mnist_from(&shared(), "http://127.0.0.1:9/").unwrap();
    assert_eq!(
        (xt.shape(), yt.shape(), xv.shape(), yv.shape()),
        (vec![60000, 1, 28, 28], vec![60000], vec![10000, 1, 28, 28], vec![10000])
    );
    assert!([&xt, &yt, &xv, &yv].iter().all(|t| t.dtype() == dtypes::UINT8));
    // the standard first labels of the training and test sets
    assert_eq!(yt.to_vec::<u8>().unwrap()[..8], [5, 0, 4, 1, 9, 2, 1, 3]);
    assert_eq!(yv.to_vec::<u8>().unwrap()[..8], [7, 2, 1, 0, 4, 1, 4, 9]);
    assert_eq!(xt.sum(..).item::<u32>().unwrap(), 1_567_298_545);
}

/// Serves the files of `dir` over HTTP/1.0 on 127.0.0.1 for `n` requests; returns the base URL.
fn serve(dir: PathBuf, n: usize) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming().take(n) {
            let mut s = stream.unwrap();
            let mut req = [0u8; 1024];
            let len = s.read(&mut req).unwrap();
            let path = String::from_utf8_lossy(&req[..len]).split_whitespace().nth(1).unwrap_or("/").trim_start_matches('/').to_string();
            match std::fs::read(dir.join(&path)) {
                Ok(body) => {
                    write!(s, "HTTP/1.0 200 OK\r\nContent-Length: {}\r\n\r\n", body.len()).unwrap();
                    s.write_all(&body).unwrap();
                }
                Err(_) => write!(s, "HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\n\r\n").unwrap(),
            }
        }
    });
    url
}

#[test]
fn downloads_missing_files_and_checks_them() {
    let dir = tmp("download");
    let url = serve(shared(), 4);
    let (xt, _, _, yv) = mnist_from(&dir, &url).unwrap();
    assert_eq!((xt.shape()[0], yv.shape()[0]), (60000, 10000));
    assert!(dir.join("train-images-idx3-ubyte.gz").exists() && !dir.join("train-images-idx3-ubyte.part").exists());
    // a missing file with no server is a Download error that says where to put the file
    let empty = tmp("offline");
    let err = mnist_from(&empty, "http://127.0.0.1:9/").expect_err("nothing to download from");
    assert!(matches!(err, Error::Download { .. }) && err.to_string().contains("copy the file"), "{err}");
}

#[test]
fn truncated_and_malformed_files_are_errors() {
    let dir = tmp("bad");
    for f in std::fs::read_dir(shared()).unwrap() {
        let f = f.unwrap().path();
        if f.extension().is_some_and(|e| e == "gz") {
            std::fs::copy(&f, dir.join(f.file_name().unwrap())).unwrap();
        }
    }
    let labels = dir.join("train-labels-idx1-ubyte.gz");
    let bytes = std::fs::read(&labels).unwrap();
    std::fs::write(&labels, &bytes[..bytes.len() / 2]).unwrap();
    let err = mnist_from(&dir, "http://127.0.0.1:9/").expect_err("truncated");
    assert!(matches!(err, Error::Format { .. }) && err.to_string().contains("train-labels-idx1-ubyte.gz"), "{err}");
    // a well-formed gzip of something that is not IDX
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(b"not an idx file at all").unwrap();
    std::fs::write(&labels, gz.finish().unwrap()).unwrap();
    let err = mnist_from(&dir, "http://127.0.0.1:9/").expect_err("malformed");
    assert!(err.to_string().contains("not an IDX file"), "{err}");
}
