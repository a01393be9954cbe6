//! The server SDK: implement [`Engine`], run it with [`serve`] or
//! [`EngineServer`].

mod authority;
mod engine;
mod hpack;
mod panic;
mod rejections;
mod serve;
mod service;
mod unix_connection;

pub use engine::{Engine, EngineError, ProgressSink};
pub use serve::{BoundEngineServer, EngineServer, ServeError, serve};
pub use service::ResponseStream;
