#![doc = include_str!("../README.md")]
#![cfg_attr(test, allow(clippy::unwrap_used))]
pub mod edit;
pub mod read_schema;
pub mod snapshot;
pub mod support;
pub mod workspace;
pub mod yaml;
