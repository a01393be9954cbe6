//! Demand options as Broadway's: processor `min_demand`, and a batcher's
//! own `max_demand`, read back through the metrics' outstanding demand.

use std::time::Duration;

use weir_pipeline::{BatchMode, Batcher, Error, Message, Pipeline, PipelineMetrics};

/// Wait until `check` holds for the metrics (a stage updates its counters
/// as it handles messages, after the acks the test waited for).
async fn eventually(
    pipeline: &Pipeline<u32>,
    check: impl Fn(&PipelineMetrics) -> bool,
) -> PipelineMetrics {
    for _ in 0..10_000 {
        let metrics = pipeline.metrics();
        if check(&metrics) {
            return metrics;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    pipeline.metrics()
}

fn outstanding(metrics: &PipelineMetrics) -> Vec<usize> {
    metrics.processors().map(|p| p.outstanding_demand).collect()
}

on_both_runtimes! {
    /// `min_demand` 0: a processor asks again only once all of its
    /// `max_demand` was handled; by default (half) after 5 of 10.
    async fn processor_min_demand_sets_when_a_processor_asks_again() -> Result<(), Error> {
        for (min_demand, expected) in [(Some(0), 4), (None, 10), (Some(7), 10), (Some(3), 4)] {
            let mut builder = Pipeline::builder()
                .test_producer()
                .processors(1, |_: &mut Message<u32>| {})
                .processor_max_demand(10);
            if let Some(min_demand) = min_demand {
                builder = builder.processor_min_demand(min_demand);
            }
            let pipeline = builder.start().await?;
            // Six handled: over the threshold (max - min) when min > 4.
            assert_eq!(pipeline.test_batch((0..6).collect()).await?.len(), 6);
            let metrics = eventually(&pipeline, |m| outstanding(m) == [expected]).await;
            assert_eq!(outstanding(&metrics), [expected], "min_demand {min_demand:?}");
            assert!(pipeline.drain(Duration::from_secs(30)).await.is_complete());
        }
        Ok(())
    }

    /// A batcher asks each processor for its `max_demand`, not its
    /// `batch_size`.
    async fn batcher_max_demand_is_what_it_asks_of_each_processor() -> Result<(), Error> {
        let pipeline = Pipeline::builder()
            .test_producer()
            .processors(2, |_: &mut Message<u32>| {})
            .batcher(
                Batcher::new("default", |_: &mut [Message<u32>], _| {})
                    .batch_size(100)
                    .max_demand(7),
            )
            .start()
            .await?;
        let batcher_demand = |m: &PipelineMetrics| m.batchers("default").map(|b| b.outstanding_demand).sum::<usize>();
        let metrics = eventually(&pipeline, |m| batcher_demand(m) == 14).await;
        assert_eq!(batcher_demand(&metrics), 14);
        // It still batches everything.
        assert_eq!(pipeline.test_batch_with((0..50).collect(), BatchMode::Bulk).await?.len(), 50);
        Ok(())
    }
}

#[tokio::test]
async fn a_min_demand_not_below_max_demand_is_refused() {
    let started = Pipeline::builder()
        .test_producer()
        .processors(1, |_: &mut Message<u32>| {})
        .processor_max_demand(4)
        .processor_min_demand(4)
        .start()
        .await;
    assert!(
        matches!(
            started,
            Err(Error::InvalidDemand {
                max_demand: 4,
                min_demand: 4
            })
        ),
        "{started:?}"
    );
}
