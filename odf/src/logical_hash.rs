//! The logical hash of data: a content hash of records, independent of how a file encodes them
//! (feature `arrow`).
//!
//! It is arrow-digest's `RecordDigestV0` with SHA3-256, stored with multicodec `arrow0-sha3-256` (0x300016),
//! which is what kamu computes and `kamu verify` compares. The digest does not depend on how records are
//! split into batches (kamu reads Parquet in batches of 10 000 rows).
//!
//! `RecordDigestV0` is a SHA3-256 over the schema (each field's name and nesting level) followed by one
//! `ArrayDigestV0` per leaf column, each hashing only its own column. For a schema without struct fields the
//! hasher keeps those parts itself, arrow-digest's `ArrayDigestV0` for every column, so that the columns of a
//! large batch are hashed on several threads; the result is `RecordDigestV0`'s, byte for byte (tested against
//! it for every supported type). Schemas with struct fields use `RecordDigestV0` as it is.
//!
//! ```
//! use std::sync::Arc;
//! use arrow::array::{Int64Array, RecordBatch};
//! use arrow::datatypes::{DataType, Field, Schema};
//!
//! let schema = Arc::new(Schema::new(vec![Field::new("offset", DataType::Int64, false)]));
//! let batch = |from: i64| {
//!     RecordBatch::try_new(schema.clone(), vec![Arc::new(Int64Array::from_iter_values(from..from + 2))])
//! };
//! let mut in_one = weir_odf::logical_hash::LogicalHasher::new(&schema)?;
//! in_one.update(&RecordBatch::try_new(schema.clone(), vec![Arc::new(Int64Array::from_iter_values(0..4))])?)?;
//! let mut in_two = weir_odf::logical_hash::LogicalHasher::new(&schema)?;
//! in_two.update(&batch(0)?)?;
//! in_two.update(&batch(2)?)?;
//! let hash = in_one.finish();
//! assert_eq!(hash, in_two.finish());
//! assert_eq!(hash.codec(), weir_odf::Multicodec::Arrow0_Sha3_256);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use arrow::array::{Array, ArrayRef, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema};
use arrow_digest::{ArrayDigest, ArrayDigestV0, RecordDigest, RecordDigestV0};

use crate::arrow_schema::same_logical_schema;
use crate::{Multicodec, Multihash, Sha3Hasher};

mod threads;
pub use threads::HashingThread;

/// Why records cannot be hashed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LogicalHashError {
    /// `RecordDigestV0` has no definition for this Arrow type (Null, Duration, Interval, Map, Dictionary,
    /// Union, run-end encoded, list views).
    #[error(
        "column `{field}` has type {data_type}, which the logical hash (RecordDigestV0) does not support"
    )]
    UnsupportedType {
        /// The field (`parent.child` for nested fields).
        field: String,
        /// The Arrow type.
        data_type: String,
    },
    /// A batch's schema is not the one the hasher was made for.
    #[error(
        "record batch schema does not match the hasher's schema: expected {expected}, got {found}"
    )]
    SchemaMismatch {
        /// The hasher's schema.
        expected: String,
        /// The batch's schema.
        found: String,
    },
    /// The thread of a [`HashingThread`] could not start, or panicked.
    #[error("the logical hash's thread {0}")]
    Thread(String),
}

/// A streaming logical hasher: make it for a schema, feed it that schema's record batches in order, finish.
pub struct LogicalHasher {
    schema: Schema,
    digest: Digest,
}

/// Rows from which a batch's columns are hashed on several threads (below, one thread is faster than the
/// spawns).
const PARALLEL_ROWS: usize = 8 * 1024;

/// The most threads one batch's columns are hashed on.
const MAX_THREADS: usize = 4;

enum Digest {
    /// Schemas with struct fields.
    Record(RecordDigestV0<Sha3Hasher>),
    /// Flat schemas: `RecordDigestV0`'s parts, the schema's hash and one `ArrayDigestV0` per column.
    Columns {
        schema: Sha3Hasher,
        columns: Vec<ArrayDigestV0<Sha3Hasher>>,
        threads: usize,
    },
}

impl Digest {
    fn new(schema: &Schema) -> Self {
        let flat = schema
            .fields()
            .iter()
            .all(|f| !matches!(f.data_type(), DataType::Struct(_)));
        if !flat {
            return Self::Record(RecordDigestV0::new(schema));
        }
        // What `RecordDigestV0::new` hashes of each field (all at nesting level 0 here).
        let mut hasher = Sha3Hasher::new();
        for field in schema.fields() {
            hasher.update(&(field.name().len() as u64).to_le_bytes());
            hasher.update(field.name().as_bytes());
            hasher.update(&0u64.to_le_bytes());
        }
        Self::Columns {
            schema: hasher,
            columns: schema
                .fields()
                .iter()
                .map(|f| ArrayDigestV0::new(f.data_type()))
                .collect(),
            threads: std::thread::available_parallelism()
                .map_or(1, |n| n.get())
                .min(MAX_THREADS),
        }
    }

    fn update(&mut self, batch: &RecordBatch) {
        match self {
            Self::Record(digest) => digest.update(batch),
            Self::Columns {
                columns, threads, ..
            } => {
                let threads = (*threads).min(columns.len());
                if threads < 2 || batch.num_rows() < PARALLEL_ROWS {
                    for (digest, array) in columns.iter_mut().zip(batch.columns()) {
                        digest.update(array.as_ref(), None);
                    }
                } else {
                    update_in_parallel(columns, batch.columns(), threads);
                }
            }
        }
    }

    fn finalize(self) -> [u8; 32] {
        match self {
            Self::Record(digest) => digest.finalize().into(),
            Self::Columns {
                schema, columns, ..
            } => finish_columns(schema, columns),
        }
    }
}

/// `RecordDigestV0`'s result from its parts: the schema's hash followed by each column's digest.
fn finish_columns(mut schema: Sha3Hasher, columns: Vec<ArrayDigestV0<Sha3Hasher>>) -> [u8; 32] {
    for column in columns {
        schema.update(&column.finalize());
    }
    *schema.finish().digest()
}

/// A logical hash's digest as its multihash (multicodec `arrow0-sha3-256`).
fn logical_multihash(digest: [u8; 32]) -> Multihash {
    Multihash::new(Multicodec::Arrow0_Sha3_256, digest)
        .unwrap_or_else(|_| unreachable!("a hash codec"))
}

/// Hashes each column into its own digest, the columns shared among `threads` threads by their size
/// (largest first, each to the least loaded thread). Every digest still sees its column's batches in order:
/// this returns when the whole batch is hashed.
fn update_in_parallel(
    columns: &mut [ArrayDigestV0<Sha3Hasher>],
    arrays: &[ArrayRef],
    threads: usize,
) {
    let mut order: Vec<usize> = (0..arrays.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(arrays[i].get_buffer_memory_size()));
    let mut load = vec![0usize; threads];
    let mut thread_of = vec![0usize; arrays.len()];
    for i in order {
        let (least, _) = load
            .iter()
            .enumerate()
            .min_by_key(|(_, l)| **l)
            .unwrap_or((0, &0));
        thread_of[i] = least;
        load[least] += arrays[i].get_buffer_memory_size();
    }
    let mut groups: Vec<Vec<(&mut ArrayDigestV0<Sha3Hasher>, &ArrayRef)>> =
        (0..threads).map(|_| Vec::new()).collect();
    for ((digest, array), &t) in columns.iter_mut().zip(arrays).zip(&thread_of) {
        groups[t].push((digest, array));
    }
    let hash = |group: Vec<(&mut ArrayDigestV0<Sha3Hasher>, &ArrayRef)>| {
        for (digest, array) in group {
            digest.update(array.as_ref(), None);
        }
    };
    let mut groups = groups.into_iter();
    let here = groups.next().unwrap_or_default();
    std::thread::scope(|scope| {
        for group in groups {
            scope.spawn(move || hash(group));
        }
        hash(here);
    });
}

impl std::fmt::Debug for LogicalHasher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogicalHasher")
            .field("schema", &self.schema)
            .finish_non_exhaustive()
    }
}

impl LogicalHasher {
    /// A hasher for records of `schema`. Fails on a type `RecordDigestV0` does not define (rather than let
    /// arrow-digest panic on it).
    pub fn new(schema: &Schema) -> Result<Self, LogicalHashError> {
        for field in schema.fields() {
            check_supported(field, "")?;
        }
        Ok(Self {
            schema: schema.clone(),
            digest: Digest::new(schema),
        })
    }

    /// Hashes one more batch. Its schema must be the hasher's, up to ODF's logical types (so `Utf8View`
    /// strings hash like `Utf8` ones).
    pub fn update(&mut self, batch: &RecordBatch) -> Result<(), LogicalHashError> {
        if !same_logical_schema(&self.schema, batch.schema_ref()) {
            return Err(LogicalHashError::SchemaMismatch {
                expected: self.schema.to_string(),
                found: batch.schema_ref().to_string(),
            });
        }
        self.digest.update(batch);
        Ok(())
    }

    /// The logical hash of every record seen (multicodec `arrow0-sha3-256`).
    pub fn finish(self) -> Multihash {
        logical_multihash(self.digest.finalize())
    }
}

/// The logical hash of `batches`, all of `schema`.
pub fn of_batches<'a>(
    schema: &Schema,
    batches: impl IntoIterator<Item = &'a RecordBatch>,
) -> Result<Multihash, LogicalHashError> {
    let mut hasher = LogicalHasher::new(schema)?;
    for batch in batches {
        hasher.update(batch)?;
    }
    Ok(hasher.finish())
}

fn check_supported(field: &Field, parent: &str) -> Result<(), LogicalHashError> {
    let path = if parent.is_empty() {
        field.name().clone()
    } else {
        format!("{parent}.{}", field.name())
    };
    match field.data_type() {
        DataType::Null
        | DataType::Duration(_)
        | DataType::Interval(_)
        | DataType::ListView(_)
        | DataType::LargeListView(_)
        | DataType::Union(..)
        | DataType::Dictionary(..)
        | DataType::Map(..)
        | DataType::RunEndEncoded(..) => Err(LogicalHashError::UnsupportedType {
            field: path,
            data_type: field.data_type().to_string(),
        }),
        DataType::List(item) | DataType::LargeList(item) | DataType::FixedSizeList(item, _) => {
            check_supported(item, &path)
        }
        DataType::Struct(fields) => fields.iter().try_for_each(|f| check_supported(f, &path)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod parallel_tests {
    use std::sync::Arc;

    use arrow::array::{
        ArrayRef, BinaryArray, BooleanArray, Date32Array, Decimal128Array, Float64Array, Int8Array,
        Int32Array, Int64Array, LargeStringArray, ListArray, StringArray, StringViewArray,
        StructArray, TimestampMillisecondArray, UInt16Array,
    };
    use arrow::datatypes::{Fields, Int32Type, TimeUnit};

    use super::*;

    /// A flat batch of `rows` rows with every kind of column, nulls in most, starting at `from`.
    fn batch(schema: &Arc<Schema>, from: usize, rows: usize) -> RecordBatch {
        let range = from..from + rows;
        let null_every = |n: usize| move |i: usize| (!i.is_multiple_of(n)).then_some(i);
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from_iter_values(
                range.clone().map(|i| i as i64),
            )),
            Arc::new(Int8Array::from_iter(
                range.clone().map(|i| null_every(3)(i).map(|v| v as i8)),
            )),
            Arc::new(UInt16Array::from_iter(
                range.clone().map(|i| null_every(5)(i).map(|v| v as u16)),
            )),
            Arc::new(Int32Array::from_iter(
                range.clone().map(|i| null_every(7)(i).map(|v| v as i32)),
            )),
            Arc::new(Float64Array::from_iter(
                range
                    .clone()
                    .map(|i| null_every(4)(i).map(|v| v as f64 / 3.0)),
            )),
            Arc::new(BooleanArray::from_iter(
                range.clone().map(|i| null_every(6)(i).map(|v| v % 2 == 0)),
            )),
            Arc::new(StringArray::from_iter(
                range
                    .clone()
                    .map(|i| null_every(9)(i).map(|v| format!("city-{}", v % 97))),
            )),
            Arc::new(LargeStringArray::from_iter(
                range
                    .clone()
                    .map(|i| null_every(2)(i).map(|v| "x".repeat(v % 13))),
            )),
            Arc::new(BinaryArray::from_iter(
                range
                    .clone()
                    .map(|i| null_every(8)(i).map(|v| v.to_le_bytes().to_vec())),
            )),
            Arc::new(Date32Array::from_iter(
                range.clone().map(|i| null_every(10)(i).map(|v| v as i32)),
            )),
            Arc::new(
                TimestampMillisecondArray::from_iter(
                    range
                        .clone()
                        .map(|i| null_every(11)(i).map(|v| v as i64 * 1000)),
                )
                .with_timezone("UTC"),
            ),
            Arc::new(
                Decimal128Array::from_iter(
                    range
                        .clone()
                        .map(|i| null_every(12)(i).map(|v| v as i128 * 7)),
                )
                .with_precision_and_scale(20, 2)
                .expect("a valid decimal"),
            ),
            Arc::new(ListArray::from_iter_primitive::<Int32Type, _, _>(
                range.clone().map(|i| {
                    (!i.is_multiple_of(5)).then(|| {
                        (0..(i % 4))
                            .map(|j| (j % 3 != 1).then_some(j as i32))
                            .collect::<Vec<_>>()
                    })
                }),
            )),
        ];
        RecordBatch::try_new(schema.clone(), columns).expect("the columns fit the schema")
    }

    fn schema() -> Arc<Schema> {
        Arc::new(Schema::new(vec![
            Field::new("offset", DataType::Int64, false),
            Field::new("i8", DataType::Int8, true),
            Field::new("u16", DataType::UInt16, true),
            Field::new("i32", DataType::Int32, true),
            Field::new("f64", DataType::Float64, true),
            Field::new("flag", DataType::Boolean, true),
            Field::new("city", DataType::Utf8, true),
            Field::new("large", DataType::LargeUtf8, true),
            Field::new("bytes", DataType::Binary, true),
            Field::new("day", DataType::Date32, true),
            Field::new(
                "at",
                DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
                true,
            ),
            Field::new("amount", DataType::Decimal128(20, 2), true),
            Field::new_list("list", Field::new_list_field(DataType::Int32, true), true),
        ]))
    }

    /// arrow-digest's own record digest over RustCrypto's portable SHA3-256: neither the columns on
    /// threads nor the crate's SHA3 backend.
    fn reference(schema: &Schema, batches: &[RecordBatch]) -> [u8; 32] {
        let mut digest = RecordDigestV0::<sha3_for_arrow_digest::Sha3_256>::new(schema);
        for b in batches {
            digest.update(b);
        }
        digest.finalize().into()
    }

    /// The logical hash of `batches` through a [`HashingThread`] with room for `depth` batches.
    fn on_threads(schema: &Schema, batches: &[RecordBatch], depth: usize) -> [u8; 32] {
        let mut there = LogicalHasher::new(schema)
            .expect("supported")
            .spawn(depth)
            .expect("threads");
        for b in batches {
            there.update(b.clone()).expect("the hasher's schema");
        }
        *there.finish().expect("hashed").digest()
    }

    #[test]
    fn columns_hashed_on_several_threads_give_record_digest_v0() {
        let schema = schema();
        // Small batches (one thread), then large ones (several), then a small one again.
        let sizes = [1, 700, PARALLEL_ROWS, 3 * PARALLEL_ROWS + 17, 5];
        let mut batches = Vec::new();
        let mut from = 0;
        for rows in sizes {
            batches.push(batch(&schema, from, rows));
            from += rows;
        }
        let mut hasher = LogicalHasher::new(&schema).expect("supported types");
        for b in &batches {
            hasher.update(b).expect("the hasher's schema");
        }
        let hash = hasher.finish();
        assert_eq!(*hash.digest(), reference(&schema, &batches));

        // The same records in one batch: the same hash.
        let whole = arrow::compute::concat_batches(&schema, &batches).expect("one schema");
        assert_eq!(of_batches(&schema, [&whole]).expect("supported"), hash);
        assert_eq!(*hash.digest(), reference(&schema, &[whole]));
    }

    #[test]
    fn a_hashing_thread_gives_the_hash_made_here_and_reports_a_batch_of_another_schema() {
        let schema = schema();
        let batches: Vec<RecordBatch> = (0..5)
            .map(|i| batch(&schema, i * PARALLEL_ROWS, PARALLEL_ROWS + i))
            .collect();
        assert_eq!(
            on_threads(&schema, &batches, 1),
            reference(&schema, &batches)
        );

        let other = Arc::new(Schema::new(vec![Field::new("x", DataType::Int64, false)]));
        let stray =
            RecordBatch::try_new(other, vec![Arc::new(Int64Array::from(vec![1]))]).expect("fits");
        let mut there = LogicalHasher::new(&schema)
            .expect("supported")
            .spawn(1)
            .expect("a thread");
        there
            .update(batches[0].clone())
            .expect("the hasher's schema");
        // The stray batch is queued; the error comes from a later call or from `finish`.
        let later = there
            .update(stray)
            .and_then(|()| there.update(batches[1].clone()))
            .and_then(|()| there.update(batches[2].clone()));
        let error = match later {
            Err(e) => e,
            Ok(()) => there.finish().expect_err("a batch of another schema"),
        };
        assert!(
            matches!(error, LogicalHashError::SchemaMismatch { .. }),
            "{error}"
        );
    }

    #[test]
    fn hashing_threads_give_record_digest_v0_over_many_uneven_batches_at_any_depth() {
        let schema = schema();
        // Uneven batches (empty ones among them), so that the lanes run at different paces.
        let mut batches = Vec::new();
        let mut from = 0;
        for i in 0..40 {
            let rows = [0, 1, 300, PARALLEL_ROWS / 3, 2 * PARALLEL_ROWS + 5][i % 5];
            batches.push(batch(&schema, from, rows));
            from += rows;
        }
        let expected = reference(&schema, &batches);
        for depth in [1, 3, 64] {
            assert_eq!(
                on_threads(&schema, &batches, depth),
                expected,
                "depth {depth}"
            );
        }
    }

    #[test]
    fn a_hashing_thread_dropped_with_batches_queued_stops_its_threads() {
        let schema = schema();
        let mut there = LogicalHasher::new(&schema)
            .expect("supported")
            .spawn(8)
            .expect("threads");
        for i in 0..8 {
            there
                .update(batch(&schema, i * PARALLEL_ROWS, PARALLEL_ROWS))
                .expect("the hasher's schema");
        }
        // Returns (the workers stop and are joined), without hashing what is left.
        drop(there);
    }

    #[test]
    fn a_struct_schema_is_hashed_on_a_thread_as_record_digest_v0() {
        let inner = Fields::from(vec![
            Field::new("a", DataType::Int64, true),
            Field::new("b", DataType::Utf8, true),
        ]);
        let schema = Arc::new(Schema::new(vec![
            Field::new("offset", DataType::Int64, false),
            Field::new("pair", DataType::Struct(inner.clone()), true),
        ]));
        let batches: Vec<RecordBatch> = (0..3)
            .map(|k| {
                let rows = 100 * (k + 1);
                let pair = StructArray::new(
                    inner.clone(),
                    vec![
                        Arc::new(Int64Array::from_iter(
                            (0..rows).map(|i| (i % 3 != 0).then_some(i as i64)),
                        )),
                        Arc::new(StringArray::from_iter(
                            (0..rows).map(|i| Some(format!("v{i}"))),
                        )),
                    ],
                    None,
                );
                RecordBatch::try_new(
                    schema.clone(),
                    vec![
                        Arc::new(Int64Array::from_iter_values(0..rows as i64)),
                        Arc::new(pair),
                    ],
                )
                .expect("fits")
            })
            .collect();
        assert_eq!(
            on_threads(&schema, &batches, 2),
            reference(&schema, &batches)
        );
    }

    #[test]
    fn utf8_view_strings_hash_like_utf8_on_the_parallel_path() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("a", DataType::Int64, false),
            Field::new("s", DataType::Utf8, true),
        ]));
        let view_schema = Arc::new(Schema::new(vec![
            Field::new("a", DataType::Int64, false),
            Field::new("s", DataType::Utf8View, true),
        ]));
        let rows = 2 * PARALLEL_ROWS;
        let strings = || (0..rows).map(|i| (!i.is_multiple_of(3)).then(|| format!("value {i}")));
        let plain = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int64Array::from_iter_values(0..rows as i64)),
                Arc::new(StringArray::from_iter(strings())),
            ],
        )
        .expect("fits");
        let view = RecordBatch::try_new(
            view_schema,
            vec![
                Arc::new(Int64Array::from_iter_values(0..rows as i64)),
                Arc::new(StringViewArray::from_iter(strings())),
            ],
        )
        .expect("fits");
        let mut hasher = LogicalHasher::new(&schema).expect("supported");
        hasher.update(&view).expect("the same logical schema");
        assert_eq!(*hasher.finish().digest(), reference(&schema, &[plain]));
    }
}
