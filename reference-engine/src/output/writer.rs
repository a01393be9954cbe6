//! Writing Parquet files: streamed on a blocking thread while the query runs, committed by rename.

use std::fs::File;
use std::path::{Path, PathBuf};

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::basic::Compression;
use datafusion::parquet::file::metadata::KeyValue;
use datafusion::parquet::file::properties::WriterProperties;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

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

/// A Parquet file being written. Batches go to a blocking writer thread; the file appears under its
/// final name only on [`ParquetOutput::finish`] (it is written next to it first).
#[derive(Debug)]
pub(crate) struct ParquetOutput {
    path: PathBuf,
    partial: PathBuf,
    sender: Option<mpsc::Sender<RecordBatch>>,
    writer: Option<JoinHandle<Result<(), String>>>,
    rows: u64,
    committed: bool,
}

impl ParquetOutput {
    /// Creates the file (and its directory) and starts the writer thread.
    pub(crate) fn create(path: &Path, schema: SchemaRef) -> Result<Self, String> {
        let partial = partial_path(path);
        if let Some(parent) = path.parent()
            && !parent.as_os_str().is_empty()
        {
            std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
        }
        let file = File::create(&partial).map_err(|e| e.to_string())?;
        let mut writer = ArrowWriter::try_new(file, schema, Some(writer_properties(Vec::new())))
            .map_err(|e| e.to_string())?;
        let (sender, mut receiver) = mpsc::channel::<RecordBatch>(4);
        let handle = tokio::task::spawn_blocking(move || {
            while let Some(batch) = receiver.blocking_recv() {
                writer.write(&batch).map_err(|e| e.to_string())?;
            }
            writer.close().map(|_| ()).map_err(|e| e.to_string())
        });
        Ok(Self {
            path: path.to_path_buf(),
            partial,
            sender: Some(sender),
            writer: Some(handle),
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
            Some(sender) => sender.send(batch).await.is_ok(),
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
        std::fs::rename(&self.partial, &self.path).map_err(|e| e.to_string())?;
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
