//! `exchange: object-store`: the reference engine, run as a process, reads its inputs and checkpoint
//! where an `s3://` storage keeps them and writes its output there itself, with credentials from STS
//! scoped to the transaction; moto's S3 and STS on 127.0.0.1 stand in for the store.
use crate::common;
use crate::moto;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::workspace;
use serde_json::Value;

const ROLE: &str = "arn:aws:iam::123456789012:role/weir-engine";

/// The reference engine's binary, built once per test binary.
fn engine_binary() -> PathBuf {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match BUILT.get_or_init(|| common::built_binary("weir-engine")) {
        Ok(path) => path.clone(),
        Err(why) => panic!("{why}"),
    }
}

/// A bucket of its own per test.
fn bucket(endpoint: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    let name = format!(
        "weir-exchange-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    );
    moto::create_bucket(endpoint, &name);
    name
}

/// `weir --workspace DIR` against moto, with the coordinator's own (unscoped) credentials.
fn weir(endpoint: &str, ws: &Path) -> assert_cmd::Command {
    let mut c = common::weir(ws);
    c.env("AWS_ENDPOINT", endpoint)
        .env("AWS_ALLOW_HTTP", "true")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "coordinator-key")
        .env("AWS_SECRET_ACCESS_KEY", "coordinator-secret")
        .env_remove("AWS_SESSION_TOKEN")
        .env_remove("AWS_ENDPOINT_URL_STS");
    c
}

fn ok(endpoint: &str, ws: &Path, args: &[&str]) -> String {
    let out = weir(endpoint, ws).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "weir {args:?} failed ({:?})\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Writes `weir.yaml`: storage in `bucket`, the reference engine binary with `exchange: object-store`.
fn configure(ws: &Path, bucket: &str, extra: &str) {
    std::fs::write(
        ws.join("weir.yaml"),
        format!(
            "storage: s3://{bucket}/ws\nengines:\n  datafusion:\n    binary: {}\n    exchange: object-store\n{extra}",
            engine_binary().display()
        ),
    )
    .unwrap();
}

/// The object keys under `prefix` in `bucket` (S3 ListObjectsV2 over plain HTTP, as moto answers it).
fn keys(endpoint: &str, bucket: &str, prefix: &str) -> Vec<String> {
    let listing = http_get(endpoint, &format!("/{bucket}?list-type=2&prefix={prefix}"));
    listing
        .split("<Key>")
        .skip(1)
        .filter_map(|rest| rest.split_once("</Key>").map(|(k, _)| k.to_owned()))
        .collect()
}

fn http_get(endpoint: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let host = endpoint.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(host).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
}

/// The session policies STS granted, from moto's own record of its state.
fn session_policies(endpoint: &str) -> Vec<Value> {
    let answer = http_get(endpoint, "/moto-api/data.json");
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    // moto may answer chunked: the JSON object is what lies between the first `{` and the last `}`.
    let (start, end) = (body.find('{').unwrap(), body.rfind('}').unwrap());
    let data: Value = serde_json::from_str(&body[start..=end]).unwrap();
    data["sts"]["AssumedRole"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter(|r| r["role_arn"] == ROLE)
        .filter_map(|r| {
            r["policy"]
                .as_str()
                .and_then(|p| serde_json::from_str(p).ok())
        })
        .collect()
}

#[test]
fn a_pull_through_an_engine_that_reads_and_writes_s3_gives_the_embedded_engines_records() {
    let Some(endpoint) = moto::moto() else {
        return;
    };
    let bucket = bucket(endpoint);
    let ws = workspace();
    configure(ws.path(), &bucket, &format!("    assume_role: {ROLE}\n"));
    let before = session_policies(endpoint).len();
    ok(
        endpoint,
        ws.path(),
        &["--engine", "process", "pull", "--all", "--quiet"],
    );

    let embedded = workspace();
    common::ok(embedded.path(), &["pull", "--all", "--quiet"]);

    // A fourth day arrives: every derivative runs a second transaction, the window aggregation resuming
    // from the checkpoint its first one wrote to the store.
    for dir in [ws.path(), embedded.path()] {
        let day3 = std::fs::read_to_string(dir.join("data/readings/2024-06-03.csv")).unwrap();
        std::fs::write(
            dir.join("data/readings/2024-06-04.csv"),
            day3.replace("2024-06-03", "2024-06-04"),
        )
        .unwrap();
    }
    ok(
        endpoint,
        ws.path(),
        &["--engine", "process", "pull", "--all", "--quiet"],
    );
    common::ok(embedded.path(), &["pull", "--all", "--quiet"]);
    assert!(
        keys(endpoint, &bucket, "ws/datasets/readings.daily/checkpoints/").len() >= 2,
        "the window aggregation wrote a checkpoint per transaction"
    );
    for dataset in [
        "stations",
        "readings",
        "readings.clean",
        "readings.daily",
        "readings.hot-days",
    ] {
        let got = common::comparable_records(
            &ok(
                endpoint,
                ws.path(),
                &["--format", "json", "tail", dataset, "-n", "1000000"],
            ),
            dataset,
        );
        assert!(!got.is_empty(), "{dataset} has no records");
        let want = common::comparable_records(
            &common::ok(
                embedded.path(),
                &["--format", "json", "tail", dataset, "-n", "1000000"],
            ),
            dataset,
        );
        assert_eq!(
            got, want,
            "{dataset}: the object-store engine and the embedded one disagree"
        );
    }
    // Verification replays the window aggregation's two steps through the same engine and exchange (the
    // second from the checkpoint in the store) and hashes every slice.
    ok(
        endpoint,
        ws.path(),
        &["--engine", "process", "verify", "readings.daily"],
    );

    // One AssumeRole per transaction (three derivatives, two transactions each, then verify's replays),
    // each granting reads of objects of the storage and writes under one `.exchange/` prefix only.
    let policies = &session_policies(endpoint)[before..];
    assert!(
        policies.len() >= 6,
        "{} sessions: {policies:?}",
        policies.len()
    );
    assert!(
        policies.iter().any(|p| p
            .to_string()
            .contains("/ws/datasets/readings.daily/checkpoints/")),
        "no session was granted the previous checkpoint: {policies:?}"
    );
    for policy in policies {
        let statements = policy["Statement"].as_array().unwrap();
        let resources = |action: &str| -> Vec<String> {
            statements
                .iter()
                .filter(|s| s["Action"].to_string().contains(action))
                .flat_map(|s| s["Resource"].as_array().cloned().unwrap_or_default())
                .map(|r| r.as_str().unwrap().to_owned())
                .collect()
        };
        let writes = resources("s3:PutObject");
        assert_eq!(writes.len(), 1, "{policy}");
        assert!(
            writes[0].starts_with(&format!("arn:aws:s3:::{bucket}/ws/.exchange/"))
                && writes[0].ends_with("/*"),
            "{policy}"
        );
        let reads = resources("s3:GetObject");
        assert!(!reads.is_empty(), "{policy}");
        for read in reads {
            assert!(
                read.starts_with(&format!("arn:aws:s3:::{bucket}/ws/")) && !read.ends_with("/*"),
                "a read that is not one object of the storage: {read}"
            );
        }
    }
    // Nothing is left where the engines wrote.
    assert_eq!(
        keys(endpoint, &bucket, "ws/.exchange/"),
        Vec::<String>::new()
    );
}

#[test]
fn an_object_store_engine_on_local_storage_is_refused_with_what_to_configure() {
    let Some(_) = moto::moto() else {
        return;
    };
    let ws = workspace();
    std::fs::write(
        ws.path().join("weir.yaml"),
        format!(
            "engines:\n  datafusion:\n    binary: {}\n    exchange: object-store\n",
            engine_binary().display()
        ),
    )
    .unwrap();
    let out = common::weir(ws.path())
        .args(["--engine", "process", "pull", "--all", "--quiet"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("exchange: object-store") && stderr.contains("storage: s3://"),
        "{stderr}"
    );
    // The roots were ingested; no derivative committed anything.
    let (_, records) = common::head_and_records(ws.path(), "readings.clean");
    assert_eq!(records, 0);
}

#[test]
fn an_engine_in_a_container_cannot_use_the_object_store_exchange() {
    let ws = workspace();
    std::fs::write(
        ws.path().join("weir.yaml"),
        "engines:\n  datafusion:\n    image: weir/reference-engine@sha256:0000000000000000000000000000000000000000000000000000000000000000\n    exchange: object-store\n",
    )
    .unwrap();
    let out = common::weir(ws.path())
        .args(["--engine", "docker", "pull", "--all", "--quiet"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("have no network"), "{stderr}");
}
