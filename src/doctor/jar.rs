//! Reading a jar's directory: its classes (name, size and CRC-32 as the zip's
//! central directory records them, no byte decompressed), its embedded Maven
//! `pom.properties`, and on demand one small entry (a POM, the manifest).

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use super::names::{self, Coords};

/// The largest entry read whole (POMs, `pom.properties`, manifests).
const SMALL_ENTRY: u64 = 1 << 20;

/// A class file in a jar: its name (`org/apache/spark/SparkConf`, no `.class`),
/// uncompressed size and CRC-32.
#[derive(Debug, Clone)]
pub(crate) struct Class {
    pub name: Box<str>,
    pub size: u64,
    pub crc: u32,
}

/// One jar, read.
#[derive(Debug)]
pub(crate) struct Jar {
    pub path: PathBuf,
    /// The file name (`celeborn-client-spark-3-shaded_2.12-0.5.1.jar`).
    pub name: String,
    pub coords: Coords,
    /// Every `pom.properties` embedded (a shaded jar holds its dependencies' too).
    pub embedded: Vec<Coords>,
    pub classes: Vec<Class>,
}

impl Jar {
    /// Reads `path`'s central directory and its `pom.properties`; `Err` says why
    /// it is not a readable jar.
    pub(crate) fn read(path: &Path) -> Result<Jar, String> {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let file = File::open(path).map_err(|e| e.to_string())?;
        let mut zip = zip::ZipArchive::new(BufReader::new(file))
            .map_err(|e| format!("not a jar (zip) file: {e}"))?;
        let mut classes = Vec::new();
        let mut poms = Vec::new();
        for i in 0..zip.len() {
            let entry = zip.by_index_data(i).map_err(|e| e.to_string())?;
            let Ok(entry_name) = entry.name() else {
                continue;
            };
            if let Some(class) = class_name(&entry_name) {
                classes.push(Class {
                    name: class.into(),
                    size: entry.size(),
                    crc: entry.crc32(),
                });
            } else if entry_name.starts_with("META-INF/maven/")
                && entry_name.ends_with("/pom.properties")
            {
                poms.push(i);
            }
        }
        let embedded: Vec<Coords> = poms
            .into_iter()
            .filter_map(|i| small_entry(&mut zip, i))
            .filter_map(|text| pom_properties(&text))
            .collect();
        let coords = choose(&name, &embedded);
        Ok(Jar {
            path: path.to_owned(),
            name,
            coords,
            embedded,
            classes,
        })
    }

    /// One entry's text (at most 1 MiB), read again from the file.
    pub(crate) fn entry_text(&self, entry: &str) -> Option<String> {
        let file = File::open(&self.path).ok()?;
        let mut zip = zip::ZipArchive::new(BufReader::new(file)).ok()?;
        let index = zip.index_for_name(entry)?;
        small_entry(&mut zip, index)
    }

    /// Whether the jar holds `class` (slash form, no `.class`).
    pub(crate) fn has(&self, class: &str) -> bool {
        self.classes.iter().any(|c| &*c.name == class)
    }
}

/// The class name of a top-level class entry; `None` for anything else
/// (resources, `module-info`, `package-info`, multi-release versions).
fn class_name(entry: &str) -> Option<&str> {
    let name = entry.strip_suffix(".class")?;
    if entry.starts_with("META-INF/")
        || name.ends_with("module-info")
        || name.ends_with("package-info")
        || name.is_empty()
    {
        return None;
    }
    Some(name)
}

fn small_entry<R: Read + std::io::Seek>(
    zip: &mut zip::ZipArchive<R>,
    index: usize,
) -> Option<String> {
    let entry = zip.by_index(index).ok()?;
    if entry.size() > SMALL_ENTRY {
        return None;
    }
    let mut text = String::new();
    entry.take(SMALL_ENTRY).read_to_string(&mut text).ok()?;
    Some(text)
}

/// `groupId`, `artifactId`, `version` of a `pom.properties`.
fn pom_properties(text: &str) -> Option<Coords> {
    let props = crate::properties::Properties::parse(text).ok()?;
    let get = |k: &str| props.get(k).map(str::trim).filter(|v| !v.is_empty());
    Some(Coords {
        group: get("groupId").map(str::to_owned),
        artifact: get("artifactId")?.to_owned(),
        version: get("version").map(str::to_owned),
    })
}

/// The jar's own coordinates: the embedded `pom.properties` its file name is
/// named after (a shaded jar embeds many), the only one there is when the file
/// was renamed, or else what the file name says.
fn choose(file_name: &str, embedded: &[Coords]) -> Coords {
    let stem = file_name.strip_suffix(".jar").unwrap_or(file_name);
    let from_name = names::from_file_name(file_name);
    let named = embedded.iter().find(|c| {
        let full = format!(
            "{}-{}",
            c.artifact,
            c.version.as_deref().unwrap_or_default()
        );
        stem == c.artifact || stem.starts_with(&full)
    });
    if let Some(c) = named {
        return c.clone();
    }
    // `jackson-databind-2.x.jar`: the artifact's own, whatever the version says.
    if let [only] = embedded
        .iter()
        .filter(|c| c.artifact == from_name.artifact)
        .collect::<Vec<_>>()[..]
    {
        return only.clone();
    }
    // A renamed jar (`#s3a-1.0.jar`) with one embedded POM: that POM is its own.
    match embedded {
        [only] => only.clone(),
        _ => from_name,
    }
}

/// A `pom.xml`'s dependency version for `group:artifact`, when the POM states it
/// literally (`${…}` properties are the parent's to say: `None`).
pub(crate) fn pom_dependency_version(pom: &str, group: &str, artifact: &str) -> Option<String> {
    let doc = roxmltree::Document::parse(pom).ok()?;
    let child = |node: roxmltree::Node, name: &str| {
        node.children()
            .find(|c| c.tag_name().name() == name)
            .and_then(|c| c.text())
            .map(str::trim)
            .map(str::to_owned)
    };
    doc.descendants()
        .filter(|n| n.tag_name().name() == "dependency")
        .find(|d| {
            child(*d, "groupId").as_deref() == Some(group)
                && child(*d, "artifactId").as_deref() == Some(artifact)
        })
        .and_then(|d| child(d, "version"))
        .filter(|v| !v.contains("${"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn class_entries_only() {
        assert_eq!(class_name("org/a/B.class"), Some("org/a/B"));
        assert_eq!(class_name("org/a/B$1.class"), Some("org/a/B$1"));
        assert_eq!(class_name("module-info.class"), None);
        assert_eq!(class_name("org/a/package-info.class"), None);
        assert_eq!(class_name("META-INF/versions/11/org/a/B.class"), None);
        assert_eq!(class_name("org/a/B.txt"), None);
    }

    #[test]
    fn the_jars_own_pom_properties_win() {
        let c = |a: &str, v: &str| Coords {
            group: Some("g".into()),
            artifact: a.into(),
            version: Some(v.into()),
        };
        let embedded = [c("jetty-util", "9.4"), c("spark-core_2.12", "3.5.3")];
        assert_eq!(
            choose("spark-core_2.12-3.5.3.jar", &embedded).artifact,
            "spark-core_2.12"
        );
        // Renamed (an #alias): the only one there is.
        assert_eq!(
            choose("celeborn.jar", &embedded[1..]).artifact,
            "spark-core_2.12"
        );
        // Renamed to something version-like, one embedded: still the embedded one.
        assert_eq!(
            choose("s3a-1.0.jar", &embedded[1..]).artifact,
            "spark-core_2.12"
        );
        // Renamed, several embedded: the name, for want of better.
        assert_eq!(choose("x-1.0.jar", &embedded).artifact, "x");
    }

    #[test]
    fn literal_dependency_versions_only() {
        let pom = r#"<project><dependencies>
            <dependency><groupId>com.amazonaws</groupId><artifactId>aws-java-sdk-bundle</artifactId><version>1.12.262</version></dependency>
            <dependency><groupId>x</groupId><artifactId>y</artifactId><version>${y.version}</version></dependency>
        </dependencies></project>"#;
        assert_eq!(
            pom_dependency_version(pom, "com.amazonaws", "aws-java-sdk-bundle").as_deref(),
            Some("1.12.262")
        );
        assert_eq!(pom_dependency_version(pom, "x", "y"), None);
        assert_eq!(pom_dependency_version("not xml", "x", "y"), None);
    }
}
