//! Writing Parquet files: streamed through DataFusion's parallel Parquet sink while the query runs,
//! committed by rename.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::streaming::StreamingTable;
use datafusion::config::{ParquetColumnOptions, TableParquetOptions};
use datafusion::dataframe::DataFrameWriteOptions;
use datafusion::error::DataFusionError;
use datafusion::execution::context::SessionContext;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::basic::Compression;
use datafusion::parquet::file::metadata::KeyValue;
use datafusion::parquet::file::properties::WriterProperties;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::streaming::PartitionStream;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

fn created_by() -> String {
    format!("weir reference-engine {}", env!("CARGO_PKG_VERSION"))
}

/// Properties of every file the engine writes: Snappy, like existing engines.
pub(crate) fn writer_properties(metadata: Vec<KeyValue>) -> WriterProperties {
    WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_created_by(format!(
            "weir reference-engine {}",
            env!("CARGO_PKG_VERSION")
        ))
        .set_key_value_metadata((!metadata.is_empty()).then_some(metadata))
        .build()
}

/// A Parquet file being written while the query runs.
///
/// Batches go through a bounded channel to DataFusion's own Parquet sink, which encodes columns in
/// parallel (the same writer `DataFrame::write_parquet` uses, with Snappy). The file appears under its
/// final name only on [`ParquetOutput::finish`]; with zero rows it still holds the schema.
#[derive(Debug)]
pub(crate) struct ParquetOutput {
    path: PathBuf,
    partial: PathBuf,
    schema: SchemaRef,
    sender: Option<mpsc::Sender<Result<RecordBatch, DataFusionError>>>,
    writer: Option<JoinHandle<Result<(), String>>>,
    rows: u64,
    committed: bool,
}

/// The batches sent to an output, as the one partition of a streaming table.
#[derive(Debug)]
struct ChannelPartition {
    schema: SchemaRef,
    receiver: Mutex<Option<mpsc::Receiver<Result<RecordBatch, DataFusionError>>>>,
}

impl PartitionStream for ChannelPartition {
    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    fn execute(&self, _ctx: Arc<TaskContext>) -> SendableRecordBatchStream {
        let receiver = self.receiver.lock().ok().and_then(|mut r| r.take());
        let stream = futures::stream::unfold(receiver, |receiver| async move {
            let mut receiver = receiver?;
            let batch = receiver.recv().await?;
            Some((batch, Some(receiver)))
        });
        Box::pin(RecordBatchStreamAdapter::new(
            Arc::clone(&self.schema),
            stream,
        ))
    }
}

async fn write_stream(
    partial: PathBuf,
    schema: SchemaRef,
    plain_columns: Vec<String>,
    receiver: mpsc::Receiver<Result<RecordBatch, DataFusionError>>,
) -> Result<(), String> {
    let partition = ChannelPartition {
        schema: Arc::clone(&schema),
        receiver: Mutex::new(Some(receiver)),
    };
    let table =
        StreamingTable::try_new(schema, vec![Arc::new(partition)]).map_err(|e| e.to_string())?;
    let ctx = SessionContext::new();
    let frame = ctx.read_table(Arc::new(table)).map_err(|e| e.to_string())?;
    let mut options = TableParquetOptions::default();
    options.global.compression = Some("snappy".to_owned());
    options.global.created_by = created_by();
    for column in plain_columns {
        // The system columns: consecutive or constant integers. PLAIN, not DELTA_BINARY_PACKED, which
        // kamu's Flink engine cannot read (kamu-engine-flink issue 3; kamu itself never writes it), and
        // no dictionary, which would hash every value; Snappy shrinks the constant runs instead.
        let column_options = ParquetColumnOptions {
            dictionary_enabled: Some(false),
            encoding: Some("plain".to_owned()),
            ..ParquetColumnOptions::default()
        };
        options
            .column_specific_options
            .insert(column, column_options);
    }
    frame
        .write_parquet(
            &partial.to_string_lossy(),
            DataFrameWriteOptions::new().with_single_file_output(true),
            Some(options),
        )
        .await
        .map(|_| ())
        .map_err(|e| e.strip_backtrace())
}

impl ParquetOutput {
    /// Creates the output's directory and starts the writer. `plain_columns` (the offset, operation
    /// type and system time) are written PLAIN without a dictionary, the encoding every ODF engine
    /// reads.
    pub(crate) fn create(
        path: &Path,
        schema: SchemaRef,
        plain_columns: &[&str],
    ) -> Result<Self, String> {
        let path = std::path::absolute(path).map_err(|e| e.to_string())?;
        let partial = partial_path(&path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
        }
        let (sender, receiver) = mpsc::channel(4);
        let writer = tokio::spawn(write_stream(
            partial.clone(),
            Arc::clone(&schema),
            plain_columns.iter().map(|c| (*c).to_owned()).collect(),
            receiver,
        ));
        Ok(Self {
            path,
            partial,
            schema,
            sender: Some(sender),
            writer: Some(writer),
            rows: 0,
            committed: false,
        })
    }

    /// Queues one batch.
    pub(crate) async fn write(&mut self, batch: RecordBatch) -> Result<(), String> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let rows = batch.num_rows() as u64;
        let sent = match &self.sender {
            Some(sender) => sender.send(Ok(batch)).await.is_ok(),
            None => false,
        };
        if !sent {
            // The writer stopped: its result says why.
            return Err(self
                .join()
                .await
                .err()
                .unwrap_or_else(|| "the writer stopped".to_owned()));
        }
        self.rows += rows;
        Ok(())
    }

    /// The file's final path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Rows queued so far.
    pub(crate) fn rows(&self) -> u64 {
        self.rows
    }

    /// Finishes the file and moves it to its final name; returns the number of rows.
    pub(crate) async fn finish(mut self) -> Result<u64, String> {
        self.join().await?;
        if self.rows == 0 {
            // A sink given no batches may write nothing: the file must still carry the schema.
            write_parquet_file(&self.path, Arc::clone(&self.schema), &[], Vec::new())?;
            let _ = std::fs::remove_file(&self.partial);
        } else {
            std::fs::rename(&self.partial, &self.path).map_err(|e| e.to_string())?;
        }
        self.committed = true;
        Ok(self.rows)
    }

    async fn join(&mut self) -> Result<(), String> {
        self.sender = None;
        match self.writer.take() {
            Some(handle) => handle.await.map_err(|e| e.to_string())?,
            None => Err("the writer already stopped".to_owned()),
        }
    }
}

impl Drop for ParquetOutput {
    fn drop(&mut self) {
        if let Some(writer) = self.writer.take() {
            writer.abort();
        }
        if !self.committed {
            // Best effort: a failed operation leaves no half-written file behind.
            let _ = std::fs::remove_file(&self.partial);
        }
    }
}

/// Writes a whole (small) Parquet file at once, with key-value metadata, committed by rename.
pub(crate) fn write_parquet_file(
    path: &Path,
    schema: SchemaRef,
    batches: &[RecordBatch],
    metadata: Vec<KeyValue>,
) -> Result<(), String> {
    let partial = partial_path(path);
    if let Some(parent) = path.parent()
        && !parent.as_os_str().is_empty()
    {
        std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
    }
    let result = (|| {
        let file = File::create(&partial).map_err(|e| e.to_string())?;
        let mut writer = ArrowWriter::try_new(file, schema, Some(writer_properties(metadata)))
            .map_err(|e| e.to_string())?;
        for batch in batches {
            writer.write(batch).map_err(|e| e.to_string())?;
        }
        writer.close().map_err(|e| e.to_string())?;
        std::fs::rename(&partial, path).map_err(|e| e.to_string())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&partial);
    }
    result
}

fn partial_path(path: &Path) -> PathBuf {
    let mut name = path
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push(".weir-partial");
    path.with_file_name(name)
}
