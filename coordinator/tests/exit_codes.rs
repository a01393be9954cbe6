//! Every failure gets its documented exit code and a hint that helps for that error: a table of failures,
//! each driven through the `weir` binary, with the code and what the hint must (and must not) say.
use crate::common;
use crate::moto;

use std::path::Path;

use common::*;
use serde_json::Value;

/// `weir --format json ARGS`: exit code and the document on stdout.
fn run(dir: &Path, args: &[&str]) -> (i32, Value) {
    let out = weir(dir)
        .args(["--format", "json"])
        .args(args)
        .output()
        .unwrap();
    let doc = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "weir {args:?}: stdout is not one JSON document ({e}):\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap(), doc)
}

/// One row of the table: what the hint must contain, and what it must not.
struct Expect<'a> {
    code: i32,
    error_has: &'a [&'a str],
    hint_has: &'a [&'a str],
    hint_lacks: &'a [&'a str],
}

fn check(what: &str, dir: &Path, args: &[&str], e: &Expect<'_>) -> Value {
    let (code, doc) = run(dir, args);
    assert_eq!(code, e.code, "{what}: {doc:#}");
    assert_eq!(doc["exitCode"], e.code, "{what}: {doc:#}");
    let error = format!(
        "{} {}",
        doc["error"].as_str().unwrap_or_default(),
        doc["causes"]
    );
    for s in e.error_has {
        assert!(error.contains(s), "{what}: the error lacks {s:?}: {doc:#}");
    }
    let hint = doc["hint"].as_str().unwrap_or_default();
    for s in e.hint_has {
        assert!(hint.contains(s), "{what}: the hint lacks {s:?}: {doc:#}");
    }
    for s in e.hint_lacks {
        assert!(!hint.contains(s), "{what}: the hint says {s:?}: {doc:#}");
    }
    doc
}

fn add_day(dir: &Path, day: u32) {
    let day3 = std::fs::read_to_string(dir.join("data/readings/2024-06-03.csv")).unwrap();
    std::fs::write(
        dir.join(format!("data/readings/2024-06-{day:02}.csv")),
        day3.replace("2024-06-03", &format!("2024-06-{day:02}")),
    )
    .unwrap();
}

/// The data files of `dataset`, as stored.
fn data_files(dir: &Path, dataset: &str) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> =
        std::fs::read_dir(dir.join(".weir/datasets").join(dataset).join("data"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
    files.sort();
    files
}

const NO_RERUN: &[&str] = &["rerun `weir pull`"];

#[test]
fn a_datasets_own_slice_missing_or_truncated_is_a_storage_error_whose_hint_is_not_to_rerun() {
    for (dataset, damage) in [
        ("readings.clean", "truncated"),
        ("readings.clean", "missing"),
        ("readings", "truncated"),
        ("readings", "missing"),
    ] {
        let ws = workspace();
        let d = ws.path();
        ok(d, &["pull", "--all", "--quiet"]);
        for file in data_files(d, dataset) {
            match damage {
                "truncated" => {
                    let bytes = std::fs::read(&file).unwrap();
                    std::fs::write(&file, &bytes[..bytes.len() / 2]).unwrap();
                }
                _ => std::fs::remove_file(&file).unwrap(),
            }
        }
        add_day(d, 4);
        let before = head_and_records(d, dataset);
        let what = format!("{dataset} {damage}");
        let folder = format!(".weir/datasets/{dataset}/data/");
        let doc = check(
            &what,
            d,
            &["pull", "--all", "--quiet"],
            &Expect {
                code: 8,
                error_has: &[dataset, &folder],
                hint_has: &["restore"],
                hint_lacks: NO_RERUN,
            },
        );
        let state = doc["datasets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["dataset"] == dataset)
            .unwrap()
            .clone();
        assert_eq!(state["exitCode"], 8, "{what}: {doc:#}");
        let hint = state["hint"].as_str().unwrap();
        assert!(!hint.contains("rerun `weir pull`"), "{what}: {doc:#}");
        assert_eq!(head_and_records(d, dataset), before, "{what}");
        // verify names the file too, and its hint is to restore it.
        check(
            &what,
            d,
            &["verify", dataset],
            &Expect {
                code: 8,
                error_has: &[dataset],
                hint_has: &["restore"],
                hint_lacks: NO_RERUN,
            },
        );
    }
}

/// A root dataset reading `file` (a Parquet file written by pyarrow) from `data/`.
fn parquet_root(dir: &Path, name: &str, file: &str) {
    std::fs::write(
        dir.join(format!("datasets/{name}.yaml")),
        format!(
            "kind: DatasetSnapshot\nversion: 1\ncontent:\n  name: {name}\n  kind: Root\n  metadata:\n    - kind: SetPollingSource\n      fetch: {{ kind: Url, url: data/{file} }}\n      read: {{ kind: Parquet }}\n      merge: {{ kind: Append }}\n"
        ),
    )
    .unwrap();
}

#[test]
fn parquet_map_and_duration_columns_are_refused_as_input_data_naming_file_and_column() {
    let ws = workspace();
    let d = ws.path();
    let script = r#"
import sys, datetime, pyarrow as pa, pyarrow.parquet as pq
out = sys.argv[1]
pq.write_table(pa.table({"id": [1, 2], "tags": pa.array([[("a", 1)], [("b", 2)]], type=pa.map_(pa.string(), pa.int64()))}), out + "/maps.parquet")
pq.write_table(pa.table({"id": [1, 2], "took": pa.array([datetime.timedelta(seconds=1), datetime.timedelta(seconds=2)], type=pa.duration("s"))}), out + "/durations.parquet")
"#;
    let written = std::process::Command::new("python3")
        .args(["-c", script])
        .arg(d.join("data"))
        .status();
    if !written.is_ok_and(|s| s.success()) {
        if std::env::var("WEIR_REQUIRE_PYARROW").is_ok_and(|v| v == "1") {
            panic!("WEIR_REQUIRE_PYARROW=1 but pyarrow cannot write the files");
        }
        eprintln!("SKIPPED: needs python3 with pyarrow to write Map and Duration columns");
        return;
    }
    parquet_root(d, "maps", "maps.parquet");
    parquet_root(d, "durations", "durations.parquet");
    for (dataset, column) in [("maps", "tags"), ("durations", "took")] {
        check(
            dataset,
            d,
            &["pull", dataset, "--quiet"],
            &Expect {
                code: 10,
                error_has: &[".parquet", column, "logical hash"],
                hint_has: &["fix the file"],
                hint_lacks: &[],
            },
        );
        assert!(
            head_and_records(d, dataset).0.is_null(),
            "{dataset}: nothing committed"
        );
    }
}

#[test]
fn reset_to_a_block_that_is_not_there_is_not_found_and_an_ambiguous_one_a_usage_error() {
    let ws = workspace();
    let d = ws.path();
    ok(d, &["pull", "--all", "--quiet"]);
    let log: Value =
        serde_json::from_str(&ok(d, &["--format", "json", "log", "readings"])).unwrap();
    let head = log["blocks"][0]["hash"].as_str().unwrap().to_string();
    let not_found = Expect {
        code: 4,
        error_has: &["no block of its chain"],
        hint_has: &["weir log"],
        hint_lacks: &[],
    };
    check(
        "zzzz",
        d,
        &["reset", "readings", "--to", "zzzz"],
        &not_found,
    );
    check("#99", d, &["reset", "readings", "--to", "#99"], &not_found);
    check(
        "a long hash of no block",
        d,
        &[
            "reset",
            "readings",
            "--to",
            "f1620000000000000000000000000000",
        ],
        &not_found,
    );
    let usage = Expect {
        code: 2,
        error_has: &[],
        hint_has: &["weir log"],
        hint_lacks: &[],
    };
    check("#x", d, &["reset", "readings", "--to", "#x"], &usage);
    let short = &head[head.len() - 3..];
    check(
        "3 characters",
        d,
        &["reset", "readings", "--to", short],
        &usage,
    );
    // Nothing moved.
    assert_eq!(head_and_records(d, "readings").0, head.as_str());
    // The last 8 characters name the head: a reset to it changes nothing.
    let (code, doc) = run(d, &["reset", "readings", "--to", &head[head.len() - 8..]]);
    assert_eq!(code, 0, "{doc:#}");
}

#[test]
fn hints_are_those_of_their_error() {
    let ws = workspace();
    let d = ws.path();
    check(
        "a workspace that is not there",
        &d.join("nonexistent"),
        &["list"],
        &Expect {
            code: 3,
            error_has: &["not a weir workspace"],
            hint_has: &["weir init", "--workspace"],
            hint_lacks: &["manifest at the position"],
        },
    );
    check(
        "an unknown dataset",
        d,
        &["tail", "nope"],
        &Expect {
            code: 4,
            error_has: &["nope"],
            hint_has: &["weir list"],
            hint_lacks: &[],
        },
    );
    ok(d, &["pull", "--all", "--quiet"]);
    check(
        "an offset past the end",
        d,
        &["provenance", "readings", "--offset", "100000"],
        &Expect {
            code: 4,
            error_has: &["100000"],
            hint_has: &["record count"],
            hint_lacks: &[],
        },
    );
    check(
        "a dataset others read",
        d,
        &["delete", "readings", "--yes"],
        &Expect {
            code: 11,
            error_has: &["readings.clean", "--recursive"],
            hint_has: &[],
            hint_lacks: NO_RERUN,
        },
    );
    // A corrupt data file of a root: verify lists it, exit 8, hint to restore.
    let file = data_files(d, "readings").remove(0);
    let mut bytes = std::fs::read(&file).unwrap();
    let last = bytes.len() - 20;
    bytes[last] ^= 0xff;
    std::fs::write(&file, bytes).unwrap();
    check(
        "a corrupt root slice",
        d,
        &["verify", "readings"],
        &Expect {
            code: 8,
            error_has: &["corrupt"],
            hint_has: &["restore"],
            hint_lacks: NO_RERUN,
        },
    );
}

/// `s3://` storage on moto: a corrupt object is named by its URL, the bucket once and the prefix once.
#[test]
fn a_corrupt_file_on_s3_is_named_by_its_url_without_the_prefix_twice() {
    let Some(endpoint) = moto::moto() else {
        return;
    };
    let bucket = format!("weir-exit-codes-{}", std::process::id());
    moto::create_bucket(endpoint, &bucket);
    let ws = workspace();
    let d = ws.path();
    std::fs::write(d.join("weir.yaml"), format!("storage: s3://{bucket}/ws\n")).unwrap();
    let s3 = |args: &[&str]| {
        weir(d)
            .env("AWS_ENDPOINT", endpoint)
            .env("AWS_ALLOW_HTTP", "true")
            .env("AWS_REGION", "us-east-1")
            .env("AWS_ACCESS_KEY_ID", "key")
            .env("AWS_SECRET_ACCESS_KEY", "secret")
            .env_remove("AWS_SESSION_TOKEN")
            .args(args)
            .output()
            .unwrap()
    };
    let out = s3(&["pull", "stations", "--quiet"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Overwrite the slice with other bytes, by a plain PUT to moto.
    let listing = http(
        endpoint,
        "GET",
        &format!("/{bucket}?list-type=2&prefix=ws/datasets/stations/data/"),
        b"",
    );
    let key = listing
        .split("<Key>")
        .nth(1)
        .and_then(|rest| rest.split_once("</Key>"))
        .map(|(k, _)| k.to_owned())
        .unwrap();
    // moto refuses unsigned object writes: boto3 (which moto depends on) signs the PUT.
    let put = std::process::Command::new("python3")
        .args([
            "-c",
            "import boto3, sys; boto3.client('s3', endpoint_url=sys.argv[1], region_name='us-east-1', aws_access_key_id='key', aws_secret_access_key='secret').put_object(Bucket=sys.argv[2], Key=sys.argv[3], Body=b'not the slice')",
            endpoint,
            &bucket,
            &key,
        ])
        .status()
        .unwrap();
    assert!(put.success());
    let out = s3(&["--format", "json", "verify", "stations"]);
    assert_eq!(out.status.code(), Some(8));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let error = doc["error"].as_str().unwrap();
    assert!(error.contains(&format!("s3://{bucket}/{key}")), "{error}");
    assert!(!error.contains("ws/ws/"), "{error}");
}

fn http(endpoint: &str, method: &str, path: &str, body: &[u8]) -> String {
    // Reads only (moto answers unsigned reads).
    use std::io::{Read, Write};
    let host = endpoint.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(host).unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .unwrap();
    stream.write_all(body).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    assert!(
        answer.starts_with("HTTP/1.1 200"),
        "{method} {path}: {answer}"
    );
    answer
}
