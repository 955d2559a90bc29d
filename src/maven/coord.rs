//! Maven coordinates as users write them (`--packages g:a:v`, `--exclude-packages
//! g:a`) and as POMs name them, with the paths and file names they take.

use std::fmt;

/// One artifact of a module: group, artifact, version, classifier, extension.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Coord {
    pub group: String,
    pub artifact: String,
    pub version: String,
    pub classifier: Option<String>,
    /// The file extension (`jar`, `pom`).
    pub ext: String,
}

/// `group:artifact`, what conflicts are decided on.
pub(crate) type Key = (String, String);

impl Coord {
    pub(crate) fn new(group: &str, artifact: &str, version: &str) -> Coord {
        Coord {
            group: group.to_owned(),
            artifact: artifact.to_owned(),
            version: version.to_owned(),
            classifier: None,
            ext: "jar".to_owned(),
        }
    }

    /// A `--packages` entry: `groupId:artifactId:version` (Spark also accepts `/`
    /// as the separator), optionally `:classifier` after the version.
    pub(crate) fn parse_package(spec: &str) -> Result<Coord, String> {
        let spec = spec.trim();
        let parts: Vec<&str> = spec.split([':', '/']).map(str::trim).collect();
        let bad = || {
            format!(
                "'{spec}' is not a Maven coordinate: write groupId:artifactId:version (e.g. org.apache.celeborn:celeborn-client-spark-3-shaded_2.12:0.5.1)"
            )
        };
        let (g, a, v, classifier) = match parts.as_slice() {
            [g, a, v] => (*g, *a, *v, None),
            [g, a, v, c] => (*g, *a, *v, Some(*c)),
            _ => return Err(bad()),
        };
        // Each becomes directories (the group's dots too) and part of file names:
        // no empty directory (`a..b`, a trailing `.`), no `..`.
        // A version may be one of Spark's dynamic revisions (`4.+`,
        // `latest.release`) or a range without a comma (`[4.2.3]`, `[4.0,)` cannot
        // be written: `,` separates packages); the version chosen becomes the path.
        let range = v.starts_with(['[', '('])
            && super::version::Requirement::parse(v).is_ok()
            && v.chars().all(|c| valid_char(c) || "[]()".contains(c));
        let parts = [g, a].into_iter().chain((!range).then_some(v));
        for part in parts.chain(classifier) {
            if part.is_empty()
                || part.starts_with('.')
                || part.ends_with('.')
                || part.contains("..")
                || !part.chars().all(valid_char)
            {
                return Err(bad());
            }
        }
        let mut c = Coord::new(g, a, v);
        c.classifier = classifier.map(str::to_owned);
        Ok(c)
    }

    /// The same module's POM.
    pub(crate) fn pom(&self) -> Coord {
        Coord {
            classifier: None,
            ext: "pom".to_owned(),
            ..self.clone()
        }
    }

    /// The path under a repository's root: `org/x/a/1.0/a-1.0[-c].jar`.
    pub(crate) fn path(&self) -> String {
        format!(
            "{}/{}/{}/{}",
            self.group.replace('.', "/"),
            self.artifact,
            self.version,
            self.file_name()
        )
    }

    /// `a-1.0[-classifier].ext`, as repositories name it.
    pub(crate) fn file_name(&self) -> String {
        self.file_name_at(&self.version)
    }

    /// [`Coord::file_name`] with another version string (a timestamped SNAPSHOT).
    pub(crate) fn file_name_at(&self, version: &str) -> String {
        match &self.classifier {
            Some(c) => format!("{}-{version}-{c}.{}", self.artifact, self.ext),
            None => format!("{}-{version}.{}", self.artifact, self.ext),
        }
    }

    /// `group_artifact-version[-classifier].jar`, as Spark's `--packages` names the
    /// jars it hands the driver and executors.
    pub(crate) fn spark_name(&self) -> String {
        let classifier = self
            .classifier
            .as_deref()
            .map(|c| format!("-{c}"))
            .unwrap_or_default();
        format!(
            "{}_{}-{}{classifier}.{}",
            self.group, self.artifact, self.version, self.ext
        )
    }
}

impl fmt::Display for Coord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.group, self.artifact, self.version)?;
        if let Some(c) = &self.classifier {
            write!(f, ":{c}")?;
        }
        Ok(())
    }
}

/// Whether `part` (a groupId, artifactId, version, classifier or type read from
/// a POM) can be one: not empty, no path separator, not `.`-led (no `..`), no
/// whitespace or control character. A POM is not trusted to stay inside the
/// repository.
pub(crate) fn check_part(part: &str) -> Result<(), &'static str> {
    if part.is_empty() {
        return Err("is empty");
    }
    if part.starts_with('.') || part.contains("..") {
        return Err("starts with '.' or holds '..'");
    }
    if part.contains(['/', '\\']) || part.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("holds a path separator, whitespace or a control character");
    }
    Ok(())
}

/// Characters a coordinate part may hold (Maven's are letters, digits, `-_.`;
/// versions add `+` and ranges never come from users here).
fn valid_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '+')
}

/// A `group:artifact` pattern (`*` matches any run of characters), as
/// `--exclude-packages` and POM `<exclusion>`s give them.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Exclusion {
    pub group: String,
    pub artifact: String,
}

impl Exclusion {
    /// A `--exclude-packages` entry: `groupId:artifactId`.
    pub(crate) fn parse(spec: &str) -> Result<Exclusion, String> {
        match spec.trim().split(':').collect::<Vec<_>>().as_slice() {
            [g, a] if !g.is_empty() && !a.is_empty() => Ok(Exclusion {
                group: (*g).to_owned(),
                artifact: (*a).to_owned(),
            }),
            _ => Err(format!(
                "'{spec}' is not groupId:artifactId (write e.g. com.google.guava:guava; * matches anything)"
            )),
        }
    }

    pub(crate) fn matches(&self, group: &str, artifact: &str) -> bool {
        glob(&self.group, group) && glob(&self.artifact, artifact)
    }
}

impl fmt::Display for Exclusion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.group, self.artifact)
    }
}

/// Ivy's glob, as Spark's `--exclude-packages` (and Ivy's POM exclusions)
/// match: `*` any run of characters, `?` one character, `[abc]`, `[a-z]` one of
/// them (`[!…]` or `[^…]`: none of them), everything else itself. Linear in
/// the text for each star (two pointers, back to the last star): never
/// exponential, whatever the pattern.
pub(crate) fn glob(pattern: &str, text: &str) -> bool {
    let tokens = tokens(pattern);
    let text: Vec<char> = text.chars().collect();
    let (mut t, mut p) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match tokens.get(p) {
            Some(Token::Star) => {
                star = Some((p, t));
                p += 1;
            }
            Some(token) if token.matches(text[t]) => {
                p += 1;
                t += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    p = sp + 1;
                    t = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    tokens[p..].iter().all(|t| matches!(t, Token::Star))
}

/// One element of a glob pattern.
enum Token {
    Star,
    Any,
    Char(char),
    /// `[…]`: the ranges, and whether they are negated.
    Class(Vec<(char, char)>, bool),
}

impl Token {
    fn matches(&self, c: char) -> bool {
        match self {
            Token::Star => true,
            Token::Any => true,
            Token::Char(x) => *x == c,
            Token::Class(ranges, negated) => {
                ranges.iter().any(|&(lo, hi)| lo <= c && c <= hi) != *negated
            }
        }
    }
}

fn tokens(pattern: &str) -> Vec<Token> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '*' => out.push(Token::Star),
            '?' => out.push(Token::Any),
            '[' => {
                // A class up to the next `]` (a `]` first in it is itself);
                // without one, `[` is itself.
                let negated = matches!(chars.get(i + 1), Some('!' | '^'));
                let start = i + 1 + usize::from(negated);
                let close = (start + 1..chars.len()).find(|&k| chars[k] == ']');
                match close.filter(|_| start < chars.len()) {
                    Some(end) => {
                        let mut ranges = Vec::new();
                        let mut k = start;
                        while k < end {
                            if k + 2 < end && chars[k + 1] == '-' {
                                ranges.push((chars[k], chars[k + 2]));
                                k += 3;
                            } else {
                                ranges.push((chars[k], chars[k]));
                                k += 1;
                            }
                        }
                        out.push(Token::Class(ranges, negated));
                        i = end;
                    }
                    None => out.push(Token::Char('[')),
                }
            }
            c => out.push(Token::Char(c)),
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packages_parse_and_name_their_files() {
        let c =
            Coord::parse_package(" org.apache.celeborn:celeborn-client-spark-3-shaded_2.12:0.5.1 ")
                .unwrap();
        assert_eq!(
            c.path(),
            "org/apache/celeborn/celeborn-client-spark-3-shaded_2.12/0.5.1/celeborn-client-spark-3-shaded_2.12-0.5.1.jar"
        );
        assert_eq!(
            c.spark_name(),
            "org.apache.celeborn_celeborn-client-spark-3-shaded_2.12-0.5.1.jar"
        );
        assert_eq!(
            c.pom().file_name(),
            "celeborn-client-spark-3-shaded_2.12-0.5.1.pom"
        );
        let c = Coord::parse_package("g/a/1.0").unwrap();
        assert_eq!(c.to_string(), "g:a:1.0");
        let c = Coord::parse_package("g:a:1.0:tests").unwrap();
        assert_eq!(c.file_name(), "a-1.0-tests.jar");
        // Spark's dynamic revisions and ranges without a comma.
        for dynamic in ["g:a:4.+", "g:a:+", "g:a:latest.release", "g:a:[4.2.3]"] {
            assert!(Coord::parse_package(dynamic).is_ok(), "{dynamic}");
        }
        // (Found by fuzzing: `c..x` and `x.` as a group made an empty directory.)
        for bad in [
            "g:a",
            "g:a:",
            ":a:1",
            "g:a:1:c:x",
            "g:a:1 2",
            "g:a:../1",
            "c..x:a:1",
            "x.:a:1",
            "g:a.:1",
            "g:a:1:c.",
            "g:a:[1",
            "g:a:[../1]",
            "g:a:1]",
        ] {
            assert!(Coord::parse_package(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn exclusions_glob() {
        let e = Exclusion::parse("org.apache.spark:spark-core*").unwrap();
        assert!(e.matches("org.apache.spark", "spark-core_2.12"));
        assert!(!e.matches("org.apache.spark", "spark-sql_2.12"));
        let any = Exclusion::parse("*:*").unwrap();
        assert!(any.matches("x", "y"));
        assert!(glob("*scala-library*", "scala-library"));
        assert!(glob("a*b*c", "aXbYc"));
        assert!(!glob("a*b*c", "aXcYb"));
        // Ivy's ? and [..], as Spark's --exclude-packages matches them.
        assert!(glob("org.codehaus.plexu?", "org.codehaus.plexus"));
        assert!(!glob("org.codehaus.plexu?", "org.codehaus.plexu"));
        assert!(glob("plexus-[cu]*", "plexus-utils") && glob("plexus-[cu]*", "plexus-cipher"));
        assert!(!glob("plexus-[cu]*", "plexus-interpolation"));
        assert!(glob("v[0-9]", "v7") && !glob("v[!0-9]", "v7") && glob("v[^0-9]", "vx"));
        assert!(glob("a[", "a[") && glob("*", "") && !glob("?", ""));
        // Many stars against a long text: linear per star, not exponential.
        let long = "a".repeat(2000);
        assert!(!glob(&format!("{}b", "*a".repeat(50)), &long));
        assert!(Exclusion::parse("nocolon").is_err());
        for bad in ["", "..", ".x", "a/../b", "a\\b", "a b", "e/../../x", "a\nb"] {
            assert!(check_part(bad).is_err(), "{bad:?}");
        }
        assert!(check_part("1.0-SNAPSHOT").is_ok());
    }
}
