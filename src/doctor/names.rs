//! What a jar's Maven coordinates (or, without them, its file name) say: the
//! artifact, its version, the Scala binary version it was built for and the Spark
//! line it targets.

/// A jar's Maven coordinates, from its embedded `pom.properties` or its name.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(crate) struct Coords {
    /// `None` when read from the file name.
    pub group: Option<String>,
    pub artifact: String,
    pub version: Option<String>,
}

impl Coords {
    /// `group:artifact:version`, as far as known.
    pub(crate) fn shown(&self) -> String {
        let mut s = String::new();
        if let Some(g) = &self.group {
            s.push_str(g);
            s.push(':');
        }
        s.push_str(&self.artifact);
        if let Some(v) = &self.version {
            s.push(':');
            s.push_str(v);
        }
        s
    }

    /// The artifact without its Scala suffix (`spark-core_2.12` -> `spark-core`).
    pub(crate) fn base(&self) -> &str {
        match scala_suffix(&self.artifact) {
            Some((raw, _)) => &self.artifact[..self.artifact.len() - raw.len() - 1],
            None => &self.artifact,
        }
    }

    /// The Scala binary version in the artifact's name (`2.12`, `2.13`, `3`).
    pub(crate) fn scala(&self) -> Option<&'static str> {
        scala_suffix(&self.artifact).map(|(_, scala)| scala)
    }

    /// The release part of the version: its leading digits and dots (`3.3.4-tests`
    /// -> `3.3.4`), for comparisons a classifier must not spoil.
    pub(crate) fn release(&self) -> Option<&str> {
        let v = self.version.as_deref()?;
        let end = v
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(v.len());
        Some(v[..end].trim_end_matches('.')).filter(|r| !r.is_empty())
    }
}

/// Coordinates read from a file name: `name_2.12-1.0.jar`, `name-1.0.jar`, `name.jar`.
pub(crate) fn from_file_name(file_name: &str) -> Coords {
    let stem = file_name
        .strip_suffix(".jar")
        .or_else(|| file_name.strip_suffix(".JAR"))
        .unwrap_or(file_name);
    // With a Scala suffix, the artifact ends there and the version follows.
    if let Some(end) = scala_suffix_end(stem) {
        let version = stem[end..].strip_prefix('-').filter(|v| !v.is_empty());
        return Coords {
            group: None,
            artifact: stem[..end].to_owned(),
            version: version.map(str::to_owned),
        };
    }
    // Otherwise the version starts at the last '-' followed by a digit.
    let bytes = stem.as_bytes();
    let split = (1..bytes.len())
        .rev()
        .find(|&i| bytes[i - 1] == b'-' && bytes[i].is_ascii_digit());
    match split {
        Some(i) => Coords {
            group: None,
            artifact: stem[..i - 1].to_owned(),
            version: Some(stem[i..].to_owned()),
        },
        None => Coords {
            group: None,
            artifact: stem.to_owned(),
            version: None,
        },
    }
}

/// The Scala binary versions artifacts are suffixed with, as spelled (Azure's
/// connectors write `_2-12`), and what each means.
const SCALA_SUFFIXES: [(&str, &str); 9] = [
    ("2.10", "2.10"),
    ("2.11", "2.11"),
    ("2.12", "2.12"),
    ("2.13", "2.13"),
    ("3", "3"),
    ("2-10", "2.10"),
    ("2-11", "2.11"),
    ("2-12", "2.12"),
    ("2-13", "2.13"),
];

/// The Scala suffix an artifact id ends with (`_2.12`): as spelled, and the
/// Scala binary version it means.
pub(crate) fn scala_suffix(artifact: &str) -> Option<(&str, &'static str)> {
    let (_, suffix) = artifact.rsplit_once('_')?;
    SCALA_SUFFIXES
        .iter()
        .find(|(raw, _)| *raw == suffix)
        .map(|(_, scala)| (suffix, *scala))
}

/// Where the first `_<scala>` that ends the artifact in `stem` ends: followed
/// by the end, or by `-` and a version (no `_` in it: `azure-cosmos-spark_3-5_2-12`'s
/// `_3` is a Spark line, not Scala 3).
fn scala_suffix_end(stem: &str) -> Option<usize> {
    stem.match_indices('_').find_map(|(i, _)| {
        SCALA_SUFFIXES.iter().find_map(|(s, _)| {
            let end = i + 1 + s.len();
            if !stem[i + 1..].starts_with(s) {
                return None;
            }
            match stem.as_bytes().get(end) {
                None => Some(end),
                Some(b'-') if !stem[end..].contains('_') => Some(end),
                _ => None,
            }
        })
    })
}

/// A Spark line: the major version, and the minor when the name says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Line {
    pub major: u32,
    pub minor: Option<u32>,
}

impl std::fmt::Display for Line {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.minor {
            Some(minor) => write!(f, "{}.{minor}", self.major),
            None => write!(f, "{}.x", self.major),
        }
    }
}

impl Line {
    /// Whether Spark `major.minor` is of this line.
    pub(crate) fn admits(&self, major: u32, minor: u32) -> bool {
        self.major == major && self.minor.is_none_or(|m| m == minor)
    }
}

/// The Spark line a third-party artifact names, as the ecosystem spells it:
/// `iceberg-spark-runtime-3.5`, `hudi-spark3.5-bundle`, `paimon-spark-3.5`,
/// `kyuubi-extension-spark-3-5`, `comet-spark-spark3.5`, `celeborn-client-spark-3-shaded`
/// (major only), `elasticsearch-spark-30` (two digits ending in 0: the major only),
/// and versions such as graphframes' `0.8.3-spark3.5-s_2.12`.
pub(crate) fn spark_line(coords: &Coords) -> Option<Line> {
    let artifact = coords.base().to_ascii_lowercase();
    let version = coords
        .version
        .as_deref()
        .unwrap_or_default()
        .to_ascii_lowercase();
    after_spark(&artifact)
        .or_else(|| after_spark(&version))
        .or_else(|| trailing_line(&artifact))
}

/// `spark` followed by a line (`3.5`, `-3.5`, `3-5`, `-3`, `35`, `-30`).
fn after_spark(text: &str) -> Option<Line> {
    text.match_indices("spark").find_map(|(i, _)| {
        let rest = &text[i + "spark".len()..];
        let rest = rest
            .strip_prefix(['-', '_'])
            .unwrap_or(rest)
            .trim_start_matches('-');
        line_at(rest)
    })
}

/// The line at the start of `text`, ended by a non-digit or the end: `3.5`, `3-5`,
/// `3_5`, `35`, `30` (major 3), `3` (major only).
fn line_at(text: &str) -> Option<Line> {
    let digits: String = text.chars().take_while(char::is_ascii_digit).collect();
    let rest = &text[digits.len()..];
    match digits.len() {
        1 => {
            let major: u32 = digits.parse().ok()?;
            let mut chars = rest.chars();
            let minor = match (chars.next(), chars.next()) {
                (Some('.' | '-' | '_'), Some(c)) if c.is_ascii_digit() => {
                    let minor: String =
                        rest[1..].chars().take_while(char::is_ascii_digit).collect();
                    // `spark-3-shaded` has no minor; `3.5.1` is a version, not a line.
                    if rest[1 + minor.len()..].starts_with('.') {
                        return None;
                    }
                    Some(minor.parse().ok()?)
                }
                _ => None,
            };
            plausible(major, minor)
        }
        2 => {
            let major = u32::from(digits.as_bytes()[0] - b'0');
            let minor = u32::from(digits.as_bytes()[1] - b'0');
            plausible(major, (minor != 0).then_some(minor))
        }
        _ => None,
    }
}

/// Spark lines that exist (1.x to 9.x): a `spark-2024` is not one.
fn plausible(major: u32, minor: Option<u32>) -> Option<Line> {
    ((1..=9).contains(&major) && minor.is_none_or(|m| m < 30)).then_some(Line { major, minor })
}

/// An artifact that mentions Spark and ends with `-<major>.<minor>`
/// (`iceberg-spark-runtime-3.5`).
fn trailing_line(artifact: &str) -> Option<Line> {
    if !artifact.contains("spark") {
        return None;
    }
    let (_, tail) = artifact.rsplit_once('-')?;
    let (major, minor) = tail.split_once('.')?;
    plausible(major.parse().ok()?, Some(minor.parse().ok()?))
}

/// `major.minor` of a version (`3.5.3` -> (3, 5)).
pub(crate) fn major_minor(version: &str) -> Option<(u32, u32)> {
    let mut parts = version.split(['.', '-']);
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(file: &str) -> Option<String> {
        spark_line(&from_file_name(file)).map(|l| l.to_string())
    }

    #[test]
    fn file_names_split_into_artifact_and_version() {
        let c = from_file_name("iceberg-spark-runtime-3.4_2.12-1.5.0.jar");
        assert_eq!(c.artifact, "iceberg-spark-runtime-3.4_2.12");
        assert_eq!(c.version.as_deref(), Some("1.5.0"));
        assert_eq!(c.scala(), Some("2.12"));
        assert_eq!(c.base(), "iceberg-spark-runtime-3.4");
        let c = from_file_name("hadoop-client-api-3.3.4.jar");
        assert_eq!(
            (c.artifact.as_str(), c.version.as_deref()),
            ("hadoop-client-api", Some("3.3.4"))
        );
        let c = from_file_name("gcs-connector-hadoop3-2.2.22-shaded.jar");
        assert_eq!(
            (c.artifact.as_str(), c.version.as_deref()),
            ("gcs-connector-hadoop3", Some("2.2.22-shaded"))
        );
        let c = from_file_name("netty-transport-native-epoll-4.1.96.Final-linux-x86_64.jar");
        assert_eq!(c.artifact, "netty-transport-native-epoll");
        let c = from_file_name("celeborn.jar");
        assert_eq!((c.artifact.as_str(), c.version), ("celeborn", None));
        assert_eq!(from_file_name("foo_3-1.0.jar").scala(), Some("3"));
        assert_eq!(from_file_name("foo_2.13.jar").scala(), Some("2.13"));
        assert_eq!(from_file_name("commons-lang3-3.12.0.jar").scala(), None);
        // Azure's connectors: `_3-5` is the Spark line, `_2-12` the Scala version.
        let c = from_file_name("azure-cosmos-spark_3-5_2-12-4.33.0.jar");
        assert_eq!(
            (c.artifact.as_str(), c.scala()),
            ("azure-cosmos-spark_3-5_2-12", Some("2.12"))
        );
        assert_eq!(c.version.as_deref(), Some("4.33.0"));
        assert_eq!(
            spark_line(&c).map(|l| l.to_string()).as_deref(),
            Some("3.5")
        );
        assert_eq!(
            from_file_name("hadoop-common-3.3.4-tests.jar").release(),
            Some("3.3.4")
        );
        assert_eq!(
            from_file_name("foo-1.0-SNAPSHOT.jar").release(),
            Some("1.0")
        );
    }

    #[test]
    fn spark_lines_as_the_ecosystem_names_them() {
        assert_eq!(
            line("iceberg-spark-runtime-3.4_2.12-1.5.0.jar").as_deref(),
            Some("3.4")
        );
        assert_eq!(
            line("hudi-spark3.5-bundle_2.12-0.15.0.jar").as_deref(),
            Some("3.5")
        );
        assert_eq!(line("paimon-spark-3.5-0.9.0.jar").as_deref(), Some("3.5"));
        assert_eq!(
            line("kyuubi-extension-spark-3-5_2.12-1.9.0.jar").as_deref(),
            Some("3.5")
        );
        assert_eq!(
            line("comet-spark-spark3.5_2.12-0.3.0.jar").as_deref(),
            Some("3.5")
        );
        assert_eq!(
            line("gluten-velox-bundle-spark3.4_2.12-1.2.0.jar").as_deref(),
            Some("3.4")
        );
        assert_eq!(
            line("celeborn-client-spark-3-shaded_2.12-0.5.1.jar").as_deref(),
            Some("3.x")
        );
        assert_eq!(
            line("elasticsearch-spark-30_2.12-8.14.0.jar").as_deref(),
            Some("3.x")
        );
        assert_eq!(
            line("graphframes-0.8.3-spark3.5-s_2.12.jar").as_deref(),
            Some("3.5")
        );
        assert_eq!(line("spark35-extension-1.0.jar").as_deref(), Some("3.5"));
        // Not lines: Spark's own modules, Delta's own versions, connectors.
        assert_eq!(line("spark-core_2.12-3.5.3.jar"), None);
        assert_eq!(line("spark-sql-kafka-0-10_2.12-3.5.3.jar"), None);
        assert_eq!(line("delta-spark_2.12-3.2.0.jar"), None);
        assert_eq!(line("spark-cassandra-connector_2.12-3.5.0.jar"), None);
        assert_eq!(line("mongo-spark-connector_2.12-10.3.0.jar"), None);
        assert_eq!(line("spark-3.5.1-foo.jar"), None);
    }

    #[test]
    fn lines_admit_their_versions() {
        let l = Line {
            major: 3,
            minor: None,
        };
        assert!(l.admits(3, 5));
        assert!(!l.admits(4, 0));
        let l = Line {
            major: 3,
            minor: Some(4),
        };
        assert!(!l.admits(3, 5));
        assert_eq!(major_minor("3.5.3"), Some((3, 5)));
        assert_eq!(major_minor("4.0.0-preview2"), Some((4, 0)));
    }
}
