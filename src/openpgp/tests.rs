//! Against keys and signatures made by the real `gpg` (Debian's gnupg, installed by
//! scripts/test.sh; without it the tests are skipped locally and fail under CI).

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Instant;

use super::{parse_keys, verify, verify_reader, Failure, TrustedKey, Verdict};

const DATA: &[u8] = b"hello maven artifact\n";
const OTHER: &[u8] = b"hello tampered artifact\n";

struct Fx {
    /// What `gpg --list-keys` prints of the RSA and Ed25519 keys (a KEYS file's text).
    listing: Vec<u8>,
    big: Vec<u8>,
    big_sig: Vec<u8>,
    rsa_fpr: String,
    rsa_key: Vec<u8>,
    rsa_key_bin: Vec<u8>,
    rsa_sig: Vec<u8>,
    rsa_sig_bin: Vec<u8>,
    rsa_sig_text: Vec<u8>,
    ed_fpr: String,
    ed_key: Vec<u8>,
    ed_sig: Vec<u8>,
    sub_fpr: String,
    sub_sub_fpr: String,
    sub_key: Vec<u8>,
    sub_sig: Vec<u8>,
    old_fpr: String,
    old_key: Vec<u8>,
    old_sig_valid_then: Vec<u8>,
    old_sig_after_expiry: Vec<u8>,
    rev_fpr: String,
    rev_key: Vec<u8>,
    rev_sig: Vec<u8>,
    rev_key_before: Vec<u8>,
    subrev_key: Vec<u8>,
    subrev_sig: Vec<u8>,
}

fn gpg_raw(home: &Path, args: &[&str], stdin: Option<&[u8]>) -> (bool, Vec<u8>, Vec<u8>) {
    use std::io::Write;
    let mut cmd = Command::new("gpg");
    cmd.arg("--homedir")
        .arg(home)
        .args([
            "--batch",
            "--pinentry-mode",
            "loopback",
            "--passphrase",
            "",
            "--no-tty",
        ])
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn gpg");
    if let Some(input) = stdin {
        child.stdin.take().unwrap().write_all(input).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    (out.status.success(), out.stdout, out.stderr)
}

fn gpg(home: &Path, args: &[&str]) -> Vec<u8> {
    let (ok, out, err) = gpg_raw(home, args, None);
    assert!(ok, "gpg {args:?} failed: {}", String::from_utf8_lossy(&err));
    out
}

/// Fingerprints (primary first, then subkeys) of the key matching `uid`.
fn fprs(home: &Path, uid: &str) -> Vec<String> {
    let out = String::from_utf8(gpg(home, &["--with-colons", "--list-keys", uid])).unwrap();
    out.lines()
        .filter(|l| l.starts_with("fpr:"))
        .map(|l| l.split(':').nth(9).unwrap().to_string())
        .collect()
}

fn sign(home: &Path, key: &str, data: &Path, extra: &[&str]) -> Vec<u8> {
    let mut args = vec!["--local-user", key, "--detach-sign", "--output", "-"];
    args.extend_from_slice(extra);
    args.push(data.to_str().unwrap());
    gpg(home, &args)
}

/// The keys and signatures gpg made, once for all tests; `None` without gpg (locally: the
/// tests are skipped; under CI, where scripts/test.sh installs it, they fail).
fn fx() -> Option<&'static Fx> {
    static FX: OnceLock<Option<Fx>> = OnceLock::new();
    FX.get_or_init(|| {
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
        Some(build_fixture())
    })
    .as_ref()
}

fn build_fixture() -> Fx {
    let dir = tempfile::Builder::new()
        .prefix("pgpt")
        .tempdir_in("/tmp")
        .unwrap();
    let home = dir.path().join("g");
    std::fs::create_dir(&home).unwrap();
    std::fs::set_permissions(&home, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let data = dir.path().join("data.bin");
    std::fs::write(&data, DATA).unwrap();
    let h = home.as_path();
    let armor = ["--armor"];

    let Basic {
        rsa_fpr,
        rsa_key,
        rsa_key_bin,
        rsa_sig,
        rsa_sig_bin,
        rsa_sig_text,
        ed_fpr,
        ed_key,
        ed_sig,
        sub_fpr,
        sub_sub_fpr,
        sub_key,
        sub_sig,
    } = basic(h, &data);
    let Lifecycle {
        old_fpr,
        old_key,
        old_sig_valid_then,
        old_sig_after_expiry,
        rev_fpr,
        rev_key,
        rev_sig,
        rev_key_before,
        subrev_key,
        subrev_sig,
    } = lifecycle(h, &home, &data);
    // A jar-sized file (4 MiB) for the streaming check.
    let big = dir.path().join("big.jar");
    {
        let mut rng = Rng(7);
        let chunk = rng.bytes(1 << 20);
        let mut out = std::fs::File::create(&big).unwrap();
        for _ in 0..4 {
            std::io::Write::write_all(&mut out, &chunk).unwrap();
        }
    }
    let big_sig = sign(h, &ed_fpr, &big, &armor);
    let big = std::fs::read(&big).unwrap();
    let listing = gpg(h, &["--list-keys", &rsa_fpr, &ed_fpr]);
    // Every signature is made: the agent gpg started for this home goes.
    let _ = Command::new("gpgconf")
        .arg("--homedir")
        .arg(h)
        .args(["--kill", "all"])
        .status();
    // Nothing is left of the home: what the tests need is in memory.
    drop(dir);

    Fx {
        big,
        big_sig,
        listing,
        rsa_fpr,
        rsa_key,
        rsa_key_bin,
        rsa_sig,
        rsa_sig_bin,
        rsa_sig_text,
        ed_fpr,
        ed_key,
        ed_sig,
        sub_fpr,
        sub_sub_fpr,
        sub_key,
        sub_sig,
        old_fpr,
        old_key,
        old_sig_valid_then,
        old_sig_after_expiry,
        rev_fpr,
        rev_key,
        rev_sig,
        rev_key_before,
        subrev_key,
        subrev_sig,
    }
}

/// RSA and Ed25519 keys, and a certify-only key with a signing subkey, each with signatures.
struct Basic {
    rsa_fpr: String,
    rsa_key: Vec<u8>,
    rsa_key_bin: Vec<u8>,
    rsa_sig: Vec<u8>,
    rsa_sig_bin: Vec<u8>,
    rsa_sig_text: Vec<u8>,
    ed_fpr: String,
    ed_key: Vec<u8>,
    ed_sig: Vec<u8>,
    sub_fpr: String,
    sub_sub_fpr: String,
    sub_key: Vec<u8>,
    sub_sig: Vec<u8>,
}

fn basic(h: &Path, data: &Path) -> Basic {
    let armor = ["--armor"];
    // RSA 3072
    gpg(
        h,
        &[
            "--quick-gen-key",
            "RSA Test <rsa@example.org>",
            "rsa3072",
            "sign",
            "0",
        ],
    );
    let rsa_fpr = fprs(h, "rsa@example.org")[0].clone();
    let rsa_key = gpg(h, &["--armor", "--export", &rsa_fpr]);
    let rsa_key_bin = gpg(h, &["--export", &rsa_fpr]);
    let rsa_sig = sign(h, &rsa_fpr, data, &armor);
    let rsa_sig_bin = sign(h, &rsa_fpr, data, &[]);
    let rsa_sig_text = sign(h, &rsa_fpr, data, &["--armor", "--textmode"]);

    // Ed25519 (future-default: ed25519 primary + cv25519 subkey)
    gpg(
        h,
        &[
            "--quick-gen-key",
            "Ed Test <ed@example.org>",
            "future-default",
            "default",
            "0",
        ],
    );
    let ed_fpr = fprs(h, "ed@example.org")[0].clone();
    let ed_key = gpg(h, &["--armor", "--export", &ed_fpr]);
    let ed_sig = sign(h, &ed_fpr, data, &armor);

    // Certify-only primary + ed25519 signing subkey
    gpg(
        h,
        &[
            "--quick-gen-key",
            "Sub Test <sub@example.org>",
            "ed25519",
            "cert",
            "0",
        ],
    );
    let sub_fpr = fprs(h, "sub@example.org")[0].clone();
    gpg(h, &["--quick-add-key", &sub_fpr, "ed25519", "sign", "0"]);
    let sub_sub_fpr = fprs(h, "sub@example.org")[1].clone();
    let sub_key = gpg(h, &["--armor", "--export", &sub_fpr]);
    let sub_sig = sign(h, &format!("{sub_sub_fpr}!"), data, &armor);

    Basic {
        rsa_fpr,
        rsa_key,
        rsa_key_bin,
        rsa_sig,
        rsa_sig_bin,
        rsa_sig_text,
        ed_fpr,
        ed_key,
        ed_sig,
        sub_fpr,
        sub_sub_fpr,
        sub_key,
        sub_sig,
    }
}

/// Keys that expired, were revoked or lost a subkey, with what they signed.
struct Lifecycle {
    old_fpr: String,
    old_key: Vec<u8>,
    old_sig_valid_then: Vec<u8>,
    old_sig_after_expiry: Vec<u8>,
    rev_fpr: String,
    rev_key: Vec<u8>,
    rev_sig: Vec<u8>,
    rev_key_before: Vec<u8>,
    subrev_key: Vec<u8>,
    subrev_sig: Vec<u8>,
}

fn lifecycle(h: &Path, home: &Path, data: &Path) -> Lifecycle {
    let armor = ["--armor"];
    // Old key: created 2020-01-01, no expiry; signs on 2020-01-10; on 2020-01-02
    // (a later self-signature) its expiry is set to 2 days after that.
    let t0 = ["--faked-system-time", "20200101T000000!"];
    let mut a = t0.to_vec();
    a.extend([
        "--quick-gen-key",
        "Old Test <old@example.org>",
        "ed25519",
        "sign",
        "0",
    ]);
    gpg(h, &a);
    let old_fpr = fprs(h, "old@example.org")[0].clone();
    let old_sig_valid_then = sign(
        h,
        &old_fpr,
        data,
        &["--armor", "--faked-system-time", "20200101T120000!"],
    );
    let old_sig_after_expiry = sign(
        h,
        &old_fpr,
        data,
        &["--armor", "--faked-system-time", "20200110T000000!"],
    );
    gpg(
        h,
        &[
            "--faked-system-time",
            "20200102T000000!",
            "--quick-set-expire",
            &old_fpr,
            "2d",
        ],
    );
    let old_key = gpg(h, &["--armor", "--export", &old_fpr]);

    // Revoked key: sign, then import its auto-generated revocation certificate.
    gpg(
        h,
        &[
            "--quick-gen-key",
            "Rev Test <rev@example.org>",
            "ed25519",
            "sign",
            "0",
        ],
    );
    let rev_fpr = fprs(h, "rev@example.org")[0].clone();
    let rev_sig = sign(h, &rev_fpr, data, &armor);
    let rev_key_before = gpg(h, &["--armor", "--export", &rev_fpr]);
    let rev_cert = std::fs::read_to_string(home.join(format!("openpgp-revocs.d/{rev_fpr}.rev")))
        .unwrap()
        .replace(
            ":-----BEGIN PGP PUBLIC KEY BLOCK-----",
            "-----BEGIN PGP PUBLIC KEY BLOCK-----",
        );
    gpg_raw(h, &["--import"], Some(rev_cert.as_bytes()));
    let rev_key = gpg(h, &["--armor", "--export", &rev_fpr]);

    // Revoked signing subkey (via --edit-key revkey).
    gpg(
        h,
        &[
            "--quick-gen-key",
            "SubRev Test <subrev@example.org>",
            "ed25519",
            "cert",
            "0",
        ],
    );
    let subrev_fpr = fprs(h, "subrev@example.org")[0].clone();
    gpg(h, &["--quick-add-key", &subrev_fpr, "ed25519", "sign", "0"]);
    let subrev_sub = fprs(h, "subrev@example.org")[1].clone();
    let subrev_sig = sign(h, &format!("{subrev_sub}!"), data, &armor);
    let (ok, _, err) = gpg_raw(
        h,
        &["--command-fd", "0", "--yes", "--edit-key", &subrev_fpr],
        Some(b"key 1\nrevkey\ny\n2\n\ny\nsave\n"),
    );
    assert!(ok, "revkey: {}", String::from_utf8_lossy(&err));
    let subrev_key = gpg(h, &["--armor", "--export", &subrev_fpr]);

    Lifecycle {
        old_fpr,
        old_key,
        old_sig_valid_then,
        old_sig_after_expiry,
        rev_fpr,
        rev_key,
        rev_sig,
        rev_key_before,
        subrev_key,
        subrev_sig,
    }
}

fn keys(b: &[u8]) -> Vec<TrustedKey> {
    parse_keys(b).expect("keyring parses")
}

fn good(fpr: &str, signer: &str, uid: &str) -> Result<Verdict, Failure> {
    Ok(Verdict::Good {
        fingerprint: fpr.to_string(),
        signing_key: signer.to_string(),
        user_id: Some(uid.to_string()),
    })
}

fn kid(fpr: &str) -> String {
    fpr[fpr.len() - 16..].to_string()
}

#[test]
fn rsa3072_good() {
    let Some(f) = fx() else { return };
    let k = keys(&f.rsa_key);
    assert_eq!(k.len(), 1);
    assert_eq!(k[0].fingerprint, f.rsa_fpr);
    assert_eq!(
        k[0].user_ids,
        vec!["RSA Test <rsa@example.org>".to_string()]
    );
    let want = good(&f.rsa_fpr, &f.rsa_fpr, "RSA Test <rsa@example.org>");
    assert_eq!(verify(&k, DATA, &f.rsa_sig), want);
    assert_eq!(verify_reader(&k, DATA, &f.rsa_sig), want);
}

#[test]
fn rsa_binary_key_and_binary_sig_and_textmode() {
    let Some(f) = fx() else { return };
    let k = keys(&f.rsa_key_bin);
    let want = good(&f.rsa_fpr, &f.rsa_fpr, "RSA Test <rsa@example.org>");
    assert_eq!(verify(&k, DATA, &f.rsa_sig_bin), want);
    assert_eq!(verify(&k, DATA, &f.rsa_sig_text), want);
}

#[test]
fn ed25519_good() {
    let Some(f) = fx() else { return };
    let k = keys(&f.ed_key);
    assert_eq!(k[0].fingerprint, f.ed_fpr);
    assert_eq!(
        verify(&k, DATA, &f.ed_sig),
        good(&f.ed_fpr, &f.ed_fpr, "Ed Test <ed@example.org>")
    );
}

#[test]
fn signing_subkey_good() {
    let Some(f) = fx() else { return };
    let k = keys(&f.sub_key);
    assert_eq!(k[0].signing_subkeys(), vec![f.sub_sub_fpr.clone()]);
    let want = good(&f.sub_fpr, &f.sub_sub_fpr, "Sub Test <sub@example.org>");
    assert_eq!(verify(&k, DATA, &f.sub_sig), want);
    assert_eq!(
        verify_reader(&k, std::io::Cursor::new(DATA), &f.sub_sig),
        want
    );
}

#[test]
fn subkey_without_valid_binding_is_unknown() {
    // Strip the subkey binding signature: the subkey must no longer be usable.
    let Some(f) = fx() else { return };
    let (mut key, _) =
        <pgp::composed::SignedPublicKey as pgp::composed::Deserializable>::from_armor_single(
            std::io::Cursor::new(&f.sub_key),
        )
        .unwrap();
    // Replace the binding signature with a (valid) binding signature taken from
    // another key: cryptographically wrong for this primary/subkey pair.
    let (other, _) =
        <pgp::composed::SignedPublicKey as pgp::composed::Deserializable>::from_armor_single(
            std::io::Cursor::new(&f.subrev_key),
        )
        .unwrap();
    key.public_subkeys[0].signatures = other.public_subkeys[0]
        .signatures
        .iter()
        .filter(|s| s.typ() == Some(pgp::packet::SignatureType::SubkeyBinding))
        .cloned()
        .collect();
    assert_eq!(key.public_subkeys[0].signatures.len(), 1);
    let bin = pgp::ser::Serialize::to_bytes(&key).unwrap();
    let k = keys(&bin);
    assert!(k[0].signing_subkeys().is_empty());
    assert_eq!(
        verify(&k, DATA, &f.sub_sig),
        Err(Failure::UnknownKey {
            key_id: kid(&f.sub_sub_fpr)
        })
    );
}

#[test]
fn expired_key_signature_made_while_valid_is_good() {
    let Some(f) = fx() else { return };
    let k = keys(&f.old_key);
    assert_eq!(
        verify(&k, DATA, &f.old_sig_valid_then),
        good(&f.old_fpr, &f.old_fpr, "Old Test <old@example.org>")
    );
}

#[test]
fn expired_key_signature_made_after_expiry() {
    let Some(f) = fx() else { return };
    let k = keys(&f.old_key);
    assert_eq!(
        verify(&k, DATA, &f.old_sig_after_expiry),
        Err(Failure::Expired {
            key_id: kid(&f.old_fpr),
            when: "2020-01-04T00:00:00Z".into()
        })
    );
}

#[test]
fn revoked_key() {
    let Some(f) = fx() else { return };
    let k = keys(&f.rev_key);
    assert_eq!(
        verify(&k, DATA, &f.rev_sig),
        Err(Failure::Revoked {
            key_id: kid(&f.rev_fpr)
        })
    );
    // over other bytes it is a bad signature first
    assert_eq!(
        verify(&k, OTHER, &f.rev_sig),
        Err(Failure::BadSignature {
            key_id: kid(&f.rev_fpr)
        })
    );
}

#[test]
fn revoked_subkey() {
    let Some(f) = fx() else { return };
    let k = keys(&f.subrev_key);
    let sub = k[0].signing_subkeys();
    assert_eq!(sub.len(), 1);
    // reason 2 = compromised (hard revocation)
    assert_eq!(
        verify(&k, DATA, &f.subrev_sig),
        Err(Failure::Revoked {
            key_id: kid(&sub[0])
        })
    );
}

#[test]
fn duplicate_key_revocation_wins() {
    let Some(f) = fx() else { return };
    let before = keys(&f.rev_key_before);
    assert_eq!(
        verify(&before, DATA, &f.rev_sig),
        good(&f.rev_fpr, &f.rev_fpr, "Rev Test <rev@example.org>")
    );
    let mut both = f.rev_key_before.clone();
    both.extend_from_slice(&f.rev_key);
    let k = keys(&both);
    assert_eq!(k.len(), 2);
    assert_eq!(
        verify(&k, DATA, &f.rev_sig),
        Err(Failure::Revoked {
            key_id: kid(&f.rev_fpr)
        })
    );
}

#[test]
fn bad_signature_other_bytes() {
    let Some(f) = fx() else { return };
    let k = keys(&f.rsa_key);
    let want = Err(Failure::BadSignature {
        key_id: kid(&f.rsa_fpr),
    });
    assert_eq!(verify(&k, OTHER, &f.rsa_sig), want);
    assert_eq!(verify_reader(&k, OTHER, &f.rsa_sig), want);
    let k = keys(&f.sub_key);
    assert_eq!(
        verify(&k, OTHER, &f.sub_sig),
        Err(Failure::BadSignature {
            key_id: kid(&f.sub_sub_fpr)
        })
    );
}

#[test]
fn html_signature_is_malformed() {
    let Some(f) = fx() else { return };
    let k = keys(&f.rsa_key);
    assert!(matches!(
        verify(&k, DATA, b"<html>404</html>"),
        Err(Failure::Malformed(_))
    ));
}

#[test]
fn empty_signature_is_malformed() {
    let Some(f) = fx() else { return };
    let k = keys(&f.rsa_key);
    assert!(matches!(verify(&k, DATA, b""), Err(Failure::Malformed(_))));
    assert!(matches!(
        verify(&k, DATA, b"  \n"),
        Err(Failure::Malformed(_))
    ));
}

#[test]
fn keys_file_two_keys_with_free_text() {
    let Some(f) = fx() else { return };
    let listing = f.listing.clone();
    let mut keys_file = Vec::new();
    keys_file.extend_from_slice(
        b"This file contains the PGP keys of various developers.\n\nUsers: pgp < KEYS\n\
          Developers: gpg --list-sigs <your name> && gpg --armor --export <your name>\n\n",
    );
    keys_file.extend_from_slice(&listing);
    keys_file.extend_from_slice(&f.rsa_key);
    keys_file.extend_from_slice(b"\nsome free text between the keys\npub   ed25519 2026-01-01\n");
    keys_file.extend_from_slice(&f.ed_key);
    keys_file.extend_from_slice(b"trailing text\n");
    let k = keys(&keys_file);
    assert_eq!(k.len(), 2);
    assert_eq!(k[0].fingerprint, f.rsa_fpr);
    assert_eq!(k[1].fingerprint, f.ed_fpr);
    assert_eq!(
        verify(&k, DATA, &f.rsa_sig),
        good(&f.rsa_fpr, &f.rsa_fpr, "RSA Test <rsa@example.org>")
    );
    assert_eq!(
        verify(&k, DATA, &f.ed_sig),
        good(&f.ed_fpr, &f.ed_fpr, "Ed Test <ed@example.org>")
    );
}

#[test]
fn key_not_in_keyring() {
    let Some(f) = fx() else { return };
    let k = keys(&f.rsa_key);
    assert_eq!(
        verify(&k, DATA, &f.ed_sig),
        Err(Failure::UnknownKey {
            key_id: kid(&f.ed_fpr)
        })
    );
    assert_eq!(
        verify_reader(&k, DATA, &f.ed_sig),
        Err(Failure::UnknownKey {
            key_id: kid(&f.ed_fpr)
        })
    );
}

#[test]
fn keyring_errors() {
    assert!(parse_keys(b"").is_err());
    assert!(parse_keys(b"<html>404</html>").is_err());
    assert!(parse_keys(b"-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n!!!!\n").is_err());
    // a signature is not a key
    let Some(f) = fx() else { return };
    assert!(parse_keys(&f.rsa_sig).is_err());
    // tampered self-signature: flip a byte inside the user id -> no valid self-sig
    let mut bin = f.rsa_key_bin.clone();
    let pos = bin.windows(8).position(|w| w == b"RSA Test").unwrap();
    bin[pos] = b'X';
    let e = parse_keys(&bin).unwrap_err();
    assert!(e.contains("no valid self-signature"), "{e}");
}

// ---------- robustness ----------

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

#[test]
fn random_garbage_never_panics() {
    let Some(f) = fx() else { return };
    let k = keys(&f.ed_key);
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let sizes = [0usize, 1, 2, 5, 16, 64, 300, 2000];
    let mut n = 0;
    for i in 0..10_000 {
        let mut b = rng.bytes(sizes[i % sizes.len()]);
        // half of the inputs look like OpenPGP binary (high bit / packet tags) or armor
        match i % 4 {
            0 if !b.is_empty() => b[0] |= 0x80,
            1 => {
                let mut a = b"-----BEGIN PGP SIGNATURE-----\n\n".to_vec();
                a.extend(b.iter().map(|c| {
                    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="
                        [(*c % 65) as usize]
                }));
                a.extend_from_slice(b"\n-----END PGP SIGNATURE-----\n");
                b = a;
            }
            2 => {
                let mut a = b"-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n".to_vec();
                a.extend(b.iter().map(|c| {
                    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="
                        [(*c % 65) as usize]
                }));
                a.extend_from_slice(b"\n-----END PGP PUBLIC KEY BLOCK-----\n");
                b = a;
            }
            _ => {}
        }
        let _ = parse_keys(&b);
        let _ = verify(&k, DATA, &b);
        n += 1;
    }
    // signature packets with a valid header but random body
    for _ in 0..2000 {
        let len = (rng.next() % 200) as usize;
        let mut b = vec![0xC2, len as u8];
        b.extend(rng.bytes(len));
        if len > 1 {
            b[2] = 4; // version 4
        }
        let _ = verify(&k, DATA, &b);
        n += 1;
    }
    eprintln!("random inputs: {n}");
}

fn dearmor(b: &[u8]) -> Vec<u8> {
    let mut r = pgp::armor::Dearmor::new(std::io::Cursor::new(b));
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut r, &mut out).unwrap();
    out
}

#[test]
fn truncations_and_bitflips_never_panic() {
    let Some(f) = fx() else { return };
    let k = keys(&f.rsa_key);
    let t = Instant::now();
    let mut goods = 0;
    for blob in [&f.rsa_sig, &f.ed_sig, &f.sub_sig] {
        let bin = dearmor(blob);
        for cut in 0..=blob.len() {
            let _ = verify(&k, DATA, &blob[..cut]);
        }
        for cut in 0..=bin.len() {
            if verify(&k, DATA, &bin[..cut]).is_ok() {
                goods += 1;
            }
        }
        for i in 0..bin.len() {
            for bit in [0x01u8, 0x80] {
                let mut m = bin.clone();
                m[i] ^= bit;
                if verify(&k, DATA, &m).is_ok() {
                    goods += 1;
                }
            }
        }
    }
    // only the full rsa signature verifies, plus flips in non-signed parts: the unhashed
    // issuer key-id subpacket (hashed issuer fingerprint still matches) and the MPI bit count
    eprintln!(
        "signature truncations/flips done in {:?}, {goods} verified",
        t.elapsed()
    );
    let t = Instant::now();
    for blob in [&f.ed_key, &f.sub_key, &f.rev_key] {
        let bin = dearmor(blob);
        for cut in 0..=blob.len() {
            let _ = parse_keys(&blob[..cut]);
        }
        for cut in 0..=bin.len() {
            let _ = parse_keys(&bin[..cut]);
        }
        for i in 0..bin.len() {
            let mut m = bin.clone();
            m[i] ^= 0x01;
            let _ = parse_keys(&m);
        }
    }
    // RSA key: every offset of the armored form
    for cut in (0..=f.rsa_key.len()).step_by(1) {
        let _ = parse_keys(&f.rsa_key[..cut]);
    }
    eprintln!("key truncations/flips done in {:?}", t.elapsed());
}

#[test]
fn streaming_large_data() {
    let Some(f) = fx() else { return };
    let k = keys(&f.ed_key);
    let r = verify_reader(&k, &f.big[..], &f.big_sig);
    assert_eq!(r, good(&f.ed_fpr, &f.ed_fpr, "Ed Test <ed@example.org>"));
    let mut other = f.big.clone();
    other[3 << 20] ^= 1;
    let r = verify_reader(&k, &other[..], &f.big_sig);
    assert!(matches!(r, Err(Failure::BadSignature { .. })), "{r:?}");
}
