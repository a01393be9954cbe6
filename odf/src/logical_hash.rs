//! The logical hash of data: a content hash of records, independent of how a file encodes them
//! (feature `arrow`).
//!
//! It is arrow-digest's `RecordDigestV0` with SHA3-256, stored with multicodec `arrow0-sha3-256` (0x300016),
//! which is what kamu computes and `kamu verify` compares. The digest does not depend on how records are
//! split into batches (kamu reads Parquet in batches of 10 000 rows).
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
//! let mut in_one = odf::logical_hash::LogicalHasher::new(&schema)?;
//! in_one.update(&RecordBatch::try_new(schema.clone(), vec![Arc::new(Int64Array::from_iter_values(0..4))])?)?;
//! let mut in_two = odf::logical_hash::LogicalHasher::new(&schema)?;
//! in_two.update(&batch(0)?)?;
//! in_two.update(&batch(2)?)?;
//! let hash = in_one.finish();
//! assert_eq!(hash, in_two.finish());
//! assert_eq!(hash.codec(), odf::Multicodec::Arrow0_Sha3_256);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use arrow::array::RecordBatch;
use arrow::datatypes::{DataType, Field, Schema};
use arrow_digest::{RecordDigest, RecordDigestV0};
use sha3_for_arrow_digest::Sha3_256;

use crate::arrow_schema::same_logical_schema;
use crate::{Multicodec, Multihash};

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
}

/// A streaming logical hasher: make it for a schema, feed it that schema's record batches in order, finish.
pub struct LogicalHasher {
    schema: Schema,
    digest: RecordDigestV0<Sha3_256>,
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
            digest: RecordDigestV0::new(schema),
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
        let digest: [u8; 32] = self.digest.finalize().into();
        Multihash::new(Multicodec::Arrow0_Sha3_256, digest)
            .unwrap_or_else(|_| unreachable!("a hash codec"))
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
