//! Introspection as Broadway's: `topology()`, `producer_names()` and
//! `all_running()`.

use std::time::Duration;

use weir_pipeline::{Batcher, Error, Message, Pipeline, all_running};

on_both_runtimes! {
    /// The topology names every stage by role, with the ids `stages()` and
    /// `metrics()` use; the pipeline is listed as running until it stops.
    async fn topology_lists_every_stage_by_role() -> Result<(), Error> {
        // A name of its own: tests run at the same time in this process.
        let name = format!("orders-{:?}", std::thread::current().id());
        let pipeline = Pipeline::builder()
            .name(name.clone())
            .test_producer()
            .processors(3, |_: &mut Message<u32>| {})
            .batcher(Batcher::new("s3", |_: &mut [Message<u32>], _| {}).concurrency(2))
            .batcher(
                Batcher::new("sqs", |_: &mut [Message<u32>], _| {})
                    .concurrency(2)
                    .partition_by(|m| u64::from(m.data)),
            )
            .start()
            .await?;
        let topology = pipeline.topology();
        assert_eq!(topology.name, name);
        assert_eq!(pipeline.producer_names(), [format!("{name}.Producer_0")]);
        assert_eq!(topology.processors.name, format!("{name}.Processor_default"));
        assert_eq!(topology.processors.concurrency, 3);
        let batchers: Vec<(&str, usize, usize, usize)> = topology
            .batchers
            .iter()
            .map(|b| (b.batcher.as_str(), b.concurrency, b.stages.len(), b.batch_processors.len()))
            .collect();
        assert_eq!(batchers, [("s3", 2, 1, 2), ("sqs", 2, 2, 2)]);
        assert_eq!(topology.batchers[0].name, format!("{name}.Batcher_s3"));
        // Every stage of the topology is one of the pipeline's, and the
        // other way round.
        let mut ids: Vec<_> = topology.producers.iter().map(|p| p.stage)
            .chain(topology.processors.stages.iter().copied())
            .chain(topology.batchers.iter().flat_map(|b| b.stages.iter().chain(&b.batch_processors).copied()))
            .collect();
        let mut stages: Vec<_> = pipeline.stages().into_iter().map(|s| s.id()).collect();
        ids.sort();
        stages.sort();
        assert_eq!(ids, stages);

        assert!(all_running().contains(&name));
        assert!(pipeline.drain(Duration::from_secs(30)).await.is_complete());
        assert!(!all_running().contains(&name));
        Ok(())
    }
}
