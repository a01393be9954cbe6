//! The output data file: its schema rules ([`layout`]) and the Parquet writer ([`writer`]).

pub(crate) mod layout;
pub(crate) mod writer;
