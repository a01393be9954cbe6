//! ODF's logical hash of 1 000 000 records shaped like a Weir data slice (offset, op, system_time,
//! event_time, a city name, two numbers), in batches of 65 536 rows as the coordinator reads them:
//! `LogicalHasher` (a batch's columns hashed on several threads) against arrow-digest's `RecordDigestV0`
//! (one thread), and `RecordDigestV0` over the crate's SHA3-256 (`weir_odf::Sha3Hasher`, assembly on x86_64 and
//! aarch64) against it over RustCrypto's portable `sha3`, interleaved in one run. The hashes are checked
//! equal first.
//!
//! ```sh
//! cargo bench -p weir-odf --features arrow --bench logical_hash     # `cargo xtask bench -p weir-odf` runs it too
//! ```
//!
//! Under `cargo test` (no `--bench` argument) each case runs once over 20 000 records, as a smoke test.

use std::hint::black_box;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, Float64Array, Int32Array, Int64Array, RecordBatch, StringArray,
    TimestampMillisecondArray,
};
use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use arrow_digest::{RecordDigest, RecordDigestV0};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use weir_odf::logical_hash::LogicalHasher;

/// The records hashed: 1 000 000 when measuring, 20 000 for `cargo test`'s smoke run (a debug build).
fn rows() -> usize {
    if std::env::args().any(|arg| arg == "--bench") {
        1_000_000
    } else {
        20_000
    }
}
const BATCH: usize = 64 * 1024;

fn slice() -> (Arc<Schema>, Vec<RecordBatch>) {
    let ts = || DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into()));
    let schema = Arc::new(Schema::new(vec![
        Field::new("offset", DataType::Int64, false),
        Field::new("op", DataType::Int32, false),
        Field::new("system_time", ts(), false),
        Field::new("event_time", ts(), true),
        Field::new("city", DataType::Utf8, true),
        Field::new("temperature_c", DataType::Float64, true),
        Field::new("humidity_pct", DataType::Int64, true),
    ]));
    let rows = rows();
    let mut batches = Vec::new();
    let mut from = 0;
    while from < rows {
        let to = (from + BATCH).min(rows);
        let range = from as i64..to as i64;
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from_iter_values(range.clone())),
            Arc::new(Int32Array::from_iter_values(range.clone().map(|_| 0))),
            Arc::new(
                TimestampMillisecondArray::from_iter_values(
                    range.clone().map(|_| 1_700_000_000_000),
                )
                .with_timezone("UTC"),
            ),
            Arc::new(
                TimestampMillisecondArray::from_iter_values(
                    range.clone().map(|i| 1_700_000_000_000 + i * 60_000),
                )
                .with_timezone("UTC"),
            ),
            Arc::new(StringArray::from_iter_values(
                range.clone().map(|i| format!("city-{}", i % 500)),
            )),
            Arc::new(Float64Array::from_iter(
                range
                    .clone()
                    .map(|i| (i % 17 != 0).then(|| (i % 400) as f64 / 10.0)),
            )),
            Arc::new(Int64Array::from_iter(
                range.clone().map(|i| (i % 13 != 0).then_some(i % 100)),
            )),
        ];
        batches.push(RecordBatch::try_new(schema.clone(), columns).expect("the columns fit"));
        from = to;
    }
    (schema, batches)
}

fn weir(schema: &Schema, batches: &[RecordBatch]) -> [u8; 32] {
    let mut hasher = LogicalHasher::new(schema).expect("supported types");
    for b in batches {
        hasher.update(b).expect("one schema");
    }
    *hasher.finish().digest()
}

fn arrow_digest<D: digest_for_arrow_digest::Digest>(
    schema: &Schema,
    batches: &[RecordBatch],
) -> [u8; 32] {
    let mut digest = RecordDigestV0::<D>::new(schema);
    for b in batches {
        digest.update(b);
    }
    let mut out = [0; 32];
    out.copy_from_slice(&digest.finalize());
    out
}

/// RustCrypto's portable SHA3-256.
type Portable = sha3_for_arrow_digest::Sha3_256;

fn bench(c: &mut Criterion) {
    let (schema, batches) = slice();
    let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
    assert_eq!(
        weir(&schema, &batches),
        arrow_digest::<Portable>(&schema, &batches),
        "the same logical hash"
    );
    assert_eq!(
        arrow_digest::<weir_odf::Sha3Hasher>(&schema, &batches),
        arrow_digest::<Portable>(&schema, &batches),
        "the same SHA3-256 ({})",
        weir_odf::Sha3Hasher::BACKEND
    );
    let mut group = c.benchmark_group("logical_hash");
    group
        .throughput(Throughput::Elements(rows as u64))
        .sample_size(20);
    group.bench_function("record_digest_v0_one_thread", |b| {
        b.iter(|| black_box(arrow_digest::<Portable>(&schema, &batches)))
    });
    group.bench_function("record_digest_v0_one_thread_odf_sha3", |b| {
        b.iter(|| black_box(arrow_digest::<weir_odf::Sha3Hasher>(&schema, &batches)))
    });
    group.bench_function("logical_hasher_columns_on_threads", |b| {
        b.iter(|| black_box(weir(&schema, &batches)))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
