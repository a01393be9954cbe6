//! Stateful window aggregation over event time (tumbling, hopping, cumulating and session windows),
//! driven by watermarks.
//!
//! The supported SQL form (one input, any filters and projections below the GROUP BY):
//!
//! ```sql
//! SELECT date_bin(INTERVAL '1 hour', event_time) AS event_time, city,
//!        count(*) AS readings, sum(population) AS population, avg(x), min(x), max(x)
//! FROM input WHERE ... GROUP BY 1, city
//! ```
//!
//! Each transaction buffers the pre-aggregated records of windows that are still open; a window
//! `[start, start + width)` is closed and emitted (one Append record per group, in window then key
//! order) once a watermark reaches `start + width`. Retractions and corrections arriving before the
//! window closes are subtracted. Open windows live in the checkpoint between transactions
//! (`checkpoint`), so one big transaction and many small ones produce identical output.
//!
//! Within a transaction, a window that no record still to come can fall into is emitted as soon as the input
//! stream (in offset order) passes it, up to the watermark: `future` bounds the event times still to come
//! from the input files' row-group statistics. So a big transaction buffers only the windows open at each
//! point of its input, not all its records; the output is the same as emitting everything at the end.
//!
//! Hopping and cumulating windows put each record in several windows (`hop`, `cumulate`); session
//! windows make each key's sessions from its buffered records whenever the watermark moves
//! (`session`). Flink's and RisingWave's window syntax is rewritten onto `date_bin` and the window
//! bound functions before planning (`syntax`, `functions`).
//!
//! `query` recognises the form and builds the pre-aggregation plan; [`state`] is the sans-IO
//! aggregation state machine.

pub(crate) mod checkpoint;
pub(crate) mod cumulate;
pub(crate) mod functions;
pub(crate) mod future;
pub(crate) mod hop;
pub(crate) mod query;
pub(crate) mod session;
pub mod state;
pub(crate) mod syntax;

pub use state::{AggregateKind, OutputSource, WindowSpec, WindowState};
