//! A small end-to-end pipeline: a producer of numbers, a producer_consumer
//! doubling them, and two consumers sharing the work through the Demand
//! dispatcher. Run it with:
//!
//! ```text
//! cargo run -p weir-gen-stage --example pipeline
//! ```
//!
//! The producer emits 1..=N exactly as demanded and stops normally after its
//! last event; the stop travels down the permanent subscriptions, each stage
//! finishing the events it already holds first; each consumer reports what
//! it handled from its `terminate`.

use std::time::Instant;

use tokio::sync::mpsc;
use weir_gen_stage::{
    Consumer, ConsumerContext, Msgs, Noreply, Producer, ProducerConsumer, ProducerConsumerContext,
    ProducerContext, StopReason, SubscribeOptions, Subscription,
};

const EVENTS: u64 = 1_000_000;

/// Emits `next..=last`, then stops once its last events are dispatched.
struct Numbers {
    next: u64,
    last: u64,
}

/// The producer tells itself it is done, through its own buffer.
struct Done;

type NumbersMessages = Msgs<(), (), (), Done>;

impl Producer for Numbers {
    type Messages = NumbersMessages;
    type Event = u64;

    async fn handle_demand(
        &mut self,
        demand: usize,
        ctx: &mut ProducerContext<'_, Self>,
    ) -> Noreply<u64> {
        let end = (self.next + demand as u64).min(self.last + 1);
        let events: Vec<u64> = (self.next..end).collect();
        self.next = end;
        if self.next > self.last {
            // Delivered after the events above have been dispatched.
            ctx.async_info(Done);
        }
        Noreply::Emit(events)
    }

    async fn handle_info(
        &mut self,
        _done: Done,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> Noreply<u64> {
        Noreply::Stop(StopReason::Normal)
    }
}

struct Doubler;

impl ProducerConsumer for Doubler {
    type Messages = ();
    type In = u64;
    type Out = u64;

    async fn handle_events(
        &mut self,
        events: Vec<u64>,
        _from: Subscription,
        _ctx: &mut ProducerConsumerContext<'_, Self>,
    ) -> Noreply<u64> {
        Noreply::Emit(events.into_iter().map(|n| n * 2).collect())
    }
}

/// What a consumer handled, reported when it stops.
#[derive(Debug)]
struct Report {
    name: &'static str,
    events: u64,
    batches: u64,
    sum: u64,
}

struct Summer {
    report: Report,
    out: mpsc::UnboundedSender<Report>,
}

impl Consumer for Summer {
    type Messages = ();
    type Event = u64;

    async fn handle_events(
        &mut self,
        events: Vec<u64>,
        _from: Subscription,
        _ctx: &mut ConsumerContext<'_, Self>,
    ) -> Noreply {
        self.report.events += events.len() as u64;
        self.report.batches += 1;
        self.report.sum += events.iter().sum::<u64>();
        Noreply::none()
    }

    async fn terminate(&mut self, _reason: &StopReason, _ctx: &mut ConsumerContext<'_, Self>) {
        let report = Report {
            name: self.report.name,
            events: self.report.events,
            batches: self.report.batches,
            sum: self.report.sum,
        };
        let _ = self.out.send(report);
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), weir_gen_stage::Error> {
    let started = Instant::now();

    let numbers = weir_gen_stage::start_producer(Numbers {
        next: 1,
        last: EVENTS,
    })
    .await?;
    let doubler = weir_gen_stage::start_producer_consumer(Doubler).await?;
    let (out, mut reports) = mpsc::unbounded_channel();
    let mut consumers = Vec::new();
    for name in ["consumer A", "consumer B"] {
        let report = Report {
            name,
            events: 0,
            batches: 0,
            sum: 0,
        };
        let consumer = weir_gen_stage::start_consumer(Summer {
            report,
            out: out.clone(),
        })
        .await?;
        // Both consumers subscribe to the doubler, whose default Demand
        // dispatcher sends each batch to the consumer with the most demand.
        consumer
            .subscribe(&doubler, SubscribeOptions::new().max_demand(500))
            .await?;
        consumers.push(consumer);
    }
    // Subscribe the doubler last: nothing flows until everyone is there.
    doubler
        .subscribe(&numbers, SubscribeOptions::new().max_demand(1000))
        .await?;

    let mut total_events = 0;
    let mut total_sum = 0;
    for _ in 0..consumers.len() {
        let Some(report) = reports.recv().await else {
            break;
        };
        println!(
            "{}: {} events in {} batches, sum {}",
            report.name, report.events, report.batches, report.sum
        );
        total_events += report.events;
        total_sum += report.sum;
    }
    let elapsed = started.elapsed();
    println!(
        "total: {total_events} events, sum {total_sum} (expected {}), in {:.1} ms ({:.2} M events/s)",
        EVENTS * (EVENTS + 1),
        elapsed.as_secs_f64() * 1000.0,
        total_events as f64 / elapsed.as_secs_f64() / 1e6
    );
    for consumer in &consumers {
        println!("{} stopped: {}", consumer.id(), consumer.stopped().await);
    }
    assert_eq!(total_events, EVENTS, "every event reached a consumer");
    assert_eq!(
        total_sum,
        EVENTS * (EVENTS + 1),
        "every event was doubled once"
    );
    Ok(())
}
