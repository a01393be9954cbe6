//! The message types of a stage's `handle_call`, `handle_cast` and
//! `handle_info`, as one bundle: the `Messages` associated type of
//! [`Producer`](crate::Producer), [`ProducerConsumer`](crate::ProducerConsumer)
//! and [`Consumer`](crate::Consumer).

use std::fmt;
use std::marker::PhantomData;

/// The types of a stage's calls, casts and infos.
///
/// A stage names its bundle once, as its `Messages` type: `()` handles
/// none (`type Messages = ();`), and a stage that does names its bundle,
/// `type Messages = Calls<Query, Answer>;`. The callbacks' contexts
/// (`ProducerContext<'_, Self>`) and the stage's handle
/// (`ProducerHandle<Store>`) take it from the stage. [`Msgs`] spells any
/// bundle, [`Calls`], [`Casts`], [`Infos`], [`CallsAndCasts`],
/// [`CallsAndInfos`] and [`CastsAndInfos`] name those with only some
/// kinds; a type of one's own implementing this trait works too.
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

/// No messages (`type Messages = ();`). The handle's `call`, `cast` and
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
/// type Messages = Msgs<Query, Answer>;          // calls
/// type Messages = Msgs<(), (), Done>;           // casts
/// type Messages = Msgs<(), (), (), Tick>;       // infos
/// type Messages = Msgs<Query, Answer, Done, Tick>; // all of them
/// ```
///
/// A stage with no messages writes `type Messages = ();` (not `Msgs<()>`,
/// which is a bundle of its own). A bundle with only some kinds reads
/// better by their names: [`Calls<Query, Answer>`], [`Casts<Done>`],
/// [`Infos<Tick>`], [`CallsAndCasts<Query, Answer, Done>`],
/// [`CallsAndInfos<Query, Answer, Tick>`], [`CastsAndInfos<Done, Tick>`]
/// are the same types as the `Msgs` spelled out.
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
/// impl ProducerConsumer for Batcher {
///     type Messages = Infos<Tick>;
///     type In = u32;
///     type Out = Vec<u32>;
///
///     async fn handle_events(&mut self, events: Vec<u32>, _from: Subscription,
///                            _ctx: &mut ProducerConsumerContext<'_, Self>) -> Noreply<Vec<u32>> {
///         self.0.extend(events);
///         Noreply::none()
///     }
///
///     async fn handle_info(&mut self, _tick: Tick,
///                          _ctx: &mut ProducerConsumerContext<'_, Self>) -> Noreply<Vec<u32>> {
///         Noreply::Emit(vec![std::mem::take(&mut self.0)])
///     }
/// }
/// ```
pub type Infos<Info> = Msgs<(), (), (), Info>;

/// A bundle with calls and casts: `Msgs<Call, Reply, Cast>`.
pub type CallsAndCasts<Call, Reply, Cast> = Msgs<Call, Reply, Cast>;

/// A bundle with calls and infos: `Msgs<Call, Reply, (), Info>`.
pub type CallsAndInfos<Call, Reply, Info> = Msgs<Call, Reply, (), Info>;

/// A bundle with casts and infos: `Msgs<(), (), Cast, Info>`.
///
/// ```
/// use weir_gen_stage::{CastsAndInfos, Consumer, ConsumerContext, Noreply, Subscription};
///
/// /// Sent by other tasks.
/// struct Reset;
/// /// Sent by a timer.
/// struct Tick;
///
/// #[derive(Default)]
/// struct Tally { seen: usize, ticks: usize }
///
/// impl Consumer for Tally {
///     type Event = u32;
///     type Messages = CastsAndInfos<Reset, Tick>;
///
///     async fn handle_events(&mut self, events: Vec<u32>, _from: Subscription,
///                            _ctx: &mut ConsumerContext<'_, Self>) -> Noreply {
///         self.seen += events.len();
///         Noreply::none()
///     }
///
///     async fn handle_cast(&mut self, _reset: Reset, _ctx: &mut ConsumerContext<'_, Self>) -> Noreply {
///         self.seen = 0;
///         Noreply::none()
///     }
///
///     async fn handle_info(&mut self, _tick: Tick, _ctx: &mut ConsumerContext<'_, Self>) -> Noreply {
///         self.ticks += 1;
///         Noreply::none()
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), weir_gen_stage::Error> {
/// // The handle's type names the stage alone; `cast` takes a `Reset`,
/// // `send_info` a `Tick`.
/// let tally: weir_gen_stage::ConsumerHandle<Tally> = weir_gen_stage::start_consumer(Tally::default()).await?;
/// tally.cast(Reset)?;
/// tally.send_info(Tick)?;
/// # Ok(())
/// # }
/// ```
pub type CastsAndInfos<Cast, Info> = Msgs<(), (), Cast, Info>;

/// The call type of a bundle (`handle_call`'s request).
pub type CallOf<M> = <M as Messages>::Call;

/// The reply type of a bundle's calls.
pub type ReplyOf<M> = <M as Messages>::Reply;

/// The cast type of a bundle.
pub type CastOf<M> = <M as Messages>::Cast;

/// The info type of a bundle.
pub type InfoOf<M> = <M as Messages>::Info;

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
