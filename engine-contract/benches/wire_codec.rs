//! Encode and decode of the reference TransformRequest (WIRE.md section 8).
#![allow(clippy::unwrap_used)] // benches: a panic is a failed run

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use weir_engine_contract::grpc::Envelope;
use weir_engine_contract::model::{TransformRequest, TransformResponse};

fn vector(name: &str) -> Vec<u8> {
    std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/vectors")
            .join(name),
    )
    .unwrap()
}

fn transform_request(c: &mut Criterion) {
    let bytes = vector("transform_request.fb");
    let request = TransformRequest::decode(&bytes).unwrap();
    let mut group = c.benchmark_group("transform_request");
    group.throughput(Throughput::Bytes(bytes.len() as u64));
    group.bench_function("decode", |b| {
        b.iter(|| TransformRequest::decode(black_box(&bytes)).unwrap())
    });
    group.bench_function("encode", |b| b.iter(|| black_box(&request).encode()));
    group.bench_function("encode_in_envelope", |b| {
        b.iter(|| Envelope::from_flatbuffer(black_box(&request).encode()).to_frame())
    });
    group.finish();

    let success = vector("transform_response_success.fb");
    c.bench_function("transform_response_success/decode", |b| {
        b.iter(|| TransformResponse::decode(black_box(&success)).unwrap())
    });
}

criterion_group!(benches, transform_request);
criterion_main!(benches);
