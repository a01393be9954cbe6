//! Container cold start to ready, and per-operation overhead, against the process runtime.
//!
//! `cargo bench -p weir-engine-runtime --bench engine_start` (needs a Docker daemon for the container
//! figures; builds the test-engine image first).
#![allow(clippy::unwrap_used)] // a benchmark that fails should stop loudly

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use support::engine::{TEST_IMAGE, daemon, shared_tempdir, test_engine_binary, test_engine_image};
use weir_engine_runtime::{
    ContainerEngine, ContainerRuntime, EngineHandle, EngineRuntime, OperationFolders, OperationId,
    ProcessEngine, ProcessRuntime, RuntimeConfig, StartRequest,
};

fn config() -> RuntimeConfig {
    RuntimeConfig::default()
        .with_start_timeout(Duration::from_secs(60))
        .with_stop_grace(Duration::from_secs(2))
}

struct Fixture {
    _dir: tempfile::TempDir,
    input: std::path::PathBuf,
    output: std::path::PathBuf,
}

fn fixture() -> Fixture {
    let dir = shared_tempdir();
    let input = dir.path().join("input.txt");
    std::fs::write(&input, "a\nb\nc\n").unwrap();
    let output = dir.path().join("out");
    Fixture {
        _dir: dir,
        input,
        output,
    }
}

fn start_request(fixture: &Fixture) -> StartRequest {
    StartRequest::new(
        OperationId::generate(),
        OperationFolders::new(&fixture.output).with_input(&fixture.input),
    )
}

async fn one_raw_query(engine: &EngineHandle, fixture: &Fixture) {
    let request = support::requests::raw_query(
        engine,
        "copy",
        &[&fixture.input],
        &fixture.output.join("copy.txt"),
    );
    let success = engine.execute_raw_query(&request, |_| {}).await.unwrap();
    assert_eq!(success.num_records, 3);
}

fn runtimes(rt: &tokio::runtime::Runtime) -> Vec<(&'static str, Box<dyn EngineRuntime>)> {
    let mut runtimes: Vec<(&'static str, Box<dyn EngineRuntime>)> = vec![(
        "process",
        Box::new(ProcessRuntime::new(
            ProcessEngine::new("test", test_engine_binary()),
            config(),
        )),
    )];
    if let Some(daemon) = rt.block_on(daemon()) {
        test_engine_image();
        runtimes.push((
            "container",
            Box::new(ContainerRuntime::new(
                daemon,
                ContainerEngine::new("test", TEST_IMAGE),
                config(),
            )),
        ));
    }
    runtimes
}

fn start_to_ready(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut group = c.benchmark_group("start_to_ready");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(20));
    for (name, runtime) in runtimes(&rt) {
        group.bench_function(name, |b| {
            b.to_async(&rt).iter_custom(|iters| {
                let runtime = &runtime;
                async move {
                    let mut ready = Duration::ZERO;
                    for _ in 0..iters {
                        let fixture = fixture();
                        let started = Instant::now();
                        let engine = runtime.start(start_request(&fixture)).await.unwrap();
                        ready += started.elapsed();
                        engine.stop().await.unwrap();
                    }
                    ready
                }
            });
        });
    }
    group.finish();
}

fn operation_overhead(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut group = c.benchmark_group("raw_query_on_a_ready_engine");
    group
        .sample_size(30)
        .measurement_time(Duration::from_secs(5));
    for (name, runtime) in runtimes(&rt) {
        let fixture = fixture();
        let engine = rt.block_on(runtime.start(start_request(&fixture))).unwrap();
        group.bench_function(name, |b| {
            b.to_async(&rt).iter(|| one_raw_query(&engine, &fixture));
        });
        rt.block_on(engine.stop()).unwrap();
    }
    group.finish();

    let mut group = c.benchmark_group("start_query_stop");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(20));
    for (name, runtime) in runtimes(&rt) {
        group.bench_function(name, |b| {
            b.to_async(&rt).iter(|| async {
                let fixture = fixture();
                let engine = runtime.start(start_request(&fixture)).await.unwrap();
                one_raw_query(&engine, &fixture).await;
                engine.stop().await.unwrap();
            });
        });
    }
    group.finish();
}

criterion_group!(benches, start_to_ready, operation_overhead);
criterion_main!(benches);
