//! Root dataset ingestion: fetch, read, preprocess, merge.
pub mod error;
pub mod fetch;
pub mod merge;
pub mod read;
