//! Version ordering and ranges, as the two resolvers order them:
//! - Ivy's `LatestRevisionStrategy` (what Spark's `--packages` uses to pick the
//!   latest of conflicting revisions): parts split on `.`, `-`, `_`, `+` and at
//!   digit/letter changes; a number beats a word; `dev` < other words < `rc` <
//!   `final`; other words compare as strings.
//! - Maven's `ComparableVersion` (nearest-wins resolution, ranges): numbers
//!   numerically, qualifiers `alpha` < `beta` < `milestone` < `rc` < `snapshot` <
//!   release (`""`, `ga`, `final`, `release`) < `sp` < other words; trailing zero
//!   parts ignored (`1.0` = `1`).
//!
//! Both are checked pair by pair against the real ones (Debian's Maven 3.8
//! `ComparableVersion`, pyspark's Ivy 2.5.1) by a unit test, including their
//! quirks: neither order is transitive on every input.
//!
//! Ranges are Maven's: `[1.0,2.0)`, `[1.5,)`, `(,1.0]`, `[1.2]`, unions separated
//! by commas between sets; a plain version is a "soft" requirement, not a range.

use std::cmp::Ordering;

/// Ivy's `LatestRevisionStrategy` comparison.
pub(crate) fn ivy_cmp(a: &str, b: &str) -> Ordering {
    let split = |v: &str| -> Vec<String> {
        let mut spaced = String::with_capacity(v.len() + 4);
        let mut prev: Option<char> = None;
        for c in v.chars() {
            if let Some(p) = prev {
                if (p.is_ascii_alphabetic() && c.is_ascii_digit())
                    || (p.is_ascii_digit() && c.is_ascii_alphabetic())
                {
                    spaced.push('.');
                }
            }
            spaced.push(c);
            prev = Some(c);
        }
        // As Java's String.split: trailing empty parts dropped (`1.0.` = `1.0`).
        let mut parts: Vec<String> = spaced
            .split(['.', '_', '-', '+'])
            .map(str::to_owned)
            .collect();
        if parts.len() > 1 {
            while parts.last().is_some_and(String::is_empty) {
                parts.pop();
            }
        }
        parts
    };
    let number = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let special = |s: &str| match s.to_ascii_lowercase().as_str() {
        "dev" => Some(-1),
        "rc" => Some(1),
        "final" => Some(2),
        _ => None,
    };
    let (pa, pb) = (split(a), split(b));
    let mut i = 0;
    while i < pa.len() && i < pb.len() {
        let (x, y) = (&pa[i], &pb[i]);
        i += 1;
        if x == y {
            continue;
        }
        match (number(x), number(y)) {
            (true, false) => return Ordering::Greater,
            (false, true) => return Ordering::Less,
            (true, true) => return cmp_digits(x, y),
            (false, false) => {}
        }
        return match (special(x), special(y)) {
            (Some(sx), sy) => sx.cmp(&sy.unwrap_or(0)),
            (None, Some(sy)) => 0.cmp(&sy),
            (None, None) => x.cmp(y),
        };
    }
    if i < pa.len() {
        return if number(&pa[i]) {
            Ordering::Greater
        } else {
            Ordering::Less
        };
    }
    if i < pb.len() {
        return if number(&pb[i]) {
            Ordering::Less
        } else {
            Ordering::Greater
        };
    }
    Ordering::Equal
}

/// Two runs of digits as numbers (any length, leading zeros ignored).
fn cmp_digits(x: &str, y: &str) -> Ordering {
    let (x, y) = (x.trim_start_matches('0'), y.trim_start_matches('0'));
    x.len().cmp(&y.len()).then_with(|| x.cmp(y))
}

/// One item of a Maven version.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Item {
    Int(String),
    Str(String),
    List(Vec<Item>),
}

/// Maven's `ComparableVersion` comparison.
pub(crate) fn maven_cmp(a: &str, b: &str) -> Ordering {
    cmp_lists(&parse_maven(a), &parse_maven(b))
}

fn parse_maven(version: &str) -> Vec<Item> {
    // A stack of lists: '-' (and a digit/letter change) opens a sublist.
    let v = version.to_ascii_lowercase();
    let mut stack: Vec<Vec<Item>> = vec![Vec::new()];
    let mut token = String::new();
    let mut digits = false;
    let push = |stack: &mut Vec<Vec<Item>>, token: &mut String, digits: bool| {
        // Nothing before a separator is a zero (`.1` = `0.1`), as in Maven.
        let item = if digits || token.is_empty() {
            Item::Int(token.trim_start_matches('0').to_owned())
        } else {
            Item::Str(canonical_qualifier(token))
        };
        stack.last_mut().expect("stack").push(item);
        token.clear();
    };
    for c in v.chars() {
        match c {
            '.' => {
                push(&mut stack, &mut token, digits);
            }
            '-' => {
                push(&mut stack, &mut token, digits);
                stack.push(Vec::new());
            }
            c => {
                let is_digit = c.is_ascii_digit();
                if !token.is_empty() && is_digit != digits {
                    // A letter followed by a digit is a short qualifier (a1 = alpha-1).
                    if is_digit && token.len() == 1 {
                        token = canonical_short(&token);
                    }
                    if !digits {
                        dotted_qualifier(&mut stack);
                    }
                    push(&mut stack, &mut token, digits);
                    stack.push(Vec::new());
                }
                digits = is_digit;
                token.push(c);
            }
        }
    }
    if !token.is_empty() || stack.len() > 1 {
        if !token.is_empty() && !digits {
            dotted_qualifier(&mut stack);
        }
        push(&mut stack, &mut token, digits);
    }
    while stack.len() > 1 {
        let list = normalize(stack.pop().expect("stack"));
        stack.last_mut().expect("stack").push(Item::List(list));
    }
    normalize(stack.pop().expect("stack"))
}

/// Maven 3.8 reads `.X` as `-X` for a qualifier X that ends at a digit or at the
/// end (`1.0.RC1` = `1.0-RC1` = `1-rc-1`, `1.0.x` = `1-x`; not `1.0.RC.1`): a
/// qualifier after a `.`, in a list that already holds items, opens a sublist.
fn dotted_qualifier(stack: &mut Vec<Vec<Item>>) {
    if stack.last().is_some_and(|list| !list.is_empty()) {
        stack.push(Vec::new());
    }
}

/// Drops "null" items (0, "", "final", "ga", "release") from the end, looking
/// past sublists as Maven does (`1.0-1` = `1-1`).
fn normalize(mut list: Vec<Item>) -> Vec<Item> {
    let mut i = list.len();
    while i > 0 {
        i -= 1;
        if is_null(&list[i]) {
            list.remove(i);
        } else if !matches!(list[i], Item::List(_)) {
            break;
        }
    }
    list
}

/// `a`, `b`, `m` right before a digit.
fn canonical_short(q: &str) -> String {
    match q {
        "a" => "alpha".into(),
        "b" => "beta".into(),
        "m" => "milestone".into(),
        other => other.to_owned(),
    }
}

fn is_null(item: &Item) -> bool {
    match item {
        Item::Int(n) => n.is_empty(),
        Item::Str(s) => s.is_empty(),
        Item::List(l) => l.is_empty(),
    }
}

fn canonical_qualifier(q: &str) -> String {
    match q {
        "cr" => "rc".into(),
        "ga" | "final" | "release" => String::new(),
        other => other.to_owned(),
    }
}

/// The rank of a qualifier; unknown words rank after `sp`, among themselves by name.
fn qualifier_rank(q: &str) -> (u8, &str) {
    match q {
        "alpha" => (0, ""),
        "beta" => (1, ""),
        "milestone" => (2, ""),
        "rc" => (3, ""),
        "snapshot" => (4, ""),
        "" => (5, ""),
        "sp" => (6, ""),
        other => (7, other),
    }
}

fn cmp_items(a: Option<&Item>, b: Option<&Item>) -> Ordering {
    match (a, b) {
        (None, None) => Ordering::Equal,
        (Some(x), None) => cmp_items(None, Some(x)).reverse(),
        (None, Some(y)) => match y {
            // Compared with nothing: a number is more unless zero; a qualifier
            // less unless it ranks after a release; a list by its items.
            Item::Int(n) => {
                if n.is_empty() {
                    Ordering::Equal
                } else {
                    Ordering::Less
                }
            }
            Item::Str(s) => qualifier_rank("").cmp(&qualifier_rank(s)),
            // The whole list, not only its first item (Maven 3.8, MNG-6964:
            // `1-0.1` > `1`).
            Item::List(l) => l
                .iter()
                .map(|item| cmp_items(None, Some(item)))
                .find(|o| *o != Ordering::Equal)
                .unwrap_or(Ordering::Equal),
        },
        (Some(x), Some(y)) => match (x, y) {
            (Item::Int(p), Item::Int(q)) => cmp_digits(p, q),
            (Item::Int(_), _) => Ordering::Greater,
            (Item::Str(_), Item::Int(_)) => Ordering::Less,
            (Item::Str(p), Item::Str(q)) => qualifier_rank(p).cmp(&qualifier_rank(q)),
            (Item::Str(_), Item::List(_)) => Ordering::Less,
            (Item::List(_), Item::Int(_)) => Ordering::Less,
            (Item::List(_), Item::Str(_)) => Ordering::Greater,
            (Item::List(p), Item::List(q)) => cmp_lists(p, q),
        },
    }
}

fn cmp_lists(a: &[Item], b: &[Item]) -> Ordering {
    let n = a.len().max(b.len());
    for i in 0..n {
        let c = cmp_items(a.get(i), b.get(i));
        if c != Ordering::Equal {
            return c;
        }
    }
    Ordering::Equal
}

/// A Maven version requirement: a soft version, or ranges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Requirement {
    Soft(String),
    Ranges(Vec<Range>),
}

/// One range of a requirement; `None` bounds are open-ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Range {
    pub lower: Option<(String, bool)>,
    pub upper: Option<(String, bool)>,
}

impl Range {
    /// Whether `v` lies in the range (Maven's order).
    pub(crate) fn contains(&self, v: &str) -> bool {
        let above = match &self.lower {
            None => true,
            Some((l, inclusive)) => match maven_cmp(v, l) {
                Ordering::Greater => true,
                Ordering::Equal => *inclusive,
                Ordering::Less => false,
            },
        };
        let below = match &self.upper {
            None => true,
            Some((u, inclusive)) => match maven_cmp(v, u) {
                Ordering::Less => true,
                Ordering::Equal => *inclusive,
                Ordering::Greater => false,
            },
        };
        above && below
    }
}

impl Requirement {
    /// Parses a `<version>` value.
    pub(crate) fn parse(spec: &str) -> Result<Requirement, String> {
        let spec = spec.trim();
        if !spec.starts_with(['[', '(']) {
            if spec.is_empty() {
                return Err("an empty version".into());
            }
            return Ok(Requirement::Soft(spec.to_owned()));
        }
        let mut ranges = Vec::new();
        let mut rest = spec;
        while !rest.is_empty() {
            let open = rest.chars().next().expect("non-empty");
            if !matches!(open, '[' | '(') {
                return Err(format!("'{spec}' is not a version range"));
            }
            let end = rest
                .find([']', ')'])
                .ok_or_else(|| format!("'{spec}' has an unclosed range"))?;
            let close = rest[end..].chars().next().expect("found");
            let inner = &rest[1..end];
            let range = match inner.split_once(',') {
                None => {
                    if open != '[' || close != ']' || inner.trim().is_empty() {
                        return Err(format!("'{spec}': a single version needs [x]"));
                    }
                    let v = inner.trim().to_owned();
                    Range {
                        lower: Some((v.clone(), true)),
                        upper: Some((v, true)),
                    }
                }
                Some((lo, hi)) => {
                    let bound = |s: &str, inclusive: bool| {
                        let s = s.trim();
                        (!s.is_empty()).then(|| (s.to_owned(), inclusive))
                    };
                    Range {
                        lower: bound(lo, open == '['),
                        upper: bound(hi, close == ']'),
                    }
                }
            };
            ranges.push(range);
            rest = rest[end + 1..].trim_start();
            if let Some(next) = rest.strip_prefix(',') {
                rest = next.trim_start();
                if rest.is_empty() {
                    return Err(format!("'{spec}' ends with a comma"));
                }
            } else if !rest.is_empty() {
                return Err(format!("'{spec}' has text after a range"));
            }
        }
        Ok(Requirement::Ranges(ranges))
    }

    /// The highest of `available` that satisfies the ranges (Maven and Ivy both
    /// pick the highest); `None` for a soft version.
    pub(crate) fn pick<'a>(&self, available: &'a [String]) -> Option<&'a String> {
        let Requirement::Ranges(ranges) = self else {
            return None;
        };
        available
            .iter()
            .filter(|v| ranges.iter().any(|r| r.contains(v)))
            .max_by(|a, b| maven_cmp(a, b))
    }
}

/// Ivy's dynamic revisions, which Spark's `--packages` (and Ivy reading a
/// POM) accepts besides Maven's ranges: `4.+` (the latest revision starting
/// with `4.`), `+` (the latest of all), `latest.release` (the latest that is
/// not a `-SNAPSHOT`: Ivy's Maven resolver gives snapshots the status
/// `integration`, every other version `release`) and `latest.integration`
/// (the latest of all). "Latest" is Ivy's order ([`ivy_cmp`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Dynamic {
    Prefix(String),
    Latest { integration: bool },
}

impl Dynamic {
    /// The dynamic revision `spec` is, if it is one.
    pub(crate) fn parse(spec: &str) -> Option<Dynamic> {
        let spec = spec.trim();
        match spec {
            "latest.release" => Some(Dynamic::Latest { integration: false }),
            "latest.integration" => Some(Dynamic::Latest { integration: true }),
            _ => spec
                .strip_suffix('+')
                .map(|prefix| Dynamic::Prefix(prefix.to_owned())),
        }
    }

    /// The latest of `available` it matches.
    pub(crate) fn pick<'a>(&self, available: &'a [String]) -> Option<&'a String> {
        available
            .iter()
            .filter(|v| match self {
                Dynamic::Prefix(prefix) => v.starts_with(prefix.as_str()),
                Dynamic::Latest { integration } => *integration || !v.ends_with("-SNAPSHOT"),
            })
            .max_by(|a, b| ivy_cmp(a, b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Versions as repositories and fuzzing give them: qualifiers of every kind,
    /// separators, leading zeros, case, and the cases the fuzz target found.
    const VERSIONS: &[&str] = &[
        "1",
        "1.0",
        "1.0.0",
        "1.0.1",
        "1.1",
        "1.10",
        "1.9",
        "01",
        "1.01",
        "2.0",
        "10",
        "1-alpha",
        "1.0-alpha",
        "1.0-alpha-1",
        "1.0-a1",
        "1.0-beta",
        "1.0-b2",
        "1.0-milestone",
        "1.0-m3",
        "1.0-rc1",
        "1.0-RC1",
        "1.0.RC1",
        "1.0-cr2",
        "1.0-SNAPSHOT",
        "1.0-snapshot",
        "1.0-ga",
        "1.0-final",
        "1.0.Final",
        "1.0-release",
        "1.0-sp1",
        "1.0-dev",
        "1.0-foo",
        "1.0-foo-1",
        "1.0_1",
        "1.0+build",
        "1.0-20240102.030405-7",
        "3.5.3",
        "3.5.03",
        "3.5.3-SNAPSHOT",
        "0-a0",
        "",
        "v1.0",
        "1.0.0.0.0",
        "1-1",
        "1.0-1",
        "2.12.10",
        "2.12.9",
        "1.0-jre",
        "33.0.0-jre",
        "33.0.0-android",
        "1.0a",
        "1.0A",
        "a",
        "final",
        "dev",
        "1.0.0.X1",
        "1.0.0-X2",
        "1.0.RC.1",
        "1.0.x",
        "1.0-x",
        "1.0.sp1",
        "1.0.a1",
        "1.x.2",
        "1..0",
        "1.0.",
        "-1",
        "1.0--1",
        "1.0-.1",
        "1.2.3-4.5",
        "2.0.0-M1",
        "2.0.0.M1",
        "1.0.0-alpha.beta",
        "1.0.0-0.3.7",
        "1.0.0-x.7.z.92",
        "1.0.0+20130313144700",
        "1.2.3.4.5.6.7.8.9.10",
        "0",
        "0.0",
        "0.0.1",
        "00",
        "1.0-0",
        "1-0.1",
        "1.0-ga-1",
        "1.0.final.1",
        "1.0-b",
        "1.0-b-1",
        "1.0-rc-1-SNAPSHOT",
        "1.0.0.Final-redhat-1",
        ".1",
        ".a",
        "1-.a",
        "1.-1",
    ];

    /// `VERSIONS`, and the lines of the file `SPARK_LOCALIZER_TEST_VERSIONS` names
    /// when set (to check more, e.g. lines of the fuzz target's working corpus).
    fn versions() -> Vec<String> {
        let mut out: Vec<String> = VERSIONS.iter().map(|v| (*v).to_owned()).collect();
        if let Some(file) = std::env::var_os("SPARK_LOCALIZER_TEST_VERSIONS") {
            let text = std::fs::read_to_string(file).unwrap();
            out.extend(text.lines().map(str::to_owned));
        }
        out
    }

    /// The reference orders: Maven's `ComparableVersion` (Debian's maven-artifact,
    /// 3.8) and Ivy's `LatestRevisionStrategy` (pyspark's ivy jar, what Spark's
    /// `--packages` runs), as a sign matrix over `VERSIONS`; `None` (skipped) when
    /// a jar or the JDK is missing outside CI.
    fn reference_orders() -> Option<Vec<(String, String)>> {
        let ci = std::env::var_os("CI").is_some_and(|v| v == "true");
        let maven = std::path::Path::new("/usr/share/maven/lib/maven-artifact-3.x.jar");
        let ivy = std::env::var_os("SPARK_LOCALIZER_TEST_SPARK_HOME").and_then(|home| {
            std::fs::read_dir(std::path::Path::new(&home).join("jars"))
                .ok()?
                .flatten()
                .map(|e| e.path())
                .find(|p| {
                    p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with("ivy-"))
                })
        });
        let javac = std::process::Command::new("javac")
            .arg("-version")
            .output()
            .is_ok();
        let (Some(ivy), true, true) = (ivy, maven.is_file(), javac) else {
            assert!(!ci, "the reference orders need Debian's maven, pyspark's ivy jar (SPARK_LOCALIZER_TEST_SPARK_HOME) and a JDK");
            eprintln!("SKIP: no maven-artifact jar, ivy jar or JDK");
            return None;
        };
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("Orders.java"),
            r#"import java.io.*; import java.util.*;
import org.apache.maven.artifact.versioning.ComparableVersion;
import org.apache.ivy.plugins.latest.*;
public class Orders {
  static ArtifactInfo info(final String r) { return new ArtifactInfo() {
    public String getRevision() { return r; } public long getLastModified() { return 0; } }; }
  static char sign(int c) { return c < 0 ? '<' : c > 0 ? '>' : '='; }
  public static void main(String[] args) throws Exception {
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, "UTF-8"));
    List<String> vs = new ArrayList<>(); String line;
    while ((line = in.readLine()) != null) vs.add(line);
    Comparator<ArtifactInfo> ivy = new LatestRevisionStrategy().getComparator();
    for (String x : vs) {
      StringBuilder m = new StringBuilder(), i = new StringBuilder();
      for (String y : vs) {
        m.append(sign(new ComparableVersion(x).compareTo(new ComparableVersion(y))));
        i.append(sign(ivy.compare(info(x), info(y))));
      }
      System.out.println(m + " " + i);
    }
  }
}
"#,
        )
        .unwrap();
        let classpath = format!("{}:{}", maven.display(), ivy.display());
        let built = std::process::Command::new("javac")
            .args(["-nowarn", "-cp", &classpath, "-d"])
            .arg(dir.path())
            .arg(dir.path().join("Orders.java"))
            .status()
            .unwrap();
        assert!(built.success());
        let mut java = std::process::Command::new("java")
            .args([
                "-cp",
                &format!("{classpath}:{}", dir.path().display()),
                "Orders",
            ])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        let mut stdin = java.stdin.take().unwrap();
        stdin
            .write_all((versions().join("\n") + "\n").as_bytes())
            .unwrap();
        drop(stdin);
        let out = java.wait_with_output().unwrap();
        assert!(out.status.success());
        let text = String::from_utf8(out.stdout).unwrap();
        // (Ivy prints a line of its own when it loads its settings.)
        let rows: Vec<(String, String)> = text
            .lines()
            .filter(|l| !l.is_empty() && l.chars().all(|c| "<=> ".contains(c)))
            .map(|l| {
                let (m, i) = l.split_once(' ').unwrap();
                (m.to_owned(), i.to_owned())
            })
            .collect();
        assert_eq!(rows.len(), versions().len());
        Some(rows)
    }

    /// Both orders, every pair of `VERSIONS`, against the real implementations.
    #[test]
    fn both_orders_agree_with_maven_and_ivy() {
        let Some(rows) = reference_orders() else {
            return;
        };
        let sign = |o: Ordering| match o {
            Ordering::Less => '<',
            Ordering::Equal => '=',
            Ordering::Greater => '>',
        };
        let mut wrong = Vec::new();
        let versions = versions();
        for (x, (maven, ivy)) in versions.iter().zip(&rows) {
            for ((y, m), i) in versions.iter().zip(maven.chars()).zip(ivy.chars()) {
                let ours = sign(maven_cmp(x, y));
                if ours != m {
                    wrong.push(format!("maven {x:?} {ours} {y:?}, Maven says {m}"));
                }
                let ours = sign(ivy_cmp(x, y));
                if ours != i {
                    wrong.push(format!("ivy {x:?} {ours} {y:?}, Ivy says {i}"));
                }
            }
        }
        assert!(
            wrong.is_empty(),
            "{} of {} pairs differ:\n{}",
            wrong.len(),
            2 * versions.len().pow(2),
            wrong.join("\n")
        );
    }

    #[test]
    fn ivy_orders_as_latest_revision_does() {
        let ordered = [
            "1.0-dev",
            "1.0-alpha",
            "1.0-rc1",
            "1.0",
            "1.0.1",
            "1.1",
            "1.10",
            "2.0-final",
        ];
        for w in ordered.windows(2) {
            assert_eq!(ivy_cmp(w[0], w[1]), Ordering::Less, "{} < {}", w[0], w[1]);
            assert_eq!(ivy_cmp(w[1], w[0]), Ordering::Greater);
        }
        assert_eq!(ivy_cmp("1.0", "1.0"), Ordering::Equal);
        // A number beats a word at the same place.
        assert_eq!(ivy_cmp("1.0.1", "1.0.debian"), Ordering::Greater);
        assert_eq!(ivy_cmp("2.12.10", "2.12.9"), Ordering::Greater);
    }

    #[test]
    fn maven_orders_as_comparable_version_does() {
        let ordered = [
            "1-alpha",
            "1-beta",
            "1-milestone",
            "1-rc",
            "1-snapshot",
            "1",
            "1-sp",
            "1.0.1",
            "1.1",
            "1.10",
            "2",
        ];
        for w in ordered.windows(2) {
            assert_eq!(maven_cmp(w[0], w[1]), Ordering::Less, "{} < {}", w[0], w[1]);
            assert_eq!(maven_cmp(w[1], w[0]), Ordering::Greater);
        }
        for (a, b) in [
            ("1.0", "1"),
            ("1.0.0", "1"),
            ("1-ga", "1"),
            ("1.0-final", "1"),
            ("1a1", "1-alpha-1"),
        ] {
            assert_eq!(maven_cmp(a, b), Ordering::Equal, "{a} = {b}");
        }
        assert_eq!(maven_cmp("2.0.0-M1", "2.0.0"), Ordering::Less);
        assert_eq!(maven_cmp("1.2.3.RELEASE", "1.2.3"), Ordering::Equal);
    }

    #[test]
    fn ranges_pick_the_highest_match() {
        let have: Vec<String> = ["1.0", "1.5", "2.0", "2.1-SNAPSHOT", "3.0"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let pick = |spec: &str| Requirement::parse(spec).unwrap().pick(&have).cloned();
        assert_eq!(pick("[1.0,2.0)"), Some("1.5".into()));
        assert_eq!(pick("[1.0,2.0]"), Some("2.0".into()));
        assert_eq!(pick("[2.5,)"), Some("3.0".into()));
        assert_eq!(pick("(,1.0]"), Some("1.0".into()));
        assert_eq!(pick("[1.5]"), Some("1.5".into()));
        assert_eq!(pick("[1.0,1.2),[2.0,2.0]"), Some("2.0".into()));
        assert_eq!(pick("[4,5)"), None);
        assert_eq!(pick("1.0"), None);
        for bad in ["[1.0", "[1.0,2.0)x", "[,]x", "[1,2),", "[]"] {
            assert!(Requirement::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn dynamic_revisions_pick_the_latest_ivy_would() {
        let have: Vec<String> = [
            "3.0",
            "4.0",
            "4.2.3",
            "4.10-SNAPSHOT",
            "40.1",
            "41.0-SNAPSHOT",
            "5.0-rc1",
        ]
        .iter()
        .map(|v| (*v).to_owned())
        .collect();
        let pick = |spec: &str| Dynamic::parse(spec).unwrap().pick(&have).cloned();
        assert_eq!(pick("4.+").as_deref(), Some("4.10-SNAPSHOT"));
        assert_eq!(pick("4.2+").as_deref(), Some("4.2.3"));
        assert_eq!(pick("4+").as_deref(), Some("41.0-SNAPSHOT"));
        assert_eq!(pick("+").as_deref(), Some("41.0-SNAPSHOT"));
        assert_eq!(pick("latest.release").as_deref(), Some("40.1"));
        assert_eq!(pick("latest.integration").as_deref(), Some("41.0-SNAPSHOT"));
        assert_eq!(pick("6.+"), None);
        assert_eq!(Dynamic::parse("4.2.3"), None);
        assert_eq!(Dynamic::parse("latest.milestone"), None);
    }
}
