//! Over loopback gRPC: round-trip latency of a no-op ExecuteTransform
//! (criterion, plus p50/p99 from individual samples printed first), and
//! Progress messages per second.
#![allow(clippy::unwrap_used)] // benches: a panic is a failed run

use std::time::{Duration, Instant};

use chrono::{TimeZone, Utc};
use criterion::{Criterion, Throughput, criterion_group};
use weir_engine_contract::model::{
    OffsetInterval, Progress, RawQueryRequest, RawQuerySuccess, Transform, TransformRequest,
    TransformSql, TransformSuccess,
};
use weir_engine_contract::{
    Engine, EngineAddress, EngineClient, EngineError, EngineServer, ProgressSink,
};

/// Does nothing for transforms; for raw queries, reports as many Progress
/// messages as the first input path says.
struct NoOpEngine;

impl Engine for NoOpEngine {
    async fn execute_raw_query(
        &self,
        request: RawQueryRequest,
        progress: ProgressSink,
    ) -> Result<RawQuerySuccess, EngineError> {
        let n: u64 = request.input_data_paths[0].parse().unwrap_or(0);
        for i in 0..n {
            progress
                .report(Progress {
                    phase: None,
                    rows_read: Some(i),
                    rows_written: None,
                })
                .await;
        }
        Ok(RawQuerySuccess { num_records: n })
    }

    async fn execute_transform(
        &self,
        request: TransformRequest,
        _progress: ProgressSink,
    ) -> Result<TransformSuccess, EngineError> {
        Ok(TransformSuccess {
            new_offset_interval: OffsetInterval::new(request.next_offset, request.next_offset),
            new_watermark: None,
        })
    }
}

fn request() -> TransformRequest {
    let bytes = std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vectors/transform_request.fb"),
    )
    .unwrap();
    let mut request = TransformRequest::decode(&bytes).unwrap();
    request.system_time = Utc.with_ymd_and_hms(2024, 1, 1, 0, 0, 0).unwrap();
    request
}

fn setup(runtime: &tokio::runtime::Runtime) -> EngineClient {
    runtime.block_on(async {
        let server = EngineServer::new(NoOpEngine)
            .address(EngineAddress::loopback(0))
            .progress_buffer(64)
            .bind()
            .await
            .unwrap();
        let address = server.local_address().clone();
        tokio::spawn(server.serve());
        EngineClient::connect(address)
            .await
            .unwrap()
            .with_deadline(Duration::from_secs(10))
    })
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// p50 / p99 of individual round trips (criterion reports means).
fn print_percentiles() {
    let benchmarking = std::env::args().any(|a| a == "--bench");
    let samples = if benchmarking { 5_000 } else { 50 };
    let runtime = runtime();
    let client = setup(&runtime);
    let request = request();
    let mut latencies: Vec<Duration> = runtime.block_on(async {
        for _ in 0..samples / 10 {
            client
                .execute_transform(&request)
                .await
                .unwrap()
                .finish()
                .await
                .unwrap();
        }
        let mut latencies = Vec::with_capacity(samples);
        for _ in 0..samples {
            let started = Instant::now();
            client
                .execute_transform(&request)
                .await
                .unwrap()
                .finish()
                .await
                .unwrap();
            latencies.push(started.elapsed());
        }
        latencies
    });
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
    println!(
        "execute_transform no-op round trip over loopback TCP, {samples} samples: p50 {:?}, p99 {:?}, max {:?}",
        at(0.50),
        at(0.99),
        at(1.0)
    );
}

fn roundtrip(c: &mut Criterion) {
    let runtime = runtime();
    let client = setup(&runtime);
    let request = request();
    c.bench_function("execute_transform_noop_roundtrip", |b| {
        b.to_async(&runtime).iter(|| async {
            client
                .execute_transform(&request)
                .await
                .unwrap()
                .finish()
                .await
                .unwrap()
        })
    });
}

fn progress_rate(c: &mut Criterion) {
    const MESSAGES: u64 = 10_000;
    let runtime = runtime();
    let client = setup(&runtime);
    let request = RawQueryRequest {
        input_data_paths: vec![MESSAGES.to_string()],
        transform: Transform::Sql(TransformSql::new("noop", "select 1")),
        output_data_path: "/dev/null".into(),
    };
    let mut group = c.benchmark_group("progress");
    group.throughput(Throughput::Elements(MESSAGES));
    group.sample_size(10);
    group.bench_function("progress_messages_10k", |b| {
        b.to_async(&runtime).iter(|| async {
            let mut call = client.execute_raw_query(&request).await.unwrap();
            let mut received = 0u64;
            while call.progress().await.unwrap().is_some() {
                received += 1;
            }
            assert_eq!(received, MESSAGES);
            call.finish().await.unwrap()
        })
    });
    group.finish();
}

criterion_group!(benches, roundtrip, progress_rate);

fn main() {
    print_percentiles();
    benches();
    Criterion::default().configure_from_args().final_summary();
}
