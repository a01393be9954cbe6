//! UTC timestamps: [`chrono::DateTime<Utc>`] in the model, the 16-byte
//! `Timestamp` struct (year, ordinal day, seconds from midnight,
//! nanoseconds) on the wire.

use chrono::{DateTime, Datelike, NaiveDate, NaiveTime, Timelike, Utc};

use crate::generated as fb;

/// The fields of the wire `Timestamp` struct, before validation.
///
/// ```
/// use chrono::{TimeZone, Utc};
/// use weir_engine_contract::model::WireTimestamp;
///
/// let instant = Utc.with_ymd_and_hms(2023, 3, 1, 0, 0, 0).unwrap();
/// let wire = WireTimestamp::from_utc(&instant);
/// assert_eq!((wire.year, wire.ordinal, wire.seconds_from_midnight), (2023, 60, 0));
/// assert_eq!(wire.to_utc(), Ok(instant));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WireTimestamp {
    /// Proleptic Gregorian year.
    pub year: i32,
    /// Day of the year, 1-based.
    pub ordinal: u16,
    /// Whole seconds since midnight UTC.
    pub seconds_from_midnight: u32,
    /// Nanoseconds within the second (1_000_000_000 and above only for a
    /// leap second, at second 59 of a minute).
    pub nanoseconds: u32,
}

/// A wire timestamp that names no instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "timestamp out of range: year {} ordinal {} seconds_from_midnight {} nanoseconds {}: {reason}",
    timestamp.year,
    timestamp.ordinal,
    timestamp.seconds_from_midnight,
    timestamp.nanoseconds
)]
pub struct TimestampError {
    /// The rejected value.
    pub timestamp: WireTimestamp,
    /// Which field is out of range.
    pub reason: TimestampRange,
}

/// Which part of a wire timestamp is out of range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimestampRange {
    /// Year outside what chrono represents, or ordinal not a day of that year.
    Date,
    /// Seconds at or past 86 400, or nanoseconds not valid for that second.
    TimeOfDay,
}

impl std::fmt::Display for TimestampRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Date => "no such day",
            Self::TimeOfDay => "no such time of day",
        })
    }
}

impl WireTimestamp {
    /// Splits an instant into the wire fields. Never fails: every
    /// `DateTime<Utc>` has a wire form.
    pub fn from_utc(instant: &DateTime<Utc>) -> Self {
        let naive = instant.naive_utc();
        Self {
            year: naive.year(),
            // ordinal() is 1..=366, so it always fits.
            ordinal: u16::try_from(naive.ordinal()).unwrap_or(u16::MAX),
            seconds_from_midnight: naive.num_seconds_from_midnight(),
            nanoseconds: naive.nanosecond(),
        }
    }

    /// The instant these fields name.
    pub fn to_utc(&self) -> Result<DateTime<Utc>, TimestampError> {
        let error = |reason| TimestampError {
            timestamp: *self,
            reason,
        };
        let date = NaiveDate::from_yo_opt(self.year, u32::from(self.ordinal))
            .ok_or_else(|| error(TimestampRange::Date))?;
        let time = NaiveTime::from_num_seconds_from_midnight_opt(
            self.seconds_from_midnight,
            self.nanoseconds,
        )
        .ok_or_else(|| error(TimestampRange::TimeOfDay))?;
        Ok(date.and_time(time).and_utc())
    }

    pub(crate) fn from_fb(timestamp: &fb::Timestamp) -> Self {
        Self {
            year: timestamp.year(),
            ordinal: timestamp.ordinal(),
            seconds_from_midnight: timestamp.seconds_from_midnight(),
            nanoseconds: timestamp.nanoseconds(),
        }
    }

    pub(crate) fn to_fb(self) -> fb::Timestamp {
        fb::Timestamp::new(
            self.year,
            self.ordinal,
            self.seconds_from_midnight,
            self.nanoseconds,
        )
    }
}

/// Encodes an instant as the wire struct.
pub(crate) fn to_fb(instant: &DateTime<Utc>) -> fb::Timestamp {
    WireTimestamp::from_utc(instant).to_fb()
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn leap_day_and_end_of_year_round_trip() {
        for instant in [
            Utc.with_ymd_and_hms(2024, 2, 29, 12, 30, 5).unwrap(),
            Utc.with_ymd_and_hms(2024, 12, 31, 23, 59, 59).unwrap(),
            Utc.with_ymd_and_hms(1, 1, 1, 0, 0, 0).unwrap(),
            Utc.with_ymd_and_hms(-44, 3, 15, 0, 0, 0).unwrap(),
        ] {
            let wire = WireTimestamp::from_utc(&instant);
            assert_eq!(wire.to_utc(), Ok(instant));
        }
    }

    #[test]
    fn nanoseconds_survive() {
        let instant = Utc.timestamp_opt(1_700_000_000, 123_456_789).unwrap();
        let wire = WireTimestamp::from_utc(&instant);
        assert_eq!(wire.nanoseconds, 123_456_789);
        assert_eq!(wire.to_utc(), Ok(instant));
    }

    #[test]
    fn ordinal_zero_is_rejected() {
        let wire = WireTimestamp {
            year: 2023,
            ordinal: 0,
            seconds_from_midnight: 0,
            nanoseconds: 0,
        };
        assert_eq!(wire.to_utc().unwrap_err().reason, TimestampRange::Date);
    }

    #[test]
    fn day_366_of_a_common_year_is_rejected() {
        let wire = WireTimestamp {
            year: 2023,
            ordinal: 366,
            seconds_from_midnight: 0,
            nanoseconds: 0,
        };
        assert_eq!(wire.to_utc().unwrap_err().reason, TimestampRange::Date);
    }

    #[test]
    fn year_beyond_chrono_is_rejected() {
        let wire = WireTimestamp {
            year: i32::MAX,
            ordinal: 1,
            seconds_from_midnight: 0,
            nanoseconds: 0,
        };
        assert_eq!(wire.to_utc().unwrap_err().reason, TimestampRange::Date);
    }

    #[test]
    fn second_86400_and_bad_nanoseconds_are_rejected() {
        for (seconds_from_midnight, nanoseconds) in [(86_400, 0), (0, 1_000_000_000), (0, u32::MAX)]
        {
            let wire = WireTimestamp {
                year: 2023,
                ordinal: 1,
                seconds_from_midnight,
                nanoseconds,
            };
            assert_eq!(wire.to_utc().unwrap_err().reason, TimestampRange::TimeOfDay);
        }
    }

    #[test]
    fn leap_second_is_kept() {
        let wire = WireTimestamp {
            year: 2016,
            ordinal: 366,
            seconds_from_midnight: 86_399,
            nanoseconds: 1_500_000_000,
        };
        let instant = wire.to_utc().unwrap();
        assert_eq!(WireTimestamp::from_utc(&instant), wire);
    }
}
