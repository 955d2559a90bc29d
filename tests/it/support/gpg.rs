//! Real OpenPGP keys and signatures for the `--verify-signatures` tests, made by Debian's
//! `gpg` (GnuPG 2.2) in a throwaway home: RSA and Ed25519 keys, signing subkeys, keys
//! that expired or were revoked. `scripts/test.sh` installs gnupg; without it the tests
//! are skipped locally and fail under CI. The agent gpg starts for the home is stopped on
//! Drop.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

pub struct Gpg {
    dir: tempfile::TempDir,
    home: PathBuf,
}

impl Gpg {
    /// A new home (under /tmp: the agent's socket path must stay short); `None` without gpg.
    pub fn new() -> Option<Gpg> {
        let found = Command::new("gpg")
            .arg("--version")
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !found {
            assert!(
                std::env::var_os("CI").is_none(),
                "gpg is missing: scripts/test.sh installs Debian's gnupg"
            );
            eprintln!("skipped: no gpg (Debian's gnupg)");
            return None;
        }
        let dir = tempfile::Builder::new()
            .prefix("sl-gpg")
            .tempdir_in("/tmp")
            .unwrap();
        let home = dir.path().join("h");
        std::fs::create_dir(&home).unwrap();
        std::fs::set_permissions(&home, std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .unwrap();
        Some(Gpg { dir, home })
    }

    /// Runs gpg in the home; its stdout. `input`: its stdin.
    fn run(&self, args: &[&str], input: Option<&[u8]>) -> Vec<u8> {
        use std::io::Write;
        let mut child = Command::new("gpg")
            .arg("--homedir")
            .arg(&self.home)
            .args(["--batch", "--no-tty", "--pinentry-mode", "loopback"])
            .args(["--passphrase", ""])
            .args(args)
            .stdin(if input.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("gpg");
        if let Some(input) = input {
            child.stdin.take().unwrap().write_all(input).unwrap();
        }
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "gpg {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    }

    /// The fingerprints of `uid`'s key: the primary's first, then its subkeys'.
    fn fingerprints(&self, uid: &str) -> Vec<String> {
        let listing = self.run(&["--with-colons", "--list-keys", uid], None);
        String::from_utf8(listing)
            .unwrap()
            .lines()
            .filter(|l| l.starts_with("fpr:"))
            .map(|l| l.split(':').nth(9).unwrap().to_owned())
            .collect()
    }

    /// A new key for `uid` (`algo`: rsa3072, ed25519; `usage`: sign, cert), made at
    /// `at` (gpg's `--faked-system-time`, e.g. `20200101T000000`) or now; its fingerprint.
    pub fn key(&self, uid: &str, algo: &str, usage: &str, at: Option<&str>) -> String {
        let faked = at.map(|t| format!("{t}!"));
        let mut args = Vec::new();
        if let Some(t) = &faked {
            args.extend(["--faked-system-time", t.as_str()]);
        }
        args.extend(["--quick-gen-key", uid, algo, usage, "0"]);
        self.run(&args, None);
        self.fingerprints(uid).remove(0)
    }

    /// Adds an Ed25519 signing subkey to `primary`'s key; its fingerprint.
    pub fn signing_subkey(&self, primary: &str) -> String {
        self.run(&["--quick-add-key", primary, "ed25519", "sign", "0"], None);
        self.fingerprints(primary).pop().unwrap()
    }

    /// Sets `key` to expire `after` (`2d`) from `at` (a self-signature made then).
    pub fn expire(&self, key: &str, at: &str, after: &str) {
        let t = format!("{at}!");
        self.run(
            &["--faked-system-time", &t, "--quick-set-expire", key, after],
            None,
        );
    }

    /// Revokes `key` with the revocation certificate gpg made with it.
    pub fn revoke(&self, key: &str) {
        let cert = std::fs::read_to_string(self.home.join(format!("openpgp-revocs.d/{key}.rev")))
            .unwrap()
            .replace(
                ":-----BEGIN PGP PUBLIC KEY BLOCK-----",
                "-----BEGIN PGP PUBLIC KEY BLOCK-----",
            );
        self.run(&["--import"], Some(cert.as_bytes()));
    }

    /// `key`'s public key, armored.
    pub fn export(&self, key: &str) -> Vec<u8> {
        self.run(&["--armor", "--export", key], None)
    }

    /// An armored detached signature of `bytes` by `key` (`FPR!` for a subkey), made at
    /// `at` or now.
    pub fn sign(&self, key: &str, bytes: &[u8], at: Option<&str>) -> Vec<u8> {
        let file = self.dir.path().join("to-sign");
        std::fs::write(&file, bytes).unwrap();
        let faked = at.map(|t| format!("{t}!"));
        let mut args = vec!["--local-user", key, "--armor", "--detach-sign"];
        if let Some(t) = &faked {
            args.extend(["--faked-system-time", t.as_str()]);
        }
        let file = file.display().to_string();
        args.extend(["--output", "-", file.as_str()]);
        self.run(&args, None)
    }

    pub fn home(&self) -> &Path {
        &self.home
    }
}

impl Drop for Gpg {
    fn drop(&mut self) {
        let _ = Command::new("gpgconf")
            .arg("--homedir")
            .arg(&self.home)
            .args(["--kill", "all"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}
