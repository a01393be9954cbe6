//! Lines of a text file through a pipeline: the file is read line by line
//! as the processors ask for more (never whole in memory), processors parse
//! each line as a number (a line that does not parse, or cannot be read,
//! fails), and a batcher writes each batch of 10 000 parsed lines as a
//! Parquet file (`line: UInt64`, `value: Int64`). A message is acked once
//! the file holding it is written and synced; a batch whose file cannot be
//! written fails all its messages.
//!
//! ```text
//! cargo run -p weir-pipeline --example lines                      # a generated sample file
//! cargo run -p weir-pipeline --example lines -- numbers.txt out/  # your file, batches into out/
//! ```

use std::fs::File;
use std::io::{BufRead as _, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use arrow::array::{Int64Array, RecordBatch, UInt64Array};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use weir_pipeline::{Batcher, Message, Pipeline, Status};

/// Rows per Parquet file.
const BATCH_SIZE: usize = 10_000;

/// One line of the input.
#[derive(Debug)]
struct Line {
    /// 1-based, as editors count.
    number: u64,
    /// The line, or why it could not be read (not UTF-8, an I/O error).
    text: Result<String, String>,
    /// Set by the processor.
    value: i64,
}

/// What the acknowledger was told.
#[derive(Default)]
struct Tally {
    written: usize,
    failed: Vec<(u64, String)>,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let output = std::env::temp_dir().join(format!("pipeline-lines-{}", std::process::id()));
    let (input, output) = match (args.next(), args.next()) {
        (Some(input), out) => (PathBuf::from(input), out.map_or(output, PathBuf::from)),
        (None, _) => (sample(&output)?, output),
    };
    std::fs::create_dir_all(&output)
        .map_err(|e| format!("cannot create {}: {e}", output.display()))?;
    let file = File::open(&input).map_err(|e| format!("cannot read {}: {e}", input.display()))?;
    // Read lazily: the producer pulls the next lines only when asked.
    let lines = BufReader::new(file)
        .lines()
        .zip(1u64..)
        .map(|(text, number)| Line {
            number,
            text: text.map_err(|e| e.to_string()),
            value: 0,
        });

    // The acknowledger: in a real source this would delete the file, commit
    // an offset or confirm to a broker.
    let tally = Arc::new(Mutex::new(Tally::default()));
    let record = tally.clone();
    let acknowledger = Arc::new(move |ok: Vec<Message<Line>>, failed: Vec<Message<Line>>| {
        if let Ok(mut tally) = record.lock() {
            tally.written += ok.len();
            for message in failed {
                if let Status::Failed(reason) = message.status() {
                    tally.failed.push((message.data.number, reason.clone()));
                }
            }
        }
    });

    let schema: SchemaRef = Arc::new(Schema::new(vec![
        Field::new("line", DataType::UInt64, false),
        Field::new("value", DataType::Int64, false),
    ]));
    let files = Arc::new(AtomicUsize::new(0));
    let directory = output.clone();
    let source = weir_gen_stage::from_iter(lines).await?;
    let pipeline = Pipeline::builder()
        .producer_of(&source, acknowledger)
        .processors(2, |message: &mut Message<Line>| {
            let parsed = match &message.data.text {
                Ok(text) => text
                    .trim()
                    .parse::<i64>()
                    .map_err(|e| format!("{text:?} is not a number: {e}")),
                Err(e) => Err(format!("cannot read the line: {e}")),
            };
            match parsed {
                Ok(value) => message.data.value = value,
                Err(reason) => message.fail(reason),
            }
        })
        .batcher(
            Batcher::new("default", move |messages: &mut [Message<Line>], _info| {
                let n = files.fetch_add(1, Ordering::SeqCst);
                let path = directory.join(format!("batch-{n:04}.parquet"));
                if let Err(e) = write_parquet(&path, &schema, messages) {
                    for message in messages.iter_mut() {
                        message.fail(format!("cannot write {}: {e}", path.display()));
                    }
                }
            })
            .batch_size(BATCH_SIZE)
            .concurrency(2),
        )
        .start()
        .await?;
    // The file ends, the producer stops, the pipeline drains itself: the
    // last partial batch is written and acked too.
    pipeline.stopped().await;

    let tally = tally.lock().map_err(|_| "the acknowledger panicked")?;
    println!(
        "{} lines: {} written to {} Parquet file(s) under {}, {} failed",
        tally.written + tally.failed.len(),
        tally.written,
        std::fs::read_dir(&output)?
            .filter_map(Result::ok)
            .filter(|e| e.path().extension().is_some_and(|x| x == "parquet"))
            .count(),
        output.display(),
        tally.failed.len()
    );
    for (line, reason) in tally.failed.iter().take(5) {
        println!("  line {line}: {reason}");
    }
    Ok(())
}

/// Writes `messages` (their line numbers and values) to a new Parquet file at
/// `path` and syncs it, so that an ack means the rows are on disk.
fn write_parquet(
    path: &Path,
    schema: &SchemaRef,
    messages: &[Message<Line>],
) -> Result<(), Box<dyn std::error::Error>> {
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(UInt64Array::from_iter_values(
                messages.iter().map(|m| m.data.number),
            )),
            Arc::new(Int64Array::from_iter_values(
                messages.iter().map(|m| m.data.value),
            )),
        ],
    )?;
    let properties = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .build();
    let mut writer = ArrowWriter::try_new(File::create(path)?, schema.clone(), Some(properties))?;
    writer.write(&batch)?;
    writer.into_inner()?.sync_all()?;
    Ok(())
}

/// A sample input: 25 000 numbers, every 97th line not a number.
fn sample(directory: &Path) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(directory)?;
    let path = directory.join("numbers.txt");
    let mut file = std::io::BufWriter::new(File::create(&path)?);
    for n in 1..=25_000u32 {
        if n.is_multiple_of(97) {
            writeln!(file, "line {n}")?;
        } else {
            writeln!(file, "{n}")?;
        }
    }
    file.flush()?;
    Ok(path)
}
