//! `cargo xtask image [--engine reference|test|ballista|all] [--release] [--tag TAG]`: builds engine images
//! locally (`--tag` replaces the default tag of a single engine's image).
//!
//! An image holds one engine binary, the dynamic loader and the shared libraries it loads (as `ldd`
//! resolves them on the building machine: the C library and little else), and nothing more: the binary
//! and a `rootfs/` folder of those libraries are copied with the crate's `Dockerfile` into a temporary
//! build context; `docker build` then makes a `FROM scratch` image. Nothing is pulled. The debug binaries
//! are the workspace build's own, so that the images cost no build of their own after the test suite's.

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
    let binaries = build_binaries(release)?;
    for image in selected {
        build_image(image, &binaries, tag.as_deref().unwrap_or(image.tag))?;
    }
    Ok(())
}

/// `cargo xtask engines [--release]`: the engine binaries alone, the ones the images hold, their paths
/// printed one per line (tests run them as process engines).
pub fn engines(args: &[String]) -> Result<(), String> {
    let release = match args {
        [] => false,
        [flag] if flag == "--release" => true,
        _ => return Err("usage: cargo xtask engines [--release]".into()),
    };
    let binaries = build_binaries(release)?;
    for image in &IMAGES {
        println!("{}", checked_binary(&binaries, image)?.display());
    }
    Ok(())
}

fn build_image(image: &EngineImage, binaries: &Path, tag: &str) -> Result<(), String> {
    let binary = checked_binary(binaries, image)?;
    let context = env::temp_dir().join(format!("weir-image-{}-{}", image.name, std::process::id()));
    let result = (|| {
        std::fs::create_dir_all(context.join("rootfs"))
            .map_err(|e| format!("could not create {}: {e}", context.display()))?;
        let dockerfile = root().join(image.dockerfile_dir).join("Dockerfile");
        copy(&dockerfile, &context.join("Dockerfile"))?;
        copy(&binary, &context.join(image.binary))?;
        for library in shared_libraries(&binary)? {
            let inside = context.join("rootfs").join(
                library
                    .strip_prefix("/")
                    .map_err(|_| format!("{} is not an absolute path", library.display()))?,
            );
            if let Some(folder) = inside.parent() {
                std::fs::create_dir_all(folder)
                    .map_err(|e| format!("could not create {}: {e}", folder.display()))?;
            }
            // std::fs::copy follows symbolic links: the image holds each library's content under the
            // name the binary asks for.
            copy(&library, &inside)?;
        }
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

/// Builds every engine binary; returns the folder that holds them.
///
/// The debug binaries are the workspace build's own (`cargo build --workspace --all-targets
/// --all-features`, the selection `cargo xtask test` builds): after the test suite's build this compiles
/// nothing, and the images and the process-engine tests run exactly the binaries that build made. Release
/// binaries are built for the engine packages alone, in one build so that they share one DataFusion.
fn build_binaries(release: bool) -> Result<PathBuf, String> {
    let mut command = crate::cargo_command();
    command.arg("build").current_dir(root());
    if release {
        for engine in &IMAGES {
            command.args(["--package", engine.package]);
        }
        command.args(["--bins", "--release"]);
    } else {
        command.args(["--workspace", "--all-targets", "--all-features"]);
    }
    let shown: Vec<String> = command
        .get_args()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    eprintln!("xtask: cargo {}", shown.join(" "));
    run(&mut command)?;
    Ok(target_dir().join(if release { "release" } else { "debug" }))
}

/// An engine's binary in `binaries`, checked to be an x86_64 ELF executable.
fn checked_binary(binaries: &Path, image: &EngineImage) -> Result<PathBuf, String> {
    let binary = binaries.join(image.binary);
    let mut head = [0u8; 20];
    let read = std::fs::File::open(&binary)
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head))
        .map_err(|e| format!("could not read {}: {e}", binary.display()));
    read?;
    // ELF, 64-bit, little-endian, e_machine = EM_X86_64 (62).
    if head[0..6] != [0x7f, b'E', b'L', b'F', 2, 1] || head[18..20] != [62, 0] {
        return Err(format!(
            "{} is not an x86_64 ELF executable",
            binary.display()
        ));
    }
    Ok(binary)
}

/// The dynamic loader and every shared library `binary` loads, as the host resolves them (`ldd`):
/// the image holds the binary with exactly the libraries it was linked and tested against, and nothing
/// else. The kernel's vDSO has no file and is skipped.
fn shared_libraries(binary: &Path) -> Result<Vec<PathBuf>, String> {
    let output = Command::new("ldd")
        .arg(binary)
        .output()
        .map_err(|e| format!("could not run ldd: {e}"))?;
    let text = String::from_utf8_lossy(&output.stdout);
    let errors = String::from_utf8_lossy(&output.stderr);
    // A static binary (`RUSTFLAGS="-C target-feature=+crt-static"`) needs nothing beside it.
    if text.contains("statically linked") || errors.contains("not a dynamic executable") {
        return Ok(Vec::new());
    }
    if !output.status.success() {
        return Err(format!(
            "ldd {} failed ({}): {}{}",
            binary.display(),
            output.status,
            text,
            errors
        ));
    }
    parse_ldd(&text)
}

/// The library paths of `ldd`'s output: `name => /path (0x...)` and `/path (0x...)` lines; a
/// `name => not found` line is an error.
fn parse_ldd(text: &str) -> Result<Vec<PathBuf>, String> {
    let mut libraries = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let resolved = match line.split_once("=>") {
            Some((name, rest)) => {
                let rest = rest.trim();
                if rest.starts_with("not found") {
                    return Err(format!("the library {} is not found", name.trim()));
                }
                rest
            }
            None => line,
        };
        let path = resolved.split(" (").next().unwrap_or("").trim();
        if path.starts_with('/') {
            libraries.push(PathBuf::from(path));
        }
    }
    if libraries.is_empty() {
        return Err(format!("ldd named no library:\n{text}"));
    }
    Ok(libraries)
}

fn target_dir() -> PathBuf {
    env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|p| if p.is_absolute() { p } else { root().join(p) })
        .unwrap_or_else(|| root().join("target"))
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

#[cfg(test)]
mod tests {
    use super::parse_ldd;
    use std::path::PathBuf;

    #[test]
    fn ldd_output_gives_the_loader_and_the_resolved_libraries() {
        let text = "\tlinux-vdso.so.1 (0x00007ffd5a3f2000)
\tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x00007f0c1c5f0000)
\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f0c1c40f000)
\t/lib64/ld-linux-x86-64.so.2 (0x00007f0c1e2c4000)
";
        assert_eq!(
            parse_ldd(text),
            Ok(vec![
                PathBuf::from("/lib/x86_64-linux-gnu/libgcc_s.so.1"),
                PathBuf::from("/lib/x86_64-linux-gnu/libc.so.6"),
                PathBuf::from("/lib64/ld-linux-x86-64.so.2"),
            ])
        );
    }

    #[test]
    fn a_library_ldd_cannot_find_is_an_error() {
        let text =
            "\tlibfoo.so.1 => not found\n\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x1)\n";
        assert_eq!(
            parse_ldd(text),
            Err("the library libfoo.so.1 is not found".to_owned())
        );
    }

    #[test]
    fn output_naming_no_library_is_an_error() {
        assert!(parse_ldd("\tlinux-vdso.so.1 (0x00007ffd5a3f2000)\n").is_err());
    }
}
