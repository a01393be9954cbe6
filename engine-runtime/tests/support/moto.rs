//! moto's S3 API server on 127.0.0.1, started per test binary.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// A running moto server; it stops when dropped or when the test binary exits.
pub struct Moto {
    pub endpoint: String,
    child: Child,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn required() -> bool {
    std::env::var("WEIR_REQUIRE_S3").is_ok_and(|v| v == "1")
}

/// The shared server, or `None` (with a message) when moto is not installed and S3 is not
/// required. With `WEIR_REQUIRE_S3=1`, a missing moto fails the test.
pub fn moto() -> Option<&'static str> {
    static MOTO: OnceLock<Result<Moto, String>> = OnceLock::new();
    match MOTO.get_or_init(start) {
        Ok(moto) => Some(moto.endpoint.as_str()),
        Err(why) if required() => panic!("WEIR_REQUIRE_S3=1 but moto is unavailable: {why}"),
        Err(why) => {
            eprintln!("SKIPPED: S3 test needs moto's server ({why}); `pip install 'moto[server]'`");
            None
        }
    }
}

/// Runs moto's threaded S3 server and stops it as soon as its parent (the test binary) is gone:
/// statics are never dropped, so the test binary cannot stop it itself.
const WATCHED_SERVER: &str = r#"
import os, sys, time
from moto.server import ThreadedMotoServer
parent = os.getppid()
server = ThreadedMotoServer(ip_address="127.0.0.1", port=int(sys.argv[1]), verbose=False)
server.start()
while os.getppid() == parent:
    time.sleep(0.2)
server.stop()
"#;

fn start() -> Result<Moto, String> {
    let probe = Command::new("python3")
        .args(["-c", "from moto.server import ThreadedMotoServer"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|e| format!("python3 not runnable: {e}"))?;
    if !probe.success() {
        return Err("python3 cannot import moto.server".into());
    }
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| format!("no free port: {e}"))?
        .port();
    let child = Command::new("python3")
        .args(["-c", WATCHED_SERVER, &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("could not start moto: {e}"))?;
    let moto = Moto {
        endpoint: format!("http://127.0.0.1:{port}"),
        child,
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if Instant::now() > deadline {
            return Err("moto did not listen within 30 s".into());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(moto)
}

/// Creates a bucket (object_store cannot) with a plain HTTP request to the local server.
pub fn create_bucket(endpoint: &str, bucket: &str) {
    let host = endpoint.trim_start_matches("http://");
    let mut stream = TcpStream::connect(host).unwrap();
    write!(
        stream,
        "PUT /{bucket} HTTP/1.1\r\nHost: {host}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    assert!(
        answer.starts_with("HTTP/1.1 200"),
        "bucket creation failed: {answer}"
    );
}
