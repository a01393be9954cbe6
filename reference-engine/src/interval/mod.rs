//! Stream-to-stream interval joins: two inputs joined on a condition that bounds one side's event time
//! by the other's (Flink's interval join; kamu's `overdue_shipments`):
//!
//! ```sql
//! SELECT o.event_time AS order_time, o.order_id, s.event_time AS shipped_time
//! FROM orders AS o
//! LEFT JOIN shipments AS s
//!   ON o.order_id = s.order_id
//!  AND s.event_time BETWEEN o.event_time AND o.event_time + INTERVAL '2' DAY
//! ```
//!
//! - `query` finds the join under the query's map/filter operators, reads the time bound off its
//!   condition, and binds the plan to one transaction's records.
//! - [`state`] is the sans-IO state of each side: the records the other side's records still to come
//!   may match, until the other side's watermark passes their bound.
//! - `checkpoint` keeps both sides in one Parquet file between transactions (format 6; format 3
//!   is still read).
//! - `run` runs a transaction.
//!
//! Each transaction emits the matches that involve at least one of its new records (so every match is
//! emitted once, in the transaction where its second record arrives), then, for an outer join, the
//! preserved side's records whose bound the other side's watermark has passed without a match, with
//! nulls. Inputs may retract and correct records: the matches of each record taken out (or its
//! record with nulls) are written as retractions, after the transaction's appends; the preserved
//! side counts its matches, so a record whose matches are all retracted is unmatched again.

pub(crate) mod checkpoint;
pub(crate) mod query;
pub(crate) mod run;
pub mod state;

pub use state::JoinSide;
