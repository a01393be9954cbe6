//! `start` never fails for a valid topology: a finite producer cannot end
//! before every processor has subscribed, however few messages it has.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use weir_pipeline::{Batcher, Error, Message, NoopAcknowledger, Pipeline};

fn finite(n: u32) -> impl Iterator<Item = Message<u32>> {
    (0..n).map(|n| Message::new(n, Arc::new(NoopAcknowledger)))
}

on_both_runtimes! {
    /// Broadway starts its processors before its producers emit; here the
    /// processors subscribe before any demand reaches the producer, so the
    /// first processor cannot empty it before the others subscribe.
    async fn three_messages_and_four_processors_start_and_are_all_handled() -> Result<(), Error> {
        for _ in 0..20 {
            let handled = Arc::new(AtomicUsize::new(0));
            let count = handled.clone();
            let three = weir_gen_stage::from_iter(finite(3)).await?;
            let pipeline = Pipeline::builder()
                .producer(&three)
                .processors(4, move |_: &mut Message<u32>| {
                    count.fetch_add(1, Ordering::SeqCst);
                })
                .start()
                .await?;
            pipeline.stopped().await;
            assert_eq!(handled.load(Ordering::SeqCst), 3);
        }
        Ok(())
    }

    /// Two finite producers, two processors and a batcher: every message of
    /// both is handled and batched.
    async fn two_finite_producers_and_two_processors_start_every_time() -> Result<(), Error> {
        for _ in 0..20 {
            let sum = Arc::new(AtomicU64::new(0));
            let add = sum.clone();
            let a = weir_gen_stage::from_iter(finite(40)).await?;
            let b = weir_gen_stage::from_iter(finite(40)).await?;
            let pipeline = Pipeline::builder()
                .producer(&a)
                .producer(&b)
                .processors(2, |_: &mut Message<u32>| {})
                .batcher(Batcher::new("default", move |batch: &mut [Message<u32>], _| {
                    let batch_sum: u64 = batch.iter().map(|m| u64::from(m.data)).sum();
                    add.fetch_add(batch_sum, Ordering::SeqCst);
                }).batch_size(7))
                .start()
                .await?;
            pipeline.stopped().await;
            assert_eq!(sum.load(Ordering::SeqCst), 2 * (0..40).sum::<u64>());
        }
        Ok(())
    }

    /// A producer of plain data (wrapped into messages by the pipeline)
    /// with fewer messages than processors.
    async fn a_finite_producer_of_data_with_more_processors_than_messages() -> Result<(), Error> {
        for _ in 0..20 {
            let acked = Arc::new(Mutex::new(Vec::new()));
            let record = acked.clone();
            let two = weir_gen_stage::from_iter([1u32, 2]).await?;
            let pipeline = Pipeline::builder()
                .producer_of(
                    &two,
                    Arc::new(move |ok: Vec<Message<u32>>, _failed: Vec<Message<u32>>| {
                        record.lock().expect("no panic while locked").extend(ok.into_iter().map(|m| m.data));
                    }),
                )
                .processors(3, |_: &mut Message<u32>| {})
                .start()
                .await?;
            pipeline.stopped().await;
            let mut acked = acked.lock().expect("no panic while locked").clone();
            acked.sort_unstable();
            assert_eq!(acked, [1, 2]);
        }
        Ok(())
    }

    /// A producer the caller holds in accumulate mode stays so: the pipeline
    /// does not release its demand.
    async fn a_producer_held_in_accumulate_mode_stays_held() -> Result<(), Error> {
        let handled = Arc::new(AtomicUsize::new(0));
        let count = handled.clone();
        let five = weir_gen_stage::from_iter(finite(5)).await?;
        five.set_demand_mode(weir_gen_stage::DemandMode::Accumulate).await?;
        let pipeline = Pipeline::builder()
            .producer(&five)
            .processors(2, move |_: &mut Message<u32>| {
                count.fetch_add(1, Ordering::SeqCst);
            })
            .start()
            .await?;
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(handled.load(Ordering::SeqCst), 0);
        five.set_demand_mode(weir_gen_stage::DemandMode::Forward).await?;
        pipeline.stopped().await;
        assert_eq!(handled.load(Ordering::SeqCst), 5);
        Ok(())
    }
}
