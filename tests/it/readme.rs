//! The README's walkthrough (serve → upload → fetch → JVM), run exactly as written:
//! the `sh` block under "Walkthrough: serve, upload, fetch, run", with this build's
//! `spark-localizer` first on `PATH`.

use std::path::Path;
use std::process::Command;

use crate::support::BIN;

/// The first ```sh block after the heading `heading` in README.md.
fn block_after(heading: &str) -> String {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let from = readme
        .find(heading)
        .unwrap_or_else(|| panic!("README has no {heading:?}"));
    let rest = &readme[from..];
    let start = rest.find("```sh\n").expect("an sh block") + "```sh\n".len();
    let end = rest[start..].find("\n```").expect("the block ends") + start;
    rest[start..end].to_owned()
}

#[test]
fn the_staging_walkthrough_works_as_written() {
    let script = block_after("### Walkthrough: serve, upload, fetch, run");
    let has_jdk = Command::new("sh")
        .args(["-c", "command -v javac && command -v jar"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_jdk {
        assert!(
            std::env::var_os("CI").is_none(),
            "no JDK; scripts/test.sh installs default-jdk-headless"
        );
        eprintln!("SKIP: no JDK installed; run scripts/test.sh");
        return;
    }
    let bin_dir = Path::new(BIN).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = Command::new("bash");
    // -e: every step must succeed; the server is killed on any exit.
    cmd.arg("-c")
        .arg(format!("set -e\ntrap 'kill %1 2>/dev/null || true; [ -n \"$W\" ] && rm -rf \"$W\"' EXIT\n{script}"))
        .env("PATH", path);
    for (name, _) in std::env::vars() {
        if name.starts_with("SPARK_LOCALIZER_") || name == "SSL_CERT_FILE" {
            cmd.env_remove(name);
        }
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the walkthrough failed\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}"
    );
    assert!(
        stdout.lines().any(|l| l == "hello from a staged jar"),
        "the JVM did not run the staged class\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}"
    );
    // The secret went to a file and the server; never to the logs.
    assert!(!stderr.contains("resourceSecret"));
}
