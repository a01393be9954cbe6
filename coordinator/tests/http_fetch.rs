//! `fetch: {kind: Url}` over HTTP and HTTPS, against a server on 127.0.0.1 started by the test (HTTPS with
//! a certificate authority made by the test, trusted through `WEIR_CA_CERTIFICATES`): a 200 is ingested, a
//! 304 or an unchanged body adds nothing, a 404 fails with the status and the URL, a redirect is followed,
//! and a body that breaks off commits nothing and is fetched again by the next pull.
use crate::common;
use crate::support_http;

use std::path::Path;

use common::*;
use support_http::{Route, Server};

const CSV_1: &str = "id,at,city\n1,2024-06-01T00:00:00Z,Paris\n2,2024-06-01T01:00:00Z,\n";
const CSV_2: &str = "id,at,city\n1,2024-06-01T00:00:00Z,Paris\n2,2024-06-01T01:00:00Z,\n3,2024-06-02T00:00:00Z,Rome\n";

/// A workspace with one root `cities` fetching `url`, read with a kamu-style ODF schema.
fn root(url: &str) -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.path().join("datasets")).unwrap();
    std::fs::write(
        ws.path().join("datasets/cities.yaml"),
        format!(
            "kind: DatasetSnapshot
version: 1
content:
  name: cities
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch:
        kind: Url
        url: {url}
      read:
        kind: Csv
        header: true
        schema:
          fields:
            - name: id
              type: int64
            - name: at
              type: timestamp
            - name: city
              type:
                kind: Option
                inner: String
      merge:
        kind: Ledger
        primaryKey: [id]
    - kind: SetVocab
      eventTimeColumn: at
"
        ),
    )
    .unwrap();
    ws
}

/// `weir` trusting the server's test CA.
fn weir_for(ws: &Path, server: &Server) -> assert_cmd::Command {
    let mut c = weir(ws);
    match &server.ca_pem {
        Some(pem) => c.env("WEIR_CA_CERTIFICATES", pem),
        None => c.env_remove("WEIR_CA_CERTIFICATES"),
    };
    c
}

fn pull(ws: &Path, server: &Server) -> (Option<i32>, String, String) {
    let out = weir_for(ws, server)
        .args(["pull", "cities", "--quiet"])
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn pulled(ws: &Path, server: &Server) -> String {
    let (code, out, err) = pull(ws, server);
    assert_eq!(code, Some(0), "stdout:\n{out}\nstderr:\n{err}");
    out
}

#[test]
fn an_https_source_is_ingested_and_a_304_adds_nothing_until_it_changes() {
    let server = Server::https();
    server.route("/cities.csv", Route::with_etag(CSV_1, "\"v1\""));
    let ws = root(&server.url("/cities.csv"));
    pulled(ws.path(), &server);
    let (head, records) = head_and_records(ws.path(), "cities");
    assert_eq!(records, 2);
    let tail = ok(ws.path(), &["--format", "json", "tail", "cities"]);
    assert!(tail.contains("Paris"), "{tail}");

    // The next pull asks conditionally and the 304 adds nothing.
    pulled(ws.path(), &server);
    assert_eq!(head_and_records(ws.path(), "cities"), (head.clone(), 2));
    let last = server.seen().last().cloned().unwrap();
    assert_eq!(
        last.headers.get("if-none-match").map(String::as_str),
        Some("\"v1\"")
    );
    assert_eq!(last.status, 304);

    server.route("/cities.csv", Route::with_etag(CSV_2, "\"v2\""));
    pulled(ws.path(), &server);
    let (new_head, records) = head_and_records(ws.path(), "cities");
    assert_ne!(new_head, head);
    assert_eq!(records, 3, "the Ledger adds the one new id");
}

#[test]
fn last_modified_is_sent_back_and_a_server_without_validators_is_compared_by_content() {
    let server = Server::http();
    server.route(
        "/lm.csv",
        Route::Ok {
            body: CSV_1.into(),
            etag: None,
            last_modified: Some("Sat, 01 Jun 2024 10:00:00 GMT".into()),
        },
    );
    server.route("/plain.csv", Route::body(CSV_1));
    let lm = root(&server.url("/lm.csv"));
    pulled(lm.path(), &server);
    let head = head_and_records(lm.path(), "cities");
    pulled(lm.path(), &server);
    assert_eq!(head_and_records(lm.path(), "cities"), head);
    let last = server.seen().last().cloned().unwrap();
    assert_eq!(
        last.headers.get("if-modified-since").map(String::as_str),
        Some("Sat, 01 Jun 2024 10:00:00 GMT")
    );
    assert_eq!(last.status, 304);

    // No validators: the body is fetched again, and the same bytes add nothing.
    let plain = root(&server.url("/plain.csv"));
    pulled(plain.path(), &server);
    let head = head_and_records(plain.path(), "cities");
    pulled(plain.path(), &server);
    assert_eq!(head_and_records(plain.path(), "cities"), head);
}

#[test]
fn a_404_fails_the_pull_with_the_status_and_the_url_and_commits_nothing() {
    let server = Server::http();
    let url = server.url("/missing.csv");
    let ws = root(&url);
    let (code, _, err) = pull(ws.path(), &server);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("404 Not Found"), "{err}");
    assert!(err.contains(&url), "{err}");
    assert!(head_and_records(ws.path(), "cities").0.is_null());
    // A 4xx is not retried.
    assert_eq!(server.seen().len(), 1);
}

#[test]
fn a_redirect_is_followed() {
    let server = Server::https();
    server.route("/old.csv", Route::Redirect("/new.csv".into()));
    server.route("/new.csv", Route::body(CSV_2));
    let ws = root(&server.url("/old.csv"));
    pulled(ws.path(), &server);
    assert_eq!(head_and_records(ws.path(), "cities").1, 3);
    let paths: Vec<String> = server.seen().into_iter().map(|s| s.path).collect();
    assert_eq!(paths, ["/old.csv", "/new.csv"]);
}

#[test]
fn a_body_that_breaks_off_commits_nothing_and_the_next_pull_fetches_it_again() {
    let server = Server::http();
    server.route(
        "/cities.csv",
        Route::BreaksOff {
            body: CSV_2.into(),
            after: 40,
        },
    );
    let ws = root(&server.url("/cities.csv"));
    let (code, _, err) = pull(ws.path(), &server);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("after 3 attempts"), "{err}");
    assert!(err.contains("of 92"), "{err}");
    assert_eq!(server.seen().len(), 3, "retried");
    assert!(head_and_records(ws.path(), "cities").0.is_null());

    server.route("/cities.csv", Route::body(CSV_2));
    pulled(ws.path(), &server);
    assert_eq!(head_and_records(ws.path(), "cities").1, 3);
}

#[test]
fn an_https_server_whose_authority_is_not_trusted_is_refused() {
    let server = Server::https();
    server.route("/cities.csv", Route::body(CSV_1));
    let ws = root(&server.url("/cities.csv"));
    let out = weir(ws.path())
        .env_remove("WEIR_CA_CERTIFICATES")
        .args(["pull", "cities", "--quiet"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.to_lowercase().contains("certificate"), "{err}");
    assert!(head_and_records(ws.path(), "cities").0.is_null());
}

#[test]
fn event_time_from_metadata_is_the_responses_last_modified() {
    let server = Server::http();
    server.route(
        "/readings.csv",
        Route::Ok {
            body: b"station,value\nA,1\nB,2\n".to_vec(),
            etag: None,
            last_modified: Some("Sat, 01 Jun 2024 10:00:00 GMT".into()),
        },
    );
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.path().join("datasets")).unwrap();
    std::fs::write(
        ws.path().join("datasets/readings.yaml"),
        format!(
            "kind: DatasetSnapshot
version: 1
content:
  name: readings
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch:
        kind: Url
        url: {}
        eventTime:
          kind: FromMetadata
      read:
        kind: Csv
        header: true
      merge:
        kind: Append
",
            server.url("/readings.csv")
        ),
    )
    .unwrap();
    ok(ws.path(), &["pull", "--all", "--quiet"]);
    let v: serde_json::Value =
        serde_json::from_str(&ok(ws.path(), &["--format", "json", "tail", "readings"])).unwrap();
    let records = v["records"].as_array().unwrap();
    assert_eq!(records.len(), 2);
    for r in records {
        assert!(
            r["event_time"]
                .as_str()
                .unwrap()
                .starts_with("2024-06-01T10:00:00"),
            "{r}"
        );
    }
}

#[test]
fn headers_and_env_templates_in_the_url_are_sent_and_an_unset_variable_is_an_error() {
    let server = Server::https();
    server.route("/api?key=k123", Route::body(CSV_1));
    let ws = root(&format!(
        "\"{}\"\n        headers:\n          - name: Authorization\n            value: \"Bearer ${{{{ env.WEIR_TEST_TOKEN }}}}\"",
        server.url("/api?key=${{ env.WEIR_TEST_KEY }}")
    ));
    let out = weir_for(ws.path(), &server)
        .env("WEIR_TEST_KEY", "k123")
        .env("WEIR_TEST_TOKEN", "t456")
        .args(["pull", "cities", "--quiet"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(head_and_records(ws.path(), "cities").1, 2);
    let seen = server.seen();
    assert_eq!(seen[0].path, "/api?key=k123");
    assert_eq!(
        seen[0].headers.get("authorization").map(String::as_str),
        Some("Bearer t456")
    );

    let fresh = root(&format!(
        "\"{}\"",
        server.url("/api?key=${{ env.WEIR_TEST_KEY }}")
    ));
    let out = weir_for(fresh.path(), &server)
        .env_remove("WEIR_TEST_KEY")
        .args(["pull", "cities", "--quiet"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("`WEIR_TEST_KEY`"), "{err}");
}
