//! kamu's event-time sources: the event time given to records whose data has no event-time column.
//!
//! - none, or `FromSystemTime`: the time of ingest;
//! - `FromMetadata` (a `Url`): the resource's modification time: an http(s) response's `Last-Modified`
//!   (the time of the fetch when the server sends none), a local file's or an object's modification time;
//! - `FromPath { pattern, timestampFormat }` (a `FilesGlob`): the first group of the regular expression
//!   `pattern` matched against the file's name, parsed with the chrono format `timestampFormat` (default
//!   `%Y-%m-%d`; a format without time or zone is midnight UTC).
//!
//! A fetched copy keeps its source's modification time ([`super::fetch`], [`super::http`]), so
//! `FromMetadata` reads it from the copy.

use chrono::{DateTime, NaiveDate, TimeZone as _, Utc};
use weir_odf::{EventTimeSource, FetchStep};

use super::fetch::{FetchError, Fetched};

/// The event time of records without an event-time column, fetched as `fetched` by `fetch`.
pub fn for_records_without_one(
    fetch: &FetchStep,
    fetched: &Fetched,
    now: DateTime<Utc>,
) -> Result<DateTime<Utc>, FetchError> {
    let source = match fetch {
        FetchStep::Url(u) => u.event_time.as_ref(),
        FetchStep::FilesGlob(g) => g.event_time.as_ref(),
        _ => None,
    };
    let err = |message: String| FetchError {
        what: fetched.name.clone(),
        message,
    };
    match source {
        None | Some(EventTimeSource::FromSystemTime) => Ok(now),
        Some(EventTimeSource::FromMetadata) => {
            let modified = std::fs::metadata(&fetched.path)
                .and_then(|m| m.modified())
                .map_err(|e| {
                    err(format!(
                        "its modification time (eventTime: FromMetadata): {e}"
                    ))
                })?;
            let t: DateTime<Utc> = modified.into();
            Utc.timestamp_millis_opt(t.timestamp_millis())
                .single()
                .ok_or_else(|| err("its modification time is out of range".into()))
        }
        Some(EventTimeSource::FromPath(p)) => {
            let name = std::path::Path::new(&fetched.name)
                .file_name()
                .map_or(fetched.name.clone(), |n| n.to_string_lossy().into_owned());
            from_path(&name, &p.pattern, p.timestamp_format.as_deref()).map_err(err)
        }
    }
}

/// The time the first group of `pattern` finds in `name`, parsed with `format` (`%Y-%m-%d` by default).
///
/// ```
/// use weir_ingest::event_time::from_path;
/// let t = from_path("sales-2024-06-01.csv", r"sales-(\d{4}-\d{2}-\d{2})\.csv", None).unwrap();
/// assert_eq!(t.to_rfc3339(), "2024-06-01T00:00:00+00:00");
/// assert!(from_path("other.csv", r"sales-(.*)\.csv", None).is_err());
/// ```
pub fn from_path(name: &str, pattern: &str, format: Option<&str>) -> Result<DateTime<Utc>, String> {
    let re = regex::Regex::new(pattern)
        .map_err(|e| format!("eventTime pattern `{pattern}` is not a regular expression: {e}"))?;
    let captures = re.captures(name).ok_or_else(|| {
        format!("eventTime pattern `{pattern}` does not match the file name `{name}`")
    })?;
    let text = captures
        .get(1)
        .ok_or_else(|| {
            format!("eventTime pattern `{pattern}` has no group (`(...)`) around the time")
        })?
        .as_str();
    let format = format.unwrap_or("%Y-%m-%d");
    if let Ok(t) = DateTime::parse_from_str(text, format) {
        return Ok(t.with_timezone(&Utc));
    }
    if let Ok(t) = chrono::NaiveDateTime::parse_from_str(text, format) {
        return Ok(Utc.from_utc_datetime(&t));
    }
    NaiveDate::parse_from_str(text, format)
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|t| Utc.from_utc_datetime(&t))
        .ok_or_else(|| {
            format!("`{text}` in the file name `{name}` is not a time in the format `{format}`")
        })
}
