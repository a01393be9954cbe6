//! Engine output (a container's or a child process's stdout/stderr) as `tracing` events tagged with
//! the engine and the operation, plus the last lines kept for error messages.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How many of the last output lines an error message quotes.
const TAIL_LINES: usize = 20;

/// Which stream a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OutputStream {
    Stdout,
    Stderr,
}

impl OutputStream {
    fn as_str(self) -> &'static str {
        match self {
            Self::Stdout => "stdout",
            Self::Stderr => "stderr",
        }
    }
}

/// Turns chunks of engine output into one `tracing` event per line (target `weir::engine`, fields
/// `engine`, `operation_id`, `stream`), keeping the last lines.
#[derive(Debug, Clone)]
pub(crate) struct EngineLog {
    engine: Arc<str>,
    operation_id: Arc<str>,
    tail: Arc<Mutex<VecDeque<String>>>,
    /// How many streams have ended (stdout and stderr: 2 means all output is in).
    ended: Arc<AtomicUsize>,
}

impl EngineLog {
    pub(crate) fn new(engine: &str, operation_id: &str) -> Self {
        Self {
            engine: engine.into(),
            operation_id: operation_id.into(),
            tail: Arc::new(Mutex::new(VecDeque::with_capacity(TAIL_LINES))),
            ended: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// A log for an engine without output streams (in-process): nothing to wait for.
    pub(crate) fn without_output(engine: &str, operation_id: &str) -> Self {
        let log = Self::new(engine, operation_id);
        log.ended.store(2, Ordering::Release);
        log
    }

    /// Waits (at most `timeout`) until both output streams have ended, so that the tail holds an
    /// engine's last words once it has exited.
    pub(crate) async fn settle(&self, timeout: Duration) {
        let give_up = tokio::time::Instant::now() + timeout;
        while self.ended.load(Ordering::Acquire) < 2 && tokio::time::Instant::now() < give_up {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// A line splitter for one stream of this engine.
    pub(crate) fn lines(&self, stream: OutputStream) -> LineSplitter {
        LineSplitter {
            log: self.clone(),
            stream,
            pending: Vec::new(),
        }
    }

    fn emit(&self, stream: OutputStream, line: &str) {
        tracing::info!(
            target: "weir::engine",
            engine = %self.engine,
            operation_id = %self.operation_id,
            stream = stream.as_str(),
            "{line}"
        );
        if let Ok(mut tail) = self.tail.lock() {
            if tail.len() == TAIL_LINES {
                tail.pop_front();
            }
            tail.push_back(line.to_owned());
        }
    }

    /// The last lines written, oldest first, joined with newlines.
    pub(crate) fn tail(&self) -> String {
        self.tail
            .lock()
            .map(|t| t.iter().map(String::as_str).collect::<Vec<_>>().join("\n"))
            .unwrap_or_default()
    }
}

/// Splits arbitrary chunks into lines; a partial line waits for its end (or [`Self::finish`]).
#[derive(Debug)]
pub(crate) struct LineSplitter {
    log: EngineLog,
    stream: OutputStream,
    pending: Vec<u8>,
}

impl LineSplitter {
    pub(crate) fn push(&mut self, chunk: &[u8]) {
        self.pending.extend_from_slice(chunk);
        while let Some(end) = self.pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=end).collect();
            self.emit(&line[..end]);
        }
    }

    /// The stream ended: emits a last partial line, and counts the stream as ended.
    pub(crate) fn finish(&mut self) {
        if !self.pending.is_empty() {
            let line = std::mem::take(&mut self.pending);
            self.emit(&line);
        }
        self.log.ended.fetch_add(1, Ordering::AcqRel);
    }

    fn emit(&self, line: &[u8]) {
        let text = String::from_utf8_lossy(line);
        let text = text.trim_end_matches('\r');
        self.log.emit(self.stream, text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_are_split_into_lines_and_the_tail_keeps_the_last_ones() {
        let log = EngineLog::new("e", "op");
        let mut out = log.lines(OutputStream::Stdout);
        out.push(b"first li");
        out.push(b"ne\nsecond\r\nthi");
        assert_eq!(log.tail(), "first line\nsecond");
        out.finish();
        assert_eq!(log.tail(), "first line\nsecond\nthi");
        for i in 0..30 {
            out.push(format!("l{i}\n").as_bytes());
        }
        let tail = log.tail();
        assert_eq!(tail.lines().count(), TAIL_LINES);
        assert!(tail.ends_with("l29"));
    }
}
