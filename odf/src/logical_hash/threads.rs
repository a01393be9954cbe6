//! [`HashingThread`]: a [`LogicalHasher`] that hashes on threads of its own while the caller goes on.
//!
//! A flat schema's columns are hashed by a few workers with no barrier between batches: every column is a
//! *lane*, a queue of that column's arrays in batch order and the column's own `ArrayDigestV0`. A worker
//! takes any lane that has arrays waiting and that no other worker holds, hashes what is queued on it, and
//! puts the digest back. A column's arrays are thus hashed in order, by one worker at a time, while the
//! other columns go on on other workers; a worker never waits for a batch's slowest column before it
//! starts on the next batch (as a fork and join per batch would), so the cores stay busy whatever the
//! columns cost. The caller waits only when `depth` batches' worth of arrays are queued.
//!
//! Schemas with struct fields are hashed by `RecordDigestV0` on one thread.

use std::collections::VecDeque;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use arrow::array::{ArrayRef, RecordBatch};
use arrow::datatypes::Schema;
use arrow_digest::{ArrayDigest, ArrayDigestV0};

use super::{Digest, LogicalHashError, LogicalHasher, finish_columns, logical_multihash};
use crate::arrow_schema::same_logical_schema;
use crate::{Multihash, Sha3Hasher};

/// A [`LogicalHasher`] on threads of its own ([`LogicalHasher::spawn`]), so that records are hashed while
/// the caller reads or writes the next ones: [`HashingThread::update`] queues a batch (waiting while
/// `depth` batches are queued, so memory stays bounded), [`HashingThread::finish`] waits for the hash.
/// A batch is queued, not copied (its buffers are shared). A flat schema's columns are hashed on up to
/// four threads (no more than the machine's cores), with no wait between batches.
///
/// ```
/// use std::sync::Arc;
/// use arrow::array::{Int64Array, RecordBatch};
/// use arrow::datatypes::{DataType, Field, Schema};
///
/// let schema = Arc::new(Schema::new(vec![Field::new("offset", DataType::Int64, false)]));
/// let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(Int64Array::from_iter_values(0..4))])?;
/// let mut here = weir_odf::logical_hash::LogicalHasher::new(&schema)?;
/// here.update(&batch)?;
/// let mut there = weir_odf::logical_hash::LogicalHasher::new(&schema)?.spawn(2)?;
/// there.update(batch)?;
/// assert_eq!(there.finish()?, here.finish());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct HashingThread {
    schema: Schema,
    hashing: Hashing,
}

#[derive(Debug)]
enum Hashing {
    /// A flat schema: one lane per column, shared by the workers.
    Lanes {
        lanes: Arc<Lanes>,
        workers: Vec<JoinHandle<()>>,
        /// `RecordDigestV0`'s hash of the schema, which the columns' digests are added to at the end.
        schema_digest: Option<Box<Sha3Hasher>>,
    },
    /// Struct fields: `RecordDigestV0` on one thread.
    Record {
        queue: Option<SyncSender<RecordBatch>>,
        thread: Option<JoinHandle<Result<Multihash, LogicalHashError>>>,
    },
}

/// The lanes and what the workers and the caller wait on.
#[derive(Debug)]
struct Lanes {
    state: Mutex<State>,
    /// Workers wait here for a lane to take (or for the end).
    work: Condvar,
    /// The caller waits here for room in the queue.
    room: Condvar,
    /// Arrays queued (and not yet hashed) beyond which the caller waits.
    limit: usize,
}

struct State {
    lanes: Vec<Lane>,
    /// Arrays queued and not yet hashed, those being hashed included.
    queued: usize,
    /// No more batches will come.
    closed: bool,
    /// A worker panicked, or the hasher was dropped: every thread stops.
    stopped: bool,
    /// A worker panicked.
    panicked: bool,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("State")
            .field("lanes", &self.lanes.len())
            .field("queued", &self.queued)
            .field("closed", &self.closed)
            .field("stopped", &self.stopped)
            .finish()
    }
}

/// One column: its digest (`None` while a worker holds it) and its arrays still to hash, in batch order.
struct Lane {
    digest: Option<ArrayDigestV0<Sha3Hasher>>,
    waiting: VecDeque<ArrayRef>,
}

impl Lanes {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Nothing panics while holding the lock (hashing happens outside it), so a poisoned lock still
        // holds a consistent state.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A worker: takes lanes with arrays waiting until the batches end (or the hasher stops).
    fn work(&self) {
        let mut state = self.lock();
        loop {
            if state.stopped {
                return;
            }
            // The free lane with the most arrays waiting: its backlog is the likeliest to hold the others up.
            let ready = state
                .lanes
                .iter()
                .enumerate()
                .filter(|(_, lane)| lane.digest.is_some() && !lane.waiting.is_empty())
                .max_by_key(|(_, lane)| lane.waiting.len())
                .map(|(i, _)| i);
            let Some(i) = ready else {
                if state.closed && state.queued == 0 {
                    return;
                }
                state = self.work.wait(state).unwrap_or_else(|p| p.into_inner());
                continue;
            };
            let lane = &mut state.lanes[i];
            let (Some(mut digest), arrays) =
                (lane.digest.take(), std::mem::take(&mut lane.waiting))
            else {
                continue;
            };
            drop(state);
            let hashed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                for array in &arrays {
                    digest.update(array.as_ref(), None);
                }
                digest
            }));
            state = self.lock();
            match hashed {
                Ok(digest) => {
                    state.lanes[i].digest = Some(digest);
                    state.queued -= arrays.len();
                }
                Err(_) => {
                    state.stopped = true;
                    state.panicked = true;
                }
            }
            // Room for the caller, and this lane (or the end) for the other workers.
            self.room.notify_all();
            self.work.notify_all();
        }
    }
}

impl LogicalHasher {
    /// Moves the hasher to threads of its own, with room for `depth` queued batches (at least one).
    pub fn spawn(self, depth: usize) -> Result<HashingThread, LogicalHashError> {
        let depth = depth.max(1);
        let start_err =
            |e: std::io::Error| LogicalHashError::Thread(format!("could not start: {e}"));
        let hashing = match self.digest {
            Digest::Columns {
                schema,
                columns,
                threads,
            } => {
                let width = columns.len();
                let lanes = Arc::new(Lanes {
                    state: Mutex::new(State {
                        lanes: columns
                            .into_iter()
                            .map(|digest| Lane {
                                digest: Some(digest),
                                waiting: VecDeque::new(),
                            })
                            .collect(),
                        queued: 0,
                        closed: false,
                        stopped: false,
                        panicked: false,
                    }),
                    work: Condvar::new(),
                    room: Condvar::new(),
                    limit: depth * width.max(1),
                });
                let mut hashing = Hashing::Lanes {
                    lanes: Arc::clone(&lanes),
                    workers: Vec::new(),
                    schema_digest: Some(Box::new(schema)),
                };
                for _ in 0..threads.clamp(1, width.max(1)) {
                    let lanes = Arc::clone(&lanes);
                    let worker = std::thread::Builder::new()
                        .name("odf-logical-hash".into())
                        .spawn(move || lanes.work())
                        // Dropping `hashing` stops and joins the workers already started.
                        .map_err(start_err)?;
                    if let Hashing::Lanes { workers, .. } = &mut hashing {
                        workers.push(worker);
                    }
                }
                hashing
            }
            digest @ Digest::Record(_) => {
                let (queue, batches) = sync_channel::<RecordBatch>(depth);
                let hasher = LogicalHasher {
                    schema: self.schema.clone(),
                    digest,
                };
                let thread = std::thread::Builder::new()
                    .name("odf-logical-hash".into())
                    .spawn(move || hash_record_batches(hasher, batches))
                    .map_err(start_err)?;
                Hashing::Record {
                    queue: Some(queue),
                    thread: Some(thread),
                }
            }
        };
        Ok(HashingThread {
            schema: self.schema,
            hashing,
        })
    }
}

fn hash_record_batches(
    mut hasher: LogicalHasher,
    batches: Receiver<RecordBatch>,
) -> Result<Multihash, LogicalHashError> {
    for batch in batches {
        hasher.update(&batch)?;
    }
    Ok(hasher.finish())
}

fn panicked() -> LogicalHashError {
    LogicalHashError::Thread("panicked".into())
}

impl HashingThread {
    /// Queues one more batch, waiting while `depth` batches' worth are queued. A batch of another schema
    /// (up to ODF's logical types, as for [`LogicalHasher::update`]) is refused.
    pub fn update(&mut self, batch: RecordBatch) -> Result<(), LogicalHashError> {
        if !same_logical_schema(&self.schema, batch.schema_ref()) {
            return Err(LogicalHashError::SchemaMismatch {
                expected: self.schema.to_string(),
                found: batch.schema_ref().to_string(),
            });
        }
        match &mut self.hashing {
            Hashing::Lanes { lanes, .. } => {
                if batch.num_rows() == 0 {
                    return Ok(());
                }
                let arrays = batch.columns();
                let mut state = lanes.lock();
                while !state.stopped
                    && state.queued > 0
                    && state.queued + arrays.len() > lanes.limit
                {
                    state = lanes.room.wait(state).unwrap_or_else(|p| p.into_inner());
                }
                if state.stopped {
                    return Err(panicked());
                }
                for (lane, array) in state.lanes.iter_mut().zip(arrays) {
                    lane.waiting.push_back(Arc::clone(array));
                }
                state.queued += arrays.len();
                drop(state);
                lanes.work.notify_all();
                Ok(())
            }
            Hashing::Record { queue, thread } => {
                if queue.as_ref().is_some_and(|q| q.send(batch).is_ok()) {
                    return Ok(());
                }
                // The thread stopped (it hangs up only on an error): its result says why.
                *queue = None;
                match join_record(thread) {
                    Err(e) => Err(e),
                    Ok(_) => Err(LogicalHashError::Thread("stopped early".into())),
                }
            }
        }
    }

    /// Waits for the hash of every batch queued.
    pub fn finish(mut self) -> Result<Multihash, LogicalHashError> {
        match &mut self.hashing {
            Hashing::Lanes {
                lanes,
                workers,
                schema_digest,
            } => {
                lanes.lock().closed = true;
                lanes.work.notify_all();
                let mut joined = true;
                for worker in workers.drain(..) {
                    joined &= worker.join().is_ok();
                }
                let mut state = lanes.lock();
                if !joined || state.panicked {
                    return Err(panicked());
                }
                let digests = state
                    .lanes
                    .iter_mut()
                    .map(|lane| lane.digest.take())
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(panicked)?;
                let schema = *schema_digest.take().ok_or_else(panicked)?;
                Ok(logical_multihash(finish_columns(schema, digests)))
            }
            Hashing::Record { queue, thread } => {
                *queue = None;
                join_record(thread)
            }
        }
    }
}

fn join_record(
    thread: &mut Option<JoinHandle<Result<Multihash, LogicalHashError>>>,
) -> Result<Multihash, LogicalHashError> {
    match thread.take() {
        Some(thread) => thread.join().unwrap_or_else(|_| Err(panicked())),
        None => Err(LogicalHashError::Thread("already stopped".into())),
    }
}

impl Drop for HashingThread {
    fn drop(&mut self) {
        // No thread outlives its hasher: stop the workers (what is still queued is not hashed) and wait.
        match &mut self.hashing {
            Hashing::Lanes { lanes, workers, .. } => {
                if !workers.is_empty() {
                    lanes.lock().stopped = true;
                    lanes.work.notify_all();
                    for worker in workers.drain(..) {
                        let _ = worker.join();
                    }
                }
            }
            Hashing::Record { queue, thread } => {
                *queue = None;
                if let Some(thread) = thread.take() {
                    let _ = thread.join();
                }
            }
        }
    }
}
