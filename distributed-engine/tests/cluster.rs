//! The distributed engine against a real Ballista cluster in this process: a scheduler and two
//! executors on 127.0.0.1 ports, each executor with its own work folder. Every result is compared
//! with the embedded reference engine's for the same request (ODF's logical hash).

#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::*;
use weir_distributed_engine::reference_engine::arrow::array::{
    Int32Array, Int64Array, RecordBatch,
};
use weir_distributed_engine::reference_engine::arrow::datatypes::SchemaRef;
use weir_distributed_engine::reference_engine::{
    NoProgress, RawQueryRequest, ReferenceEngine, Transform, TransformSql,
};
use weir_distributed_engine::{ClusterConfig, LocalCluster, SchedulerAddress, distributed_engine};

/// Runs the same transform on the embedded and the distributed engine; the outcomes and the
/// outputs' logical hashes must be equal. Returns the distributed output's path.
async fn same_as_embedded(
    cluster: &LocalCluster,
    dir: &Path,
    slices: &[String],
    sql: &str,
) -> String {
    let embedded_request = request(dir, slices, sql, "embedded");
    let embedded = ReferenceEngine::new()
        .execute_transform(&embedded_request, &NoProgress)
        .await
        .unwrap();
    let distributed_request = request(dir, slices, sql, "distributed");
    let engine = distributed_engine(&ClusterConfig::new(cluster.scheduler().clone()));
    let distributed = engine
        .execute_transform(&distributed_request, &NoProgress)
        .await
        .unwrap();
    assert_eq!(distributed, embedded, "{sql}");
    assert_eq!(
        logical_hash(&distributed_request.new_data_path),
        logical_hash(&embedded_request.new_data_path),
        "{sql}"
    );
    distributed_request.new_data_path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn map_filter_transform_on_two_executors_equals_the_embedded_engine() {
    let (cluster, _root) = start_cluster().await;
    let data = tempfile::tempdir().unwrap();
    let slices = write_slices(data.path(), true);

    let output = same_as_embedded(
        &cluster,
        data.path(),
        &slices,
        "SELECT event_time, city, population * 2 AS doubled FROM readings WHERE population % 3 <> 0",
    )
    .await;

    // Both executors ran tasks of the job: each wrote shuffle files under its work folder.
    for work_dir in cluster.work_dirs() {
        assert!(jobs_run(work_dir) > 0, "{} ran no task", work_dir.display());
    }
    // ODF's rules: offsets from next_offset, in input offset order; system time the request's;
    // the input's operation types carried through the filter (pairs repaired).
    let (_, batches) = read(&output);
    let offsets: Vec<i64> = batches
        .iter()
        .flat_map(|b| {
            b.column(0)
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap()
                .values()
                .to_vec()
        })
        .collect();
    assert_eq!(
        offsets,
        (1_000..1_000 + offsets.len() as i64).collect::<Vec<_>>()
    );
    let ops: Vec<i32> = batches
        .iter()
        .flat_map(|b| {
            b.column(1)
                .as_any()
                .downcast_ref::<Int32Array>()
                .unwrap()
                .values()
                .to_vec()
        })
        .collect();
    assert!(ops.contains(&1), "retractions carried");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn union_all_and_multi_step_queries_equal_the_embedded_engine() {
    let (cluster, _root) = start_cluster().await;
    let data = tempfile::tempdir().unwrap();
    let slices = write_slices(data.path(), true);
    same_as_embedded(
        &cluster,
        data.path(),
        &slices,
        "SELECT event_time, city FROM readings WHERE city = 'Oslo' \
         UNION ALL SELECT event_time, upper(city) AS city FROM readings WHERE population < 100",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn window_aggregation_stays_local_and_equals_the_embedded_engine() {
    let (cluster, _root) = start_cluster().await;
    let data = tempfile::tempdir().unwrap();
    let slices = write_slices(data.path(), false);
    same_as_embedded(
        &cluster,
        data.path(),
        &slices,
        "SELECT date_bin(INTERVAL '1 hour', event_time) AS event_time, city, count(*) AS readings, \
         sum(population) AS population FROM readings \
         GROUP BY date_bin(INTERVAL '1 hour', event_time), city",
    )
    .await;
    // Stateful queries never reach the cluster.
    for work_dir in cluster.work_dirs() {
        assert_eq!(jobs_run(work_dir), 0, "{} ran a task", work_dir.display());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn raw_query_aggregation_on_two_executors_equals_the_embedded_engine() {
    let (cluster, _root) = start_cluster().await;
    let data = tempfile::tempdir().unwrap();
    let slices = write_slices(data.path(), true);
    let sql = "SELECT city, count(*) AS readings, max(population) AS highest, min(event_time) AS first \
               FROM input GROUP BY city ORDER BY city";
    let raw = |out: &str| RawQueryRequest {
        input_data_paths: slices.clone(),
        transform: Transform::Sql(TransformSql::new("datafusion", sql)),
        output_data_path: data.path().join(out).display().to_string(),
    };
    let (embedded_request, distributed_request) = (raw("embedded"), raw("distributed"));
    let embedded = ReferenceEngine::new()
        .execute_raw_query(&embedded_request, &NoProgress)
        .await
        .unwrap();
    let engine = distributed_engine(&ClusterConfig::new(cluster.scheduler().clone()));
    let distributed = engine
        .execute_raw_query(&distributed_request, &NoProgress)
        .await
        .unwrap();
    assert_eq!(distributed, embedded);
    assert_eq!(distributed.num_records, 5);
    let (embedded_schema, embedded_batches) = read(&embedded_request.output_data_path);
    let (schema, batches) = read(&distributed_request.output_data_path);
    assert_eq!(schema, embedded_schema);
    let concat = |schema: &SchemaRef, batches: &[RecordBatch]| {
        weir_distributed_engine::reference_engine::arrow::compute::concat_batches(schema, batches)
            .unwrap()
    };
    assert_eq!(
        concat(&schema, &batches),
        concat(&embedded_schema, &embedded_batches)
    );
    for work_dir in cluster.work_dirs() {
        assert!(jobs_run(work_dir) > 0, "{} ran no task", work_dir.display());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_unreachable_scheduler_is_an_internal_error_and_writes_no_output() {
    let data = tempfile::tempdir().unwrap();
    let slices = write_slices(data.path(), true);
    let request = request(
        data.path(),
        &slices,
        "SELECT event_time, city FROM readings",
        "nowhere",
    );
    let engine = distributed_engine(&ClusterConfig::new(SchedulerAddress::new(
        "127.0.0.1",
        free_port(),
    )));
    let error = engine
        .execute_transform(&request, &NoProgress)
        .await
        .unwrap_err();
    assert_eq!(
        error.kind(),
        weir_distributed_engine::reference_engine::ErrorKind::Internal,
        "{error}"
    );
    assert!(!Path::new(&request.new_data_path).exists());
}

/// With `WEIR_BALLISTA_SCHEDULER=HOST:PORT` and `WEIR_BALLISTA_SHARE=DIR` (a folder the cluster's
/// scheduler and executors see at the same path): the same comparison on that cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_external_cluster_gives_the_embedded_engines_output() {
    let (Ok(scheduler), Ok(share)) = (
        std::env::var("WEIR_BALLISTA_SCHEDULER"),
        std::env::var("WEIR_BALLISTA_SHARE"),
    ) else {
        eprintln!("NOT RUN: set WEIR_BALLISTA_SCHEDULER and WEIR_BALLISTA_SHARE");
        return;
    };
    let scheduler: SchedulerAddress = scheduler.parse().unwrap();
    let data = tempfile::tempdir_in(share).unwrap();
    let slices = write_slices(data.path(), true);
    let sql = "SELECT event_time, city, population * 2 AS doubled FROM readings WHERE population % 3 <> 0";
    let embedded_request = request(data.path(), &slices, sql, "embedded");
    let embedded = ReferenceEngine::new()
        .execute_transform(&embedded_request, &NoProgress)
        .await
        .unwrap();
    let distributed_request = request(data.path(), &slices, sql, "distributed");
    let distributed = distributed_engine(&ClusterConfig::new(scheduler))
        .execute_transform(&distributed_request, &NoProgress)
        .await
        .unwrap();
    assert_eq!(distributed, embedded);
    assert_eq!(
        logical_hash(&distributed_request.new_data_path),
        logical_hash(&embedded_request.new_data_path)
    );
}
