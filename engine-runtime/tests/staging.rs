//! Data staging: local data in place, in-memory and S3 (moto on 127.0.0.1) data downloaded and
//! uploaded.
use crate::support;

use std::sync::Arc;

use object_store::memory::InMemory;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt};
use weir_engine_runtime::{DataLocation, RuntimeError, S3Config, StagingArea};

async fn put(store: &dyn ObjectStore, path: &str, bytes: &[u8]) {
    store
        .put(&ObjectPath::from(path), bytes.to_vec().into())
        .await
        .unwrap();
}

async fn get(store: &dyn ObjectStore, path: &str) -> Vec<u8> {
    store
        .get(&ObjectPath::from(path))
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap()
        .to_vec()
}

#[tokio::test]
async fn local_input_is_used_in_place_without_copying() {
    let data = tempfile::tempdir().unwrap();
    let file = data.path().join("slice.parquet");
    std::fs::write(&file, b"rows").unwrap();
    let area = StagingArea::new().unwrap();
    let staged = area.stage_input(&DataLocation::local(&file)).await.unwrap();
    assert_eq!(staged, file);
    assert_eq!(
        std::fs::read_dir(area.path()).unwrap().count(),
        0,
        "nothing copied"
    );
}

#[tokio::test]
async fn remote_object_is_downloaded_into_the_staging_folder() {
    let store = Arc::new(InMemory::new());
    put(store.as_ref(), "datasets/a/slice-1.parquet", b"one").await;
    let area = StagingArea::new().unwrap();
    let staged = area
        .stage_input(&DataLocation::store(store, "datasets/a/slice-1.parquet"))
        .await
        .unwrap();
    assert!(staged.starts_with(area.path()));
    assert_eq!(staged.file_name().unwrap(), "slice-1.parquet");
    assert_eq!(std::fs::read(&staged).unwrap(), b"one");
}

#[tokio::test]
async fn remote_prefix_is_downloaded_as_a_folder_keeping_relative_paths() {
    let store = Arc::new(InMemory::new());
    put(store.as_ref(), "ckpt/state/part-0", b"p0").await;
    put(store.as_ref(), "ckpt/state/nested/part-1", b"p1").await;
    put(store.as_ref(), "ckpt/other", b"not below the prefix").await;
    let area = StagingArea::new().unwrap();
    let staged = area
        .stage_input(&DataLocation::store(store, "ckpt/state"))
        .await
        .unwrap();
    assert_eq!(staged.file_name().unwrap(), "state");
    assert_eq!(std::fs::read(staged.join("part-0")).unwrap(), b"p0");
    assert_eq!(std::fs::read(staged.join("nested/part-1")).unwrap(), b"p1");
    assert!(!staged.join("other").exists());
}

#[tokio::test]
async fn two_remote_inputs_with_the_same_name_get_separate_folders() {
    let store = Arc::new(InMemory::new());
    put(store.as_ref(), "a/data.parquet", b"a").await;
    put(store.as_ref(), "b/data.parquet", b"b").await;
    let area = StagingArea::new().unwrap();
    let a = area
        .stage_input(&DataLocation::store(store.clone(), "a/data.parquet"))
        .await
        .unwrap();
    let b = area
        .stage_input(&DataLocation::store(store, "b/data.parquet"))
        .await
        .unwrap();
    assert_ne!(a, b);
    assert_eq!(std::fs::read(a).unwrap(), b"a");
    assert_eq!(std::fs::read(b).unwrap(), b"b");
}

#[tokio::test]
async fn missing_remote_input_is_reported_by_location() {
    let store = Arc::new(InMemory::new());
    let area = StagingArea::new().unwrap();
    let error = area
        .stage_input(&DataLocation::store(store, "nothing/here"))
        .await
        .unwrap_err();
    assert!(
        matches!(&error, RuntimeError::InputNotFound { location } if location.ends_with("nothing/here")),
        "{error}"
    );
}

#[tokio::test]
async fn outputs_are_uploaded_under_the_destination_prefix() {
    let store = Arc::new(InMemory::new());
    let destination = DataLocation::store(store.clone(), "results/run-1");
    let area = StagingArea::new().unwrap();
    let out = area.output_dir(&destination).unwrap();
    std::fs::write(out.join("data.parquet"), b"data").unwrap();
    std::fs::create_dir(out.join("checkpoint")).unwrap();
    std::fs::write(out.join("checkpoint/state"), b"state").unwrap();
    let published = area.publish_output(&destination).await.unwrap();
    let paths: Vec<String> = published.iter().map(|p| p.path.to_string()).collect();
    assert_eq!(
        paths,
        vec![
            "results/run-1/checkpoint/state",
            "results/run-1/data.parquet"
        ]
    );
    assert_eq!(
        get(store.as_ref(), "results/run-1/data.parquet").await,
        b"data"
    );
    assert_eq!(
        get(store.as_ref(), "results/run-1/checkpoint/state").await,
        b"state"
    );
}

#[tokio::test]
async fn an_existing_output_object_is_never_overwritten() {
    let store = Arc::new(InMemory::new());
    put(store.as_ref(), "results/data.parquet", b"first").await;
    let destination = DataLocation::store(store.clone(), "results");
    let area = StagingArea::new().unwrap();
    std::fs::write(
        area.output_dir(&destination).unwrap().join("data.parquet"),
        b"second",
    )
    .unwrap();
    let error = area.publish_output(&destination).await.unwrap_err();
    assert!(
        matches!(error, RuntimeError::OutputExists { .. }),
        "{error}"
    );
    assert_eq!(get(store.as_ref(), "results/data.parquet").await, b"first");
}

#[tokio::test]
async fn local_destination_is_written_in_place_and_nothing_is_uploaded() {
    let dest = tempfile::tempdir().unwrap();
    let destination = DataLocation::local(dest.path().join("out"));
    let area = StagingArea::new().unwrap();
    let out = area.output_dir(&destination).unwrap();
    assert_eq!(out, dest.path().join("out"));
    assert!(out.is_dir());
    std::fs::write(out.join("data.parquet"), b"d").unwrap();
    assert!(area.publish_output(&destination).await.unwrap().is_empty());
}

#[tokio::test]
async fn s3_inputs_are_staged_and_outputs_uploaded_including_multipart_and_create_only() {
    let Some(endpoint) = support::moto::moto() else {
        return;
    };
    support::moto::create_bucket(endpoint, "staging-test");
    let store = S3Config::new("staging-test", endpoint)
        .with_credentials("testing", "testing")
        .build()
        .unwrap();
    put(store.as_ref(), "in/slice.parquet", b"remote rows").await;
    put(store.as_ref(), "in/dir/a", b"A").await;
    put(store.as_ref(), "in/dir/b/c", b"C").await;

    let area = StagingArea::new().unwrap();
    let file = area
        .stage_input(&DataLocation::store(store.clone(), "in/slice.parquet"))
        .await
        .unwrap();
    assert_eq!(std::fs::read(file).unwrap(), b"remote rows");
    let dir = area
        .stage_input(&DataLocation::store(store.clone(), "in/dir"))
        .await
        .unwrap();
    assert_eq!(std::fs::read(dir.join("a")).unwrap(), b"A");
    assert_eq!(std::fs::read(dir.join("b/c")).unwrap(), b"C");

    // 12 MiB goes up in three parts; a small file in one conditional put.
    let big: Vec<u8> = (0..12 * 1024 * 1024).map(|i| (i % 251) as u8).collect();
    let destination = DataLocation::store(store.clone(), "out/run-1");
    let out = area.output_dir(&destination).unwrap();
    std::fs::write(out.join("big.bin"), &big).unwrap();
    std::fs::write(out.join("small.bin"), b"small").unwrap();
    let published = area.publish_output(&destination).await.unwrap();
    assert_eq!(published.len(), 2);
    assert_eq!(published[0].size, big.len() as u64);
    assert_eq!(get(store.as_ref(), "out/run-1/big.bin").await, big);
    assert_eq!(get(store.as_ref(), "out/run-1/small.bin").await, b"small");

    // Publishing the same outputs again must not overwrite them.
    let again = StagingArea::new().unwrap();
    std::fs::write(
        again.output_dir(&destination).unwrap().join("small.bin"),
        b"other",
    )
    .unwrap();
    let error = again.publish_output(&destination).await.unwrap_err();
    assert!(
        matches!(error, RuntimeError::OutputExists { .. }),
        "{error}"
    );
    assert_eq!(get(store.as_ref(), "out/run-1/small.bin").await, b"small");
}
