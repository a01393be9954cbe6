//! `weir verify` and `weir engine deprecate` replay recorded transform steps.
use crate::common;

use common::*;
use weir_dataset::chain::store::Storage;
use weir_odf::MetadataEvent;

/// Rewrites every block of `dataset` with `f`, relinking the chain, and moves the head to the result.
fn rewrite_chain(dir: &std::path::Path, dataset: &str, f: impl Fn(&mut weir_odf::MetadataBlock)) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let storage = Storage::open(dir.join(".weir").to_str().unwrap()).unwrap();
        let store = storage.dataset(dataset);
        let chain = store.chain().await.unwrap();
        let old_head = chain.summary.head;
        let mut prev = None;
        for (_, b) in chain.blocks {
            let mut b = b.clone();
            b.prev_block_hash = prev;
            f(&mut b);
            prev = Some(store.put_block(&b).await.unwrap());
        }
        store.set_head(old_head, prev.unwrap()).await.unwrap();
    });
}

#[test]
fn verify_replays_every_step_and_finds_them_identical() {
    let ws = workspace();
    ok(ws.path(), &["pull", "--all", "--quiet"]);
    for d in ["readings.clean", "readings.daily", "readings.hot-days"] {
        let out = ok(ws.path(), &["verify", d]);
        assert!(out.contains("all outputs identical"), "{out}");
    }
    let out = ok(ws.path(), &["verify", "readings"]);
    assert!(out.contains("no transform steps"), "{out}");
}

#[test]
fn verify_reports_the_first_mismatching_block_precisely() {
    let ws = workspace();
    ok(ws.path(), &["pull", "--all", "--quiet"]);
    let forged = weir_odf::Multihash::sha3_256(b"forged");
    rewrite_chain(ws.path(), "readings.hot-days", |b| {
        if let MetadataEvent::ExecuteTransform(t) = &mut b.event
            && let Some(d) = &mut t.new_data
        {
            d.logical_hash = forged;
        }
    });
    let out = weir(ws.path())
        .args(["verify", "readings.hot-days"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(7));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("block #3"), "{err}");
    assert!(err.contains(&forged.to_string()), "{err}");
    assert!(err.contains("replayed records [0, "), "{err}");
}

#[test]
fn deprecating_an_engine_replays_history_and_lets_the_new_engine_serve_for_the_old() {
    let ws = workspace();
    ok(ws.path(), &["pull", "--all", "--quiet"]);
    // Pretend hot-days was computed by an older engine build.
    rewrite_chain(ws.path(), "readings.hot-days", |b| {
        // The engine is recorded in the SetTransform in force (`TransformSql.version`).
        if let MetadataEvent::SetTransform(t) = &mut b.event {
            let weir_odf::Transform::Sql(sql) = &mut t.transform;
            sql.version = Some("embedded:reference-engine@0.0.1".into());
        }
    });
    let out = weir(ws.path())
        .args(["verify", "readings.hot-days"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(4),
        "the old engine is not available"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("engine deprecate"));

    let dep = ok(
        ws.path(),
        &["engine", "deprecate", "datafusion", "--to", "embedded"],
    );
    assert!(dep.contains("all outputs identical"), "{dep}");
    assert!(dep.contains("1 compatibility record(s) written"), "{dep}");
    let records = ok(ws.path(), &["engine", "list"]);
    assert!(records.contains("reference-engine@0.0.1"), "{records}");

    let out = ok(ws.path(), &["verify", "readings.hot-days"]);
    assert!(out.contains("all outputs identical"), "{out}");
}
