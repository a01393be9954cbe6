//! Open Data Fabric datasets on a local disk or an object store: a dataset's metadata chain (content-addressed
//! blocks, the head moved last) and its data slices and checkpoints, read and hashed as they are read, validated
//! with the rules kamu enforces, and appended to crash-safely under a workspace lock.
//!
//! The blocks, events, hashes and the logical hash are [`weir_odf`]'s; this crate does the I/O around them.
//!
#![doc = include_str!("../README.md")]
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod chain;
pub mod data;
pub mod durable;
pub mod fault;
pub mod identity;
pub mod progress;
pub mod workspace_lock;
