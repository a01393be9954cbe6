//! DeriveProvenance: the input records behind given output records of a map/filter transform step.
//!
//! The step is replayed (same inputs, same `next_offset`) without writing anything; each output record's
//! input offset is known from lineage. Window aggregations are refused: each of their records
//! summarises a whole window.

use std::collections::BTreeSet;

use crate::error::EngineError;
use crate::execute::Reporter;
use crate::inputs::{InputSource, register_inputs};
use crate::prepare::{QueryShape, prepare};
use crate::progress::{Phase, ProgressSink};
use crate::request::{
    DeriveProvenanceRequest, DeriveProvenanceSuccess, InputProvenance, OffsetInterval,
};
use crate::session::new_session;
use crate::transform::{MapFilterRun, first_offset, run_map_filter};

pub(crate) async fn derive_provenance(
    request: &DeriveProvenanceRequest,
    progress: &dyn ProgressSink,
) -> Result<DeriveProvenanceSuccess, EngineError> {
    let mut reporter = Reporter::new(progress);
    reporter.report(Phase::Planning, None, None);
    let first = first_offset(request.next_offset)?;
    let ctx = new_session();
    let sources = request
        .query_inputs
        .iter()
        .map(InputSource::for_transform)
        .collect::<Result<Vec<_>, _>>()?;
    let inputs = register_inputs(&ctx, &sources).await?;
    let prepared = match prepare(&ctx, &request.transform, &inputs, &request.vocab).await {
        Ok(prepared) => prepared,
        Err(error) => {
            if crate::chain::split(&request.transform, &sources, &request.vocab)
                .await?
                .is_some()
            {
                return Err(EngineError::ProvenanceUnsupported {
                    reason: "provenance of chained stateful query steps is not supported yet; it \
                             is derived for map/filter queries only"
                        .to_owned(),
                });
            }
            return Err(error);
        }
    };
    let query_columns = match prepared.shape {
        QueryShape::MapFilter { query_columns, .. } => query_columns,
        QueryShape::Temporal(_) => {
            return Err(EngineError::ProvenanceUnsupported {
                reason: "provenance of temporal joins is not supported yet; it is derived for \
                         map/filter queries only"
                    .to_owned(),
            });
        }
        QueryShape::Interval(_) => {
            return Err(EngineError::ProvenanceUnsupported {
                reason: "provenance of interval joins is not supported yet; it is derived for \
                         map/filter queries only"
                    .to_owned(),
            });
        }
        QueryShape::TopN(_) => {
            return Err(EngineError::ProvenanceUnsupported {
                reason: "provenance of top-N queries is not supported yet; it is derived for \
                         map/filter queries only"
                    .to_owned(),
            });
        }
        QueryShape::Window(_) => {
            return Err(EngineError::ProvenanceUnsupported {
                reason:
                    "each record of a window aggregation summarises a whole window; provenance is \
                         derived for map/filter queries only"
                        .to_owned(),
            });
        }
    };
    let wanted: BTreeSet<i64> = request
        .output_offsets
        .iter()
        .map(|&offset| i64::try_from(offset).unwrap_or(i64::MAX))
        .collect();
    let mut found: BTreeSet<i64> = BTreeSet::new();
    let mut behind: BTreeSet<(i32, i64)> = BTreeSet::new();
    let run = MapFilterRun {
        ctx: &ctx,
        prepared: &prepared,
        query_columns,
        first_offset: first,
        system_time_ms: request.system_time.timestamp_millis(),
    };
    let produced = run_map_filter(&run, None, &mut reporter, |first_output, records| {
        let last_output = first_output + records.len() as i64;
        for &offset in wanted.range(first_output..last_output) {
            if let Some(record) = usize::try_from(offset - first_output)
                .ok()
                .and_then(|i| records.get(i))
            {
                found.insert(offset);
                behind.insert((record.input, record.offset));
            }
        }
    })
    .await?;
    if let Some(&missing) = wanted.difference(&found).next() {
        let produced = if produced == 0 {
            "it produced no records".to_owned()
        } else {
            format!(
                "it produced offsets {first} to {}",
                first + produced as i64 - 1
            )
        };
        return Err(EngineError::OutputOffsetNotProduced {
            offset: missing as u64,
            produced,
        });
    }
    Ok(DeriveProvenanceSuccess {
        inputs: request
            .query_inputs
            .iter()
            .enumerate()
            .map(|(index, query_input)| {
                let offsets: BTreeSet<i64> = behind
                    .iter()
                    .filter(|(input, _)| usize::try_from(*input).ok() == Some(index))
                    .map(|(_, offset)| *offset)
                    .collect();
                InputProvenance {
                    dataset_id: query_input.dataset_id,
                    query_alias: query_input.query_alias.clone(),
                    offset_intervals: merge(&offsets),
                }
            })
            .collect(),
    })
}

/// Sorted offsets as sorted, non-overlapping closed intervals.
fn merge(offsets: &BTreeSet<i64>) -> Vec<OffsetInterval> {
    let mut intervals: Vec<OffsetInterval> = Vec::new();
    for &offset in offsets {
        let Ok(offset) = u64::try_from(offset) else {
            continue;
        };
        match intervals.last_mut() {
            Some(last) if last.end + 1 == offset => last.end = offset,
            _ => intervals.push(OffsetInterval {
                start: offset,
                end: offset,
            }),
        }
    }
    intervals
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adjacent_offsets_merge_into_intervals() {
        let offsets: BTreeSet<i64> = [1, 2, 3, 7, 9, 10].into_iter().collect();
        let got: Vec<(u64, u64)> = merge(&offsets).iter().map(|i| (i.start, i.end)).collect();
        assert_eq!(got, [(1, 3), (7, 7), (9, 10)]);
    }
}
