//! The `weir` coordinator.
pub mod chain;
pub mod hash;
pub mod manifest;
