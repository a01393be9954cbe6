//! Shared test harness: moto's S3 server, the test engine (image and binary), request builders.
#![allow(dead_code)]

pub mod engine;
pub mod logs;
pub mod moto;
pub mod requests;
