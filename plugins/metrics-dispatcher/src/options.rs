//! The dispatcher options, parsed from the JSON the host passes.

use serde_json::Value;
use weir_plugin_interface::CallError;

/// Default latency histogram bounds, in seconds: 1 µs to 10 s, one bucket per
/// decade (dispatching in-process is fast; a stalled consumer is not).
pub(crate) const DEFAULT_LATENCY_BOUNDS: [f64; 8] = [1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0];

/// What `{"max_demand": 1000, "shuffle_demands_on_first_dispatch": true, ...}` says.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Options {
    /// GenStage's `max_demand` dispatcher option: the expected maximum ask.
    pub(crate) max_demand: Option<u64>,
    /// Shuffle the consumer list at the first dispatch, with this seed.
    pub(crate) shuffle_seed: Option<u64>,
    /// Upper bounds of the ask-to-fulfilment histogram, ascending, seconds.
    pub(crate) latency_bounds: Vec<f64>,
    /// Time one ask in this many, per subscription, for the histogram.
    pub(crate) latency_sample_every: u64,
    /// Time asks with `Instant` even where the time-stamp counter is usable.
    pub(crate) std_clock: bool,
}

impl Options {
    /// Parse the options object (`null` and `{}` mean all defaults).
    pub(crate) fn parse(json: &str) -> Result<Self, CallError> {
        let value: Value = serde_json::from_str(json)
            .map_err(|e| CallError::invalid_option("options", format!("not JSON: {e}")))?;
        let map = match value {
            Value::Null => serde_json::Map::new(),
            Value::Object(map) => map,
            other => {
                return Err(CallError::invalid_option(
                    "options",
                    format!("expected a JSON object, got {other}"),
                ));
            }
        };
        let mut options = Options {
            max_demand: None,
            shuffle_seed: None,
            latency_bounds: DEFAULT_LATENCY_BOUNDS.to_vec(),
            latency_sample_every: 1,
            std_clock: false,
        };
        let mut shuffle = false;
        let mut seed = None;
        for (key, value) in &map {
            match key.as_str() {
                "max_demand" => options.max_demand = Some(positive(key, value)?),
                "shuffle_demands_on_first_dispatch" => {
                    shuffle = value.as_bool().ok_or_else(|| {
                        CallError::invalid_option(
                            key,
                            format!("expected true or false, got {value}"),
                        )
                    })?;
                }
                "shuffle_seed" => {
                    seed = Some(value.as_u64().ok_or_else(|| {
                        CallError::invalid_option(
                            key,
                            format!("expected an unsigned integer, got {value}"),
                        )
                    })?);
                }
                "latency_buckets_seconds" => options.latency_bounds = bounds(key, value)?,
                "latency_sample_every" => options.latency_sample_every = positive(key, value)?,
                "latency_clock" => {
                    options.std_clock = match value.as_str() {
                        Some("auto") => false,
                        Some("std") => true,
                        _ => {
                            return Err(CallError::invalid_option(
                                key,
                                format!("expected \"auto\" or \"std\", got {value}"),
                            ));
                        }
                    };
                }
                other => {
                    return Err(CallError::invalid_option(
                        other,
                        "unknown option (known: max_demand, shuffle_demands_on_first_dispatch, \
                         shuffle_seed, latency_buckets_seconds, latency_sample_every, \
                         latency_clock)",
                    ));
                }
            }
        }
        if shuffle {
            options.shuffle_seed = Some(seed.unwrap_or_else(crate::shuffle::random_seed));
        } else if seed.is_some() {
            return Err(CallError::invalid_option(
                "shuffle_seed",
                "only meaningful with shuffle_demands_on_first_dispatch: true",
            ));
        }
        Ok(options)
    }
}

fn positive(key: &str, value: &Value) -> Result<u64, CallError> {
    match value.as_u64() {
        Some(n) if n >= 1 => Ok(n),
        _ => Err(CallError::invalid_option(
            key,
            format!("expected an integer of at least 1, got {value}"),
        )),
    }
}

fn bounds(key: &str, value: &Value) -> Result<Vec<f64>, CallError> {
    let invalid = || {
        CallError::invalid_option(
            key,
            format!("expected a non-empty ascending array of positive seconds, got {value}"),
        )
    };
    let array = value.as_array().ok_or_else(invalid)?;
    let bounds: Vec<f64> = array
        .iter()
        .map(|v| v.as_f64().filter(|b| b.is_finite() && *b > 0.0))
        .collect::<Option<_>>()
        .ok_or_else(invalid)?;
    if bounds.is_empty() || bounds.windows(2).any(|w| w[0] >= w[1]) {
        return Err(invalid());
    }
    Ok(bounds)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_object_and_null_give_the_defaults() {
        for json in ["{}", "null"] {
            let options = Options::parse(json).expect("valid options");
            assert_eq!(options.max_demand, None);
            assert_eq!(options.shuffle_seed, None);
            assert_eq!(options.latency_bounds, DEFAULT_LATENCY_BOUNDS.to_vec());
            assert_eq!(options.latency_sample_every, 1);
            assert!(!options.std_clock);
        }
    }

    #[test]
    fn every_option_is_read() {
        let options = Options::parse(
            r#"{"max_demand": 3, "shuffle_demands_on_first_dispatch": true, "shuffle_seed": 7,
                "latency_buckets_seconds": [0.5, 1], "latency_sample_every": 16,
                "latency_clock": "std"}"#,
        )
        .expect("valid options");
        assert_eq!(
            options,
            Options {
                max_demand: Some(3),
                shuffle_seed: Some(7),
                latency_bounds: vec![0.5, 1.0],
                latency_sample_every: 16,
                std_clock: true,
            }
        );
    }

    #[test]
    fn invalid_values_name_the_option() {
        for (json, option) in [
            (r#"{"max_demand": 0}"#, "max_demand"),
            (r#"{"max_demand": "many"}"#, "max_demand"),
            (
                r#"{"shuffle_demands_on_first_dispatch": 1}"#,
                "shuffle_demands_on_first_dispatch",
            ),
            (r#"{"shuffle_seed": 1}"#, "shuffle_seed"),
            (
                r#"{"latency_buckets_seconds": [1, 0.5]}"#,
                "latency_buckets_seconds",
            ),
            (
                r#"{"latency_buckets_seconds": []}"#,
                "latency_buckets_seconds",
            ),
            (r#"{"latency_sample_every": 0}"#, "latency_sample_every"),
            (r#"{"latency_clock": "tsc"}"#, "latency_clock"),
            (r#"{"partitions": 4}"#, "partitions"),
            ("[1]", "options"),
            ("{", "options"),
        ] {
            match Options::parse(json) {
                Err(CallError::InvalidOption { option: got, .. }) => {
                    assert_eq!(got.as_str(), option, "{json}")
                }
                other => panic!("{json}: expected InvalidOption, got {other:?}"),
            }
        }
    }
}
