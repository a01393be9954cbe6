//! Memory soak: a fast producer feeding a slow consumer through a
//! producer_consumer, for 100 000 000 events by default, reporting peak RSS
//! (`VmHWM` from `/proc/self/status`) every tenth of the run and at the end.
//!
//! Demand is the only thing that holds the producer back, so the peak must
//! stay flat: bounded by `max_demand` events per subscription, not by how
//! many events went through. An unbounded queue would instead grow towards
//! `events x 8` bytes (800 MB at the default count).
//!
//! ```sh
//! cargo run --release -p weir-gen-stage --example memory_soak
//! cargo run --release -p weir-gen-stage --example memory_soak -- --events 10000000 --max-demand 100 --runtime current_thread
//! ```
//!
//! Options: `--events N` (default 100 000 000), `--max-demand N` (default
//! 1000, min_demand is half), `--work N` (mixing rounds the consumer spends
//! per event, default 16: what makes it slower than the producer),
//! `--runtime multi_thread|current_thread` (default multi_thread, 2 workers,
//! so the producer really runs ahead of the consumer). Nothing is asserted;
//! the figures are printed.

use std::process::ExitCode;
use std::time::Instant;

use tokio::sync::oneshot;
use weir_gen_stage::{
    Consumer, ConsumerContext, DemandMode, Noreply, Producer, ProducerConsumer,
    ProducerConsumerContext, ProducerContext, ProducerOptions, StopReason, SubscribeOptions,
    Subscription,
};

/// Emits `0..end` as fast as it is asked; held in accumulate mode until the
/// pipeline is subscribed.
struct Numbers {
    next: u64,
    end: u64,
}

impl Producer for Numbers {
    type Messages = ();
    type Event = u64;

    async fn init(
        &mut self,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> Result<ProducerOptions<u64>, StopReason> {
        Ok(ProducerOptions::new().demand(DemandMode::Accumulate))
    }

    async fn handle_demand(
        &mut self,
        demand: usize,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> Noreply<u64> {
        let end = self.next.saturating_add(demand as u64).min(self.end);
        let events = (self.next..end).collect();
        self.next = end;
        Noreply::Emit(events)
    }
}

/// Passes events on, doubled.
struct Doubler;

impl ProducerConsumer for Doubler {
    type Messages = ();
    type In = u64;
    type Out = u64;

    async fn handle_events(
        &mut self,
        mut events: Vec<u64>,
        _from: Subscription,
        _ctx: &mut ProducerConsumerContext<'_, Self>,
    ) -> Noreply<u64> {
        for event in &mut events {
            *event = event.wrapping_mul(2);
        }
        Noreply::Emit(events)
    }
}

/// Spends `work` mixing rounds on every event, and reports memory every
/// tenth of the run.
struct SlowCounter {
    work: u32,
    total: u64,
    seen: u64,
    next_report: u64,
    mixed: u64,
    started: Instant,
    done: Option<oneshot::Sender<u64>>,
}

impl SlowCounter {
    fn report_every(&self) -> u64 {
        (self.total / 10).max(1)
    }
}

impl Consumer for SlowCounter {
    type Messages = ();
    type Event = u64;

    async fn handle_events(
        &mut self,
        events: Vec<u64>,
        _from: Subscription,
        _ctx: &mut ConsumerContext<'_, Self>,
    ) -> Noreply {
        for event in &events {
            let mut x = *event;
            for _ in 0..self.work {
                // splitmix64's finaliser: cheap, and not foldable away.
                x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                x ^= x >> 31;
            }
            self.mixed ^= std::hint::black_box(x);
        }
        self.seen += events.len() as u64;
        if self.seen >= self.next_report {
            report(&format!("{:>11} events", self.seen), self.started);
            self.next_report = self.next_report.saturating_add(self.report_every());
        }
        if self.seen >= self.total
            && let Some(done) = self.done.take()
        {
            let _ = done.send(self.mixed);
        }
        Noreply::none()
    }
}

/// `VmRSS` and `VmHWM` (peak RSS) in KiB, from `/proc/self/status`.
fn memory_kib() -> Option<(u64, u64)> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| {
                rest.trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<u64>()
                    .ok()
            })
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

fn report(label: &str, started: Instant) {
    let elapsed = started.elapsed().as_secs_f64();
    match memory_kib() {
        Some((rss, hwm)) => println!(
            "{label} {elapsed:>8.2} s   rss {:>8.1} MiB   peak rss (VmHWM) {:>8.1} MiB",
            rss as f64 / 1024.0,
            hwm as f64 / 1024.0
        ),
        None => println!("{label} {elapsed:>8.2} s   (no /proc/self/status: memory not available)"),
    }
}

struct Options {
    events: u64,
    max_demand: usize,
    work: u32,
    multi_thread: bool,
}

fn parse(mut args: impl Iterator<Item = String>) -> Result<Options, String> {
    let mut options = Options {
        events: 100_000_000,
        max_demand: 1000,
        work: 16,
        multi_thread: true,
    };
    while let Some(flag) = args.next() {
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let number = || {
            value
                .replace('_', "")
                .parse::<u64>()
                .map_err(|e| format!("{flag} {value}: {e}"))
        };
        match flag.as_str() {
            "--events" => options.events = number()?,
            "--max-demand" => {
                options.max_demand =
                    usize::try_from(number()?).map_err(|e| format!("{flag}: {e}"))?
            }
            "--work" => {
                options.work = u32::try_from(number()?).map_err(|e| format!("{flag}: {e}"))?
            }
            "--runtime" => {
                options.multi_thread = match value.as_str() {
                    "multi_thread" => true,
                    "current_thread" => false,
                    other => {
                        return Err(format!(
                            "--runtime {other}: expected multi_thread or current_thread"
                        ));
                    }
                }
            }
            other => return Err(format!("unknown option {other}")),
        }
    }
    if options.events == 0 || options.max_demand == 0 {
        return Err("--events and --max-demand must be at least 1".to_owned());
    }
    Ok(options)
}

async fn soak(options: &Options) -> Result<(), weir_gen_stage::Error> {
    let subscribe = || {
        SubscribeOptions::new()
            .max_demand(options.max_demand)
            .min_demand(options.max_demand / 2)
    };
    let started = Instant::now();
    report("before start     ", started);

    let producer = weir_gen_stage::start_producer(Numbers {
        next: 0,
        end: options.events,
    })
    .await?;
    let doubler = weir_gen_stage::start_producer_consumer(Doubler).await?;
    doubler.subscribe(&producer, subscribe()).await?;
    let (done_tx, done_rx) = oneshot::channel();
    let counter = weir_gen_stage::start_consumer(SlowCounter {
        work: options.work,
        total: options.events,
        seen: 0,
        next_report: (options.events / 10).max(1),
        mixed: 0,
        started,
        done: Some(done_tx),
    })
    .await?;
    counter.subscribe(&doubler, subscribe()).await?;

    let clock = Instant::now();
    producer.set_demand_mode(DemandMode::Forward).await?;
    let mixed = done_rx.await.unwrap_or_default();
    let elapsed = clock.elapsed().as_secs_f64();

    report("end              ", started);
    let bound_kib = (options.max_demand * 3 * std::mem::size_of::<u64>()) as f64 / 1024.0;
    let unbounded_mib =
        (options.events * std::mem::size_of::<u64>() as u64) as f64 / (1024.0 * 1024.0);
    println!(
        "{} events in {elapsed:.2} s ({:.1} M events/s, checksum {mixed:x}); events in flight are bounded by \
         max_demand x 3 stages = {bound_kib:.1} KiB of u64, an unbounded queue could hold up to {unbounded_mib:.0} MiB",
        options.events,
        options.events as f64 / elapsed / 1e6
    );
    producer.stop(StopReason::Shutdown).await?;
    counter.stopped().await;
    Ok(())
}

fn main() -> ExitCode {
    let options = match parse(std::env::args().skip(1)) {
        Ok(options) => options,
        Err(message) => {
            eprintln!("memory_soak: {message}");
            return ExitCode::FAILURE;
        }
    };
    let mut builder = if options.multi_thread {
        let mut builder = tokio::runtime::Builder::new_multi_thread();
        builder.worker_threads(2);
        builder
    } else {
        tokio::runtime::Builder::new_current_thread()
    };
    let runtime = match builder.enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("memory_soak: cannot build the tokio runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    println!(
        "memory_soak: {} events, max_demand {}, consumer work {} rounds/event, {} runtime",
        options.events,
        options.max_demand,
        options.work,
        if options.multi_thread {
            "multi_thread (2 workers)"
        } else {
            "current_thread"
        }
    );
    match runtime.block_on(soak(&options)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("memory_soak: {error}");
            ExitCode::FAILURE
        }
    }
}
