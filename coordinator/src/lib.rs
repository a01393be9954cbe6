#![doc = include_str!("../README.md")]
//!
//! # The crate's API
//!
//! The Weir coordinator: datasets with a verifiable ODF metadata chain, pulled through engines on gen-stage
//! pipelines. This library is the `weir` binary's implementation; `weir --help` and the crate README are the
//! user guide.
//!
//! - [`weir_manifest`]: the workspace and its `DatasetSnapshot` manifests, errors pointing at file:line and field.
//! - [`weir_dataset`]: datasets' storage and metadata chains (the chain's rules, content-addressed blocks,
//!   data and checkpoints, the head moved last, the workspace lock, the upgrade of old chains).
//! - [`weir_ingest`]: fetch, read, check and merge (append, ledger, snapshot) for root datasets.
//! - [`weir_engines`]: engines by name, jobs, deadlines and the contract checks on what they return.
//! - [`weir_transaction`]: one transaction of one dataset, committed atomically; it reports its phase and
//!   counts through [`weir_dataset::progress`].
//! - [`scheduler`] and [`commands::pull`]: the pull pipeline on gen-stage.
//!
//! # Example
//!
//! ```
//! use weir_manifest::snapshot::DatasetManifest;
//! let text = "kind: DatasetSnapshot\nversion: 1\ncontent:\n  name: trips\n  kind: Root\n  metadata:\n    - kind: SetPollingSource\n      fetch: {kind: FilesGlob, path: 'data/*.csv'}\n      read: {kind: Csv, header: true}\n      merge: {kind: Append}\n";
//! let m = DatasetManifest::parse("datasets/trips.yaml".as_ref(), text).unwrap();
//! assert_eq!(m.name, "trips");
//! ```

#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod cli;
pub mod commands;

pub mod exit;
pub mod scheduler;
pub mod scratch;
