//! The checkpoint file of a window aggregation: one Parquet file.
//!
//! Its records are the buffered pre-aggregated records of open windows, in arrival order (columns
//! `__weir_window`, `__weir_key_<i>`, `__weir_arg_<j>`, `__weir_sign`); a session window's also hold
//! each key's last emitted session end (sign 0). Three kinds share the layout, each with its format:
//! 1 `tumbling_window` (tumbling and hopping windows), 7 `cumulating_window` (the window column holds
//! each window's end) and 8 `session_window` (it holds each record's event time). Its key-value metadata holds
//! `weir.checkpoint` (JSON: format version, kind, query fingerprint, how far windows were closed, the
//! window spec) and `weir.result_schema` (the Arrow IPC schema of the aggregation's results, hex), so
//! that a checkpoint can be finalised without the query that wrote it (MigrateQuery).

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use datafusion::arrow::datatypes::{Schema, SchemaRef};
use datafusion::arrow::ipc::reader::StreamReader;
use datafusion::arrow::ipc::writer::StreamWriter;
use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use datafusion::parquet::file::metadata::KeyValue;
use serde::{Deserialize, Serialize};

use super::state::{WindowSpec, WindowState};
use crate::error::EngineError;
use crate::output::writer::write_parquet_file;

/// Metadata key of the checkpoint header (every kind of checkpoint has one).
pub(crate) const HEADER_KEY: &str = "weir.checkpoint";
/// Metadata key of the result schema.
const RESULT_SCHEMA_KEY: &str = "weir.result_schema";
/// The formats and kinds of window checkpoints: tumbling and hopping windows, cumulating windows,
/// session windows.
const KINDS: [(u32, &str); 3] = [
    (1, "tumbling_window"),
    (7, "cumulating_window"),
    (8, "session_window"),
];

/// Whether `kind` is one of a window aggregation's checkpoints.
pub(crate) fn is_window_kind(kind: &str) -> bool {
    KINDS.iter().any(|(_, k)| *k == kind)
}

/// The format and kind a window aggregation of `spec` writes.
fn format_of(spec: &WindowSpec) -> (u32, &'static str) {
    if spec.session {
        KINDS[2]
    } else if spec.step_ms.is_some() {
        KINDS[1]
    } else {
        KINDS[0]
    }
}

/// The checkpoint header.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct CheckpointHeader {
    /// Format version.
    pub format: u32,
    /// What state this is (`tumbling_window`, `cumulating_window` or `session_window`).
    pub kind: String,
    /// Fingerprint of the query that wrote it.
    pub query_fingerprint: String,
    /// Windows ending at or before this instant were emitted.
    pub closed_through_ms: Option<i64>,
    /// The aggregation.
    pub spec: WindowSpec,
}

/// What every checkpoint header says first: its format version and kind of state.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub(crate) struct CheckpointKind {
    /// Format version: 1 for `tumbling_window`, 2 for `temporal_join`, ...
    pub format: u32,
    /// What state it holds.
    pub kind: String,
}

/// The format and kind of the checkpoint at `path`, from its header alone.
pub(crate) fn kind_of(path: &Path) -> Result<CheckpointKind, EngineError> {
    let failed = |reason: String| EngineError::CheckpointRead {
        path: path.to_path_buf(),
        reason,
    };
    let file = File::open(path).map_err(|e| failed(e.to_string()))?;
    let builder =
        ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| failed(e.to_string()))?;
    let header = metadata_value(&builder, HEADER_KEY).map_err(failed)?;
    serde_json::from_str(&header).map_err(|e| failed(e.to_string()))
}

/// The value of the key-value metadata `key` of an open checkpoint.
pub(crate) fn metadata_value(
    builder: &ParquetRecordBatchReaderBuilder<File>,
    key: &str,
) -> Result<String, String> {
    builder
        .metadata()
        .file_metadata()
        .key_value_metadata()
        .and_then(|kvs| kvs.iter().find(|kv| kv.key == key))
        .and_then(|kv| kv.value.clone())
        .ok_or_else(|| format!("it has no `{key}` metadata: not a checkpoint of this engine"))
}

/// Fingerprint of a query's steps (FNV-1a, stable across runs and builds).
pub(crate) fn fingerprint(steps: &[(Option<String>, String)]) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for (alias, query) in steps {
        for byte in alias
            .as_deref()
            .unwrap_or("")
            .bytes()
            .chain([0u8])
            .chain(query.trim().bytes())
            .chain([0u8])
        {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{hash:016x}")
}

/// Writes `state` to `path`.
pub(crate) fn write(
    path: &Path,
    state: &WindowState,
    query_fingerprint: &str,
) -> Result<(), EngineError> {
    let failed = |reason: String| EngineError::CheckpointWrite {
        path: path.to_path_buf(),
        reason,
    };
    let (format, kind) = format_of(state.spec());
    let header = CheckpointHeader {
        format,
        kind: kind.to_owned(),
        query_fingerprint: query_fingerprint.to_owned(),
        closed_through_ms: state.closed_through_ms(),
        spec: state.spec().clone(),
    };
    let header = serde_json::to_string(&header).map_err(|e| failed(e.to_string()))?;
    let result_schema = schema_to_hex(&state.result_schema()).map_err(failed)?;
    write_parquet_file(
        path,
        state.buffered_schema(),
        &state.checkpoint_records(),
        vec![
            KeyValue::new(HEADER_KEY.to_owned(), header),
            KeyValue::new(RESULT_SCHEMA_KEY.to_owned(), result_schema),
        ],
    )
    .map_err(failed)?;
    tracing::debug!(path = %path.display(), records = state.buffered_records(), "checkpoint written");
    Ok(())
}

/// Reads a checkpoint: its header and the restored state.
pub(crate) fn read(path: &Path) -> Result<(CheckpointHeader, WindowState), EngineError> {
    let failed = |reason: String| EngineError::CheckpointRead {
        path: path.to_path_buf(),
        reason,
    };
    let file = File::open(path).map_err(|e| failed(e.to_string()))?;
    let builder =
        ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| failed(e.to_string()))?;
    let metadata = builder
        .metadata()
        .file_metadata()
        .key_value_metadata()
        .cloned()
        .unwrap_or_default();
    let value = |key: &str| {
        metadata
            .iter()
            .find(|kv| kv.key == key)
            .and_then(|kv| kv.value.clone())
            .ok_or_else(|| {
                failed(format!(
                    "it has no `{key}` metadata: not a checkpoint of this engine"
                ))
            })
    };
    let header: CheckpointHeader =
        serde_json::from_str(&value(HEADER_KEY)?).map_err(|e| failed(e.to_string()))?;
    if !KINDS.contains(&(header.format, header.kind.as_str())) {
        let known: Vec<String> = KINDS
            .iter()
            .map(|(format, kind)| format!("{format} `{kind}`"))
            .collect();
        return Err(failed(format!(
            "format {} of kind `{}` is not supported (this engine reads window checkpoints of format {})",
            header.format,
            header.kind,
            known.join(", ")
        )));
    }
    if format_of(&header.spec) != (header.format, header.kind.as_str()) {
        return Err(failed(format!(
            "its window does not match its kind `{}`",
            header.kind
        )));
    }
    let result_schema = schema_from_hex(&value(RESULT_SCHEMA_KEY)?).map_err(failed)?;
    let buffered_schema = Arc::clone(builder.schema());
    let reader = builder.build().map_err(|e| failed(e.to_string()))?;
    let batches = reader
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| failed(e.to_string()))?;
    let mut state = WindowState::new(
        header.spec.clone(),
        buffered_schema,
        result_schema,
        header.closed_through_ms,
    );
    state.restore(batches).map_err(|e| failed(e.to_string()))?;
    Ok((header, state))
}

fn schema_to_hex(schema: &Schema) -> Result<String, String> {
    let mut writer = StreamWriter::try_new(Vec::new(), schema).map_err(|e| e.to_string())?;
    writer.finish().map_err(|e| e.to_string())?;
    let bytes = writer.into_inner().map_err(|e| e.to_string())?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

fn schema_from_hex(hex: &str) -> Result<SchemaRef, String> {
    if !hex.len().is_multiple_of(2) {
        return Err("the result schema is not hex".to_owned());
    }
    let bytes = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).map_err(|e| e.to_string()))
        .collect::<Result<Vec<u8>, _>>()?;
    let reader = StreamReader::try_new(bytes.as_slice(), None).map_err(|e| e.to_string())?;
    Ok(reader.schema())
}
