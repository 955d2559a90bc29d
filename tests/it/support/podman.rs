//! podman for the tests, in a throwaway storage: its own `--root`, `--runroot` and
//! `--tmpdir` under one temporary directory per test process, removed when the process
//! exits. The tests never write to the user's container storage (images built there
//! once left a manifest list whose instance was gone, and `podman images` failed).
//! `images/build-image.sh` takes the same directory from [`ROOT_VAR`].

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// The variable naming the throwaway storage to `images/build-image.sh`.
pub const ROOT_VAR: &str = "SPARK_LOCALIZER_PODMAN_ROOT";

static ROOT: OnceLock<PathBuf> = OnceLock::new();

/// The throwaway storage directory of this test process, made on first use.
pub fn root() -> &'static Path {
    ROOT.get_or_init(|| {
        let dir = tempfile::Builder::new()
            .prefix("sl-it-podman-")
            .tempdir()
            .expect("a temporary directory for podman's storage")
            .keep();
        // SAFETY: registers a plain `extern "C" fn()` to run at exit.
        unsafe { libc::atexit(remove_root) };
        dir
    })
}

/// `podman` on the throwaway storage, with the flags that work on these machines
/// (vfs, runc, no cgroup manager).
pub fn podman() -> Command {
    let root = root();
    let mut cmd = Command::new("podman");
    cmd.arg("--root")
        .arg(root.join("root"))
        .arg("--runroot")
        .arg(root.join("run"))
        .arg("--tmpdir")
        .arg(root.join("tmp"))
        .args([
            "--storage-driver=vfs",
            "--runtime",
            "runc",
            "--cgroup-manager=cgroupfs",
        ]);
    cmd.stdin(Stdio::null());
    cmd
}

/// Copies `image` from the user's own storage (read only: `podman save`) into the
/// throwaway one; `Err` says why not.
pub fn import_user_image(image: &str) -> Result<(), String> {
    let archive = root().join("import.tar");
    let saved = Command::new("podman")
        .args(["image", "save", "--format", "oci-archive", "-o"])
        .arg(&archive)
        .arg(image)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run podman: {e}"))?;
    if !saved.status.success() {
        return Err(String::from_utf8_lossy(&saved.stderr).into_owned());
    }
    let loaded = podman()
        .args(["load", "-q", "-i"])
        .arg(&archive)
        .output()
        .map_err(|e| format!("cannot run podman: {e}"))?;
    let _ = std::fs::remove_file(&archive);
    if !loaded.status.success() {
        return Err(String::from_utf8_lossy(&loaded.stderr).into_owned());
    }
    // `load` of an OCI archive names the image by its reference annotation.
    let named = podman()
        .args(["image", "exists", image])
        .status()
        .is_ok_and(|s| s.success());
    if !named {
        let id = String::from_utf8_lossy(&loaded.stdout);
        let id = id.trim().rsplit(' ').next().unwrap_or_default().to_owned();
        let tagged = podman().args(["tag", &id, image]).status();
        if !tagged.is_ok_and(|s| s.success()) {
            return Err(format!(
                "podman load gave {id:?}, which cannot be tagged {image}"
            ));
        }
    }
    Ok(())
}

/// At exit: containers left by a failed test removed (their mounts with them), then
/// the whole storage.
extern "C" fn remove_root() {
    let Some(root) = ROOT.get() else {
        return;
    };
    let _ = podman()
        .args(["rm", "--all", "--force"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if let Err(e) = std::fs::remove_dir_all(root) {
        eprintln!(
            "warning: cannot remove the tests' podman storage {}: {e}",
            root.display()
        );
    }
}

/// Runs `cmd` (podman or another tool) to completion.
pub fn output(cmd: &mut Command) -> std::process::Output {
    cmd.output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"))
}

/// An outcome as a failed assertion shows it: exit code, stdout and stderr.
pub fn text(out: &std::process::Output) -> String {
    format!(
        "exit {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}
