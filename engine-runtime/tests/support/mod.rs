//! Shared test harness: moto's S3 server and the test-engine image/binary.
#![allow(dead_code)]

pub mod moto;
