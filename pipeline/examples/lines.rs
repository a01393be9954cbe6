//! Lines of a text file through a pipeline: processors parse each line as a
//! number (a line that does not parse fails), a batcher of 1000 sums each
//! batch and writes it to a file; a message is acked once its batch is
//! written.
//!
//! ```text
//! cargo run -p pipeline --example lines                      # a generated sample file
//! cargo run -p pipeline --example lines -- numbers.txt out/  # your file, batches into out/
//! ```

use std::io::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use pipeline::{Batcher, Message, Pipeline, Status};

/// One line of the input.
#[derive(Debug)]
struct Line {
    /// 1-based, as editors count.
    number: usize,
    text: String,
    /// Set by the processor.
    value: i64,
}

/// What the acknowledger was told.
#[derive(Default)]
struct Tally {
    written: usize,
    failed: Vec<(usize, String)>,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let output = std::env::temp_dir().join(format!("pipeline-lines-{}", std::process::id()));
    let (input, output) = match (args.next(), args.next()) {
        (Some(input), out) => (PathBuf::from(input), out.map_or(output, PathBuf::from)),
        (None, _) => (sample(&output)?, output),
    };
    std::fs::create_dir_all(&output)?;
    let text = std::fs::read_to_string(&input)
        .map_err(|e| format!("cannot read {}: {e}", input.display()))?;
    let lines: Vec<Line> = text
        .lines()
        .enumerate()
        .map(|(i, text)| Line {
            number: i + 1,
            text: text.to_owned(),
            value: 0,
        })
        .collect();
    let total = lines.len();

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

    let batches = Arc::new(AtomicUsize::new(0));
    let directory = output.clone();
    let source = gen_stage::from_iter(lines).await?;
    let pipeline = Pipeline::builder()
        .producer_of(&source, acknowledger)
        .processors(2, |message: &mut Message<Line>| {
            match message.data.text.trim().parse::<i64>() {
                Ok(value) => message.data.value = value,
                Err(e) => message.fail(format!("{:?} is not a number: {e}", message.data.text)),
            }
        })
        .batcher(
            Batcher::new("default", move |messages: &mut [Message<Line>], info| {
                let n = batches.fetch_add(1, Ordering::SeqCst);
                let path = directory.join(format!("batch-{n:04}.txt"));
                let sum: i64 = messages.iter().map(|m| m.data.value).sum();
                let written = std::fs::File::create(&path).and_then(|mut file| {
                    for message in messages.iter() {
                        writeln!(file, "{}", message.data.value)?;
                    }
                    writeln!(
                        file,
                        "# sum {sum} of {} lines ({:?})",
                        info.size, info.trigger
                    )?;
                    file.sync_all()
                });
                if let Err(e) = written {
                    for message in messages.iter_mut() {
                        message.fail(format!("cannot write {}: {e}", path.display()));
                    }
                }
            })
            .batch_size(1000)
            .concurrency(2),
        )
        .start()
        .await?;
    // The iterator ends, the producer stops, the pipeline drains itself:
    // the last partial batch is written and acked too.
    pipeline.stopped().await;

    let tally = tally.lock().map_err(|_| "the acknowledger panicked")?;
    println!(
        "{total} lines: {} written in batches under {}, {} failed",
        tally.written,
        output.display(),
        tally.failed.len()
    );
    for (line, reason) in tally.failed.iter().take(5) {
        println!("  line {line}: {reason}");
    }
    Ok(())
}

/// A sample input: 2500 numbers, every 97th line not a number.
fn sample(directory: &std::path::Path) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(directory)?;
    let path = directory.join("numbers.txt");
    let mut file = std::fs::File::create(&path)?;
    for n in 1..=2500u32 {
        if n.is_multiple_of(97) {
            writeln!(file, "line {n}")?;
        } else {
            writeln!(file, "{n}")?;
        }
    }
    Ok(path)
}
