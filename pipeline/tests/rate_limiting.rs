//! Rate limiting on the paused clock: at most `allowed_messages` handled per
//! interval across all producers, a limit changed while running, no message
//! lost, and a drain with demand still held (it waits for the limit).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;
use weir_pipeline::{Batcher, Error, Message, NoopAcknowledger, Pipeline, RateLimiting};

const SECOND: Duration = Duration::from_secs(1);

/// When each message was handled, as the interval it fell in.
#[derive(Clone)]
struct Clock {
    start: Instant,
    seen: Arc<Mutex<Vec<(u64, u32)>>>,
}

impl Clock {
    fn new() -> Self {
        Self {
            start: Instant::now(),
            seen: Arc::default(),
        }
    }

    fn record(&self, data: u32) {
        let interval = (self.start.elapsed().as_nanos() / SECOND.as_nanos()) as u64;
        self.seen
            .lock()
            .expect("no panic while locked")
            .push((interval, data));
    }

    /// Messages handled per interval.
    fn per_interval(&self) -> BTreeMap<u64, usize> {
        let mut counts = BTreeMap::new();
        for (interval, _) in self.seen.lock().expect("no panic while locked").iter() {
            *counts.entry(*interval).or_default() += 1;
        }
        counts
    }

    fn data(&self) -> Vec<u32> {
        let mut data: Vec<u32> = self
            .seen
            .lock()
            .expect("no panic while locked")
            .iter()
            .map(|(_, data)| *data)
            .collect();
        data.sort_unstable();
        data
    }
}

#[tokio::test(start_paused = true)]
async fn at_most_the_budget_per_interval_across_processors_and_nothing_lost() -> Result<(), Error> {
    let clock = Clock::new();
    let seen = clock.clone();
    let pipeline = Pipeline::builder()
        .test_producer()
        .processors(3, move |message: &mut Message<u32>| {
            seen.record(message.data)
        })
        .rate_limiting(10, SECOND)
        .start()
        .await?;
    assert_eq!(
        pipeline.get_rate_limiting(),
        Some(RateLimiting::new(10, SECOND))
    );
    let acked = pipeline.test_batch((0..35).collect()).await?;
    assert_eq!(acked.len(), 35);
    assert!(acked.iter().all(Message::is_ok));
    // 3 processors asking 10 each would take 30 at once: 10 per interval.
    assert_eq!(
        clock.per_interval(),
        BTreeMap::from([(0, 10), (1, 10), (2, 10), (3, 5)])
    );
    assert_eq!(clock.data(), (0..35).collect::<Vec<_>>());
    assert!(pipeline.drain(Duration::from_secs(5)).await.is_complete());
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn the_budget_is_shared_by_every_producer() -> Result<(), Error> {
    let clock = Clock::new();
    let seen = clock.clone();
    let evens = weir_gen_stage::from_iter((0..20).map(|n| n * 2)).await?;
    let odds = weir_gen_stage::from_iter((0..20).map(|n| n * 2 + 1)).await?;
    let pipeline = Pipeline::builder()
        .producer_of(&evens, Arc::new(NoopAcknowledger))
        .producer_of(&odds, Arc::new(NoopAcknowledger))
        .processors(2, move |message: &mut Message<u32>| {
            seen.record(message.data)
        })
        .batcher(Batcher::new("default", |_: &mut [Message<u32>], _| {}).batch_size(4))
        .rate_limiting(8, SECOND)
        .start()
        .await?;
    // Both iterators end; the pipeline drains itself once all is handled.
    pipeline.stopped().await;
    assert_eq!(clock.data(), (0..40).collect::<Vec<_>>());
    let counts = clock.per_interval();
    assert!(counts.values().all(|&n| n <= 8), "{counts:?}");
    // At least 5 intervals for 40 messages at 8 each (more when budget goes
    // to a producer that has nothing left: granted demand is not moved).
    assert!(counts.len() >= 5, "{counts:?}");
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_limit_changed_at_run_time_applies_from_the_next_interval() -> Result<(), Error> {
    let clock = Clock::new();
    let seen = clock.clone();
    let pipeline = Arc::new(
        Pipeline::builder()
            .test_producer()
            .processors(2, move |message: &mut Message<u32>| {
                seen.record(message.data)
            })
            .rate_limiting(5, SECOND)
            .start()
            .await?,
    );
    let all = pipeline.test_batch((0..60).collect());
    let update = {
        let pipeline = pipeline.clone();
        tokio::spawn(async move {
            tokio::time::sleep(SECOND / 2).await;
            pipeline.update_rate_limiting(20, SECOND)
        })
    };
    update.await.expect("the update task does not panic")?;
    assert_eq!(
        pipeline.get_rate_limiting(),
        Some(RateLimiting::new(20, SECOND))
    );
    let acked = all.await?;
    assert_eq!(acked.len(), 60);
    assert_eq!(clock.data(), (0..60).collect::<Vec<_>>());
    let counts = clock.per_interval();
    assert_eq!(counts.get(&0), Some(&5), "{counts:?}");
    assert!(counts.values().all(|&n| n <= 20), "{counts:?}");
    // 55 messages after the first interval at up to 20 each: 3 intervals
    // (at 5 each it would take 11).
    assert_eq!(counts.len(), 4, "{counts:?}");
    assert!(
        matches!(
            pipeline.update_rate_limiting(0, SECOND),
            Err(Error::InvalidRateLimiting { .. })
        ),
        "0 messages per interval is refused"
    );
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn demand_held_by_the_limiter_is_in_the_metrics_and_granted_later() -> Result<(), Error> {
    let pipeline = Pipeline::builder()
        .test_producer()
        .processors(2, |_: &mut Message<u32>| {})
        .processor_max_demand(10)
        .rate_limiting(4, SECOND)
        .start()
        .await?;
    // Both processors asked 10: 4 granted, 16 held.
    let metrics = pipeline.metrics();
    let limiter = metrics.rate_limiting.expect("a rate-limited pipeline");
    assert_eq!((limiter.remaining, limiter.held), (0, 16));
    let outstanding: usize = metrics.processors().map(|p| p.outstanding_demand).sum();
    assert_eq!(outstanding, 4);
    // One interval later, 4 more are granted (nothing has been handled).
    tokio::time::sleep(SECOND + Duration::from_millis(1)).await;
    let metrics = pipeline.metrics();
    let outstanding: usize = metrics.processors().map(|p| p.outstanding_demand).sum();
    assert_eq!(outstanding, 8);
    assert_eq!(metrics.rate_limiting.map(|l| l.held), Some(12));
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_drain_with_demand_held_handles_every_message_at_the_limit() -> Result<(), Error> {
    let clock = Clock::new();
    let seen = clock.clone();
    let pipeline = Pipeline::builder()
        .test_producer()
        .processors(2, move |message: &mut Message<u32>| {
            seen.record(message.data)
        })
        .batcher(Batcher::new("default", |_: &mut [Message<u32>], _| {}).batch_size(3))
        .rate_limiting(10, SECOND)
        .start()
        .await?;
    let all = pipeline.test_batch((0..50).collect());
    tokio::time::sleep(SECOND + SECOND / 2).await;
    let report = pipeline.drain(Duration::from_secs(5)).await;
    assert!(report.is_complete(), "{report:?}");
    let acked = all.await?;
    assert_eq!(acked.len(), 50, "every message acked, successful or failed");
    let mut data: Vec<u32> = acked.iter().map(|m| m.data).collect();
    data.sort_unstable();
    assert_eq!(data, (0..50).collect::<Vec<_>>());
    // Everything pushed before the drain is handled (as Broadway's shutdown
    // waits for every event), still at the limit: 10 an interval.
    assert!(acked.iter().all(Message::is_ok), "{acked:?}");
    assert_eq!(clock.data(), (0..50).collect::<Vec<_>>());
    assert!(
        clock.per_interval().values().all(|&n| n <= 10),
        "{:?}",
        clock.per_interval()
    );
    assert_eq!(clock.per_interval().len(), 5);
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn invalid_limits_are_refused() {
    let started = Pipeline::builder()
        .test_producer()
        .processors(1, |_: &mut Message<u32>| {})
        .rate_limiting(10, Duration::ZERO)
        .start()
        .await;
    assert!(matches!(started, Err(Error::InvalidRateLimiting { .. })));
    let unlimited = Pipeline::builder()
        .test_producer()
        .processors(1, |_: &mut Message<u32>| {})
        .start()
        .await
        .expect("starts");
    assert_eq!(unlimited.get_rate_limiting(), None);
    assert!(matches!(
        unlimited.update_rate_limiting(1, SECOND),
        Err(Error::NoRateLimiting)
    ));
}

on_both_runtimes! {
    /// `reset_rate_limiting` starts a new interval at once: the demand held
    /// for the next interval is granted now, not an interval later.
    async fn a_reset_grants_the_next_interval_now() -> Result<(), Error> {
        let interval = Duration::from_secs(60);
        let pipeline = Pipeline::builder()
            .test_producer()
            .processors(2, |_: &mut Message<u32>| {})
            .rate_limiting(10, interval)
            .start()
            .await?;
        let start = Instant::now();
        let all = pipeline.test_batch((0..20).collect());
        let handled = || pipeline.metrics().processors().map(|p| p.processed).sum::<u64>();
        let held = || pipeline.metrics().rate_limiting.map_or(0, |l| l.held);
        while handled() < 10 || held() == 0 {
            assert!(start.elapsed() < Duration::from_secs(30), "the first interval's 10 were never handled");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        assert_eq!(handled(), 10, "the limit holds until the reset");
        pipeline.reset_rate_limiting()?;
        assert_eq!(all.await?.len(), 20);
        assert!(start.elapsed() < interval, "{:?}", start.elapsed());
        assert!(pipeline.drain(Duration::from_secs(5)).await.is_complete());
        Ok(())
    }
}
