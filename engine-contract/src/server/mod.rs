//! The server SDK: implement [`Engine`], run it with [`serve`] or
//! [`EngineServer`].

mod engine;
mod panic;
mod serve;
mod service;

pub use engine::{Engine, EngineError, ProgressSink};
pub use serve::{BoundEngineServer, EngineServer, ServeError, serve};
pub use service::ResponseStream;
