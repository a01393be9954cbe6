//! Timestamps: `chrono::DateTime<Utc>` in the model, the FlatBuffers struct
//! `Timestamp { year: int32, ordinal: uint16, seconds_from_midnight: uint32, nanoseconds: uint32 }` on the
//! wire (`ordinal` is the 1-based day of the year).
//!
//! ```
//! use chrono::{TimeZone, Utc};
//! let t = Utc.with_ymd_and_hms(2024, 2, 1, 0, 0, 3).unwrap();
//! let fb = weir_odf::timestamp::to_flatbuffers(&t);
//! assert_eq!((fb.year(), fb.ordinal(), fb.seconds_from_midnight()), (2024, 32, 3));
//! assert_eq!(weir_odf::timestamp::from_flatbuffers(&fb)?, t);
//! # Ok::<(), weir_odf::TimestampError>(())
//! ```

use chrono::{DateTime, Datelike, NaiveDate, NaiveTime, Timelike, Utc};

use crate::generated as fb;

/// Why a FlatBuffers `Timestamp` is not a valid UTC date and time.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TimestampError {
    /// No such day: the year is out of chrono's range, or the ordinal is 0 or past the year's end.
    #[error("year {year} has no day {ordinal}")]
    InvalidDate {
        /// The `year` field.
        year: i32,
        /// The `ordinal` field (1-based day of the year).
        ordinal: u16,
    },
    /// No such time of day: seconds past 86 399, or nanoseconds past 999 999 999 (past 1 999 999 999 in a
    /// leap second).
    #[error("{seconds_from_midnight} s + {nanoseconds} ns is not a time of day")]
    InvalidTime {
        /// The `seconds_from_midnight` field.
        seconds_from_midnight: u32,
        /// The `nanoseconds` field.
        nanoseconds: u32,
    },
}

/// The FlatBuffers form of a UTC time. Every `DateTime<Utc>` has one.
pub fn to_flatbuffers(time: &DateTime<Utc>) -> fb::Timestamp {
    let naive = time.naive_utc();
    // A chrono ordinal is at most 366, so it fits in 16 bits.
    let ordinal = u16::try_from(naive.ordinal()).unwrap_or(u16::MAX);
    fb::Timestamp::new(
        naive.year(),
        ordinal,
        naive.num_seconds_from_midnight(),
        naive.nanosecond(),
    )
}

/// The UTC time of a FlatBuffers `Timestamp`, checked: out-of-range fields are an error, never a panic.
pub fn from_flatbuffers(ts: &fb::Timestamp) -> Result<DateTime<Utc>, TimestampError> {
    let date = NaiveDate::from_yo_opt(ts.year(), u32::from(ts.ordinal())).ok_or(
        TimestampError::InvalidDate {
            year: ts.year(),
            ordinal: ts.ordinal(),
        },
    )?;
    let time =
        NaiveTime::from_num_seconds_from_midnight_opt(ts.seconds_from_midnight(), ts.nanoseconds())
            .ok_or(TimestampError::InvalidTime {
                seconds_from_midnight: ts.seconds_from_midnight(),
                nanoseconds: ts.nanoseconds(),
            })?;
    Ok(date.and_time(time).and_utc())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn day_zero_and_day_367_are_invalid_dates() {
        for ordinal in [0, 367] {
            assert_eq!(
                from_flatbuffers(&fb::Timestamp::new(2024, ordinal, 0, 0)),
                Err(TimestampError::InvalidDate {
                    year: 2024,
                    ordinal
                })
            );
        }
        assert!(from_flatbuffers(&fb::Timestamp::new(2023, 366, 0, 0)).is_err());
        assert!(from_flatbuffers(&fb::Timestamp::new(i32::MAX, 1, 0, 0)).is_err());
    }

    #[test]
    fn a_second_past_midnight_is_an_invalid_time() {
        assert!(matches!(
            from_flatbuffers(&fb::Timestamp::new(2024, 1, 86_400, 0)),
            Err(TimestampError::InvalidTime { .. })
        ));
        assert!(from_flatbuffers(&fb::Timestamp::new(2024, 1, 0, 1_000_000_000)).is_err());
    }

    #[test]
    fn nanoseconds_and_leap_years_round_trip() {
        let t = NaiveDate::from_yo_opt(2024, 366)
            .and_then(|d| d.and_hms_nano_opt(23, 59, 59, 123_456_789))
            .map(|t| t.and_utc())
            .expect("a valid time");
        assert_eq!(from_flatbuffers(&to_flatbuffers(&t)), Ok(t));
    }
}
