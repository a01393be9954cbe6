//! Loading real libraries: a plugin, and every way a library can fail to be one.

use crate::support;

use serde_json::json;
use weir_plugin_host::{PluginError, load};

#[test]
fn a_missing_file_is_not_found() {
    let path = support::workspace_root().join("target/no-such-dir/libno_such_plugin.so");
    let error = load(&path, &json!({})).expect_err("nothing to load");
    assert_eq!(error, PluginError::NotFound { path: path.clone() });
    assert!(error.to_string().contains("does not exist"), "{error}");
}

#[test]
fn a_file_that_is_not_a_shared_library_cannot_be_opened() {
    let dir = support::fixtures()
        .not_a_plugin
        .parent()
        .expect("a directory")
        .to_path_buf();
    let path = dir.join("not-a-library.so");
    std::fs::write(&path, "just text\n").expect("write the file");
    match load(&path, &json!({})) {
        Err(PluginError::OpenFailed { path: p, reason }) => {
            assert_eq!(p, path);
            assert!(!reason.is_empty());
        }
        other => panic!("expected OpenFailed, got {other:?}"),
    }
}

#[test]
fn a_shared_library_without_a_root_module_is_not_a_plugin() {
    let path = &support::fixtures().not_a_plugin;
    match load(path, &json!({})) {
        Err(error @ PluginError::NotAPlugin { .. }) => {
            assert!(
                error.to_string().contains("not a Weir dispatcher plugin"),
                "{error}"
            );
        }
        other => panic!("expected NotAPlugin, got {other:?}"),
    }
}

#[test]
fn a_plugin_built_against_interface_2_is_refused_naming_both_versions() {
    let path = &support::fixtures().future_interface;
    let error = load(path, &json!({})).expect_err("interface 2.0.0 is not 1.x");
    assert_eq!(
        error,
        PluginError::IncompatibleInterface {
            path: path.clone(),
            expected: weir_plugin_host::INTERFACE_VERSION.to_owned(),
            found: "2.0.0".to_owned(),
        }
    );
    let message = error.to_string();
    assert!(message.contains("interface 2.0.0"), "{message}");
    assert!(
        message.contains(&format!(
            "interface {}",
            weir_plugin_host::INTERFACE_VERSION
        )),
        "{message}"
    );
}

#[test]
fn a_plugin_of_the_same_version_with_another_layout_is_refused() {
    let path = &support::fixtures().other_layout;
    match load(path, &json!({})) {
        Err(PluginError::LayoutMismatch { path: p, details }) => {
            assert_eq!(&p, path);
            assert!(!details.is_empty());
        }
        other => panic!("expected LayoutMismatch, got {other:?}"),
    }
}

#[test]
fn a_plugin_built_with_panic_abort_is_refused() {
    let path = &support::fixtures().panic_abort;
    match load(path, &json!({})) {
        Err(PluginError::PanicStrategyAbort { plugin, .. }) => assert_eq!(plugin, "panicking"),
        other => panic!("expected PanicStrategyAbort, got {other:?}"),
    }
}

#[test]
fn the_metrics_plugin_loads_and_says_who_it_is() {
    let path = support::metrics_plugin();
    let factory = load(&path, &json!({"max_demand": 1000})).expect("the metrics plugin loads");
    let plugin = factory.plugin();
    assert_eq!(plugin.name, "metrics");
    assert_eq!(
        plugin.interface_version,
        weir_plugin_host::INTERFACE_VERSION
    );
    assert_eq!(plugin.version, env!("CARGO_PKG_VERSION"));
    assert_eq!(plugin.path, path);
    let dispatcher = factory.dispatcher::<u64>().expect("a dispatcher");
    assert_eq!(
        weir_dispatchers::Dispatcher::<u64>::name(&dispatcher),
        "metrics"
    );
}

#[test]
fn the_same_library_loads_twice_and_its_dispatchers_are_independent() {
    let first = load(support::metrics_plugin(), &json!({})).expect("loads");
    let second = load(support::metrics_plugin(), &json!({})).expect("loads again");
    let a = first.dispatcher::<u64>().expect("a dispatcher");
    let b = second.dispatcher::<u64>().expect("another dispatcher");
    let (a, b) = (a.metrics().expect("metrics"), b.metrics().expect("metrics"));
    assert!(a.snapshot().expect("snapshot").consumers.is_empty());
    assert!(b.snapshot().expect("snapshot").consumers.is_empty());
}

#[test]
fn invalid_dispatcher_options_are_refused_at_load_naming_the_option() {
    let error = load(support::metrics_plugin(), &json!({"max_demand": 0})).expect_err("refused");
    match &error {
        PluginError::InvalidOptions { plugin, option, .. } => {
            assert_eq!(
                (plugin.as_str(), option.as_str()),
                ("metrics", "max_demand")
            );
        }
        other => panic!("expected InvalidOptions, got {other:?}"),
    }
    assert!(error.to_string().contains("max_demand"));
}

#[test]
fn a_plugin_that_routes_by_key_needs_a_key_function() {
    let factory = load(support::key_affinity_plugin(), &json!({})).expect("loads");
    assert_eq!(
        factory.dispatcher::<u64>().expect_err("no key function"),
        PluginError::KeyFunctionRequired {
            plugin: "key-affinity".to_owned()
        }
    );
    assert!(factory.dispatcher_with_key(|n: &u64| *n).is_ok());
}
