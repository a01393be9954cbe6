//! The distributed engine with `s3://` inputs and output on moto's S3 server (127.0.0.1): the
//! scheduler plans and both executors scan the objects themselves, with the store settings and
//! credentials the engine's environment gives the job (no executor has any of its own), and the
//! output is the embedded engine's (ODF's logical hash).
//!
//! One test in its own binary: it sets the process environment (the engine's per-operation
//! credentials) before any thread starts.

#![allow(clippy::unwrap_used)]

mod common;
#[path = "../../engine-runtime/tests/support/moto.rs"]
mod moto;

use std::sync::Arc;

use common::{ROWS, SLICES, jobs_run, logical_hash, request, write_slices};
use object_store::aws::AmazonS3Builder;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt};
use weir_distributed_engine::reference_engine::{NoProgress, ReferenceEngine};
use weir_distributed_engine::{ClusterConfig, LocalCluster, distributed_engine};

const BUCKET: &str = "weir-distributed";

#[test]
fn a_map_filter_job_over_s3_inputs_is_scanned_by_both_executors_and_equals_the_embedded_engine() {
    let Some(endpoint) = moto::moto() else {
        return;
    };
    moto::create_bucket(endpoint, BUCKET);
    // SAFETY: no other thread of this process exists yet (the test binary runs this one test, and the
    // runtime below is built after).
    unsafe {
        std::env::set_var("AWS_ENDPOINT", endpoint);
        std::env::set_var("AWS_ALLOW_HTTP", "true");
        std::env::set_var("AWS_REGION", "us-east-1");
        std::env::set_var("AWS_ACCESS_KEY_ID", "engine-key");
        std::env::set_var("AWS_SECRET_ACCESS_KEY", "engine-secret");
    }
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap()
        .block_on(run(endpoint));
}

async fn run(endpoint: &str) {
    let store: Arc<dyn ObjectStore> = Arc::new(
        AmazonS3Builder::new()
            .with_bucket_name(BUCKET)
            .with_endpoint(endpoint)
            .with_allow_http(true)
            .with_region("us-east-1")
            .with_access_key_id("test")
            .with_secret_access_key("test")
            .build()
            .unwrap(),
    );
    let data = tempfile::tempdir().unwrap();
    let local = write_slices(data.path(), true);
    let mut urls = Vec::new();
    for (n, file) in local.iter().enumerate() {
        let key = ObjectPath::from(format!("datasets/readings/data/slice-{n}"));
        store
            .put(&key, std::fs::read(file).unwrap().into())
            .await
            .unwrap();
        urls.push(format!("s3://{BUCKET}/{key}"));
    }
    let sql = "SELECT event_time, city, population * 2 AS doubled FROM readings WHERE population % 3 <> 0";

    let embedded_request = request(data.path(), &local, sql, "embedded");
    let embedded = ReferenceEngine::new()
        .execute_transform(&embedded_request, &NoProgress)
        .await
        .unwrap();

    let root = tempfile::tempdir().unwrap();
    let cluster = LocalCluster::start(2, 1, root.path()).await.unwrap();
    let mut distributed_request = request(data.path(), &urls, sql, "distributed");
    distributed_request.new_data_path = format!("s3://{BUCKET}/.exchange/op-1/data");
    distributed_request.new_checkpoint_path = format!("s3://{BUCKET}/.exchange/op-1/checkpoint");
    let engine = distributed_engine(&ClusterConfig::new(cluster.scheduler().clone()));
    let distributed = engine
        .execute_transform(&distributed_request, &NoProgress)
        .await
        .unwrap();
    assert_eq!(distributed, embedded);
    assert!(
        distributed
            .new_offset_interval
            .is_some_and(|i| i.end - i.start + 1 < (SLICES * ROWS) as u64)
    );

    // The scans ran on both executors, which read the objects themselves.
    for work_dir in cluster.work_dirs() {
        assert!(jobs_run(work_dir) > 0, "{} ran no task", work_dir.display());
    }
    // The output is in the store, and it is the embedded engine's.
    let output = data.path().join("distributed.from-s3");
    let bytes = store
        .get(&ObjectPath::from(".exchange/op-1/data"))
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    std::fs::write(&output, &bytes).unwrap();
    assert_eq!(
        logical_hash(output.to_str().unwrap()),
        logical_hash(&embedded_request.new_data_path)
    );
}
