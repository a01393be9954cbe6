//! The pipeline's metrics: counters each stage keeps in atomics as it
//! works (relaxed, a few per batch of messages, none per message), read
//! without stopping anything by [`Pipeline::metrics`](crate::Pipeline::metrics).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use weir_gen_stage::StageId;

use crate::rate_limit::RateLimitingMetrics;

/// Which stage of the pipeline a [`StageMetrics`] describes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StageRole {
    /// Processor number `index` (`0..concurrency`).
    Processor {
        /// Its index.
        index: usize,
    },
    /// A batcher's stage; `partition` when the batcher has `partition_by`
    /// (one stage per partition).
    Batcher {
        /// The batcher's name.
        name: String,
        /// Its partition.
        partition: Option<usize>,
    },
    /// A batch processor of batcher `batcher`.
    BatchProcessor {
        /// The batcher's name.
        batcher: String,
        /// Its index among the batcher's batch processors (its partition
        /// when the batcher has `partition_by`).
        index: usize,
    },
}

/// Batch sizes seen by a stage.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BatchSizes {
    /// Batches.
    pub count: u64,
    /// Messages in them.
    pub sum: u64,
    /// The largest.
    pub max: usize,
}

impl BatchSizes {
    /// The mean size (0 without batches).
    pub fn mean(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum as f64 / self.count as f64
        }
    }
}

/// One stage's counters at one moment.
///
/// Each counter is read on its own (no lock), so the figures of a running
/// pipeline may be a few messages apart from each other.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StageMetrics {
    /// Which stage.
    pub role: StageRole,
    /// Its gen-stage id (see [`Pipeline::stages`](crate::Pipeline::stages)).
    pub stage: StageId,
    /// Messages the stage handled: processors, `handle_message` calls;
    /// batchers, messages received; batch processors, messages in the
    /// batches they ran `handle_batch` on.
    pub processed: u64,
    /// Of those, failed here: by `handle_message` (or its panic, or an
    /// unknown batcher) in a processor, by `handle_batch` in a batch
    /// processor.
    pub failed: u64,
    /// Batches: emitted by a batcher, handled by a batch processor.
    pub batches: BatchSizes,
    /// Demand the stage asked of its producers and has not received yet
    /// (messages; batches for a batch processor). A processor's demand held
    /// by the rate limiter is not counted here but in
    /// [`RateLimitingMetrics::held`].
    pub outstanding_demand: usize,
    /// Messages the stage holds in its own state: a batcher's partial
    /// batches (0 for the other stages, which hold nothing between two
    /// calls).
    pub buffered: usize,
}

/// Every stage's metrics, and the rate limiter's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PipelineMetrics {
    /// Processors, then each batcher's stages and batch processors.
    pub stages: Vec<StageMetrics>,
    /// The rate limiter, if the pipeline has one.
    pub rate_limiting: Option<RateLimitingMetrics>,
}

impl PipelineMetrics {
    /// The processors' metrics.
    pub fn processors(&self) -> impl Iterator<Item = &StageMetrics> {
        self.stages
            .iter()
            .filter(|stage| matches!(stage.role, StageRole::Processor { .. }))
    }

    /// The metrics of batcher `name`'s stages (one, or one per partition).
    pub fn batchers<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a StageMetrics> + 'a {
        self.stages.iter().filter(
            move |stage| matches!(&stage.role, StageRole::Batcher { name: n, .. } if n == name),
        )
    }

    /// The metrics of batcher `name`'s batch processors.
    pub fn batch_processors<'a>(
        &'a self,
        name: &'a str,
    ) -> impl Iterator<Item = &'a StageMetrics> + 'a {
        self.stages.iter().filter(move |stage| {
            matches!(&stage.role, StageRole::BatchProcessor { batcher, .. } if batcher == name)
        })
    }
}

/// A stage's counters, shared by the stage (which writes) and the pipeline
/// (which reads).
///
/// Aligned to 128 bytes (two cache lines, as the adjacent-line prefetcher
/// pairs them): the stages' counters are allocated one after the other, and
/// two stages running on two workers must not write to one cache line.
#[derive(Debug, Default)]
#[repr(align(128))]
pub(crate) struct Counters {
    processed: AtomicU64,
    failed: AtomicU64,
    batches: AtomicU64,
    batched: AtomicU64,
    max_batch: AtomicUsize,
    outstanding: AtomicUsize,
    buffered: AtomicUsize,
}

/// Add `n` to a counter only its stage writes: a relaxed load and store, no
/// read-modify-write (readers see the counter before or after, as with
/// `fetch_add`).
fn bump(counter: &AtomicU64, n: u64) {
    counter.store(counter.load(Ordering::Relaxed) + n, Ordering::Relaxed);
}

/// Each stage writes its own counters from its own task, and the pipeline
/// only reads them: one writer, so adding is a load and a store.
impl Counters {
    pub fn processed(&self, n: usize) {
        bump(&self.processed, n as u64);
    }

    pub fn failed(&self, n: usize) {
        if n > 0 {
            bump(&self.failed, n as u64);
        }
    }

    pub fn batch(&self, size: usize) {
        bump(&self.batches, 1);
        bump(&self.batched, size as u64);
        if size > self.max_batch.load(Ordering::Relaxed) {
            self.max_batch.store(size, Ordering::Relaxed);
        }
    }

    /// The stage's outstanding demand is now `n` (the stage keeps the
    /// count; only it writes).
    pub fn set_outstanding(&self, n: usize) {
        self.outstanding.store(n, Ordering::Relaxed);
    }

    pub fn set_buffered(&self, n: usize) {
        self.buffered.store(n, Ordering::Relaxed);
    }

    pub fn snapshot(&self, role: StageRole, stage: StageId) -> StageMetrics {
        StageMetrics {
            role,
            stage,
            processed: self.processed.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            batches: BatchSizes {
                count: self.batches.load(Ordering::Relaxed),
                sum: self.batched.load(Ordering::Relaxed),
                max: self.max_batch.load(Ordering::Relaxed),
            },
            outstanding_demand: self.outstanding.load(Ordering::Relaxed),
            buffered: self.buffered.load(Ordering::Relaxed),
        }
    }
}
