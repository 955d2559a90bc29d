//! What `fetch` leaves behind for the main container and for operators: the
//! classpath file, the `spark-classpath.env` snippet, the JSON report and the
//! Kubernetes termination message.

use crate::maven::signatures::Check;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::engine::{Mirrored, Outcome, Status};
use crate::plan::{Kind, Plan};

/// Kubernetes reads at most this much of the termination message.
pub(crate) const TERMINATION_LIMIT: usize = 4096;

/// The classpath: absolute paths in declared order, `:`-joined, newline-terminated
/// (empty, with no newline, when there are no jars).
pub(crate) fn classpath_text(entries: &[PathBuf]) -> String {
    let joined = entries
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(":");
    if joined.is_empty() {
        joined
    } else {
        joined + "\n"
    }
}

/// Whether `path` holds what [`classpath_text`] (or, with `env`, [`env_text`])
/// writes: a failed run removes an earlier run's outputs, never a file of
/// someone else's that `--classpath-file` or `--env-file` happens to name.
pub(crate) fn written_by_us(path: &std::path::Path, env: bool) -> bool {
    let Ok(bytes) = crate::util::fs::read_regular(path, 16 << 20) else {
        return false;
    };
    let Ok(text) = String::from_utf8(bytes) else {
        return false;
    };
    if env {
        return text.starts_with("# Written by spark-localizer");
    }
    text.is_empty()
        || text.strip_suffix('\n').is_some_and(|line| {
            !line.contains('\n') && line.split(':').all(|entry| entry.starts_with('/'))
        })
}

/// Quotes `s` for POSIX sh: single quotes, with `'` written as `'\''`.
pub(crate) fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// A POSIX-sh snippet that prepends the jars to any existing `SPARK_CLASSPATH`.
pub(crate) fn env_text(entries: &[PathBuf]) -> String {
    let mut out =
        String::from("# Written by spark-localizer: source it before Spark's entrypoint.\n");
    if entries.is_empty() {
        out.push_str("# No jars were localized; SPARK_CLASSPATH is left as it is.\n");
        return out;
    }
    let joined = entries
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(":");
    out.push_str(&format!(
        "SPARK_CLASSPATH={}\"${{SPARK_CLASSPATH:+:$SPARK_CLASSPATH}}\"\nexport SPARK_CLASSPATH\n",
        sh_quote(&joined)
    ));
    out
}

/// One artifact in the JSON report.
#[derive(Debug, Serialize)]
pub(crate) struct ReportEntry {
    pub uri: String,
    pub kind: Kind,
    pub destination: Option<PathBuf>,
    pub status: Status,
    pub bytes: u64,
    pub sha256: Option<String>,
    pub attempts: u32,
    pub duration_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// A staging bundle's files, published into `destination`, in the bundle's order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub files: Option<Vec<crate::engine::BundleEntry>>,
    /// With `--mirror`: `served` (the bytes came through the mirror) or `fallback`
    /// (the mirror failed for it: `mirror_error` says why; it came from its origin).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mirror: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mirror_error: Option<String>,
    /// For a layer of an `oci://` reference: the manifest digest it resolved to
    /// and the layer's digest and title.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oci: Option<crate::oci::Pinned>,
}

/// The JSON report.
#[derive(Debug, Serialize)]
pub(crate) struct Report {
    pub version: u32,
    pub ok: bool,
    pub exit_code: i32,
    pub duration_ms: u64,
    pub files: usize,
    pub bytes: u64,
    pub artifacts: Vec<ReportEntry>,
    /// What `--packages` resolved to in this run (not with `--lock`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub packages: Option<PackagesReport>,
    /// Why the run stopped before any transfer (`--packages` or an `oci://`
    /// reference could not be resolved), already scrubbed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The classpath doctor's diagnosis (`--spark-jars`, `--spark-home`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub doctor: Option<crate::doctor::Diagnosis>,
}

/// The `--packages` resolution: each jar's coordinate, repository and the path
/// that pulled it in, and the versions evicted.
#[derive(Debug, Serialize)]
pub(crate) struct PackagesReport {
    pub repositories: Vec<String>,
    pub jars: Vec<PackageJar>,
    pub evicted: Vec<String>,
    /// Jars whose signatures were checked and are unverified (`--verify-signatures warn`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unverified: Option<usize>,
}

/// One jar of a `--packages` resolution.
#[derive(Debug, Serialize)]
pub(crate) struct PackageJar {
    pub coordinate: String,
    pub name: String,
    pub repository: String,
    /// The modules that required it, nearest first (empty: asked for).
    pub required_by: Vec<String>,
    /// The fingerprint of the key that signed its POM and jar (`--verify-signatures`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signed_by: Option<String>,
    /// Its signer's user id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signer: Option<String>,
    /// Why its signatures are unverified (`--verify-signatures warn`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unverified: Option<String>,
}

impl PackagesReport {
    pub(crate) fn new(r: &crate::maven::Resolution) -> Self {
        PackagesReport {
            repositories: r.repositories.clone(),
            jars: r
                .jars
                .iter()
                .map(|j| {
                    let (signed_by, signer, unverified) = match &j.signature {
                        Some(Check::Signed(s)) => {
                            (Some(s.fingerprint.clone()), s.user_id.clone(), None)
                        }
                        Some(Check::Unverified(why)) => (None, None, Some(why.clone())),
                        None => (None, None, None),
                    };
                    PackageJar {
                        coordinate: j.coord.to_string(),
                        name: j.coord.spark_name(),
                        repository: j.repo.clone(),
                        required_by: j.path.iter().rev().cloned().collect(),
                        signed_by,
                        signer,
                        unverified,
                    }
                })
                .collect(),
            evicted: r.evicted.clone(),
            unverified: r.jars.iter().any(|j| j.signature.is_some()).then(|| {
                r.jars
                    .iter()
                    .filter(|j| matches!(j.signature, Some(Check::Unverified(_))))
                    .count()
            }),
        }
    }
}

impl Report {
    /// The report of a run stopped before any transfer: no artifacts, `error` why.
    pub(crate) fn unresolved(exit_code: i32, duration_ms: u64, error: &str) -> Self {
        Report {
            version: 1,
            ok: false,
            exit_code,
            duration_ms,
            files: 0,
            bytes: 0,
            artifacts: Vec::new(),
            packages: None,
            error: Some(crate::util::redact::scrub(error)),
            doctor: None,
        }
    }

    pub(crate) fn new(plan: &Plan, outcomes: &[Outcome], exit_code: i32, duration_ms: u64) -> Self {
        let artifacts: Vec<ReportEntry> = plan
            .artifacts
            .iter()
            .zip(outcomes)
            .map(|(a, o)| ReportEntry {
                uri: a.display_uri.clone(),
                kind: a.kind,
                destination: Some(a.visible().to_owned()),
                status: o.status,
                bytes: o.bytes,
                sha256: o.sha256.clone(),
                attempts: o.attempts,
                duration_ms: o.duration.as_millis() as u64,
                error: o
                    .failure
                    .as_ref()
                    .map(|f| crate::util::redact::scrub(&f.message)),
                files: o.bundle_files.clone().filter(|_| o.failure.is_none()),
                mirror: o.mirror.as_ref().map(|m| match m {
                    Mirrored::Served => "served",
                    Mirrored::FellBack(_) => "fallback",
                }),
                mirror_error: match &o.mirror {
                    Some(Mirrored::FellBack(why)) => Some(crate::util::redact::scrub(why)),
                    _ => None,
                },
                oci: a.oci.clone(),
            })
            .collect();
        Report {
            version: 1,
            ok: exit_code == 0,
            exit_code,
            duration_ms,
            files: artifacts.len(),
            bytes: artifacts.iter().map(|a| a.bytes).sum(),
            artifacts,
            packages: None,
            error: None,
            doctor: None,
        }
    }
}

/// The termination message: which URIs failed and why (control characters
/// escaped), cut to 4 KiB on a char boundary.
pub(crate) fn termination_text(headline: &str, failures: &[String]) -> String {
    use crate::util::text::escape_controls as shown;
    let mut out = format!("spark-localizer: {}\n", shown(headline));
    for (i, f) in failures.iter().enumerate() {
        let line = format!("- {}\n", shown(&crate::util::redact::scrub(f)));
        // Keep room for the "and N more" line unless this is the last failure.
        let reserve = if i + 1 < failures.len() { 64 } else { 0 };
        if out.len() + line.len() + reserve > TERMINATION_LIMIT {
            if i == 0 {
                // One huge message: show as much of it as fits.
                out.push_str(&line);
                truncate_at(&mut out, TERMINATION_LIMIT);
                return out;
            }
            out.push_str(&format!(
                "… and {} more (see the log)\n",
                failures.len() - i
            ));
            return out;
        }
        out.push_str(&line);
    }
    truncate_at(&mut out, TERMINATION_LIMIT);
    out
}

fn truncate_at(s: &mut String, limit: usize) {
    if s.len() > limit {
        let mut cut = limit;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
    }
}

/// Writes the termination message in place: the kubelet mounted that file, so it
/// is opened and truncated, never renamed onto.
pub(crate) fn write_termination_log(path: &Path, text: &str) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)?;
    f.write_all(text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(snippet: &str, existing: Option<&str>) -> String {
        let mut cmd = std::process::Command::new("sh");
        cmd.arg("-c")
            .arg(format!("{snippet}\nprintf %s \"$SPARK_CLASSPATH\""))
            .env_remove("SPARK_CLASSPATH");
        if let Some(v) = existing {
            cmd.env("SPARK_CLASSPATH", v);
        }
        String::from_utf8(cmd.output().unwrap().stdout).unwrap()
    }

    #[test]
    fn env_file_prepends_and_quotes_anything() {
        let weird = PathBuf::from("/d/it's a \"jar\" $HOME `x` \\n.jar");
        let entries = vec![PathBuf::from("/d/a.jar"), weird.clone()];
        let text = env_text(&entries);
        let want = format!("/d/a.jar:{}", weird.display());
        assert_eq!(sh(&text, None), want);
        assert_eq!(sh(&text, Some("/opt/x/*")), format!("{want}:/opt/x/*"));
        assert_eq!(sh(&text, Some("")), want);
    }

    #[test]
    fn empty_env_file_keeps_classpath() {
        assert_eq!(sh(&env_text(&[]), Some("/opt/x/*")), "/opt/x/*");
        assert_eq!(classpath_text(&[]), "");
    }

    #[test]
    fn termination_text_is_bounded() {
        let failures: Vec<String> = (0..500)
            .map(|i| format!("https://h/{i}.jar: HTTP 404 — é"))
            .collect();
        let t = termination_text("3 of 500 failed", &failures);
        assert!(t.len() <= TERMINATION_LIMIT);
        assert!(t.contains("more (see the log)"));
    }
}

#[cfg(test)]
mod written_by_us_tests {
    use super::*;

    #[test]
    fn only_our_outputs_are_recognized() {
        let dir = tempfile::tempdir().unwrap();
        let at = |name: &str, text: &str| {
            let p = dir.path().join(name);
            std::fs::write(&p, text).unwrap();
            p
        };
        let jars = [PathBuf::from("/a/x.jar"), PathBuf::from("/b/y.jar")];
        assert!(written_by_us(&at("cp", &classpath_text(&jars)), false));
        assert!(written_by_us(&at("empty", ""), false));
        assert!(written_by_us(&at("env", &env_text(&jars)), true));
        assert!(!written_by_us(&at("user", "user data\n"), false));
        assert!(!written_by_us(&at("two", "/a.jar\n/b.jar\n"), false));
        assert!(!written_by_us(&at("sh", "export X=1\n"), true));
        assert!(!written_by_us(&dir.path().join("missing"), false));
    }
}

#[cfg(test)]
mod props;

pub(crate) mod sbom;
