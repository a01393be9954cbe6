//! What the integration tests share.

/// A test run once on a current_thread runtime and once on a multi_thread
/// runtime with 2 workers: `on_both_runtimes! { async fn name() -> R { .. } }`
/// becomes a module `name` with the tests `current_thread` and
/// `multi_thread`.
#[macro_export]
macro_rules! on_both_runtimes {
    ($($(#[doc = $doc:expr])* async fn $name:ident() -> $ret:ty $body:block)*) => {
        $(
            $(#[doc = $doc])*
            mod $name {
                #[allow(unused_imports)]
                use super::*;

                async fn run() -> $ret $body

                #[tokio::test(flavor = "current_thread")]
                async fn current_thread() -> $ret {
                    run().await
                }

                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn multi_thread() -> $ret {
                    run().await
                }
            }
        )*
    };
}
