//! Property: for any jars the tool can put on the classpath, sourcing the env
//! snippet in `sh` (dash) and in `bash` exports exactly the classpath the
//! classpath file holds, prepended to any existing `SPARK_CLASSPATH`.
//!
//! The jars come from the real planner (fetched jars named by odd `#alias`es into
//! an odd `--jars-dir`, `local://` jars at odd paths; what it refuses is left out)
//! and from the real archive listing ([`crate::engine::top_level_jars`] over files
//! with odd names), in the order `fetch` lists them.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::Config;

use super::{classpath_text, env_text, written_by_us};
use crate::config::{Problems, Settings};
use crate::plan::{Kind, Target};

/// Characters of names and directories that shells quote, expand or split on,
/// and unicode (combining, bidi, non-BMP).
const ODD: &[char] = &[
    'a', 'Z', '0', '.', '-', ' ', '"', '\'', '$', '`', ';', '&', '|', '*', '?', '~', '!', '(', '{',
    '}', '[', '=', '%', '#', 'é', '\u{301}', '\u{202e}', '😀',
];

/// Characters the planner refuses in some places: the classpath separator, the
/// path separator of other systems, controls.
const REFUSED: &[char] = &[':', '\\', '\n', '\t', '\r', '\0', '\u{7f}', '\u{85}'];

#[derive(Debug, Clone)]
enum Jar {
    /// `https://h/x.jar#<alias>`.
    Fetched(String),
    /// `local:///<segments>`.
    Local(Vec<String>),
}

#[derive(Debug, Clone)]
struct Input {
    /// The jars dir's name in the case's directory (with a byte that is not
    /// UTF-8 appended when `not_utf8`).
    jars_dir: String,
    not_utf8: bool,
    jars: Vec<Jar>,
    /// Files in an unpacked archive (`.jar` appended), listed at `at`.
    contents: Vec<String>,
    at: usize,
    /// `SPARK_CLASSPATH` before sourcing.
    existing: Option<String>,
}

fn text(len: std::ops::Range<usize>) -> impl Strategy<Value = String> {
    let char = prop_oneof![12 => select(ODD), 1 => select(REFUSED)];
    proptest::collection::vec(char, len).prop_map(|cs| cs.into_iter().collect())
}

fn input() -> impl Strategy<Value = Input> {
    let jar = prop_oneof![
        3 => text(1..12).prop_map(Jar::Fetched),
        1 => proptest::collection::vec(text(1..8), 1..3).prop_map(Jar::Local),
    ];
    let existing = proptest::option::of(text(0..10).prop_map(|s| s.replace('\0', "")));
    (
        text(1..8),
        proptest::bool::weighted(0.1),
        proptest::collection::vec(jar, 0..8),
        proptest::collection::vec(text(1..8), 0..4),
        0usize..6,
        existing,
    )
        .prop_map(|(jars_dir, not_utf8, jars, contents, at, existing)| Input {
            jars_dir,
            not_utf8,
            jars,
            contents,
            at,
            existing,
        })
}

/// Percent-encodes every byte but ASCII letters, digits, `.`, `-`.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'.' | b'-' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn root() -> &'static Path {
    static ROOT: OnceLock<tempfile::TempDir> = OnceLock::new();
    ROOT.get_or_init(|| tempfile::tempdir().unwrap()).path()
}

/// The settings of `fetch --jars-dir <jars_dir> --jars <uri>…` in `case`, if
/// they resolve without a problem.
fn settings(case: &Path, jars_dir: &Path, uris: &[String]) -> Option<Settings> {
    let mut args: Vec<OsString> = vec!["spark-localizer".into(), "fetch".into()];
    let mut jars_dir_arg = OsString::from("--jars-dir=");
    jars_dir_arg.push(jars_dir);
    args.push(jars_dir_arg);
    for (flag, name) in [
        ("files-dir", "files"),
        ("termination-log", "termination-log"),
    ] {
        let mut arg = OsString::from(format!("--{flag}="));
        arg.push(case.join(name));
        args.push(arg);
    }
    args.extend(uris.iter().map(|uri| format!("--jars={uri}").into()));
    let (cli, origins) = crate::cli::parse_from(args).expect("the arguments parse");
    let crate::cli::Command::Fetch(args) = cli.command else {
        unreachable!("a fetch command line");
    };
    let mut problems = Problems::default();
    let settings = Settings::resolve(&args, &origins, &mut problems);
    problems.is_empty().then_some(settings)
}

/// The classpath entries `fetch` writes for `input` once every artifact
/// succeeded: the planned jars in declared order, the archive's jars at `at`.
/// A classpath is written only after a plan without problems: each jar is kept
/// if the plan still has none with it. `None` when the jars directory itself is
/// refused (`:`, a control character, not UTF-8): no classpath is written.
fn entries(input: &Input, case: &Path) -> Option<Vec<PathBuf>> {
    use std::os::unix::ffi::OsStringExt;
    // One directory component: '/' and NUL cannot be in it.
    let mut dir_name = input.jars_dir.replace(['/', '\0'], "_").into_bytes();
    if matches!(&dir_name[..], b"." | b"..") {
        dir_name.push(b'_');
    }
    if input.not_utf8 {
        dir_name.push(0xff);
    }
    let jars_dir = case.join(OsString::from_vec(dir_name));
    let plan_of =
        |uris: &[String]| settings(case, &jars_dir, uris).and_then(|s| crate::plan::build(&s).ok());
    let mut kept: Vec<String> = Vec::new();
    let mut plan = plan_of(&kept)?;
    for jar in &input.jars {
        kept.push(match jar {
            Jar::Fetched(alias) => format!("https://h/x.jar#{}", encode(alias)),
            Jar::Local(parts) => {
                let parts: Vec<String> = parts.iter().map(|p| encode(p)).collect();
                format!("local:///{}", parts.join("/"))
            }
        });
        match plan_of(&kept) {
            Some(p) => plan = p,
            None => drop(kept.pop()),
        }
    }
    let mut entries: Vec<PathBuf> = plan
        .artifacts
        .iter()
        .filter(|a| a.kind == Kind::Jar && a.unpack.is_none())
        .map(|a| match &a.target {
            Target::Fetch { path, .. } | Target::Local { path } => path.clone(),
        })
        .collect();
    let unpacked = case.join("files").join("x $'\"`\\ é=~.tgz");
    std::fs::create_dir_all(&unpacked).unwrap();
    for name in &input.contents {
        let name = format!("{}.jar", name.replace(['/', '\0'], "_"));
        std::fs::write(unpacked.join(name), b"").unwrap();
    }
    let at = input.at.min(entries.len());
    entries.splice(at..at, crate::engine::top_level_jars(&unpacked));
    Some(entries)
}

/// What `shell` exports after sourcing `env`: `Some(value)`, or `None` when unset.
fn exported(shell: &str, env: &Path, existing: Option<&str>) -> Option<Vec<u8>> {
    // The child shell sees what Spark's entrypoint would: the exported environment.
    let script = r#". "$1" || exit 9
exec /bin/sh -c 'printf "%s" "${SPARK_CLASSPATH+set}"; printf "\000%s" "$SPARK_CLASSPATH"'"#;
    let mut cmd = Command::new(shell);
    cmd.env_clear()
        .env("PATH", "/usr/bin:/bin")
        .arg("-c")
        .arg(script)
        .arg("sh")
        .arg(env);
    if let Some(v) = existing {
        cmd.env("SPARK_CLASSPATH", v);
    }
    let out = cmd.output().expect("the shell runs");
    assert!(out.status.success(), "{shell}: {out:?}");
    let nul = out.stdout.iter().position(|&b| b == 0).expect("two fields");
    (&out.stdout[..nul] == b"set").then(|| out.stdout[nul + 1..].to_vec())
}

fn shells() -> &'static [&'static str] {
    static SHELLS: OnceLock<Vec<&'static str>> = OnceLock::new();
    SHELLS.get_or_init(|| {
        ["/bin/sh", "/bin/bash", "/usr/bin/bash"]
            .into_iter()
            .filter(|s| Path::new(s).exists())
            .take(2)
            .collect()
    })
}

fn check(input: &Input) -> Result<(), TestCaseError> {
    let case = tempfile::tempdir_in(root()).unwrap();
    let Some(entries) = entries(input, case.path()) else {
        return Ok(());
    };
    let classpath = classpath_text(&entries);
    let env = env_text(&entries);
    let (cp_file, env_file) = (case.path().join("classpath"), case.path().join("env"));
    std::fs::write(&cp_file, &classpath).unwrap();
    std::fs::write(&env_file, &env).unwrap();

    // The classpath file: one line, ':'-joined absolute paths, each entry
    // recoverable; a later failed run recognizes it (and the snippet) as ours.
    let shown: Vec<String> = entries
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if entries.is_empty() {
        prop_assert_eq!(&classpath, "");
    } else {
        let line = classpath.strip_suffix('\n').expect("newline-terminated");
        prop_assert!(!line.contains('\n'), "{line:?}");
        prop_assert_eq!(line.split(':').collect::<Vec<_>>(), shown.clone());
    }
    prop_assert!(written_by_us(&cp_file, false), "{classpath:?}");
    prop_assert!(written_by_us(&env_file, true), "{env:?}");

    let joined = classpath.strip_suffix('\n').unwrap_or_default();
    let want = match (&input.existing, entries.is_empty()) {
        (existing, true) => existing.clone(),
        (Some(v), false) if !v.is_empty() => Some(format!("{joined}:{v}")),
        (_, false) => Some(joined.to_owned()),
    };
    for shell in shells() {
        let got = exported(shell, &env_file, input.existing.as_deref());
        prop_assert_eq!(
            got.as_deref(),
            want.as_deref().map(str::as_bytes),
            "{} sourcing {:?}",
            shell,
            env
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(Config {
        cases: 64,
        failure_persistence: None,
        ..Config::default()
    })]

    #[test]
    fn sourcing_the_env_snippet_reproduces_the_classpath(input in input()) {
        check(&input)?;
    }
}
