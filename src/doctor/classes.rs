//! Class findings: the same class in two jars with different bytes, and the
//! classes Spark properties name (a typo, a jar on no classpath, a jar that
//! reaches the JVM after Spark needs the class).

use std::collections::{BTreeMap, HashMap};

use super::{image_jar, Added, Finding, Image, Reach, Severity};

/// How many class names a finding lists.
const SHOWN: usize = 5;

/// Dotted (`org.apache.Foo`) from slash form.
fn dotted(name: &str) -> String {
    name.replace('/', ".")
}

/// `duplicate-classes` (warning): per pair of jars (an added one and an image
/// one, or two added ones), the classes both hold with different bytes (size or
/// CRC-32 differ).
pub(super) fn duplicates(image: &Image, added: &[Added]) -> Vec<Finding> {
    // Classes of the jars on the classpath, first holder wins (classpath order).
    let mut first: HashMap<&str, (usize, u64, u32)> = HashMap::new();
    // (added jar, other jar (Ok: image index, Err: added index)) -> class names.
    let mut pairs: BTreeMap<(usize, Result<usize, usize>), Vec<&str>> = BTreeMap::new();
    for (i, a) in added.iter().enumerate() {
        // A byte-identical copy of an image jar adds nothing (and would re-report
        // the image's own overlaps).
        if a.reach != Reach::Classpath || image.jars.iter().any(|j| same_classes(j, &a.jar)) {
            continue;
        }
        for c in &a.jar.classes {
            match first.get(&*c.name) {
                None => {
                    first.insert(&c.name, (i, c.size, c.crc));
                }
                Some(&(j, size, crc)) if j != i && (size, crc) != (c.size, c.crc) => {
                    pairs.entry((j, Err(i))).or_default().push(&c.name);
                }
                Some(_) => {}
            }
        }
    }
    for (k, jar) in image.jars.iter().enumerate() {
        for c in &jar.classes {
            if let Some(&(i, size, crc)) = first.get(&*c.name) {
                if (size, crc) != (c.size, c.crc) {
                    pairs.entry((i, Ok(k))).or_default().push(&c.name);
                }
            }
        }
    }
    pairs
        .into_iter()
        .map(|((i, other), mut names)| {
            names.sort_unstable();
            let ours = &added[i].jar;
            let (theirs, shown, whose) = match other {
                Ok(k) => (&image.jars[k], image_jar(&image.jars[k].name), "the image's"),
                Err(j) => (&added[j].jar, added[j].jar.name.clone(), "the added"),
            };
            let versions = if ours.coords.base() == theirs.coords.base() {
                format!(
                    " ({} {} and {})",
                    ours.coords.base(),
                    ours.coords.version.as_deref().unwrap_or("?"),
                    theirs.coords.version.as_deref().unwrap_or("?")
                )
            } else {
                String::new()
            };
            Finding::new(
                "duplicate-classes",
                Severity::Warning,
                vec![ours.name.clone(), shown.clone()],
                format!(
                    "{} and {whose} {} hold {} class{} with different bytes{versions}",
                    ours.name,
                    theirs.name,
                    names.len(),
                    if names.len() == 1 { "" } else { "es" }
                ),
                format!(
                    "{} comes first on the classpath and wins; if it replaces {shown}, remove that one (or use a shaded build); two versions of one class fail with NoSuchMethodError or LinkageError",
                    ours.name
                ),
            ).with_classes(names.iter().take(SHOWN).map(|n| dotted(n)).collect())
        })
        .collect()
}

/// Whether two jars hold the same classes with the same bytes.
fn same_classes(a: &super::jar::Jar, b: &super::jar::Jar) -> bool {
    a.classes.len() == b.classes.len()
        && !a.classes.is_empty()
        && a.classes
            .iter()
            .zip(&b.classes)
            .all(|(x, y)| (&x.name, x.size, x.crc) == (&y.name, y.size, y.crc))
}

/// Properties whose values are class names Spark loads.
const CLASS_KEYS: [&str; 5] = [
    "spark.plugins",
    "spark.shuffle.manager",
    "spark.serializer",
    "spark.kryo.registrator",
    "spark.sql.extensions",
];

/// Whether `key` names classes (`spark.sql.catalog.<name>` too, not its options).
pub(super) fn names_classes(key: &str) -> bool {
    CLASS_KEYS.contains(&key)
        || key
            .strip_prefix("spark.sql.catalog.")
            .is_some_and(|name| !name.is_empty() && !name.contains('.'))
}

/// The short names `spark.shuffle.manager` accepts.
fn shuffle_alias(value: &str) -> Option<&'static str> {
    match value.to_ascii_lowercase().as_str() {
        "sort" | "tungsten-sort" => Some("org.apache.spark.shuffle.sort.SortShuffleManager"),
        _ => None,
    }
}

/// Why a class named by `key` must be on the JVM's classpath from its start on
/// Spark `line`, when jars given to Spark itself (`spark.jars`) arrive too late.
fn needed_at_start(key: &str, line: (u32, u32)) -> Option<&'static str> {
    match key {
        "spark.shuffle.manager" if line < (4, 0) => Some(
            "executors create the shuffle manager before they fetch spark.jars (Spark 4.0 changed this, SPARK-45762)",
        ),
        "spark.serializer" => Some(
            "executors create the serializer (SparkEnv) before they fetch spark.jars, in every Spark version",
        ),
        _ => None,
    }
}

/// Where a class was found.
struct Found {
    image: bool,
    classpath: Vec<String>,
    off_classpath: Vec<String>,
}

fn find(image: &Image, added: &[Added], class: &str) -> Found {
    let mut found = Found {
        image: image.jars.iter().any(|j| j.has(class)),
        classpath: Vec::new(),
        off_classpath: Vec::new(),
    };
    for a in added.iter().filter(|a| a.jar.has(class)) {
        match a.reach {
            Reach::Classpath => found.classpath.push(a.jar.name.clone()),
            Reach::NotOnClasspath => found.off_classpath.push(a.jar.name.clone()),
        }
    }
    found
}

/// `class-not-found`, `class-not-on-classpath` and `class-loaded-too-late` (errors;
/// `class-not-found` is a warning when jars Spark fetches itself were not looked
/// into): each class the properties name, looked up in every jar.
pub(super) fn named(
    image: &Image,
    added: &[Added],
    properties: &[(String, String)],
    uninspected: &[String],
) -> Vec<Finding> {
    let mut out = Vec::new();
    let line = image.versions.spark_line();
    for (key, value) in properties {
        for given in value.split(',').map(str::trim).filter(|v| !v.is_empty()) {
            let class = match (key.as_str(), shuffle_alias(given)) {
                ("spark.shuffle.manager", Some(full)) => full.to_owned(),
                _ => given.to_owned(),
            };
            let slash = class.replace('.', "/");
            let found = find(image, added, &slash);
            if found.image || !found.classpath.is_empty() {
                continue;
            }
            if !found.off_classpath.is_empty() {
                out.push(Finding::new(
                    "class-not-on-classpath",
                    Severity::Error,
                    found.off_classpath.clone(),
                    format!(
                        "{key} names {class}, which only {} holds{}: localized, but on no classpath",
                        found.off_classpath.join(", "),
                        if found.off_classpath.len() == 1 { "" } else { " (each)" }
                    ),
                    "declare the jar with --jars (spark.jars) so it goes into the classpath fragment, not with --files or inside an archive",
                ).with_classes(vec![class]));
                continue;
            }
            let early = line.and_then(|l| needed_at_start(key, l));
            out.push(not_found(image, added, key, &class, uninspected, early));
        }
    }
    out
}

/// A class in no jar looked into: a typo (with the likeliest meant class), or in
/// a `spark.jars` jar Spark fetches itself, which for some keys is too late.
fn not_found(
    image: &Image,
    added: &[Added],
    key: &str,
    class: &str,
    uninspected: &[String],
    early: Option<&str>,
) -> Finding {
    let spark = image.versions.spark.as_deref().unwrap_or("unknown");
    if !uninspected.is_empty() {
        let list = uninspected.join(", ");
        return match early {
            Some(why) => Finding {
                id: "class-loaded-too-late",
                severity: Severity::Error,
                jars: uninspected.to_vec(),
                message: format!(
                    "{key} names {class}, which is in neither the image nor the classpath fragment; the properties' spark.jars ({list}) reach the JVM too late for it on Spark {spark}: {why}"
                ),
                advice: "localize the jar that holds it with --jars (the classpath fragment puts it on the JVM's classpath at start)".to_owned(),
                classes: vec![class.to_owned()],
            },
            None => Finding {
                id: "class-not-found",
                severity: Severity::Warning,
                jars: uninspected.to_vec(),
                message: format!(
                    "{key} names {class}, which is in neither the image nor the jars this run localizes; the properties' spark.jars ({list}), which Spark fetches itself, were not looked into"
                ),
                advice: "check the name, or localize those jars with this run so the doctor can look into them".to_owned(),
                classes: vec![class.to_owned()],
            },
        };
    }
    let meant = likeliest(image, added, class);
    Finding {
        id: "class-not-found",
        severity: Severity::Error,
        jars: Vec::new(),
        message: format!(
            "{key} names {class}, which no jar holds (neither the image's {} nor the {} added){}",
            image.jars.len(),
            added.len(),
            match &meant {
                Some(m) => format!("; did you mean {m}?"),
                None => String::new(),
            }
        ),
        advice: "fix the class name, or add the jar that holds it with --jars; Spark would fail at start with ClassNotFoundException".to_owned(),
        classes: vec![class.to_owned()],
    }
}

/// The class most likely meant: one with the same simple name, else the closest
/// name in the same package (at most 3 edits).
fn likeliest(image: &Image, added: &[Added], class: &str) -> Option<String> {
    let slash = class.replace('.', "/");
    // `a.b.Outer.Inner` for `a.b.Outer$Inner`, as Class.forName wants it.
    let mut nested = slash.clone();
    for _ in 0..2 {
        let Some(at) = nested.rfind('/') else { break };
        nested.replace_range(at..=at, "$");
        let held = image
            .jars
            .iter()
            .chain(added.iter().map(|a| &a.jar))
            .any(|j| j.has(&nested));
        if held {
            return Some(dotted(&nested));
        }
    }
    let (package, simple) = slash.rsplit_once('/').unwrap_or(("", &slash));
    let all = image
        .jars
        .iter()
        .chain(added.iter().map(|a| &a.jar))
        .flat_map(|j| &j.classes)
        .map(|c| &*c.name);
    let mut best: Option<(usize, &str)> = None;
    for name in all {
        let (p, s) = name.rsplit_once('/').unwrap_or(("", name));
        let score = if s == simple {
            0
        } else if p == package && !s.contains('$') {
            match edit_distance(s, simple) {
                d @ 1..=3 => d,
                _ => continue,
            }
        } else {
            continue;
        };
        if best.is_none_or(|(b, n)| (score, name) < (b, n)) {
            best = Some((score, name));
        }
    }
    best.map(|(_, n)| dotted(n))
}

/// Levenshtein distance (names are short).
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_that_name_classes() {
        assert!(names_classes("spark.plugins"));
        assert!(names_classes("spark.sql.catalog.iceberg"));
        assert!(!names_classes("spark.sql.catalog.iceberg.type"));
        assert!(!names_classes("spark.sql.catalog."));
        assert!(!names_classes("spark.jars"));
    }

    #[test]
    fn shuffle_aliases_and_start_up_needs() {
        assert!(shuffle_alias("SORT").is_some());
        assert!(shuffle_alias("org.x.Y").is_none());
        assert!(needed_at_start("spark.shuffle.manager", (3, 5)).is_some());
        assert!(needed_at_start("spark.shuffle.manager", (4, 0)).is_none());
        assert!(needed_at_start("spark.sql.extensions", (3, 5)).is_none());
        assert_eq!(
            edit_distance("SparkShuffleManager", "SparkShufleManager"),
            1
        );
    }
}
