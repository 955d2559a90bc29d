//! Property: any mix of declared URIs, `#alias`es, destination layouts, output
//! files and `--checksums` pins either is a configuration error or plans
//! destinations that are safe and unique.
//!
//! The engine writes a fetched artifact only at paths built from its target:
//! `dir/<name>` (published file, or an archive's unpacked tree), `dir/.spark-localizer/
//! archives/<name>` (a kept archive or staging bundle), and, keyed by `<name>` in
//! `dir`, `dir/.spark-localizer/<name>.json` (record), `<name>.unpacked` (marker)
//! and `.spark-localizer.<name>.*` temp files; it replaces (`remove_any`) whatever
//! is at `dir/<name>`. So "safe and unique" means, for every planned artifact:
//! - its name is one plain path component: not empty, `.` or `..`, no `/`, `\`,
//!   NUL or other control character, at most 200 bytes, not starting with the
//!   reserved `.spark-localizer`;
//! - a fetched one goes into the directory of its kind (`--jars-dir` for jars, else
//!   `--files-dir`), `real_dir` is where that directory really leads, and every
//!   path it writes is that directory joined with normal components only, in one of
//!   the shapes above;
//! - a `local://` one is an absolute path without control characters (a jar's
//!   without `:`, the classpath separator);
//! - no two fetched artifacts write the same path or share a name in one real
//!   directory (records and markers are keyed by name), compared where the paths
//!   really lead (symlinks, `..`); names differing only in case are different
//!   files (Linux file systems are case-sensitive);
//! - nothing it writes is an output file of the tool (`--classpath-file`,
//!   `--env-file`, `--report`, `--termination-log`), nor a destination directory or
//!   one of its ancestors (replacing it would remove the other directory's files);
//! - its pin is the one `--checksums` gives its URI (exact, or without the
//!   `#fragment`), else its name, else none.

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;

use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::Config;

use super::{build, resolved, Kind, Target};
use crate::cli::{parse_from, Command};
use crate::config::{Problems, Settings};
use crate::layout::{MAX_NAME, RESERVED_PREFIX};

/// Names users and hostile inputs give: the tool's own file names, dot names,
/// case twins, archives, the staging bundle's name, shell metacharacters.
const NAMES: &[&str] = &[
    "a.jar",
    "A.jar",
    "a.JAR",
    "b.jar",
    "classpath",
    "spark-classpath.env",
    "spark-localizer-report.json",
    "termination-log",
    ".",
    "..",
    "",
    ".spark-localizer",
    ".spark-localizer.a.jar.1.2.partial",
    "staging-s1.tar.gz",
    "x.tgz",
    "x.tar.gz",
    "X.ZIP",
    "x.tar",
    "files",
    "jars",
    "archives",
    "lock",
    "a.jar.json",
    "a b.jar",
    "é.jar",
    "e\u{301}.jar",
    "it's \"q\" $HOME `x` \\.jar",
    "a:b.jar",
    "-rf",
    "~",
];

/// Characters names are built from: ASCII, separators, dots, percent signs,
/// controls (C0, DEL, C1), invisible and bidi characters, non-BMP.
const CHARS: &[char] = &[
    'a', 'A', 'z', '0', '.', '-', '_', ' ', '"', '\'', '$', '`', '\\', '/', ':', ';', '&', '|',
    '~', '%', '#', '\n', '\t', '\0', '\u{7f}', '\u{85}', 'é', 'e', '\u{301}', '\u{200b}',
    '\u{202e}', '😀', '*', '[', '?', '@', ',',
];

/// Scheme prefixes: every source kind, case and slash variants, unsupported ones.
const SCHEMES: &[&str] = &[
    "https://",
    "http://",
    "HTTPS://",
    "s3a://",
    "s3://",
    "gs://",
    "hdfs://",
    "file://",
    "file:",
    "FILE://",
    "local://",
    "local:",
    "staging://",
    "ftp://",
    "",
];

const HOSTS: &[&str] = &["h", "H", "h2", "bucket", "", "localhost", "nn:8020"];

const DIGESTS: [[u8; 32]; 3] = [[0x11; 32], [0x22; 32], [0x33; 32]];

/// One declared URI, as parts.
#[derive(Debug, Clone)]
struct Uri {
    scheme: &'static str,
    host: &'static str,
    dirs: Vec<String>,
    last: String,
    alias: Option<String>,
    /// Which characters (by position) are written percent-encoded though they
    /// need not be.
    encode: Vec<bool>,
}

/// Where a pin's key comes from.
#[derive(Debug, Clone)]
enum PinKey {
    /// A declared URI (index into all declared URIs), as written or spelled
    /// otherwise: without its fragment, with an upper-case scheme and host.
    Uri(usize, u8),
    Name(String),
}

#[derive(Debug, Clone)]
struct Input {
    jars: Vec<String>,
    files: Vec<String>,
    archives: Vec<String>,
    /// 0: sibling dirs, 1: one dir, 2: files inside jars, 3: files a symlink to
    /// jars, 4: files spelled with `..`, 5: odd characters in both.
    layout: u8,
    /// `--classpath-file`, `--env-file`, `--report`, `--termination-log`: the
    /// default, or a name in the jars (false) or files (true) dir.
    outputs: [Option<(bool, String)>; 4],
    staging: bool,
    pins: Vec<(PinKey, usize)>,
}

fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => select(NAMES).prop_map(str::to_owned),
        2 => proptest::collection::vec(select(CHARS), 1..10)
            .prop_map(|cs| cs.into_iter().collect()),
        1 => (195usize..206).prop_map(|n| format!("{}.jar", "x".repeat(n - 4))),
        1 => (50usize..52).prop_map(|n| "é".repeat(n)),
    ]
}

/// Names the planner accepts one by one, many of them alike: case twins, the
/// tool's own file names, the directories' names, archive and bundle names.
const VALID_NAMES: &[&str] = &[
    "a.jar",
    "A.jar",
    "a.JAR",
    "b.jar",
    "classpath",
    "spark-classpath.env",
    "spark-localizer-report.json",
    "termination-log",
    "staging-s1.tar.gz",
    "x.tgz",
    "x.tar.gz",
    "X.ZIP",
    "x.tar",
    "files",
    "jars",
    "d",
    "link",
    "archives",
    "lock",
    "a.jar.json",
    "a.jar.unpacked",
    "a b.jar",
    "é.jar",
    "e\u{301}.jar",
    "it's \"q\" $HOME `x`.jar",
    ".hidden.jar",
    "%41.jar",
    "😀.jar",
    "a\u{200b}.jar",
    "\u{202e}raj.jar",
    "-rf",
    "~",
];

/// Scheme and host pairs every source accepts.
const VALID_ROOTS: &[(&str, &str)] = &[
    ("https://", "h"),
    ("HTTPS://", "H"),
    ("http://", "h2"),
    ("s3a://", "bucket"),
    ("gs://", "bucket"),
    ("hdfs://", "nn:8020"),
    ("file://", ""),
    ("file:", ""),
    ("local://", ""),
];

fn uri_of(
    roots: impl Strategy<Value = (&'static str, &'static str)>,
    names: fn() -> BoxedStrategy<String>,
) -> impl Strategy<Value = String> {
    (
        roots,
        proptest::collection::vec(name(), 0..3),
        names(),
        proptest::option::weighted(0.4, names()),
        proptest::collection::vec(any::<bool>(), 0..24),
    )
        .prop_map(|((scheme, host), dirs, last, alias, encode)| Uri {
            scheme,
            host,
            dirs,
            last,
            alias,
            encode,
        })
        .prop_map(|u| u.render())
}

fn uri() -> impl Strategy<Value = String> {
    // Mostly URIs the planner accepts one by one, so that whole plans succeed
    // and their names meet; some hostile ones, with any scheme, host and name.
    let valid = uri_of(select(VALID_ROOTS), || {
        select(VALID_NAMES).prop_map(str::to_owned).boxed()
    });
    let hostile = uri_of((select(SCHEMES), select(HOSTS)), || name().boxed());
    // Raw text: whatever a user may paste (no ',' the list splits on; no '@' or
    // '?' that would register process-wide secrets; no glob characters that
    // would read the machine's file tree).
    let raw = "[a-zA-Z0-9:/.%#é \\\\$'\"-]{1,24}".prop_filter_map("blank", |s: String| {
        Some(s.trim().to_owned()).filter(|s| !s.is_empty())
    });
    let staging = (
        select(&["s1", "s1", "S1", "a.b", "..", "x%20y"][..]),
        select(&["", "", "", "/", "/x", "#a.jar"][..]),
    )
        .prop_map(|(id, rest)| format!("staging://{id}{rest}"));
    prop_oneof![24 => valid, 2 => hostile, 1 => raw, 2 => staging]
}

impl Uri {
    /// The URI text: `scheme host /dirs/ last #alias`, each character as is or
    /// percent-encoded as chosen. Always encoded: what would change the list or
    /// register process-wide secrets (`,`, `@`, `?`), blanks and controls, glob
    /// characters, and in directories `#` and `%` (which would end the path or
    /// spoil an escape); a raw `/`, `#` or `%` in the last segment or the alias
    /// stays possible.
    fn render(&self) -> String {
        let mut at = 0;
        let mut enc = |s: &str, dir: bool| {
            let mut out = String::new();
            for c in s.chars() {
                let chosen = self.encode.get(at).copied().unwrap_or(false);
                at += 1;
                let must = ",@?*[".contains(c)
                    || c.is_whitespace()
                    || c.is_control()
                    || (dir && "#%".contains(c));
                if must || chosen {
                    let mut buf = [0; 4];
                    for b in c.encode_utf8(&mut buf).bytes() {
                        out.push_str(&format!("%{b:02X}"));
                    }
                } else {
                    out.push(c);
                }
            }
            out
        };
        let mut text = if self.scheme.ends_with(':') {
            format!("{}/", self.scheme)
        } else {
            format!("{}{}/", self.scheme, self.host)
        };
        for d in &self.dirs {
            text.push_str(&enc(d, true));
            text.push('/');
        }
        text.push_str(&enc(&self.last, false));
        if let Some(alias) = &self.alias {
            text.push('#');
            text.push_str(&enc(alias, false));
        }
        text
    }
}

fn input() -> impl Strategy<Value = Input> {
    let output = || proptest::option::weighted(0.3, (any::<bool>(), name()));
    let pin = (
        prop_oneof![
            (0usize..12, 0u8..3).prop_map(|(i, how)| PinKey::Uri(i, how)),
            name().prop_map(PinKey::Name),
        ],
        0usize..DIGESTS.len(),
    );
    (
        proptest::collection::vec(uri(), 0..5),
        proptest::collection::vec(uri(), 0..4),
        proptest::collection::vec(uri(), 0..3),
        0u8..6,
        [output(), output(), output(), output()],
        any::<bool>(),
        proptest::collection::vec(pin, 0..5),
    )
        .prop_map(
            |(jars, files, archives, layout, outputs, staging, pins)| Input {
                jars,
                files,
                archives,
                layout,
                outputs,
                staging,
                pins,
            },
        )
}

/// A directory shared by every case: `jars/`, `files/`, `d/` exist, `link`
/// leads to `jars/`.
fn root() -> &'static Path {
    static ROOT: OnceLock<tempfile::TempDir> = OnceLock::new();
    ROOT.get_or_init(|| {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        for d in ["jars", "files", "d", "jars/files"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        std::os::unix::fs::symlink(root.join("jars"), root.join("link")).unwrap();
        tmp
    })
    .path()
}

/// `(jars dir, files dir)` of a layout.
fn dirs(layout: u8) -> (PathBuf, PathBuf) {
    let root = root().canonicalize().unwrap();
    let jars = root.join("jars");
    match layout {
        0 => (jars, root.join("files")),
        1 => (root.join("d"), root.join("d")),
        2 => (jars.clone(), jars.join("files")),
        3 => (jars, root.join("link")),
        4 => (jars, root.join("jars/../files")),
        _ => (root.join("j $'\"`é"), root.join("f \\ ë")),
    }
}

/// What a case declared, per kind, as `fetch` reads it (repeats dropped), and
/// the settings it resolves to (with any configuration problems).
fn settings(input: &Input, pins_file: &Path) -> (Vec<(Kind, String)>, Settings, Problems) {
    let (jars_dir, files_dir) = dirs(input.layout);
    let mut args: Vec<OsString> = vec!["spark-localizer".into(), "fetch".into()];
    let mut arg = |flag: &str, value: &std::ffi::OsStr| {
        let mut a = OsString::from(format!("--{flag}="));
        a.push(value);
        args.push(a);
    };
    arg("jars-dir", jars_dir.as_os_str());
    arg("files-dir", files_dir.as_os_str());
    let mut declared = Vec::new();
    for (kind, flag, list) in [
        (Kind::Jar, "jars", &input.jars),
        (Kind::File, "files", &input.files),
        (Kind::Archive, "archives", &input.archives),
    ] {
        for uri in list {
            arg(flag, uri.as_ref());
            if !declared.contains(&(kind, uri.clone())) {
                declared.push((kind, uri.clone()));
            }
        }
    }
    let flags = ["classpath-file", "env-file", "report", "termination-log"];
    for (flag, output) in flags.iter().zip(&input.outputs) {
        let path = match output {
            Some((in_files, name)) => {
                let dir = if *in_files { &files_dir } else { &jars_dir };
                dir.join(name)
            }
            // The termination log has no default in the jars dir.
            None if *flag == "termination-log" => root().join("termination-log"),
            None => continue,
        };
        arg(flag, path.as_os_str());
    }
    if input.staging {
        arg("staging-uri", "http://stage.invalid:1/".as_ref());
    }
    if !input.pins.is_empty() {
        let mut text = String::new();
        for (key, digest) in &input.pins {
            let key = match key {
                PinKey::Uri(i, how) if !declared.is_empty() => {
                    let uri = &declared[i % declared.len()].1;
                    match how {
                        0 => uri.clone(),
                        1 => uri.split('#').next().unwrap_or(uri).to_owned(),
                        _ => uri.to_ascii_uppercase(),
                    }
                }
                PinKey::Uri(..) => continue,
                PinKey::Name(name) => name.clone(),
            };
            text.push_str(&format!("{}  {key}\n", hex::encode(DIGESTS[*digest])));
        }
        std::fs::write(pins_file, text).unwrap();
        arg("checksums", pins_file.as_os_str());
    }
    let (settings, problems) = resolve(args);
    (declared, settings, problems)
}

/// The settings of a `fetch` command line (`spark-localizer fetch` first).
fn resolve(args: Vec<OsString>) -> (Settings, Problems) {
    let (cli, origins) = parse_from(args).expect("the arguments parse");
    let Command::Fetch(args) = cli.command else {
        unreachable!("a fetch command line");
    };
    let mut problems = Problems::default();
    let settings = Settings::resolve(&args, &origins, &mut problems);
    (settings, problems)
}

/// Whether `name` is one plain path component the tool may write.
fn plain_name(name: &str) -> bool {
    let mut parts = Path::new(name).components();
    let one =
        matches!((parts.next(), parts.next()), (Some(Component::Normal(n)), None) if n == name);
    one && !name.contains(['/', '\\'])
        && !name.chars().any(char::is_control)
        && name.len() <= MAX_NAME
        && !name.starts_with(RESERVED_PREFIX)
}

/// Whether `path` is `dir` joined with one or more normal components.
fn inside(path: &Path, dir: &Path) -> bool {
    path.strip_prefix(dir).is_ok_and(|rel| {
        rel.components().count() > 0 && rel.components().all(|c| matches!(c, Component::Normal(_)))
    })
}

/// Checks one case; `Ok(true)` when it planned.
fn check(input: &Input) -> Result<bool, TestCaseError> {
    let pins_file = tempfile::NamedTempFile::new_in(root()).unwrap();
    let (declared, settings, problems) = settings(input, pins_file.path());
    let plan = match build(&settings) {
        Ok(plan) if problems.is_empty() => plan,
        // A configuration error: the run stops before any traffic.
        _ => return Ok(false),
    };
    prop_assert_eq!(plan.artifacts.len(), declared.len());
    let real_dirs = [
        resolved(&settings.jars_dir.value),
        resolved(&settings.files_dir.value),
    ];
    let outputs: Vec<PathBuf> = [
        Some(&settings.classpath_file),
        Some(&settings.env_file),
        Some(&settings.report),
        settings.termination_log.as_ref(),
    ]
    .into_iter()
    .flatten()
    .map(|p| resolved(p))
    .collect();
    let mut written: HashMap<PathBuf, &str> = HashMap::new();
    let mut names: HashSet<(PathBuf, &str)> = HashSet::new();
    for (a, (kind, uri)) in plan.artifacts.iter().zip(&declared) {
        prop_assert_eq!(a.kind, *kind);
        prop_assert!(plain_name(&a.name), "{uri}: unsafe name {:?}", a.name);
        let (dir, path, real_dir) = match &a.target {
            Target::Local { path } => {
                let text = path.to_string_lossy();
                prop_assert!(path.is_absolute(), "{uri}: {path:?}");
                prop_assert!(!text.chars().any(char::is_control), "{uri}: {path:?}");
                prop_assert!(
                    a.kind != Kind::Jar || !text.contains(':'),
                    "{uri}: {path:?}"
                );
                prop_assert!(a.unpack.is_none(), "{uri}");
                continue;
            }
            Target::Fetch {
                dir,
                path,
                real_dir,
            } => (dir, path, real_dir),
        };
        let want_dir = match kind {
            Kind::Jar => &settings.jars_dir.value,
            Kind::File | Kind::Archive => &settings.files_dir.value,
        };
        prop_assert_eq!(dir, want_dir, "{}", uri);
        prop_assert_eq!(real_dir, &resolved(dir), "{}", uri);
        let kept = crate::layout::archive_path(dir, &a.name);
        let mut paths = vec![path.clone()];
        match &a.unpack {
            None => prop_assert_eq!(path, &dir.join(&a.name), "{}", uri),
            Some(u) if u.flat => {
                prop_assert!(a.kind != Kind::Archive, "{uri}: a bundle in --archives");
                prop_assert_eq!(&u.into, dir, "{}", uri);
                prop_assert_eq!(path, &kept, "{}", uri);
            }
            Some(u) => {
                prop_assert_eq!(a.kind, Kind::Archive, "{}", uri);
                prop_assert_eq!(&u.into, &dir.join(&a.name), "{}", uri);
                prop_assert_eq!(path, &kept, "{}", uri);
                paths.push(u.into.clone());
            }
        }
        prop_assert!(
            names.insert((real_dir.clone(), &a.name)),
            "{uri}: a second {:?} in {real_dir:?} (records are keyed by name)",
            a.name
        );
        for p in paths {
            prop_assert!(inside(&p, dir), "{uri}: {p:?} is not inside {dir:?}");
            let real = resolved(&p);
            prop_assert!(!outputs.contains(&real), "{uri}: {p:?} is an output file");
            for d in &real_dirs {
                prop_assert!(
                    !d.starts_with(&real),
                    "{uri}: {p:?} would replace the destination directory {d:?}"
                );
            }
            if let Some(first) = written.insert(real.clone(), uri) {
                return Err(TestCaseError::fail(format!(
                    "{first} and {uri} both write {real:?}"
                )));
            }
        }
    }
    check_pins(&plan, &declared, &settings)?;
    Ok(true)
}

/// URI keys (exact, or without the fragment) win over name keys; an artifact
/// no key names has no pin.
fn check_pins(
    plan: &super::Plan,
    declared: &[(Kind, String)],
    settings: &Settings,
) -> Result<(), TestCaseError> {
    let Some(pins) = settings.checksums.as_ref().map(|c| &c.value) else {
        prop_assert!(plan.artifacts.iter().all(|a| a.pin.is_none()));
        return Ok(());
    };
    for (a, (_, uri)) in plan.artifacts.iter().zip(declared) {
        match pins.lookup_key(uri, "") {
            Some((key, digest)) => {
                prop_assert_eq!(a.pin, Some(digest), "{} by its key {}", uri, key);
            }
            None if a.pin.is_none() => {
                prop_assert!(pins.lookup(uri, &a.name).is_none(), "{uri}: unpinned");
            }
            None => prop_assert!(DIGESTS.iter().any(|d| Some(*d) == a.pin), "{uri}"),
        }
    }
    Ok(())
}

#[test]
fn plans_are_config_errors_or_unique_safe_destinations() {
    let config = Config {
        cases: 512,
        failure_persistence: None,
        ..Config::default()
    };
    let planned = std::sync::atomic::AtomicU32::new(0);
    let result = proptest::test_runner::TestRunner::new(config.clone()).run(&input(), |input| {
        if check(&input)? {
            planned.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    // Not vacuous: a good share of the cases plan.
    let planned = planned.into_inner();
    assert!(planned >= config.cases / 8, "only {planned} cases planned");
}

/// The problems of planning `fetch <args>` with jars and files in `root`.
fn problems_of(root: &Path, args: &[&str]) -> Vec<String> {
    let mut line: Vec<OsString> = vec!["spark-localizer".into(), "fetch".into()];
    line.push(
        format!(
            "--termination-log={}",
            root.join("termination-log").display()
        )
        .into(),
    );
    line.extend(
        args.iter()
            .map(|a| a.replace("ROOT", &root.display().to_string()).into()),
    );
    let (settings, problems) = resolve(line);
    assert!(problems.is_empty(), "{problems}");
    build(&settings)
        .err()
        .map(|e| e.problems)
        .unwrap_or_default()
}

#[test]
fn an_artifact_may_not_replace_a_destination_directory() {
    let root = tempfile::tempdir().unwrap();
    let nested = ["--jars-dir=ROOT/jars", "--files-dir=ROOT/jars/lib/files"];
    for jar in ["--jars=https://h/lib", "--jars=https://h/a.jar#lib"] {
        let problems = problems_of(root.path(), &[nested[0], nested[1], jar]);
        assert!(
            problems.len() == 1 && problems[0].contains("which holds --files-dir"),
            "{jar}: {problems:?}"
        );
    }
    let problems = problems_of(
        root.path(),
        &[nested[0], nested[1], "--jars=https://h/files"],
    );
    assert_eq!(problems, Vec::<String>::new());
}

#[test]
fn a_name_is_taken_once_per_directory_with_staging_bundles() {
    let root = tempfile::tempdir().unwrap();
    let dirs = [
        "--jars-dir=ROOT/d",
        "--files-dir=ROOT/d",
        "--staging-uri=http://stage:1/",
    ];
    for other in [
        "--jars=https://h/a.jar#staging-s1.tar.gz",
        "--files=https://h/staging-s1.tar.gz",
        "--archives=https://h/x.tgz#staging-s1.tar.gz",
    ] {
        let problems = problems_of(
            root.path(),
            &[dirs[0], dirs[1], dirs[2], other, "--jars=staging://s1"],
        );
        assert!(
            problems.len() == 1 && problems[0].contains("both take the name 'staging-s1.tar.gz'"),
            "{other}: {problems:?}"
        );
    }
    // In another directory the name is free.
    let problems = problems_of(
        root.path(),
        &[
            "--jars-dir=ROOT/j",
            "--files-dir=ROOT/f",
            dirs[2],
            "--files=https://h/staging-s1.tar.gz",
            "--jars=staging://s1",
        ],
    );
    assert_eq!(problems, Vec::<String>::new());
}

/// A `--jars-dir` the classpath cannot hold is a configuration error, found
/// before anything is resolved or fetched (`--packages` too: QA found it only
/// after resolving), whatever goes into it.
#[test]
fn the_jars_dir_must_fit_on_the_classpath() {
    let root = tempfile::tempdir().unwrap();
    for dir in ["--jars-dir=ROOT/a:b", "--jars-dir=ROOT/a\nb"] {
        for what in [
            "--jars=https://h/a.jar",
            "--files=https://h/a.jar",
            "--packages=g:a:1",
        ] {
            let line: Vec<OsString> = ["spark-localizer", "fetch", dir, "--files-dir=ROOT/f", what]
                .iter()
                .map(|a| a.replace("ROOT", &root.path().display().to_string()).into())
                .collect();
            let (_, problems) = resolve(line);
            let shown = problems.to_string();
            assert!(
                shown.contains("which the classpath cannot hold"),
                "{dir} {what}: {shown}"
            );
        }
    }
}
