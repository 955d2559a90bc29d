//! A real MIT Kerberos KDC (Debian's `krb5-kdc`) on 127.0.0.1 with a throw-away
//! realm, one per test process: the NameNode's service principal
//! `nn/localhost@LOCALIZER.TEST` and a user `alice@LOCALIZER.TEST` (pre-auth
//! required), their keytabs exported, a keytab exported before alice's key was
//! changed (stale), and a second KDC of the same realm whose clock runs two hours
//! ahead (libfaketime). Each KDC dies with the test process (it is watched
//! through a pipe on its wrapper's stdin).
//!
//! `scripts/setup/kerberos.sh` installs the packages (`scripts/test.sh` runs it);
//! without them the tests skip locally and fail under CI (env `CI` set).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub const REALM: &str = "LOCALIZER.TEST";
pub const USER: &str = "alice@LOCALIZER.TEST";
pub const OTHER_USER: &str = "bob@LOCALIZER.TEST";
pub const NAMENODE: &str = "nn/localhost@LOCALIZER.TEST";

pub struct Kdc {
    dir: tempfile::TempDir,
    _kdcs: Vec<(Child, ChildStdin)>,
    /// A TCP listener that never accepts: a KDC that does not answer.
    _silent: TcpListener,
}

/// The process-wide KDC, or `None` (after SKIP) when krb5-kdc is missing outside CI.
pub fn kdc() -> Option<&'static Kdc> {
    static KDC: OnceLock<Result<Kdc, String>> = OnceLock::new();
    match KDC.get_or_init(Kdc::start) {
        Ok(kdc) => Some(kdc),
        Err(why) if std::env::var_os("CI").is_some() => {
            panic!("the test KDC cannot run: {why}; `bash scripts/test.sh` installs it")
        }
        Err(why) => {
            eprintln!("SKIP: the test KDC cannot run ({why}); run scripts/setup/kerberos.sh");
            None
        }
    }
}

fn tool(name: &str) -> Result<PathBuf, String> {
    ["/usr/sbin", "/usr/bin"]
        .iter()
        .map(|d| Path::new(d).join(name))
        .find(|p| p.exists())
        .ok_or_else(|| {
            format!("{name} not found (krb5-kdc, krb5-admin-server, krb5-user, faketime)")
        })
}

/// libfaketime, preloaded into the skewed KDC directly: the `faketime` wrapper
/// leaves its shared-memory files in /dev/shm when it is killed, as it is here.
fn libfaketime() -> Result<PathBuf, String> {
    std::fs::read_dir("/usr/lib")
        .map_err(|e| format!("/usr/lib: {e}"))?
        .filter_map(|e| Some(e.ok()?.path().join("faketime/libfaketime.so.1")))
        .find(|p| p.exists())
        .ok_or_else(|| "libfaketime.so.1 not found under /usr/lib/*/faketime (faketime)".to_owned())
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn krb5_conf(kdc: &str) -> String {
    format!(
        "[libdefaults]\n default_realm = {REALM}\n dns_lookup_kdc = false\n dns_lookup_realm = false\n \
         dns_canonicalize_hostname = false\n rdns = false\n udp_preference_limit = 1\n\
         [realms]\n {REALM} = {{\n  kdc = {kdc}\n }}\n"
    )
}

impl Kdc {
    fn start() -> Result<Kdc, String> {
        let (krb5kdc, kdb5_util, kadmin) =
            (tool("krb5kdc")?, tool("kdb5_util")?, tool("kadmin.local")?);
        tool("kinit")?;
        let faketime = libfaketime()?;
        let dir = tempfile::Builder::new()
            .prefix("sl-kdc-")
            .tempdir()
            .unwrap();
        let d = dir.path();
        let (port, skewed_port, dead_port) = (free_port(), free_port(), free_port());
        let silent = TcpListener::bind("127.0.0.1:0").unwrap();
        let silent_port = silent.local_addr().unwrap().port();
        let kdc_conf = |port: u16, log: &str| {
            format!(
                "[kdcdefaults]\n kdc_listen = 127.0.0.1:{port}\n kdc_tcp_listen = 127.0.0.1:{port}\n\
                 [realms]\n {REALM} = {{\n  database_name = {db}\n  key_stash_file = {stash}\n  \
                 acl_file = {acl}\n  max_life = 10h\n  max_renewable_life = 1d\n  \
                 supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal\n }}\n\
                 [logging]\n kdc = FILE:{log}\n",
                db = d.join("principal").display(),
                stash = d.join("stash").display(),
                acl = d.join("kadm5.acl").display(),
                log = d.join(log).display(),
            )
        };
        std::fs::write(d.join("kdc.conf"), kdc_conf(port, "kdc.log")).unwrap();
        std::fs::write(
            d.join("kdc-skewed.conf"),
            kdc_conf(skewed_port, "kdc-skewed.log"),
        )
        .unwrap();
        std::fs::write(d.join("kadm5.acl"), "").unwrap();
        for (name, kdc) in [
            ("krb5.conf", format!("127.0.0.1:{port}")),
            ("krb5-skewed.conf", format!("127.0.0.1:{skewed_port}")),
            ("krb5-unreachable.conf", format!("127.0.0.1:{dead_port}")),
            ("krb5-silent.conf", format!("127.0.0.1:{silent_port}")),
        ] {
            std::fs::write(d.join(name), krb5_conf(&kdc)).unwrap();
        }
        let env = |cmd: &mut Command, conf: &str| {
            cmd.env("KRB5_CONFIG", d.join("krb5.conf"))
                .env("KRB5_KDC_PROFILE", d.join(conf))
                .stdin(Stdio::null());
        };
        let run = |program: &Path, args: &[&str]| -> Result<(), String> {
            let mut cmd = Command::new(program);
            cmd.args(args);
            env(&mut cmd, "kdc.conf");
            let out = cmd
                .output()
                .map_err(|e| format!("{}: {e}", program.display()))?;
            if out.status.success() {
                Ok(())
            } else {
                Err(format!(
                    "{} {args:?}: {}",
                    program.display(),
                    String::from_utf8_lossy(&out.stderr)
                ))
            }
        };
        run(
            &kdb5_util,
            &["create", "-s", "-r", REALM, "-P", "throwaway-master"],
        )?;
        let kt = |name: &str| d.join(name).to_string_lossy().into_owned();
        for query in [
            "addprinc -randkey +requires_preauth alice".to_owned(),
            "addprinc -randkey nn/localhost".to_owned(),
            "addprinc -randkey +requires_preauth bob".to_owned(),
            format!("ktadd -k {} alice", kt("alice-stale.keytab")),
            // A new key for alice: the keytab above is now stale.
            format!("ktadd -k {} alice", kt("alice.keytab")),
            format!("ktadd -k {} nn/localhost", kt("nn.keytab")),
            format!("ktadd -k {} bob", kt("bob.keytab")),
            // alice's and bob's current keys, without changing them.
            format!("ktadd -k {} -norandkey alice", kt("both.keytab")),
            format!("ktadd -k {} -norandkey bob", kt("both.keytab")),
        ] {
            run(&kadmin, &["-q", &query])?;
        }
        let mut kdcs = Vec::new();
        for (conf, skew) in [("kdc.conf", None), ("kdc-skewed.conf", Some("+2h"))] {
            // sh waits on its stdin; when the test process dies the pipe closes and
            // the KDC is killed with it.
            let mut cmd = Command::new("sh");
            let kdc = krb5kdc.display().to_string();
            let start = match skew {
                None => format!("{kdc} -n"),
                Some(offset) => format!(
                    "LD_PRELOAD='{}' FAKETIME='{offset}' {kdc} -n",
                    faketime.display()
                ),
            };
            cmd.args([
                "-c",
                &format!("{start} & pid=$!; cat >/dev/null; kill $pid"),
            ]);
            env(&mut cmd, conf);
            cmd.stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            let mut child = cmd.spawn().map_err(|e| format!("krb5kdc: {e}"))?;
            let stdin = child.stdin.take().unwrap();
            kdcs.push((child, stdin));
        }
        let kdc = Kdc {
            dir,
            _kdcs: kdcs,
            _silent: silent,
        };
        // Ready when a ticket can be had from each KDC.
        for conf in ["krb5.conf", "krb5-skewed.conf"] {
            let started = Instant::now();
            loop {
                let cache = kdc.path(&format!("probe-{conf}.cc"));
                match kdc.kinit_with(conf, &cache, None) {
                    Ok(()) => break,
                    Err(e) if started.elapsed() > Duration::from_secs(20) => {
                        return Err(format!("the KDC ({conf}) does not answer: {e}"))
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(100)),
                }
            }
        }
        Ok(kdc)
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// krb5.conf naming the KDC.
    pub fn krb5_conf(&self) -> PathBuf {
        self.path("krb5.conf")
    }
    /// krb5.conf naming the KDC whose clock is two hours ahead.
    pub fn skewed_krb5_conf(&self) -> PathBuf {
        self.path("krb5-skewed.conf")
    }
    /// krb5.conf naming a port nothing listens on.
    pub fn unreachable_krb5_conf(&self) -> PathBuf {
        self.path("krb5-unreachable.conf")
    }
    /// krb5.conf naming a KDC that accepts connections and never answers.
    pub fn silent_krb5_conf(&self) -> PathBuf {
        self.path("krb5-silent.conf")
    }
    pub fn user_keytab(&self) -> PathBuf {
        self.path("alice.keytab")
    }
    /// alice's keytab from before her key changed: the KDC refuses it.
    pub fn stale_keytab(&self) -> PathBuf {
        self.path("alice-stale.keytab")
    }
    /// alice's and bob's keys, in that order.
    pub fn both_keytab(&self) -> PathBuf {
        self.path("both.keytab")
    }
    pub fn namenode_keytab(&self) -> PathBuf {
        self.path("nn.keytab")
    }

    /// `kinit -kt alice.keytab alice` into `cache` (a file), optionally with a lifetime.
    pub fn kinit(&self, cache: &Path, lifetime: Option<&str>) {
        self.kinit_with("krb5.conf", cache, lifetime)
            .unwrap_or_else(|e| panic!("{e}"));
    }

    /// `kinit -kt both.keytab PRINCIPAL` into `cache`: with KRB5CCNAME set to it, so
    /// that a `DIR:` collection gets a cache per principal (the last one primary).
    pub fn kinit_as(&self, principal: &str, cache: &str) {
        let out = Command::new("kinit")
            .arg("-kt")
            .arg(self.both_keytab())
            .arg(principal)
            .env("KRB5CCNAME", cache)
            .env("KRB5_CONFIG", self.krb5_conf())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "kinit: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn kinit_with(&self, conf: &str, cache: &Path, lifetime: Option<&str>) -> Result<(), String> {
        let mut cmd = Command::new("kinit");
        if let Some(l) = lifetime {
            cmd.args(["-l", l]);
        }
        let out = cmd
            .arg("-kt")
            .arg(self.user_keytab())
            .arg("-c")
            .arg(format!("FILE:{}", cache.display()))
            .arg(USER)
            .env("KRB5_CONFIG", self.path(conf))
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("kinit: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!("kinit: {}", String::from_utf8_lossy(&out.stderr)))
        }
    }
}
