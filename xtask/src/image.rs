//! `cargo xtask image [--engine reference|test|ballista|all] [--release] [--tag TAG]`: builds engine images
//! locally (`--tag` replaces the default tag of a single engine's image).
//!
//! The engine binaries are built statically (`-C target-feature=+crt-static` for x86_64-unknown-linux-gnu),
//! all of them in one cargo build whichever image is asked for, so that the images share one build of their
//! common dependencies; each is checked to have no dynamic loader, and copied with the crate's
//! `Dockerfile` into a temporary build context holding nothing else; `docker build` then makes a
//! `FROM scratch` image. Nothing is pulled.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The workspace whose `cargo xtask` runs: `cargo run` sets `CARGO_MANIFEST_DIR` (this xtask's
/// folder) at run time. The compile-time path can name another checkout when work trees share a
/// target directory (the `xtask` binary there is the last one built, from any of them).
fn root() -> PathBuf {
    env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .and_then(|dir| dir.parent().map(Path::to_path_buf))
        .unwrap_or_else(crate::root)
}

const TARGET: &str = "x86_64-unknown-linux-gnu";

/// One engine image to build.
struct EngineImage {
    /// `--engine` name.
    name: &'static str,
    package: &'static str,
    binary: &'static str,
    /// Folder (relative to the workspace root) holding the `Dockerfile`.
    dockerfile_dir: &'static str,
    tag: &'static str,
}

const IMAGES: [EngineImage; 3] = [
    EngineImage {
        name: "reference",
        package: "weir-reference-engine",
        binary: "weir-engine",
        dockerfile_dir: "reference-engine",
        tag: "weir/reference-engine:dev",
    },
    EngineImage {
        name: "test",
        package: "weir-test-engine",
        binary: "weir-test-engine",
        dockerfile_dir: "engine-runtime/test-engine",
        tag: "weir/test-engine:dev",
    },
    // One binary for the distributed engine's Ballista scheduler and executors (and the engine).
    EngineImage {
        name: "ballista",
        package: "weir-distributed-engine",
        binary: "weir-ballista",
        dockerfile_dir: "distributed-engine",
        tag: "weir/ballista:dev",
    },
];

pub fn image(args: &[String]) -> Result<(), String> {
    let mut engine = "all".to_owned();
    let mut release = false;
    let mut tag: Option<String> = None;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--engine" => {
                engine = args
                    .next()
                    .ok_or("--engine needs a value: reference, test, ballista or all")?
                    .clone();
            }
            "--release" => release = true,
            "--tag" => {
                tag = Some(
                    args.next()
                        .ok_or("--tag needs a value, e.g. weir/reference-engine:test")?
                        .clone(),
                );
            }
            other => {
                return Err(format!(
                    "unknown argument `{other}` (usage: cargo xtask image [--engine reference|test|ballista|all] [--release] [--tag TAG])"
                ));
            }
        }
    }
    let selected: Vec<&EngineImage> = IMAGES
        .iter()
        .filter(|i| engine == "all" || i.name == engine)
        .collect();
    if selected.is_empty() {
        return Err(format!(
            "unknown engine `{engine}`: use reference, test, ballista or all"
        ));
    }
    if tag.is_some() && selected.len() > 1 {
        return Err(
            "--tag names one image: choose it with --engine reference, test or ballista".into(),
        );
    }
    let binaries = build_static_binaries(release)?;
    for image in selected {
        build_image(image, &binaries, tag.as_deref().unwrap_or(image.tag))?;
    }
    Ok(())
}

/// `cargo xtask engines [--release]`: the engine binaries alone, built statically as the images hold them,
/// their paths printed one per line (tests run them as process engines: a static binary runs anywhere).
pub fn engines(args: &[String]) -> Result<(), String> {
    let release = match args {
        [] => false,
        [flag] if flag == "--release" => true,
        _ => return Err("usage: cargo xtask engines [--release]".into()),
    };
    let binaries = build_static_binaries(release)?;
    for image in &IMAGES {
        println!("{}", checked_static(&binaries, image)?.display());
    }
    Ok(())
}

fn build_image(image: &EngineImage, binaries: &Path, tag: &str) -> Result<(), String> {
    let binary = checked_static(binaries, image)?;
    let context = env::temp_dir().join(format!("weir-image-{}-{}", image.name, std::process::id()));
    let result = (|| {
        std::fs::create_dir_all(&context)
            .map_err(|e| format!("could not create {}: {e}", context.display()))?;
        let dockerfile = root().join(image.dockerfile_dir).join("Dockerfile");
        copy(&dockerfile, &context.join("Dockerfile"))?;
        copy(&binary, &context.join(image.binary))?;
        eprintln!(
            "xtask: docker build -t {} (context: {})",
            tag,
            context.display()
        );
        run(Command::new("docker")
            .args(["build", "--quiet", "-t", tag])
            .arg(&context))
    })();
    let _ = std::fs::remove_dir_all(&context);
    result?;
    eprintln!("xtask: built image {tag}");
    Ok(())
}

/// Builds every engine binary statically; returns the folder that holds them.
fn build_static_binaries(release: bool) -> Result<PathBuf, String> {
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut rustflags = env::var("RUSTFLAGS").unwrap_or_default();
    if !rustflags.is_empty() {
        rustflags.push(' ');
    }
    rustflags.push_str("-C target-feature=+crt-static");
    // Every engine binary in one build: their dependencies' features are unified, so the images share one
    // static build of DataFusion (built per engine, the Ballista engine's features would rebuild it).
    let mut command = Command::new(&cargo);
    command.arg("build");
    for engine in &IMAGES {
        command.args(["--package", engine.package]);
    }
    command
        .args(["--bins", "--target", TARGET])
        .current_dir(root())
        // With --target, RUSTFLAGS reaches only the target's code: build scripts and proc macros stay
        // dynamic and keep sharing their artifacts with normal builds.
        .env("RUSTFLAGS", &rustflags)
        .env_remove("CARGO_ENCODED_RUSTFLAGS");
    if release {
        command.arg("--release");
    }
    eprintln!(
        "xtask: RUSTFLAGS=\"{rustflags}\" cargo build {} --bins --target {TARGET}{}",
        IMAGES
            .iter()
            .map(|e| format!("-p {}", e.package))
            .collect::<Vec<_>>()
            .join(" "),
        if release { " --release" } else { "" },
    );
    run(&mut command)?;
    Ok(target_dir()
        .join(TARGET)
        .join(if release { "release" } else { "debug" }))
}

/// An engine's binary in `binaries`, checked to be a static executable.
fn checked_static(binaries: &Path, image: &EngineImage) -> Result<PathBuf, String> {
    let binary = binaries.join(image.binary);
    let bytes =
        std::fs::read(&binary).map_err(|e| format!("could not read {}: {e}", binary.display()))?;
    if !is_static_elf(&bytes) {
        return Err(format!(
            "{} is not a static executable (it asks for a dynamic loader), so it cannot run FROM scratch",
            binary.display()
        ));
    }
    Ok(binary)
}

fn target_dir() -> PathBuf {
    env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|p| if p.is_absolute() { p } else { root().join(p) })
        .unwrap_or_else(|| root().join("target"))
}

/// Whether `elf` is a 64-bit little-endian ELF without a `PT_INTERP` program header (no dynamic
/// loader, so it runs on an empty file system).
fn is_static_elf(elf: &[u8]) -> bool {
    const PT_INTERP: u32 = 3;
    let u16_at = |at: usize| {
        elf.get(at..at + 2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
    };
    let u32_at = |at: usize| {
        elf.get(at..at + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let u64_at = |at: usize| {
        elf.get(at..at + 8).map(|b| {
            let mut a = [0u8; 8];
            a.copy_from_slice(b);
            u64::from_le_bytes(a)
        })
    };
    if elf.get(0..6) != Some(&[0x7f, b'E', b'L', b'F', 2, 1][..]) {
        return false;
    }
    let (Some(phoff), Some(phentsize), Some(phnum)) = (u64_at(0x20), u16_at(0x36), u16_at(0x38))
    else {
        return false;
    };
    (0..usize::from(phnum)).all(|i| {
        let at = usize::try_from(phoff).unwrap_or(usize::MAX) + i * usize::from(phentsize);
        u32_at(at).is_some_and(|kind| kind != PT_INTERP)
    })
}

fn copy(from: &Path, to: &Path) -> Result<(), String> {
    std::fs::copy(from, to)
        .map(|_| ())
        .map_err(|e| format!("could not copy {} to {}: {e}", from.display(), to.display()))
}

fn run(command: &mut Command) -> Result<(), String> {
    let status = command
        .status()
        .map_err(|e| format!("could not run {:?}: {e}", command.get_program()))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{command:?} failed ({status})"))
    }
}
