//! Prepare steps: how fetched bytes are prepared before they are read.

use flatbuffers::WIPOffset;

use crate::Error;
use crate::codec::{Builder, decode_strings, encode_opt_str, encode_strings, required};
use crate::generated as fb;

/// One step preparing raw data before it is read.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(tag = "kind", deny_unknown_fields))]
pub enum PrepStep {
    /// Decompress an archive.
    #[cfg_attr(feature = "serde", serde(alias = "decompress"))]
    Decompress(PrepStepDecompress),
    /// Pipe the data through a command.
    #[cfg_attr(feature = "serde", serde(alias = "pipe"))]
    Pipe(PrepStepPipe),
}

/// [`PrepStep::Decompress`]'s parameters.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "camelCase", deny_unknown_fields)
)]
pub struct PrepStepDecompress {
    /// The compression format.
    pub format: CompressionFormat,
    /// The file within a multi-file archive (may be a glob).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub sub_path: Option<String>,
}

/// [`PrepStep::Pipe`]'s parameters.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "camelCase", deny_unknown_fields)
)]
pub struct PrepStepPipe {
    /// The command and its arguments.
    pub command: Vec<String>,
}

/// A compression format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum CompressionFormat {
    /// gzip.
    #[cfg_attr(feature = "serde", serde(alias = "gzip"))]
    Gzip,
    /// zip.
    #[cfg_attr(feature = "serde", serde(alias = "zip"))]
    Zip,
}

impl PrepStep {
    /// Encodes the step as a `PrepStepWrapper` table (the schema wraps the union to put it in a vector).
    pub(crate) fn encode_wrapped<'b>(
        &self,
        fbb: &mut Builder<'b>,
    ) -> WIPOffset<fb::PrepStepWrapper<'b>> {
        let (tag, value) = match self {
            PrepStep::Decompress(x) => {
                let sub_path = encode_opt_str(fbb, x.sub_path.as_ref());
                let mut b = fb::PrepStepDecompressBuilder::new(fbb);
                b.add_format(match x.format {
                    CompressionFormat::Gzip => fb::CompressionFormat::Gzip,
                    CompressionFormat::Zip => fb::CompressionFormat::Zip,
                });
                if let Some(p) = sub_path {
                    b.add_sub_path(p);
                }
                (
                    fb::PrepStep::PrepStepDecompress,
                    b.finish().as_union_value(),
                )
            }
            PrepStep::Pipe(x) => {
                let command = encode_strings(fbb, &x.command);
                let mut b = fb::PrepStepPipeBuilder::new(fbb);
                b.add_command(command);
                (fb::PrepStep::PrepStepPipe, b.finish().as_union_value())
            }
        };
        let mut b = fb::PrepStepWrapperBuilder::new(fbb);
        b.add_value_type(tag);
        b.add_value(value);
        b.finish()
    }

    pub(crate) fn decode_wrapped(w: fb::PrepStepWrapper<'_>) -> Result<Self, Error> {
        const FIELD: &str = "PrepStepWrapper.value";
        match w.value_type() {
            fb::PrepStep::PrepStepDecompress => {
                let x = required(w.value_as_prep_step_decompress(), FIELD)?;
                Ok(PrepStep::Decompress(PrepStepDecompress {
                    format: match x.format() {
                        fb::CompressionFormat::Gzip => CompressionFormat::Gzip,
                        fb::CompressionFormat::Zip => CompressionFormat::Zip,
                        other => {
                            return Err(Error::UnknownEnumValue {
                                field: "PrepStepDecompress.format",
                                value: other.0.into(),
                            });
                        }
                    },
                    sub_path: x.sub_path().map(str::to_owned),
                }))
            }
            fb::PrepStep::PrepStepPipe => {
                let x = required(w.value_as_prep_step_pipe(), FIELD)?;
                Ok(PrepStep::Pipe(PrepStepPipe {
                    command: decode_strings(required(x.command(), "PrepStepPipe.command")?),
                }))
            }
            other => Err(Error::UnknownUnionType {
                field: FIELD,
                tag: other.0,
            }),
        }
    }
}
