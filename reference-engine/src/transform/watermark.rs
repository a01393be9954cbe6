//! The output watermark rule.

use chrono::{DateTime, Utc};

use crate::request::{TransformRequestInput, Watermark};

/// The event time of an input's latest explicit watermark: the one with the latest system time (the last
/// one listed among equals).
pub(crate) fn latest_watermark(watermarks: &[Watermark]) -> Option<DateTime<Utc>> {
    watermarks
        .iter()
        .enumerate()
        .max_by_key(|(position, w)| (w.system_time, *position))
        .map(|(_, w)| w.event_time)
}

/// The minimum over inputs of their latest explicit watermark's event time; inputs without explicit
/// watermarks are skipped, and with none at all there is no output watermark.
///
/// "Latest" is the watermark with the latest system time (the last one listed among equals).
pub(crate) fn output_watermark(inputs: &[TransformRequestInput]) -> Option<DateTime<Utc>> {
    inputs
        .iter()
        .filter_map(|input| latest_watermark(&input.explicit_watermarks))
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::{DatasetVocabulary, Watermark};
    use chrono::TimeZone;

    fn input(watermarks: &[(i64, i64)]) -> TransformRequestInput {
        TransformRequestInput {
            dataset_id: crate::request::DatasetId::from_key([0; 32]),
            dataset_alias: "a".into(),
            query_alias: "a".into(),
            vocab: DatasetVocabulary::default(),
            offset_interval: None,
            data_paths: Vec::new(),
            schema_file: "s".into(),
            explicit_watermarks: watermarks
                .iter()
                .map(|&(system, event)| Watermark {
                    system_time: Utc.timestamp_opt(system, 0).unwrap(),
                    event_time: Utc.timestamp_opt(event, 0).unwrap(),
                })
                .collect(),
        }
    }

    #[test]
    fn minimum_over_inputs_of_their_latest_watermark() {
        let inputs = [input(&[(1, 100), (2, 50)]), input(&[(5, 70)]), input(&[])];
        assert_eq!(output_watermark(&inputs), Utc.timestamp_opt(50, 0).single());
    }

    #[test]
    fn no_explicit_watermark_means_no_output_watermark() {
        assert_eq!(output_watermark(&[input(&[]), input(&[])]), None);
    }
}
