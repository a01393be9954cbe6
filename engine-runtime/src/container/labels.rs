//! Container names and labels, and the rule that tells an orphaned container (its coordinator
//! process is gone) from one in use.

use std::collections::HashMap;

use crate::operation::{OperationId, random_u64};

/// Every container the runtime creates carries this label set to `true`.
pub const LABEL_MANAGED: &str = "io.weir.managed";
/// The operation the container runs.
pub const LABEL_OPERATION: &str = "io.weir.operation-id";
/// The engine's name.
pub const LABEL_ENGINE: &str = "io.weir.engine";
/// The coordinator process that owns the container: `<boot id>/<pid>/<process start time>`.
pub const LABEL_OWNER: &str = "io.weir.owner";

/// The process that owns a container, as recorded in [`LABEL_OWNER`]. A pid alone is not enough:
/// pids are reused, so the kernel boot id and the process start time (clock ticks since boot) pin
/// the exact process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Owner {
    pub(crate) boot_id: String,
    pub(crate) pid: u32,
    pub(crate) start_time: u64,
}

impl Owner {
    /// This process.
    pub(crate) fn current() -> Option<Self> {
        let pid = std::process::id();
        Some(Self {
            boot_id: boot_id()?,
            pid,
            start_time: process_start_time(pid)?,
        })
    }

    pub(crate) fn to_label(&self) -> String {
        format!("{}/{}/{}", self.boot_id, self.pid, self.start_time)
    }

    pub(crate) fn parse(label: &str) -> Option<Self> {
        let mut parts = label.split('/');
        let boot_id = parts.next()?.to_owned();
        let pid = parts.next()?.parse().ok()?;
        let start_time = parts.next()?.parse().ok()?;
        parts.next().is_none().then_some(Self {
            boot_id,
            pid,
            start_time,
        })
    }

    /// Whether this process still runs on this machine.
    pub(crate) fn is_alive(&self) -> bool {
        boot_id().as_deref() == Some(self.boot_id.as_str())
            && process_start_time(self.pid) == Some(self.start_time)
    }
}

/// Whether a managed container with these labels is an orphan: its owner label is missing or
/// unreadable, or names a process that no longer runs (`alive` decides, so this rule is pure).
pub(crate) fn is_orphan(labels: &HashMap<String, String>, alive: impl Fn(&Owner) -> bool) -> bool {
    if labels.get(LABEL_MANAGED).map(String::as_str) != Some("true") {
        return false;
    }
    match labels.get(LABEL_OWNER).and_then(|l| Owner::parse(l)) {
        Some(owner) => !alive(&owner),
        None => true,
    }
}

/// The labels of a container for `operation` of `engine`, owned by `owner`.
pub(crate) fn labels(
    engine: &str,
    operation: &OperationId,
    owner: Option<&Owner>,
) -> HashMap<String, String> {
    let mut labels = HashMap::from([
        (LABEL_MANAGED.to_owned(), "true".to_owned()),
        (LABEL_OPERATION.to_owned(), operation.to_string()),
        (LABEL_ENGINE.to_owned(), engine.to_owned()),
    ]);
    if let Some(owner) = owner {
        labels.insert(LABEL_OWNER.to_owned(), owner.to_label());
    }
    labels
}

/// A unique container name carrying the engine and operation: `weir-<engine>-<operation>-<8 hex>`.
pub(crate) fn container_name(engine: &str, operation: &OperationId) -> String {
    let engine: String = engine
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
                c
            } else {
                '-'
            }
        })
        .take(40)
        .collect();
    format!("weir-{engine}-{operation}-{:08x}", random_u64() as u32)
}

fn boot_id() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|s| s.trim().to_owned())
}

/// Field 22 of `/proc/<pid>/stat`: the process start time in clock ticks since boot.
fn process_start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_start_time(&stat)
}

fn parse_start_time(stat: &str) -> Option<u64> {
    // The command name (field 2) is in parentheses and may contain spaces: split after it.
    let after_name = &stat[stat.rfind(')')? + 1..];
    after_name.split_whitespace().nth(19)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_label_round_trips() {
        let owner = Owner {
            boot_id: "b0".into(),
            pid: 12,
            start_time: 345,
        };
        assert_eq!(Owner::parse(&owner.to_label()), Some(owner));
        assert_eq!(Owner::parse("b0/12"), None);
        assert_eq!(Owner::parse("b0/x/1"), None);
        assert_eq!(Owner::parse("b0/1/2/3"), None);
    }

    #[test]
    fn start_time_is_read_past_a_command_name_with_spaces_and_parentheses() {
        let stat =
            "42 (my (odd) proc) S 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 98765 1234 56";
        assert_eq!(parse_start_time(stat), Some(98765));
    }

    #[test]
    fn this_process_is_alive_and_a_made_up_one_is_not() {
        let me = Owner::current().unwrap();
        assert!(me.is_alive());
        let reused_pid = Owner {
            start_time: me.start_time + 1,
            ..me.clone()
        };
        assert!(!reused_pid.is_alive());
        let other_boot = Owner {
            boot_id: "not-this-boot".into(),
            ..me
        };
        assert!(!other_boot.is_alive());
    }

    #[test]
    fn orphan_rule_needs_the_managed_label_and_a_dead_or_unknown_owner() {
        let op = OperationId::new("op1").unwrap();
        let owner = Owner {
            boot_id: "b".into(),
            pid: 1,
            start_time: 2,
        };
        let with_owner = labels("e", &op, Some(&owner));
        assert!(!is_orphan(&with_owner, |_| true));
        assert!(is_orphan(&with_owner, |_| false));
        let without_owner = labels("e", &op, None);
        assert!(is_orphan(&without_owner, |_| true));
        let unmanaged = HashMap::from([(LABEL_OWNER.to_owned(), owner.to_label())]);
        assert!(!is_orphan(&unmanaged, |_| false));
    }

    #[test]
    fn container_names_carry_engine_and_operation_and_are_unique() {
        let op = OperationId::new("op-7").unwrap();
        let a = container_name("data fusion", &op);
        let b = container_name("data fusion", &op);
        assert!(a.starts_with("weir-data-fusion-op-7-"), "{a}");
        assert_ne!(a, b);
    }
}
