//! The crate's error.

/// What went wrong building, starting or testing a pipeline.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// `start` was called without a producer.
    #[error(
        "the pipeline has no producer: call `producer`, `producers`, `producer_of` or `test_producer`"
    )]
    NoProducer,
    /// `start` was called without `processors`.
    #[error("the pipeline has no processors: call `processors(concurrency, handle_message)`")]
    NoProcessors,
    /// A concurrency of 0.
    #[error("{stage} need a concurrency of at least 1")]
    ZeroConcurrency {
        /// `processors`, or the batcher's name.
        stage: String,
    },
    /// A batcher with `batch_size(0)`.
    #[error("batcher {batcher:?} needs a batch_size of at least 1")]
    ZeroBatchSize {
        /// The batcher's name.
        batcher: String,
    },
    /// `processor_min_demand` not below `processor_max_demand`.
    #[error("processor min_demand ({min_demand}) must be below max_demand ({max_demand})")]
    InvalidDemand {
        /// The processors' `max_demand`.
        max_demand: usize,
        /// The `min_demand` asked for.
        min_demand: usize,
    },
    /// Two batchers with the same name.
    #[error("two batchers are named {batcher:?}")]
    DuplicateBatcher {
        /// The name.
        batcher: String,
    },
    /// A stage of the pipeline could not be started, subscribed or reached.
    #[error("a stage of the pipeline could not be started, subscribed or reached")]
    Stage(#[from] weir_gen_stage::Error),
    /// `test_message`, `test_batch` or `push_messages` on a pipeline built
    /// without `test_producer`.
    #[error("the pipeline has no test producer: build it with `test_producer()`")]
    NoTestProducer,
    /// `push_messages`, `test_message` or `test_batch` on a pipeline that is
    /// draining or stopped: it takes no new messages (they are acked
    /// failed).
    #[error("the pipeline is not running: it takes no new messages")]
    NotRunning,
    /// `rate_limiting` with 0 messages or a zero interval.
    #[error(
        "rate limiting needs at least 1 message per non-zero interval, got {allowed_messages} per {interval:?}"
    )]
    InvalidRateLimiting {
        /// The messages asked for.
        allowed_messages: usize,
        /// The interval asked for.
        interval: std::time::Duration,
    },
    /// `update_rate_limiting` on a pipeline built without `rate_limiting`.
    #[error("the pipeline has no rate limiting: build it with `rate_limiting(..)`")]
    NoRateLimiting,
    /// The pipeline went down: its stages stopped abnormally more often
    /// than `max_restarts` in `max_seconds` allows (Broadway's supervisor
    /// reaching its restart intensity). Every stage was stopped and the
    /// messages they held acked failed.
    #[error(
        "the pipeline went down: {stage} stopped ({reason}) after {max_restarts} restarts within {max_seconds:?}"
    )]
    TooManyRestarts {
        /// The stage whose stop was one too many (its role and index).
        stage: String,
        /// Why it stopped.
        reason: String,
        /// The restart intensity: restarts allowed ...
        max_restarts: usize,
        /// ... within this period.
        max_seconds: std::time::Duration,
    },
    /// Messages pushed by `test_message`/`test_batch` were dropped without
    /// an ack (the pipeline stopped before handling them).
    #[error("{acked} of {expected} messages were acked; the others were dropped")]
    NotAcked {
        /// Messages acked.
        acked: usize,
        /// Messages pushed.
        expected: usize,
    },
}
