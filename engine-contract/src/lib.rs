//! The ODF engine protocol.
#![warn(missing_docs)]
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod generated;
pub mod grpc;
pub mod model;
