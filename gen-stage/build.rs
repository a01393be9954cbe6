//! Declares `cfg(loom)`, under which the mailbox and the group executor are
//! built on loom's primitives and their models run (src/sync.rs).

fn main() {
    println!("cargo::rustc-check-cfg=cfg(loom)");
    println!("cargo::rerun-if-changed=build.rs");
}
