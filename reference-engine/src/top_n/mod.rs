//! Top-N over a stream: `row_number()`, `rank()` or `dense_rank()` `OVER (PARTITION BY ... ORDER BY
//! ...)` with a bound on the rank (kamu's `leaderboard`):
//!
//! ```sql
//! SELECT * FROM (
//!   SELECT row_number() OVER (PARTITION BY 1 ORDER BY score DESC) AS place,
//!          match_time, match_id, player_id, score
//!   FROM player_scores
//! ) WHERE place <= 2
//! ```
//!
//! - `query` finds the ranking under the query's map/filter operators, checks the rank bound, and
//!   rewrites the plan so that every output row also carries its rank, partition and input offset.
//! - [`state`] is the sans-IO state: the input's live records (appends add, retractions take out), and
//!   the changelog between two results of a partition.
//! - `checkpoint` keeps the live records in one Parquet file between transactions (format 4).
//! - `run` runs a transaction.
//!
//! Each transaction applies its records to the live records and recomputes, with DataFusion, the
//! query over the partitions its records fall into, before and after. The difference is written as a
//! changelog: rows that left the result are retracted, rows that entered are appended, and a row
//! leaving and one entering at the same rank of a partition form a correction.

pub(crate) mod checkpoint;
pub(crate) mod query;
pub(crate) mod run;
pub mod state;

pub use state::{Applied, LiveRecords, RankedColumns, changelog};
