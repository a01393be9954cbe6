//! Extra attributes: ODF's extension point, a JSON object whose keys are `<domain>/<path>`.

use flatbuffers::WIPOffset;

use crate::Error;
use crate::codec::{Builder, required};
use crate::generated as fb;

/// Custom key-value extension attributes: a JSON object whose every key is `<domain>/<path>` (e.g.
/// `kamu.dev/archetype`), so that extensions cannot collide. Values may be any JSON.
///
/// The JSON text is kept verbatim, so a decoded block re-encodes to the same bytes. kamu writes it compact
/// with keys sorted (serde_json's default `Map`) and re-serialises it that way when it copies a block, so
/// text meant for kamu should be in that form; with feature `serde`, [`ExtraAttributes::from_map`] writes it.
///
/// ```
/// let extra = weir_odf::ExtraAttributes::from_json(r#"{"weir.dev/engine":"datafusion"}"#);
/// assert_eq!(extra.as_json(), r#"{"weir.dev/engine":"datafusion"}"#);
/// assert!(weir_odf::ExtraAttributes::is_valid_key("weir.dev/engine"));
/// assert!(!weir_odf::ExtraAttributes::is_valid_key("engine"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ExtraAttributes {
    json: String,
}

impl ExtraAttributes {
    /// Wraps JSON object text as it is stored.
    pub fn from_json(json: impl Into<String>) -> Self {
        Self { json: json.into() }
    }

    /// The JSON object text, as stored.
    pub fn as_json(&self) -> &str {
        &self.json
    }

    /// Whether `key` has ODF's `<domain>/<path>` form: a dotted domain, a slash, a non-empty path.
    pub fn is_valid_key(key: &str) -> bool {
        match key.split_once('/') {
            Some((domain, path)) => {
                !path.is_empty()
                    && domain.contains('.')
                    && domain.split('.').all(|label| {
                        !label.is_empty()
                            && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                    })
            }
            None => false,
        }
    }

    pub(crate) fn encode<'b>(&self, fbb: &mut Builder<'b>) -> WIPOffset<fb::ExtraAttributes<'b>> {
        let attributes = fbb.create_string(&self.json);
        let mut b = fb::ExtraAttributesBuilder::new(fbb);
        b.add_attributes(attributes);
        b.finish()
    }

    pub(crate) fn decode(t: fb::ExtraAttributes<'_>) -> Result<Self, Error> {
        Ok(Self::from_json(required(
            t.attributes(),
            "ExtraAttributes.attributes",
        )?))
    }
}

/// Why extra attributes are not a JSON object with `<domain>/<path>` keys.
#[cfg(feature = "serde")]
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExtraAttributesError {
    /// The text is not JSON, or not an object.
    #[error("extra attributes are not a JSON object: {0}")]
    NotAnObject(String),
    /// A key is not `<domain>/<path>`.
    #[error("extra attribute key {key:?} is not of the form `<domain>/<path>`")]
    InvalidKey {
        /// The key.
        key: String,
    },
}

#[cfg(feature = "serde")]
impl ExtraAttributes {
    /// The attributes in kamu's form: compact JSON with keys sorted (recursively). Fails on a key that is not
    /// `<domain>/<path>`.
    pub fn from_map(
        map: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<Self, ExtraAttributesError> {
        if let Some(key) = map.keys().find(|k| !Self::is_valid_key(k)) {
            return Err(ExtraAttributesError::InvalidKey { key: key.clone() });
        }
        let sorted = sort_keys(&serde_json::Value::Object(map.clone()));
        Ok(Self::from_json(sorted.to_string()))
    }

    /// The attributes as a JSON map.
    pub fn to_map(
        &self,
    ) -> Result<serde_json::Map<String, serde_json::Value>, ExtraAttributesError> {
        match serde_json::from_str(&self.json) {
            Ok(serde_json::Value::Object(map)) => Ok(map),
            Ok(other) => Err(ExtraAttributesError::NotAnObject(other.to_string())),
            Err(e) => Err(ExtraAttributesError::NotAnObject(e.to_string())),
        }
    }

    /// One attribute's value, if present.
    pub fn get(&self, key: &str) -> Result<Option<serde_json::Value>, ExtraAttributesError> {
        Ok(self.to_map()?.remove(key))
    }
}

/// The value with every object's keys in sorted order, whatever order `serde_json::Map` keeps.
#[cfg(feature = "serde")]
fn sort_keys(value: &serde_json::Value) -> serde_json::Value {
    match value {
        serde_json::Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            serde_json::Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k.clone(), sort_keys(v)))
                    .collect(),
            )
        }
        serde_json::Value::Array(items) => {
            serde_json::Value::Array(items.iter().map(sort_keys).collect())
        }
        other => other.clone(),
    }
}

#[cfg(feature = "serde")]
impl serde::Serialize for ExtraAttributes {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_map()
            .map_err(serde::ser::Error::custom)?
            .serialize(s)
    }
}

#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for ExtraAttributes {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let map = serde_json::Map::<String, serde_json::Value>::deserialize(d)?;
        Self::from_map(&map).map_err(serde::de::Error::custom)
    }
}
