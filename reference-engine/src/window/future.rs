//! A lower bound of the event times still to come while a window query reads its input in offset order, from
//! the input files' Parquet row-group statistics (no record is read): with it, a window that no record still
//! to come can fall into is emitted as soon as the stream passes it, so only the windows still open are
//! buffered instead of every record of the transaction.
//!
//! A record of offset greater than `o` is in a row group whose largest offset is greater than `o`; its event
//! time is at least that row group's smallest. So after the record at offset `o`, every record still to come
//! has an event time of at least [`FutureEventTimes::after`]`(o)`, and lies in a window that starts later
//! than that minus the window's width.

use std::fs::File;

use datafusion::parquet::file::reader::{FileReader, SerializedFileReader};
use datafusion::parquet::file::statistics::Statistics;

/// Per row group of the input, in offset order: its largest offset and, from there on, the smallest event
/// time of it and of every row group after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FutureEventTimes {
    /// `(largest offset, smallest event time from this row group on)`, sorted by offset.
    groups: Vec<(i64, i64)>,
}

impl FutureEventTimes {
    /// Reads the footers of `files`; `None` when a row group lacks the statistics (nothing is then emitted
    /// early: the query runs as without a bound).
    pub(crate) fn read(files: &[String], offset: &str, event_time: &str) -> Option<Self> {
        let mut groups = Vec::new();
        for path in files {
            let reader = SerializedFileReader::new(File::open(path).ok()?).ok()?;
            let meta = reader.metadata();
            let schema = meta.file_metadata().schema_descr();
            let column =
                |name: &str| (0..schema.num_columns()).find(|&i| schema.column(i).name() == name);
            let (o, t) = (column(offset)?, column(event_time)?);
            for rg in meta.row_groups() {
                let max_offset = match rg.column(o).statistics()? {
                    Statistics::Int64(s) => *s.max_opt()?,
                    _ => return None,
                };
                let min_time = match rg.column(t).statistics()? {
                    Statistics::Int64(s) => *s.min_opt()?,
                    _ => return None,
                };
                groups.push((max_offset, min_time));
            }
        }
        groups.sort_by_key(|g| g.0);
        let mut running = i64::MAX;
        for g in groups.iter_mut().rev() {
            running = running.min(g.1);
            g.1 = running;
        }
        Some(Self { groups })
    }

    /// The smallest event time (ms) a record of offset greater than `offset` can have; `None` when no such
    /// record exists.
    pub(crate) fn after(&self, offset: i64) -> Option<i64> {
        let first = self.groups.partition_point(|g| g.0 <= offset);
        self.groups.get(first).map(|g| g.1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_is_the_smallest_event_time_of_every_later_row_group() {
        // Row groups (largest offset, smallest event time) 9: 5, 19: 30, 29: 20, as `read` folds them.
        let f = FutureEventTimes {
            groups: vec![(9, 5), (19, 20), (29, 20)],
        };
        assert_eq!(f.after(-1), Some(5));
        assert_eq!(
            f.after(9),
            Some(20),
            "a later group holds an earlier time than the next one"
        );
        assert_eq!(f.after(25), Some(20));
        assert_eq!(f.after(29), None);
    }
}
