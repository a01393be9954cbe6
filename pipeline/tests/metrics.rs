//! Telemetry: `Pipeline::metrics`, a snapshot of every stage's counters.

use std::time::Duration;

use weir_pipeline::{BatchMode, BatchSizes, Batcher, Error, Message, Pipeline, StageRole};

#[tokio::test(start_paused = true)]
async fn metrics_count_each_stage() -> Result<(), Error> {
    let pipeline = Pipeline::builder()
        .test_producer()
        .processors(2, |message: &mut Message<u32>| {
            if message.data.is_multiple_of(5) {
                message.fail("a multiple of 5");
            }
        })
        .processor_max_demand(8)
        .batcher(
            Batcher::new("default", |batch: &mut [Message<u32>], _| {
                batch[0].fail("the first of the batch");
            })
            .batch_size(4)
            .concurrency(2),
        )
        .start()
        .await?;
    // 1..=20: 4 multiples of 5 fail in the processors; 16 are batched in 4
    // batches of 4, each failing its first message.
    // In bulk mode, as a producer's messages: batches fill.
    let acked = pipeline
        .test_batch_with((1..=20).collect(), BatchMode::Bulk)
        .await?;
    assert_eq!(acked.iter().filter(|m| m.is_ok()).count(), 12);

    let metrics = pipeline.metrics();
    let processors: Vec<_> = metrics.processors().collect();
    assert_eq!(processors.len(), 2);
    assert_eq!(processors.iter().map(|p| p.processed).sum::<u64>(), 20);
    assert_eq!(processors.iter().map(|p| p.failed).sum::<u64>(), 4);
    // Idle, each processor has its max_demand outstanding at the producer.
    assert!(
        processors.iter().all(|p| p.outstanding_demand == 8),
        "{processors:?}"
    );

    let batchers: Vec<_> = metrics.batchers("default").collect();
    assert_eq!(batchers.len(), 1);
    let batcher = batchers[0];
    assert_eq!(
        batcher.role,
        StageRole::Batcher {
            name: "default".into(),
            partition: None
        }
    );
    assert_eq!((batcher.processed, batcher.buffered), (16, 0));
    assert_eq!(
        batcher.batches,
        BatchSizes {
            count: 4,
            sum: 16,
            max: 4
        }
    );
    // It asks each of the 2 processors for a batch_size at a time.
    assert_eq!(batcher.outstanding_demand, 8);

    let batch_processors: Vec<_> = metrics.batch_processors("default").collect();
    assert_eq!(batch_processors.len(), 2);
    assert_eq!(
        batch_processors.iter().map(|p| p.processed).sum::<u64>(),
        16
    );
    assert_eq!(batch_processors.iter().map(|p| p.failed).sum::<u64>(), 4);
    assert_eq!(
        batch_processors
            .iter()
            .map(|p| p.batches.count)
            .sum::<u64>(),
        4
    );
    assert!(batch_processors.iter().all(|p| p.outstanding_demand == 1));
    assert_eq!(metrics.rate_limiting, None);
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_partial_batch_is_buffered_until_its_timeout() -> Result<(), Error> {
    let pipeline = Pipeline::builder()
        .test_producer()
        .processors(1, |_: &mut Message<u32>| {})
        .batcher(
            Batcher::new("default", |_: &mut [Message<u32>], _| {})
                .batch_size(10)
                .batch_timeout(Duration::from_secs(1)),
        )
        .start()
        .await?;
    let acked = pipeline.test_batch_with(vec![1, 2, 3], BatchMode::Bulk);
    let buffered = || {
        pipeline
            .metrics()
            .batchers("default")
            .map(|b| b.buffered)
            .sum::<usize>()
    };
    // Well before the timeout, the three wait in the batcher.
    let mut waited = Duration::ZERO;
    while buffered() < 3 && waited < Duration::from_millis(500) {
        tokio::time::sleep(Duration::from_millis(1)).await;
        waited += Duration::from_millis(1);
    }
    assert_eq!(buffered(), 3);
    assert_eq!(acked.await?.len(), 3);
    assert_eq!(buffered(), 0);
    let metrics = pipeline.metrics();
    let batcher = metrics.batchers("default").next().expect("one batcher");
    assert_eq!(
        batcher.batches,
        BatchSizes {
            count: 1,
            sum: 3,
            max: 3
        }
    );
    Ok(())
}
