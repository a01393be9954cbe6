//! Temporal table joins, ODF's (Flink's) way: a stream input joined with the state of one or more
//! inputs declared in `temporal_tables` as of each stream record's event time.
//!
//! ```sql
//! SELECT s.event_time, s.sym, s.qty, t.price, s.qty * t.price AS value
//! FROM trades AS s
//! JOIN tickers FOR SYSTEM_TIME AS OF s.event_time AS t ON s.sym = t.sym
//! ```
//!
//! - `syntax` takes `FOR SYSTEM_TIME AS OF` out of the SQL before DataFusion plans it (its parser does
//!   not accept the clause) and remembers which table it was on.
//! - `query` finds the joins in the plan, checks the supported form, and binds the plan to one
//!   transaction's records: the stream records whose time has come, and each table's versions with
//!   the event times they hold for.
//! - [`state`] is the sans-IO state: each table's entries per primary key and event time, pruned
//!   below its watermark, and the stream records waiting for the tables' watermark.
//! - `checkpoint` keeps that state in one Parquet file between transactions (format 2).
//! - `run` runs a transaction, and MigrateQuery's finalisation.
//!
//! A stream record is joined once every table's watermark has reached its event time (Flink emits it
//! when the table's watermark passes it): the table's state as of that time is then complete. Output
//! records follow the stream records' event time, then offset, and carry the stream record's
//! operation type (correction pairs repaired as after a filter).

pub(crate) mod checkpoint;
pub(crate) mod query;
pub(crate) mod run;
pub mod state;
pub(crate) mod syntax;

pub use state::{PendingStream, VersionedTable};
