//! The message types of a stage's `handle_call`, `handle_cast` and
//! `handle_info`, as one bundle: the trait parameter of
//! [`Producer`](crate::Producer), [`ProducerConsumer`](crate::ProducerConsumer)
//! and [`Consumer`](crate::Consumer).

use std::fmt;
use std::marker::PhantomData;

/// The types of a stage's calls, casts and infos.
///
/// The stage traits take a bundle as their parameter, `()` (no messages) by
/// default: `impl Producer for Numbers` handles none, and a stage that does
/// names its bundle, `impl Producer<Msgs<Query, Answer>> for Store`.
/// [`Msgs`] spells any bundle; a type of one's own implementing this trait
/// works too.
///
/// Message types are best owned (no lifetime, not even `&'static str`):
/// rustc cannot prove the handle of a stage whose bundle holds a lifetime
/// `Send` inside a spawned task ("implementation of `Consumer` is not
/// general enough"). The handle's [`producer()`](crate::StageRef::producer)
/// and [`consumer()`](crate::StageRef::consumer) views have no message
/// types and move into tasks freely.
pub trait Messages: 'static {
    /// `handle_call` requests.
    type Call: Send + 'static;
    /// `handle_call` replies.
    type Reply: Send + 'static;
    /// `handle_cast` requests.
    type Cast: Send + 'static;
    /// `handle_info` messages.
    type Info: Send + 'static;
}

/// No messages: the stage traits' default. The handle's `call`, `cast` and
/// `send_info` take `()`, and reach the callbacks' defaults (a warning).
impl Messages for () {
    type Call = ();
    type Reply = ();
    type Cast = ();
    type Info = ();
}

/// A bundle of message types, in the order of [`Messages`]: calls, their
/// replies, casts, infos; those left out are `()`.
///
/// ```text
/// impl Producer<Msgs<Query, Answer>> for Store { .. }       // calls
/// impl Consumer<Msgs<(), (), Done>> for Worker { .. }        // casts
/// impl ProducerConsumer<Msgs<(), (), (), Tick>> for Batcher { .. } // infos
/// ```
///
/// The callbacks' contexts and the stage's handle name the bundle too
/// (`ProducerContext<'_, Self, Msgs<Query, Answer>>`,
/// `ProducerHandle<Store, Msgs<Query, Answer>>`), so a stage that uses it
/// in more than its `impl` line is best given an alias:
/// `type StoreMessages = Msgs<Query, Answer>;`. A stage with no messages
/// writes nothing (not `Msgs<()>`, which is a bundle of its own). A bundle
/// of one kind reads better by its kind's name: [`Calls<Query, Answer>`],
/// [`Casts<Done>`], [`Infos<Tick>`] are the same types as the `Msgs` above.
pub struct Msgs<Call, Reply = (), Cast = (), Info = ()>(
    PhantomData<Marker<Call, Reply, Cast, Info>>,
);

/// A bundle with calls only, of `Call` answered by `Reply`:
/// `Msgs<Call, Reply>` by its reader's name.
///
/// ```
/// use weir_gen_stage::{Calls, Messages, Msgs};
///
/// struct Query;
/// fn same<A: Messages<Call = Query, Reply = usize, Cast = (), Info = ()>>() {}
/// same::<Calls<Query, usize>>();
/// same::<Msgs<Query, usize>>();
/// ```
pub type Calls<Call, Reply = ()> = Msgs<Call, Reply>;

/// A bundle with casts only: `Msgs<(), (), Cast>`.
pub type Casts<Cast> = Msgs<(), (), Cast>;

/// A bundle with infos only: `Msgs<(), (), (), Info>`.
///
/// ```
/// use weir_gen_stage::{Infos, Noreply, ProducerConsumer, ProducerConsumerContext, Subscription};
///
/// /// Sent by a timer.
/// struct Tick;
///
/// struct Batcher(Vec<u32>);
///
/// impl ProducerConsumer<Infos<Tick>> for Batcher {
///     type In = u32;
///     type Out = Vec<u32>;
///
///     async fn handle_events(&mut self, events: Vec<u32>, _from: Subscription,
///                            _ctx: &mut ProducerConsumerContext<'_, Self, Infos<Tick>>) -> Noreply<Vec<u32>> {
///         self.0.extend(events);
///         Noreply::none()
///     }
///
///     async fn handle_info(&mut self, _tick: Tick,
///                          _ctx: &mut ProducerConsumerContext<'_, Self, Infos<Tick>>) -> Noreply<Vec<u32>> {
///         Noreply::Emit(vec![std::mem::take(&mut self.0)])
///     }
/// }
/// ```
pub type Infos<Info> = Msgs<(), (), (), Info>;

/// What [`Msgs`] holds: nothing (it is never made), and `Send`, `Sync` and
/// `'static` whatever its types.
type Marker<Call, Reply, Cast, Info> = fn() -> (Call, Reply, Cast, Info);

impl<Call, Reply, Cast, Info> Messages for Msgs<Call, Reply, Cast, Info>
where
    Call: Send + 'static,
    Reply: Send + 'static,
    Cast: Send + 'static,
    Info: Send + 'static,
{
    type Call = Call;
    type Reply = Reply;
    type Cast = Cast;
    type Info = Info;
}

impl<Call, Reply, Cast, Info> fmt::Debug for Msgs<Call, Reply, Cast, Info> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Msgs")
    }
}
