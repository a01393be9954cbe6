//! Property: whatever fails or panics, whatever the batch sizes and
//! concurrency, and wherever a drain cuts in, every message pushed is acked
//! exactly once, failed exactly when it should be.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, Once};
use std::time::Duration;

use proptest::prelude::*;
use weir_pipeline::{Batcher, Message, Pipeline};

#[derive(Debug, Clone)]
struct Case {
    messages: u32,
    processors: usize,
    /// `None`: no batcher, processors ack.
    batcher: Option<(usize, usize)>,
    fail_every: u32,
    panic_every: u32,
    batch_panic_every: u32,
    /// Drain after this many yields instead of waiting for every ack.
    drain_after: Option<usize>,
}

fn cases() -> impl Strategy<Value = Case> {
    (
        0u32..300,
        1usize..4,
        proptest::option::of((1usize..40, 1usize..3)),
        2u32..10,
        2u32..20,
        5u32..60,
        proptest::option::of(0usize..20),
    )
        .prop_map(
            |(
                messages,
                processors,
                batcher,
                fail_every,
                panic_every,
                batch_panic_every,
                drain_after,
            )| Case {
                messages,
                processors,
                batcher,
                fail_every,
                panic_every,
                batch_panic_every,
                drain_after,
            },
        )
}

fn quiet_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| std::panic::set_hook(Box::new(|_| {})));
}

fn run(case: Case) -> Result<(), TestCaseError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    runtime.block_on(async move {
        let panicked_batches: Arc<Mutex<HashSet<u32>>> = Arc::default();
        let (fail_every, panic_every) = (case.fail_every, case.panic_every);
        let mut builder = Pipeline::builder().test_producer().processors(
            case.processors,
            move |message: &mut Message<u32>| {
                if message.data.is_multiple_of(fail_every) {
                    message.fail("fail_every");
                }
                assert!(!message.data.is_multiple_of(panic_every), "panic_every");
            },
        );
        if let Some((batch_size, concurrency)) = case.batcher {
            let record = panicked_batches.clone();
            let every = case.batch_panic_every;
            builder = builder.batcher(
                Batcher::new("default", move |messages: &mut [Message<u32>], _| {
                    if messages.iter().any(|m| m.data.is_multiple_of(every)) {
                        if let Ok(mut record) = record.lock() {
                            record.extend(messages.iter().map(|m| m.data));
                        }
                        panic!("batch_panic_every");
                    }
                })
                .batch_size(batch_size)
                .batch_timeout(Duration::from_millis(100))
                .concurrency(concurrency),
            );
        }
        let pipeline = builder
            .start()
            .await
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let acked = tokio::spawn(pipeline.test_batch((1..=case.messages).collect()));
        if let Some(yields) = case.drain_after {
            for _ in 0..yields {
                tokio::task::yield_now().await;
            }
            let report = pipeline.drain(Duration::from_secs(60)).await;
            prop_assert!(report.is_complete(), "{:?}", report);
        }
        let acked = acked
            .await
            .map_err(|e| TestCaseError::fail(e.to_string()))?
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let mut data: Vec<u32> = acked.iter().map(|m| m.data).collect();
        data.sort_unstable();
        prop_assert_eq!(data, (1..=case.messages).collect::<Vec<_>>());
        let panicked = panicked_batches
            .lock()
            .map(|p| p.clone())
            .unwrap_or_default();
        for message in &acked {
            let n = message.data;
            let processor_failed = n.is_multiple_of(fail_every) || n.is_multiple_of(panic_every);
            if processor_failed || panicked.contains(&n) {
                prop_assert!(!message.is_ok(), "{} should have failed", n);
            } else if case.drain_after.is_none() {
                // Without a drain nothing fails for other reasons.
                prop_assert!(message.is_ok(), "{} should be ok: {:?}", n, message);
            }
        }
        if case.drain_after.is_none() {
            let report = pipeline.drain(Duration::from_secs(60)).await;
            prop_assert!(report.is_complete(), "{:?}", report);
        }
        Ok(())
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn every_message_is_acked_exactly_once(case in cases()) {
        quiet_panics();
        run(case)?;
    }
}
