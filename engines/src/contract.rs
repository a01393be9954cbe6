//! The engine contract as the coordinator enforces it, sans IO: what a successful ExecuteTransform must have
//! produced, checked against the files the engine wrote.

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;

use weir_dataset::data;
use weir_odf::{DatasetVocabulary, OffsetInterval};

/// An engine broke the contract; the transaction is aborted and the dataset keeps its previous head.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContractViolation {
    /// Success claims records but no data file was written.
    #[error("the engine claims records [{}, {}] but wrote no data file", interval.start, interval.end)]
    ClaimsRowsButNoFile {
        /// The claimed interval.
        interval: OffsetInterval,
    },
    /// The interval does not start at `next_offset`.
    #[error(
        "the engine's output starts at offset {found} but must start at next_offset {expected}"
    )]
    WrongStartOffset {
        /// `next_offset` of the request.
        expected: u64,
        /// The interval's start.
        found: u64,
    },
    /// The data file does not hold the claimed number of records.
    #[error("the engine claims {claimed} records but its data file holds {found}")]
    RecordCountMismatch {
        /// Records claimed.
        claimed: u64,
        /// Records in the file.
        found: u64,
    },
    /// Offsets in the file are not `next_offset, next_offset + 1, ...`.
    #[error("offsets are not contiguous: record {index} has offset {found}, expected {expected}")]
    NonContiguousOffsets {
        /// Position in the file.
        index: usize,
        /// Expected offset.
        expected: u64,
        /// Offset found.
        found: u64,
    },
    /// The output schema differs from the dataset's previous output.
    #[error("the output schema changed: was [{previous}], now [{found}]")]
    SchemaChanged {
        /// Previous schema.
        previous: String,
        /// New schema.
        found: String,
    },
    /// The data file is unreadable or lacks system columns.
    #[error("the engine's data file is unusable: {message}")]
    BadDataFile {
        /// Why.
        message: String,
    },
    /// The response stream carried two terminal messages.
    #[error("the engine sent two terminal messages")]
    TwoTerminalMessages,
    /// The response stream ended without a terminal message.
    #[error("the engine closed the stream without a terminal message")]
    NoTerminalMessage,
    /// The engine did not finish within the deadline.
    #[error("the engine did not answer within the {seconds} s deadline")]
    DeadlineExceeded {
        /// The deadline.
        seconds: u64,
    },
    /// The watermark went backwards.
    #[error("the engine's watermark went backwards")]
    WatermarkRegressed,
}

/// The contract's checks of an engine's data file, fed one record batch at a time, so a file of any size is
/// checked in bounded memory: [`OutputCheck::start`] with what the file's footer says, [`OutputCheck::batch`]
/// for every batch in file order, [`OutputCheck::finish`] at the end.
#[derive(Debug, Clone)]
pub struct OutputCheck {
    next_offset: u64,
    expected: u64,
    rows: u64,
    vocab: DatasetVocabulary,
}

impl OutputCheck {
    /// Checks what is known before reading records: the claimed interval against `next_offset` and the
    /// file's row count, and the file's schema (system columns normalised) against the previous output's.
    /// `Ok(None)` when there is nothing to read: no records claimed and none in the file.
    pub fn start(
        next_offset: u64,
        claimed: Option<OffsetInterval>,
        file_rows: Option<u64>,
        file_schema: Option<&SchemaRef>,
        previous_schema: Option<&SchemaRef>,
        vocab: &DatasetVocabulary,
    ) -> Result<Option<Self>, ContractViolation> {
        let Some(interval) = claimed else {
            if let Some(found) = file_rows
                && found > 0
            {
                return Err(ContractViolation::RecordCountMismatch { claimed: 0, found });
            }
            return Ok(None);
        };
        let (Some(found), Some(schema)) = (file_rows, file_schema) else {
            return Err(ContractViolation::ClaimsRowsButNoFile { interval });
        };
        if interval.start != next_offset {
            return Err(ContractViolation::WrongStartOffset {
                expected: next_offset,
                found: interval.start,
            });
        }
        if interval.end < interval.start || found != interval.len() {
            return Err(ContractViolation::RecordCountMismatch {
                claimed: interval.end.saturating_sub(interval.start) + 1,
                found,
            });
        }
        if let Some(prev) = previous_schema {
            let now = data::normalized_schema(schema, vocab);
            if !data::same_logical_columns(prev, &now) {
                return Err(ContractViolation::SchemaChanged {
                    previous: data::schema_text(prev),
                    found: data::schema_text(&now),
                });
            }
        }
        Ok(Some(Self {
            next_offset,
            expected: found,
            rows: 0,
            vocab: vocab.clone(),
        }))
    }

    /// Checks the next batch of the file: its offsets continue the previous batch's.
    pub fn batch(&mut self, batch: &RecordBatch) -> Result<(), ContractViolation> {
        let offsets = data::offset_values(batch, &self.vocab).map_err(|e| {
            ContractViolation::BadDataFile {
                message: e.to_string(),
            }
        })?;
        for (i, o) in offsets.iter().enumerate() {
            let index = self.rows + i as u64;
            let expected = self.next_offset + index;
            if *o != expected {
                return Err(ContractViolation::NonContiguousOffsets {
                    index: usize::try_from(index).unwrap_or(usize::MAX),
                    expected,
                    found: *o,
                });
            }
        }
        self.rows += offsets.len() as u64;
        Ok(())
    }

    /// The records read: the file must have held as many as its footer and the engine said.
    pub fn finish(self) -> Result<u64, ContractViolation> {
        if self.rows != self.expected {
            return Err(ContractViolation::RecordCountMismatch {
                claimed: self.expected,
                found: self.rows,
            });
        }
        Ok(self.rows)
    }
}

/// Checks a Success against the written data file held as one batch (`None` when no file exists): the
/// checks of [`OutputCheck`] in one call.
///
/// ```
/// use weir_odf::{OffsetInterval, DatasetVocabulary};
/// use weir_engines::contract::{check_transform_output, ContractViolation};
/// let err = check_transform_output(5, Some(OffsetInterval { start: 5, end: 6 }), None, None, &DatasetVocabulary::default());
/// assert!(matches!(err, Err(ContractViolation::ClaimsRowsButNoFile { .. })));
/// ```
pub fn check_transform_output(
    next_offset: u64,
    claimed: Option<OffsetInterval>,
    file: Option<&RecordBatch>,
    previous_schema: Option<&SchemaRef>,
    vocab: &DatasetVocabulary,
) -> Result<(), ContractViolation> {
    let schema = file.map(RecordBatch::schema);
    let check = OutputCheck::start(
        next_offset,
        claimed,
        file.map(|b| b.num_rows() as u64),
        schema.as_ref(),
        previous_schema,
        vocab,
    )?;
    if let (Some(mut check), Some(batch)) = (check, file) {
        check.batch(batch)?;
        check.finish()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    use std::sync::Arc;

    fn out(offsets: &[i64], col: &str) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("offset", DataType::Int64, false),
            Field::new(col, DataType::Utf8, false),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from(offsets.to_vec())),
                Arc::new(StringArray::from(vec!["x"; offsets.len()])),
            ],
        )
        .unwrap()
    }

    const V: fn() -> DatasetVocabulary = DatasetVocabulary::default;

    #[test]
    fn a_matching_output_passes() {
        let b = out(&[10, 11], "a");
        assert_eq!(
            check_transform_output(
                10,
                Some(OffsetInterval { start: 10, end: 11 }),
                Some(&b),
                None,
                &V()
            ),
            Ok(())
        );
        assert_eq!(
            check_transform_output(10, None, Some(&out(&[], "a")), None, &V()),
            Ok(())
        );
    }

    #[test]
    fn gaps_counts_and_starts_are_violations() {
        let iv = Some(OffsetInterval { start: 10, end: 11 });
        assert!(matches!(
            check_transform_output(10, iv, Some(&out(&[10, 12], "a")), None, &V()),
            Err(ContractViolation::NonContiguousOffsets {
                index: 1,
                expected: 11,
                found: 12
            })
        ));
        assert!(matches!(
            check_transform_output(10, iv, Some(&out(&[10], "a")), None, &V()),
            Err(ContractViolation::RecordCountMismatch {
                claimed: 2,
                found: 1
            })
        ));
        assert!(matches!(
            check_transform_output(9, iv, Some(&out(&[10, 11], "a")), None, &V()),
            Err(ContractViolation::WrongStartOffset {
                expected: 9,
                found: 10
            })
        ));
        assert!(matches!(
            check_transform_output(10, None, Some(&out(&[10], "a")), None, &V()),
            Err(ContractViolation::RecordCountMismatch {
                claimed: 0,
                found: 1
            })
        ));
    }

    #[test]
    fn a_schema_change_is_a_violation() {
        let prev = out(&[1], "a").schema();
        assert!(matches!(
            check_transform_output(
                10,
                Some(OffsetInterval { start: 10, end: 10 }),
                Some(&out(&[10], "b")),
                Some(&prev),
                &V()
            ),
            Err(ContractViolation::SchemaChanged { .. })
        ));
    }
}
