//! The classpath doctor: whether the jars a run adds will work with the image's
//! Spark, said before a JVM starts. It reads jars' directories and embedded POMs
//! (no class is loaded) and reports findings, each with a stable identifier, a
//! severity, the jars involved and what to do. See docs/doctor.md.

mod checks;
mod classes;
pub(crate) mod image;
pub(crate) mod jar;
pub(crate) mod names;
mod render;

use std::path::PathBuf;

pub(crate) use image::Image;
use jar::Jar;

/// How bad a finding is. `Error`: the JVM will fail (or misbehave) with these
/// jars; `Warning`: it may; `Note`: worth knowing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Severity {
    Note,
    Warning,
    Error,
}

/// One finding.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct Finding {
    /// A stable identifier (docs/doctor.md lists them all).
    pub id: &'static str,
    pub severity: Severity,
    /// The jars involved (file names; image jars as `image:<name>`).
    pub jars: Vec<String>,
    pub message: String,
    /// What to do.
    pub advice: String,
    /// Classes involved (dotted names), the first few.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub classes: Vec<String>,
}

impl Finding {
    /// A finding without classes.
    pub(crate) fn new(
        id: &'static str,
        severity: Severity,
        jars: Vec<String>,
        message: String,
        advice: impl Into<String>,
    ) -> Finding {
        Finding {
            id,
            severity,
            jars,
            message,
            advice: advice.into(),
            classes: Vec::new(),
        }
    }

    /// The classes involved.
    pub(crate) fn with_classes(mut self, classes: Vec<String>) -> Finding {
        self.classes = classes;
        self
    }
}

/// How an added jar reaches the JVM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Reach {
    /// In the classpath fragment: on the JVM's classpath from its start.
    Classpath,
    /// Localized but on no classpath (`--files`, an archive without
    /// `--archive-classpath`).
    NotOnClasspath,
}

/// A jar the run adds.
#[derive(Debug)]
pub(crate) struct Added {
    pub jar: Jar,
    pub reach: Reach,
}

/// A jar the run adds, before it is read: where it is and how it reaches the JVM.
#[derive(Debug, Clone)]
pub(crate) struct AddedPath {
    pub path: PathBuf,
    pub reach: Reach,
}

/// What the doctor looks at.
pub(crate) struct Input<'a> {
    pub image: &'a Image,
    pub added: Vec<AddedPath>,
    /// Spark properties naming classes (`spark.plugins`, …), as given.
    pub properties: Vec<(String, String)>,
    /// `spark.jars` entries of the properties file this run does not localize
    /// (a flag or env gave the jars): Spark fetches them itself, after start-up.
    pub uninspected: Vec<String>,
}

/// The doctor's verdict.
#[derive(Debug, serde::Serialize)]
pub(crate) struct Diagnosis {
    pub image: ImageSummary,
    /// The added jars looked at.
    pub added: Vec<AddedSummary>,
    pub findings: Vec<Finding>,
}

/// The image as the doctor saw it.
#[derive(Debug, serde::Serialize)]
pub(crate) struct ImageSummary {
    pub dir: PathBuf,
    pub jars: usize,
    #[serde(flatten)]
    pub versions: image::Versions,
}

/// An added jar as the doctor saw it.
#[derive(Debug, serde::Serialize)]
pub(crate) struct AddedSummary {
    pub path: PathBuf,
    pub coordinates: String,
    pub reach: Reach,
}

impl Diagnosis {
    /// Whether any finding is an error.
    pub(crate) fn has_errors(&self) -> bool {
        self.findings.iter().any(|f| f.severity == Severity::Error)
    }

    /// How many findings of `severity`.
    pub(crate) fn count(&self, severity: Severity) -> usize {
        self.findings
            .iter()
            .filter(|f| f.severity == severity)
            .count()
    }

    /// The findings as text, one block each, most severe first.
    pub(crate) fn text(&self) -> String {
        render::text(self)
    }
}

/// Reads the added jars and checks them against the image. Blocking (reads
/// every jar's directory): run it off the async threads.
pub(crate) fn diagnose(input: Input<'_>) -> Diagnosis {
    let image = input.image;
    let mut findings = Vec::new();
    let mut added = Vec::new();
    for a in &input.added {
        if !a.path.exists() {
            // A local:// jar is in the main container's image, not in the init
            // container (nor on a laptop).
            findings.push(Finding::new(
                "jar-not-here",
                Severity::Note,
                vec![a.path.display().to_string()],
                format!(
                    "{} is not in this container (a local:// jar is in the main container's image): not looked into",
                    a.path.display()
                ),
                "run the doctor where the jar is (check --spark-home in the Spark image) to have it checked",
            ));
            continue;
        }
        match Jar::read(&a.path) {
            Ok(jar) => added.push(Added { jar, reach: a.reach }),
            Err(why) => findings.push(Finding::new(
                "unreadable-jar",
                Severity::Error,
                vec![a.path.display().to_string()],
                format!("{} cannot be read as a jar: {why}", a.path.display()),
                "the JVM cannot load classes from it either: check what the URI serves (an HTML error page, a truncated upload)",
            )),
        }
    }
    findings.extend(checks::image_versions(image));
    findings.extend(checks::versions(image, &added));
    findings.extend(classes::duplicates(image, &added));
    findings.extend(classes::named(
        image,
        &added,
        &input.properties,
        &input.uninspected,
    ));
    // Most severe first; within a severity, in the order found.
    findings.sort_by_key(|f| std::cmp::Reverse(f.severity));
    Diagnosis {
        image: ImageSummary {
            dir: image.dir.clone(),
            jars: image.jars.len(),
            versions: image.versions.clone(),
        },
        added: added
            .iter()
            .map(|a| AddedSummary {
                path: a.jar.path.clone(),
                coordinates: a.jar.coords.shown(),
                reach: a.reach,
            })
            .collect(),
        findings,
    }
}

/// The properties that name classes Spark loads: the keys the doctor checks.
pub(crate) fn class_properties(props: &crate::properties::Properties) -> Vec<(String, String)> {
    props
        .iter()
        .filter(|(k, _)| classes::names_classes(k))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// `image:<name>` for an image jar, the file name for an added one.
fn image_jar(name: &str) -> String {
    format!("image:{name}")
}
