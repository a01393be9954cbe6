//! The dataset metadata chain: the chain's rules and its storage, and the upgrade of chains written before
//! they were ODF's. The blocks and events themselves are [`weir_odf`]'s.
pub mod append;
pub mod integrity;
pub mod legacy;
pub mod store;
pub mod upgrade;
pub mod validate;
mod written;

use chrono::{DateTime, Utc};
use weir_odf::{DatasetId, Multihash};

/// A new dataset's id. Weir derives the 32 key bytes from the dataset name and its creation time
/// (SHA3-256): ids are unique per creation but are not Ed25519 keys, since Weir does not sign blocks.
pub fn new_dataset_id(name: &str, created: DateTime<Utc>) -> DatasetId {
    let h = Multihash::sha3_256(format!("weir dataset {name} {}", created.to_rfc3339()).as_bytes());
    DatasetId::from_key(*h.digest())
}

/// The end of a dataset id, enough to tell datasets apart in a listing.
pub fn short_id(id: &weir_odf::DatasetId) -> String {
    let text = id.to_string();
    text[text.len().saturating_sub(8)..].to_string()
}

/// The last 8 characters of a hash's text, for tables.
pub fn short(hash: &Multihash) -> String {
    let text = hash.to_string();
    text[text.len().saturating_sub(8)..].to_string()
}
