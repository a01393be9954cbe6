//! Changelog semantics: which queries keep them, and how records' operation types flow through.
//!
//! The rule (also in the README):
//!
//! - A map/filter query (projections, filters, aliases over one input) gets each output record's `op`
//!   from the input record behind it: the user never passes `op` by hand (`lineage`).
//! - If the query outputs `op` itself, that value is written, as in the reference engines.
//! - Correction pairs are repaired after filtering ([`repair`]): a CorrectFrom whose CorrectTo was
//!   filtered out becomes a Retract (the record left the result), a CorrectTo whose CorrectFrom was
//!   filtered out becomes an Append (the record entered the result). Surviving pairs stay adjacent
//!   because output records keep input offset order.
//! - Anything that merges, duplicates or reorders records is refused as `InvalidQuery`, except the
//!   stateful tumbling-window aggregation (see `crate::window`) and temporal table joins (see
//!   `crate::temporal`), whose output records carry their stream record's `op`.

pub(crate) mod lineage;
pub mod repair;

/// Operation type code of an appended record.
pub const APPEND: i32 = 0;
/// Operation type code of a retraction.
pub const RETRACT: i32 = 1;
/// Operation type code of the first half of a correction (the old values).
pub const CORRECT_FROM: i32 = 2;
/// Operation type code of the second half of a correction (the new values).
pub const CORRECT_TO: i32 = 3;
