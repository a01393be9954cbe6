//! GenStage's `test/gen_stage/buffer_test.exs`: the producer buffer as a
//! state machine, ported to [`weir_gen_stage::buffer::Buffer`].
//!
//! Name mapping: GenStage's "temporary" entries are events
//! ([`Buffer::store`]), its "permanent" entries are infos waiting behind them
//! ([`Buffer::store_info`], identified by [`InfoId`]);
//! `take_count_or_until_permanent` is [`Buffer::take`], which returns the
//! events and the infos released after them (the count still wanted is the
//! caller's: asked minus taken). Where GenStage answers `:empty`, Weir
//! returns the info back (`store_info`) or an empty take. GenStage passes
//! the keep strategy on each store; Weir's buffer is built with it.

use weir_gen_stage::buffer::{Buffer, BufferKeep, BufferSize, Stored, Taken};
use weir_gen_stage::dispatchers::InfoId;

fn buffer(size: usize, keep: BufferKeep) -> Buffer<&'static str> {
    Buffer::new(BufferSize::Limited(size), keep)
}

fn info(n: u64) -> InfoId {
    InfoId(n)
}

/// `{:ok, buffer} = Buffer.store_permanent_unless_empty(buffer, perm)`.
fn store_info(buffer: &mut Buffer<&'static str>, n: u64) {
    assert_eq!(
        buffer.store_info(info(n)),
        None,
        "the buffer is not empty, so the info waits"
    );
}

// ---- estimate_size/1 -------------------------------------------------------

#[test]
fn does_not_count_permanent_events_in_size_estimate() {
    let mut buffer = buffer(10, BufferKeep::First);
    buffer.store(vec!["temp1", "temp2"], 0);
    store_info(&mut buffer, 3);
    store_info(&mut buffer, 4);

    // Size should still be 2 (only events).
    assert_eq!(buffer.len(), 2);
    assert_eq!(buffer.waiting_infos(), 2);
}

// ---- store_temporary/3 with :first keep strategy --------------------------

#[test]
fn discards_excess_events_when_buffer_is_full() {
    let mut buffer = buffer(3, BufferKeep::First);
    assert_eq!(buffer.store(vec!["a", "b", "c"], 0).discarded, 0);
    assert_eq!(buffer.store(vec!["d", "e", "f"], 0).discarded, 3);

    assert_eq!(buffer.len(), 3);
    assert_eq!(
        buffer.take(3),
        Taken {
            events: vec!["a", "b", "c"],
            released: vec![]
        }
    );
}

#[test]
fn handles_infinity_buffer_size() {
    let mut buffer: Buffer<u32> = Buffer::new(BufferSize::Infinity, BufferKeep::First);
    let events: Vec<u32> = (1..=1000).collect();
    assert_eq!(buffer.store(events, 0), Stored::default());

    assert_eq!(buffer.len(), 1000);
}

// ---- store_temporary/3 with :last keep strategy ---------------------------

#[test]
fn keeps_last_events_when_buffer_overflows() {
    let mut buffer = buffer(3, BufferKeep::Last);
    assert_eq!(buffer.store(vec!["a", "b", "c"], 0).discarded, 0);
    assert_eq!(buffer.store(vec!["d", "e", "f"], 0).discarded, 3);

    assert_eq!(
        buffer.take(3),
        Taken {
            events: vec!["d", "e", "f"],
            released: vec![]
        }
    );
}

#[test]
fn emits_permanent_events_when_they_are_displaced_by_new_temporaries() {
    let mut buffer = buffer(3, BufferKeep::Last);
    buffer.store(vec!["temp1", "temp2"], 0);
    store_info(&mut buffer, 3);
    store_info(&mut buffer, 4);

    // Overflowing with keep-last drops the events the infos waited for: the
    // infos are released.
    let stored = buffer.store(vec!["temp5", "temp6", "temp7"], 0);

    assert_eq!(stored.discarded, 2);
    assert!(!stored.released.is_empty());
    assert_eq!(stored.released, vec![info(3), info(4)]);
}

// ---- store_permanent_unless_empty/2 ---------------------------------------

#[test]
fn returns_empty_when_buffer_is_empty_on_store_permanent() {
    let mut buffer = buffer(10, BufferKeep::Last);
    // GenStage answers `:empty`: nothing to wait for, deliver the info now.
    assert_eq!(buffer.store_info(info(1)), Some(info(1)));
    assert_eq!(buffer.waiting_infos(), 0);
}

// ---- take_count_or_until_permanent/2 --------------------------------------

#[test]
fn returns_empty_when_buffer_is_empty_on_take() {
    let mut buffer = buffer(10, BufferKeep::Last);
    assert_eq!(
        buffer.take(5),
        Taken {
            events: vec![],
            released: vec![]
        }
    );
    assert!(buffer.is_empty());
}

#[test]
fn takes_temporary_events_in_fifo_order_stopping_at_permanent_events_and_returning_them() {
    let mut buffer = buffer(10, BufferKeep::First);
    buffer.store(vec!["temp1", "temp2"], 0);
    store_info(&mut buffer, 3);
    buffer.store(vec!["temp4"], 0);

    let taken = buffer.take(5);

    assert_eq!(taken.events, vec!["temp1", "temp2"]);
    assert_eq!(taken.released, vec![info(3)]);
    // We wanted 5, got 2 events, stopped at the info.
    assert_eq!(5 - taken.events.len(), 3);
    assert_eq!(buffer.len(), 1);
}

#[test]
fn maintains_fifo_order_for_permanent_events_stored_at_same_position() {
    let mut buffer = buffer(10, BufferKeep::First);
    buffer.store(vec!["temp1", "temp2"], 0);

    // Several infos behind the same event.
    store_info(&mut buffer, 3);
    store_info(&mut buffer, 4);
    store_info(&mut buffer, 5);

    let taken = buffer.take(5);

    assert_eq!(taken.events, vec!["temp1", "temp2"]);
    assert_eq!(taken.released, vec![info(3), info(4), info(5)]);
}

#[test]
fn interleaves_temporary_and_permanent_events_correctly_across_multiple_wheel_positions() {
    let mut buffer = buffer(10, BufferKeep::First);

    buffer.store(vec!["temp1", "temp2"], 0);
    store_info(&mut buffer, 3);
    store_info(&mut buffer, 4);

    buffer.store(vec!["temp5", "temp6", "temp7"], 0);
    store_info(&mut buffer, 8);
    store_info(&mut buffer, 9);

    buffer.store(vec!["temp10"], 0);
    store_info(&mut buffer, 11);

    let first = buffer.take(3);
    assert_eq!(first.events, vec!["temp1", "temp2"]);
    assert_eq!(first.released, vec![info(3), info(4)]);

    let second = buffer.take(4);
    assert_eq!(second.events, vec!["temp5", "temp6", "temp7"]);
    assert_eq!(second.released, vec![info(8), info(9)]);

    let third = buffer.take(2);
    assert_eq!(third.events, vec!["temp10"]);
    assert_eq!(third.released, vec![info(11)]);
}
