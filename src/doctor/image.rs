//! The image's jars (`$SPARK_HOME/jars`) and the versions they say: Spark,
//! Scala, Hadoop.

use std::path::{Path, PathBuf};

use super::jar::Jar;
use super::names::{self, Coords};

/// The image's jars, read, and what they say.
#[derive(Debug)]
pub(crate) struct Image {
    pub dir: PathBuf,
    pub jars: Vec<Jar>,
    /// Jars that could not be read: name and why.
    pub unreadable: Vec<(String, String)>,
    /// Entries named `*.jar` that are not files (a directory, a FIFO, a
    /// symbolic link that leads nowhere): name and what they are.
    pub skipped: Vec<Skipped>,
    pub versions: Versions,
}

/// The versions the image's jars say, each with the jar it was read from.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub(crate) struct Versions {
    /// Spark (`spark-core_<scala>`'s version).
    pub spark: Option<String>,
    /// The Scala binary version (`2.12`), from spark-core's name or scala-library.
    pub scala: Option<String>,
    /// scala-library's full version (`2.12.18`).
    pub scala_library: Option<String>,
    /// Hadoop (hadoop-client-api's, or hadoop-common's, version).
    pub hadoop: Option<String>,
}

impl Versions {
    /// Spark's `(major, minor)`.
    pub(crate) fn spark_line(&self) -> Option<(u32, u32)> {
        names::major_minor(self.spark.as_deref()?)
    }

    /// One line: `Spark 3.5.3, Scala 2.12 (2.12.18), Hadoop 3.3.4`.
    pub(crate) fn shown(&self) -> String {
        let or = |v: &Option<String>| v.clone().unwrap_or_else(|| "unknown".to_owned());
        let scala = match (&self.scala, &self.scala_library) {
            (Some(b), Some(full)) if full != b => format!("{b} ({full})"),
            (b, full) => or(&b.clone().or(full.clone())),
        };
        format!(
            "Spark {}, Scala {scala}, Hadoop {}",
            or(&self.spark),
            or(&self.hadoop)
        )
    }
}

impl Image {
    /// Reads every `*.jar` directly in `dir`, sorted by name. `Err` when `dir`
    /// cannot be listed.
    pub(crate) fn read(dir: &Path) -> Result<Image, String> {
        let (paths, skipped) = jar_paths(dir).map_err(|e| e.to_string())?;
        let mut jars = Vec::new();
        let mut unreadable = Vec::new();
        for path in paths {
            match Jar::read(&path) {
                Ok(jar) => jars.push(jar),
                Err(why) => unreadable.push((
                    path.file_name()
                        .unwrap_or_default()
                        .to_string_lossy()
                        .into_owned(),
                    why,
                )),
            }
        }
        let versions = versions(&jars);
        Ok(Image {
            dir: dir.to_owned(),
            jars,
            unreadable,
            skipped,
            versions,
        })
    }
}

/// An entry named `*.jar` that is not a file: its name and what it is.
pub(crate) type Skipped = (String, String);

/// The `*.jar` entries directly in `dir`, sorted by name: the regular files
/// (symbolic links followed), and the others (a directory, a FIFO, a link that
/// leads nowhere) with why they are skipped.
pub(crate) fn jar_paths(dir: &Path) -> std::io::Result<(Vec<PathBuf>, Vec<Skipped>)> {
    let mut paths = Vec::new();
    let mut skipped = Vec::new();
    for entry in std::fs::read_dir(dir)?.filter_map(|e| e.ok()) {
        let path = entry.path();
        if !path
            .extension()
            .is_some_and(|x| x.eq_ignore_ascii_case("jar"))
        {
            continue;
        }
        match not_a_file(&path) {
            None => paths.push(path),
            Some(why) => skipped.push((entry.file_name().to_string_lossy().into_owned(), why)),
        }
    }
    paths.sort();
    skipped.sort();
    Ok((paths, skipped))
}

/// Why `path` is not a regular file (after symbolic links), or `None` when it is.
fn not_a_file(path: &Path) -> Option<String> {
    use std::os::unix::fs::FileTypeExt;
    let t = match std::fs::metadata(path) {
        Ok(m) => m.file_type(),
        Err(e) => return Some(format!("a symbolic link that leads to no file ({e})")),
    };
    let what = if t.is_file() {
        return None;
    } else if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_block_device() || t.is_char_device() {
        "a device"
    } else {
        "not a regular file"
    };
    Some(what.to_owned())
}

/// What the jars say of Spark, Scala and Hadoop.
fn versions(jars: &[Jar]) -> Versions {
    let find = |pred: &dyn Fn(&Coords) -> bool| -> Option<&Coords> {
        jars.iter().map(|j| &j.coords).find(|c| pred(c))
    };
    let core = find(&|c| c.base() == "spark-core" && c.scala().is_some());
    let library = find(&|c| c.artifact == "scala-library" || c.artifact == "scala3-library_3");
    let hadoop = find(&|c| c.artifact == "hadoop-client-api")
        .or_else(|| find(&|c| c.artifact == "hadoop-common"))
        .and_then(|c| c.version.clone())
        .or_else(|| {
            // hadoop-client-api embeds hadoop-common's pom.properties.
            jars.iter()
                .flat_map(|j| &j.embedded)
                .find(|c| c.artifact == "hadoop-common")
                .and_then(|c| c.version.clone())
        });
    let scala_library = library.and_then(|c| c.version.clone());
    let scala = core.and_then(|c| c.scala()).map(str::to_owned).or_else(|| {
        scala_library
            .as_deref()
            .and_then(names::major_minor)
            .map(|(a, b)| {
                if a >= 3 {
                    a.to_string()
                } else {
                    format!("{a}.{b}")
                }
            })
    });
    Versions {
        spark: core.and_then(|c| c.version.clone()),
        scala,
        scala_library,
        hadoop,
    }
}
