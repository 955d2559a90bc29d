//! Who published a jar (issue 39): `--verify-signatures` checks the `.asc` beside every
//! POM and jar `--packages` resolves against `--trusted-keys`, with keys and signatures
//! made by the real gpg (`support::gpg`) over a Maven repository nginx serves: a signed
//! tree passes `require` and the lock, the SBOM, the report and `check` name the signers;
//! each bad case (no `.asc`, an HTML page, other bytes, a key not trusted or trusted for
//! another group, an expired key, a revoked key) fails before anything is published,
//! naming the file and the key; `warn` says and counts; `off` asks for no `.asc`.

use std::path::{Path, PathBuf};

use crate::support::gpg::Gpg;
use crate::support::nginx::Nginx;
use crate::support::{data, s, Sandbox};

const CELEBORN: (&str, &str, &str) = (
    "org.apache.celeborn",
    "celeborn-client-spark-3-shaded_2.12",
    "0.5.1",
);
const UTIL: (&str, &str, &str) = ("org.example", "util", "1.0");
const CELEBORN_UID: &str = "Celeborn Release Manager <rm@celeborn.example>";
const UTIL_UID: &str = "Util Developer <dev@util.example>";

type Module = (&'static str, &'static str, &'static str);

/// `group/artifact/version/artifact-version.ext` under the repository root.
fn rel((g, a, v): Module, ext: &str) -> String {
    format!("{}/{a}/{v}/{a}-{v}.{ext}", g.replace('.', "/"))
}

fn pom((g, a, v): Module, deps: &[Module]) -> String {
    let deps: String = deps
        .iter()
        .map(|(g, a, v)| {
            format!("<dependency><groupId>{g}</groupId><artifactId>{a}</artifactId><version>{v}</version></dependency>")
        })
        .collect();
    format!(
        "<project><modelVersion>4.0.0</modelVersion><groupId>{g}</groupId><artifactId>{a}</artifactId><version>{v}</version><dependencies>{deps}</dependencies></project>\n"
    )
}

/// Two modules (the Celeborn client depending on a utility of another group), each POM
/// and jar signed by its project's key: the Celeborn client by an RSA key, the utility
/// by the Ed25519 signing subkey of a certify-only key. Served by nginx.
struct Tree {
    gpg: Gpg,
    root: tempfile::TempDir,
    nginx: Nginx,
    celeborn_key: String,
    util_key: String,
    util_subkey: String,
    /// Both keys in one file, with free text around them, as Apache's KEYS files.
    keys: PathBuf,
    celeborn_keys: PathBuf,
    util_keys: PathBuf,
    celeborn_jar: Vec<u8>,
    util_jar: Vec<u8>,
}

impl Tree {
    fn new() -> Option<Tree> {
        let gpg = Gpg::new()?;
        let root = tempfile::Builder::new()
            .prefix("sl-signed-repo-")
            .tempdir()
            .unwrap();
        let nginx = Nginx::start(root.path())?;
        let celeborn_key = gpg.key(CELEBORN_UID, "rsa3072", "sign", None);
        let util_key = gpg.key(UTIL_UID, "ed25519", "cert", None);
        let util_subkey = gpg.signing_subkey(&util_key);
        let (celeborn_pub, util_pub) = (gpg.export(&celeborn_key), gpg.export(&util_key));
        let mut keys = b"This file contains the PGP keys of release managers.\n\npub   rsa3072 2026-11-28 [SC]\nuid   Celeborn Release Manager\n\n".to_vec();
        keys.extend(&celeborn_pub);
        keys.extend(b"\n(and the utility's developer)\n\n");
        keys.extend(&util_pub);
        let write = |name: &str, bytes: &[u8]| {
            let path = gpg.home().parent().unwrap().join(name);
            std::fs::write(&path, bytes).unwrap();
            path
        };
        let (keys, celeborn_keys, util_keys) = (
            write("KEYS", &keys),
            write("celeborn.asc", &celeborn_pub),
            write("util.asc", &util_pub),
        );
        let tree = Tree {
            celeborn_jar: data(3901, 300_000),
            util_jar: data(3902, 50_000),
            gpg,
            root,
            nginx,
            celeborn_key,
            util_key,
            util_subkey,
            keys,
            celeborn_keys,
            util_keys,
        };
        tree.sign_all();
        Some(tree)
    }

    /// Writes every file as the project published it, signed.
    fn sign_all(&self) {
        let util_signer = format!("{}!", self.util_subkey);
        for (module, deps, jar, signer) in [
            (
                CELEBORN,
                &[UTIL][..],
                &self.celeborn_jar,
                &self.celeborn_key,
            ),
            (UTIL, &[][..], &self.util_jar, &util_signer),
        ] {
            let pom = pom(module, deps);
            self.publish(&rel(module, "pom"), pom.as_bytes(), signer);
            self.publish(&rel(module, "jar"), jar, signer);
        }
    }

    /// `rel` and its `.asc` by `signer`.
    fn publish(&self, rel: &str, bytes: &[u8], signer: &str) {
        self.put(rel, bytes);
        self.put(&format!("{rel}.asc"), &self.gpg.sign(signer, bytes, None));
    }

    fn put(&self, rel: &str, bytes: &[u8]) {
        let path = self.root.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }

    fn url(&self, rel: &str) -> String {
        self.nginx.url(&format!("/{rel}"))
    }

    /// `resolve` or `fetch --packages` of the Celeborn client from this repository only.
    fn args(&self) -> Vec<String> {
        let (g, a, v) = CELEBORN;
        vec![
            "--packages".into(),
            format!("{g}:{a}:{v}"),
            "--repositories".into(),
            self.nginx.url("/"),
            "--only-repositories".into(),
        ]
    }

    fn asc_requests(&self) -> usize {
        self.nginx
            .access_log()
            .iter()
            .filter(|l| l.contains(".asc "))
            .count()
    }
}

/// The key id gpg and spark-localizer name a v4 key by: its fingerprint's last 16 digits.
fn key_id(fingerprint: &str) -> &str {
    &fingerprint[fingerprint.len() - 16..]
}

fn trusted(path: &Path) -> String {
    s(path)
}

#[test]
fn require_passes_on_a_signed_tree_and_the_lock_sbom_and_check_name_the_signers() {
    let Some(tree) = Tree::new() else { return };
    let sb = Sandbox::new();
    let lock = sb.root.join("packages.lock");
    let out = sb
        .resolve()
        .args(tree.args())
        .args(["--verify-signatures", "require"])
        .args(["--trusted-keys", &trusted(&tree.keys)])
        .args(["--lock", &s(&lock)])
        .run();
    out.expect_code(0)
        .expect_stderr("signatures: the POM and jar of all 2 jar(s) signed by trusted keys");
    let text = std::fs::read_to_string(&lock).unwrap();
    // Each entry after who signed it: the primary key's fingerprint and user id, the
    // utility's signed by its subkey, named by its primary key.
    let (g, a, v) = CELEBORN;
    let celeborn_entry = format!(
        "# signed by {} ({CELEBORN_UID})\n# {g}:{a}:{v} (",
        tree.celeborn_key
    );
    assert!(text.contains(&celeborn_entry), "{text}");
    let util_entry = format!(
        "# signed by {} ({UTIL_UID})\n# org.example:util:1.0 (",
        tree.util_key
    );
    assert!(text.contains(&util_entry), "{text}");
    // The SBOM beside the lock.
    let bom: serde_json::Value =
        serde_json::from_slice(&std::fs::read(sb.root.join("packages.lock.cdx.json")).unwrap())
            .unwrap();
    let signed_by: Vec<(String, String)> = bom["components"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let prop = |n: &str| {
                c["properties"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|p| p["name"] == n)
                    .map(|p| p["value"].as_str().unwrap().to_owned())
                    .unwrap_or_default()
            };
            (
                c["name"].as_str().unwrap().to_owned(),
                prop("spark-localizer:signed-by"),
            )
        })
        .collect();
    assert_eq!(
        signed_by,
        [
            (a.to_owned(), tree.celeborn_key.clone()),
            ("util".to_owned(), tree.util_key.clone())
        ]
    );

    // `fetch --lock` needs no key: the pins carry what was verified.
    let asked = tree.asc_requests();
    let out = sb.fetch().args(["--lock", &s(&lock)]).run();
    out.expect_code(0);
    assert_eq!(
        std::fs::read(sb.jar(&format!("{g}_{a}-{v}.jar"))).unwrap(),
        tree.celeborn_jar
    );
    assert_eq!(
        tree.asc_requests(),
        asked,
        "fetch --lock asked for signatures"
    );
    // `check --lock` shows the signers, `check --trusted-keys` each key's fingerprint.
    let out = sb
        .check()
        .args(["--lock", &s(&lock)])
        .args(["--trusted-keys", &trusted(&tree.keys)])
        .run();
    out.expect_code(0);
    for needle in [
        format!(
            "{g}:{a}:{v}  signed by {} ({CELEBORN_UID})",
            tree.celeborn_key
        ),
        format!(
            "org.example:util:1.0  signed by {} ({UTIL_UID})",
            tree.util_key
        ),
        format!("{}  {CELEBORN_UID}", tree.celeborn_key),
        format!("{}  {UTIL_UID}", tree.util_key),
    ] {
        assert!(out.stdout.contains(&needle), "{needle}\n{}", out.stdout);
    }

    // Keys per group: each project's key vouches for its group only.
    let per_group = format!(
        "org.apache.celeborn={},org.example={}",
        s(&tree.celeborn_keys),
        s(&tree.util_keys)
    );
    let out = sb
        .resolve()
        .args(tree.args())
        .args([
            "--verify-signatures",
            "require",
            "--trusted-keys",
            &per_group,
        ])
        .run();
    out.expect_code(0);
    let swapped = format!(
        "org.apache.celeborn={},org.example={}",
        s(&tree.util_keys),
        s(&tree.celeborn_keys)
    );
    let out = sb
        .resolve()
        .args(tree.args())
        .args(["--verify-signatures", "require", "--trusted-keys", &swapped])
        .run();
    out.expect_code(4).expect_stderr(&format!(
        "{}: signed by unknown key {}",
        tree.url(&rel(CELEBORN, "jar")),
        key_id(&tree.celeborn_key)
    ));
    assert!(out.stdout.is_empty(), "{out}");

    // By default nothing is asked for.
    let asked = tree.asc_requests();
    sb.resolve().args(tree.args()).run().expect_code(0);
    assert_eq!(tree.asc_requests(), asked);
}

/// One way a published tree is wrong, and what `require` says of it.
struct Bad {
    what: &'static str,
    /// Changes the repository.
    make: Box<dyn Fn(&Tree)>,
    /// The file named and why.
    says: Box<dyn Fn(&Tree) -> String>,
}

#[test]
fn require_fails_on_each_bad_case_before_publishing() {
    let Some(tree) = Tree::new() else { return };
    let jar = rel(CELEBORN, "jar");
    let util_jar = rel(UTIL, "jar");
    let stranger = tree
        .gpg
        .key("Someone Else <x@else.example>", "ed25519", "sign", None);
    // A key that expired before it signed: made in 2020, set on the 2nd to expire 2 days
    // later, signing on the 10th.
    let expired = tree.gpg.key(
        "Expired Key <old@celeborn.example>",
        "ed25519",
        "sign",
        Some("20200101T000000"),
    );
    let expired_sig = tree
        .gpg
        .sign(&expired, &tree.celeborn_jar, Some("20200110T000000"));
    tree.gpg.expire(&expired, "20200102T000000", "2d");
    // A key revoked after it signed.
    let revoked = tree.gpg.key(
        "Revoked Key <rev@celeborn.example>",
        "ed25519",
        "sign",
        None,
    );
    let revoked_sig = tree.gpg.sign(&revoked, &tree.celeborn_jar, None);
    tree.gpg.revoke(&revoked);
    let keys = tree.gpg.home().parent().unwrap().join("KEYS-more");
    std::fs::write(&keys, {
        let mut all = std::fs::read(&tree.keys).unwrap();
        all.extend(tree.gpg.export(&expired));
        all.extend(tree.gpg.export(&revoked));
        all
    })
    .unwrap();
    let (stranger2, revoked2) = (stranger.clone(), revoked.clone());
    let cases: Vec<Bad> = vec![
        Bad {
            what: "no .asc",
            make: Box::new({
                let jar = jar.clone();
                move |t| std::fs::remove_file(t.root.path().join(format!("{jar}.asc"))).unwrap()
            }),
            says: Box::new({
                let jar = jar.clone();
                move |t| format!("{}: no signature (no .asc beside it)", t.url(&jar))
            }),
        },
        Bad {
            what: "an .asc that is HTML",
            make: Box::new({
                let jar = jar.clone();
                move |t| {
                    t.put(
                        &format!("{jar}.asc"),
                        b"<!DOCTYPE html><html><body>Please sign in</body></html>",
                    )
                }
            }),
            says: Box::new({
                let jar = jar.clone();
                move |t| {
                    format!(
                        "{}: malformed signature: not an OpenPGP signature",
                        t.url(&jar)
                    )
                }
            }),
        },
        Bad {
            what: "a signature over other bytes",
            make: Box::new({
                let jar = jar.clone();
                move |t| {
                    let other = t.gpg.sign(&t.celeborn_key, b"another jar", None);
                    t.put(&format!("{jar}.asc"), &other)
                }
            }),
            says: Box::new({
                let jar = jar.clone();
                move |t| {
                    format!(
                        "{}: BAD signature by key {}",
                        t.url(&jar),
                        key_id(&t.celeborn_key)
                    )
                }
            }),
        },
        Bad {
            what: "a POM signed over other bytes",
            make: Box::new(|t| {
                let other = t
                    .gpg
                    .sign(&format!("{}!", t.util_subkey), b"<project/>", None);
                t.put(&format!("{}.asc", rel(UTIL, "pom")), &other)
            }),
            says: Box::new(|t| {
                format!(
                    "{}: BAD signature by key {}",
                    t.url(&rel(UTIL, "pom")),
                    key_id(&t.util_subkey)
                )
            }),
        },
        Bad {
            what: "a key not trusted",
            make: Box::new({
                let (jar, stranger) = (util_jar.clone(), stranger2);
                move |t| {
                    let sig = t.gpg.sign(&stranger, &t.util_jar, None);
                    t.put(&format!("{jar}.asc"), &sig)
                }
            }),
            says: Box::new({
                let (jar, stranger) = (util_jar.clone(), stranger.clone());
                move |t| {
                    format!(
                        "{}: signed by unknown key {}",
                        t.url(&jar),
                        key_id(&stranger)
                    )
                }
            }),
        },
        Bad {
            what: "a key that had expired",
            make: Box::new({
                let (jar, sig) = (jar.clone(), expired_sig);
                move |t| t.put(&format!("{jar}.asc"), &sig)
            }),
            says: Box::new({
                let (jar, expired) = (jar.clone(), expired.clone());
                move |t| {
                    format!(
                        "{}: key/signature {} expired 2020-01-04T00:00:00Z",
                        t.url(&jar),
                        key_id(&expired)
                    )
                }
            }),
        },
        Bad {
            what: "a revoked key",
            make: Box::new({
                let (jar, sig) = (jar.clone(), revoked_sig);
                move |t| t.put(&format!("{jar}.asc"), &sig)
            }),
            says: Box::new({
                let (jar, revoked) = (jar.clone(), revoked2);
                move |t| format!("{}: key {} is revoked", t.url(&jar), key_id(&revoked))
            }),
        },
    ];
    let (g, a, v) = CELEBORN;
    for case in &cases {
        (case.make)(&tree);
        let says = (case.says)(&tree);
        let sb = Sandbox::new();
        let lock = sb.root.join("packages.lock");
        let out = sb
            .resolve()
            .args(tree.args())
            .args(["--verify-signatures", "require"])
            .args(["--trusted-keys", &s(&keys)])
            .args(["--lock", &s(&lock)])
            .run();
        out.expect_code(4)
            .expect_stderr(
                "1 of 2 jar(s) not signed by a trusted key (--verify-signatures require)",
            )
            .expect_stderr(&says);
        assert!(!lock.exists(), "{}: a lock was written", case.what);
        // fetch --packages: nothing published.
        let out = sb
            .fetch()
            .args(tree.args())
            .args(["--verify-signatures", "require"])
            .args(["--trusted-keys", &s(&keys)])
            .run();
        out.expect_code(4).expect_stderr(&says);
        assert!(
            sb.jar_names().is_empty(),
            "{}: {:?}",
            case.what,
            sb.jar_names()
        );
        tree.sign_all();
    }
    // Signed again: the same run passes, and publishes.
    let sb = Sandbox::new();
    sb.fetch()
        .args(tree.args())
        .args(["--verify-signatures", "require"])
        .args(["--trusted-keys", &s(&keys)])
        .run()
        .expect_code(0);
    assert_eq!(
        std::fs::read(sb.jar(&format!("{g}_{a}-{v}.jar"))).unwrap(),
        tree.celeborn_jar
    );
}

#[test]
fn warn_says_and_counts_what_is_unverified() {
    let Some(tree) = Tree::new() else { return };
    let util_jar = rel(UTIL, "jar");
    std::fs::remove_file(tree.root.path().join(format!("{util_jar}.asc"))).unwrap();
    let sb = Sandbox::new();
    let lock = sb.root.join("packages.lock");
    let warn = ["--verify-signatures", "warn"];
    let out = sb
        .resolve()
        .args(tree.args())
        .args(warn)
        .args(["--trusted-keys", &s(&tree.keys), "--lock", &s(&lock)])
        .run();
    let why = format!("{}: no signature (no .asc beside it)", tree.url(&util_jar));
    out.expect_code(0)
        .expect_stderr(&format!("unverified (--verify-signatures warn): {why}"))
        .expect_stderr("signatures: 1 of 2 jar(s) unverified");
    let text = std::fs::read_to_string(&lock).unwrap();
    assert!(
        text.contains(&format!("# unverified: {why}\n# org.example:util:1.0 (")),
        "{text}"
    );
    // fetch --packages: published, counted in the report, each jar's signer named.
    let out = sb
        .fetch()
        .args(tree.args())
        .args(warn)
        .args(["--trusted-keys", &s(&tree.keys)])
        .run();
    out.expect_code(0);
    assert_eq!(sb.jar_names().len(), 2, "{:?}", sb.jar_names());
    let report = sb.report();
    let packages = &report["packages"];
    assert_eq!(packages["unverified"], 1, "{packages:#}");
    assert_eq!(packages["jars"][0]["signed_by"], tree.celeborn_key.as_str());
    assert_eq!(packages["jars"][0]["signer"], CELEBORN_UID);
    assert_eq!(packages["jars"][1]["unverified"], why.as_str());
    // check --lock says which is unverified.
    let out = sb.check().args(["--lock", &s(&lock)]).run();
    assert!(
        out.stdout
            .contains(&format!("org.example:util:1.0  UNVERIFIED: {why}")),
        "{}",
        out.stdout
    );
}

#[test]
fn key_files_that_are_not_keys_are_configuration_errors() {
    let sb = Sandbox::new();
    let html = sb.write("KEYS", "<html><body>404</body></html>");
    let out = sb
        .resolve()
        .args(["--packages", "g:a:1", "--verify-signatures", "require"])
        .args(["--trusted-keys", &s(&html)])
        .run();
    out.expect_code(2)
        .expect_stderr("--trusted-keys")
        .expect_stderr("no OpenPGP public key found");
    let out = sb
        .resolve()
        .args(["--packages", "g:a:1", "--verify-signatures", "require"])
        .run();
    out.expect_code(2)
        .expect_stderr("--verify-signatures")
        .expect_stderr("give --trusted-keys FILE");
}
