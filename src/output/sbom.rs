//! The CycloneDX 1.6 SBOM of what a run put in place (`spark-localizer-sbom.cdx.json`):
//! one component per localized artifact with its SHA-256 and a purl, spark-localizer
//! as the tool, and the dependency graph of resolved packages.
//!
//! It is a pure function of the artifacts: no timestamp, a `serialNumber` derived
//! from the content, file names but no local path, URLs without userinfo, query or
//! fragment (a presigned URL's signature is in its query). The same inputs give the
//! same bytes, so an image that carries it stays reproducible.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::engine::Outcome;
use crate::maven::coord::Coord;
use crate::maven::lock::Locked;
use crate::maven::signatures::Check;
use crate::maven::Resolution;
use crate::plan::{Kind, Plan};

/// The tool's name, in the SBOM and in what [`written_by_us`] looks for.
const TOOL: &str = "spark-localizer";

/// The CycloneDX document.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Bom {
    #[serde(rename = "$schema")]
    schema: &'static str,
    bom_format: &'static str,
    spec_version: &'static str,
    serial_number: String,
    version: u32,
    metadata: Metadata,
    components: Vec<Component>,
    dependencies: Vec<Dependency>,
}

#[derive(Debug, Clone, Serialize)]
struct Metadata {
    tools: Tools,
}

#[derive(Debug, Clone, Serialize)]
struct Tools {
    components: Vec<Tool>,
}

#[derive(Debug, Clone, Serialize)]
struct Tool {
    #[serde(rename = "type")]
    kind: &'static str,
    name: &'static str,
    version: &'static str,
}

/// One localized artifact.
#[derive(Debug, Clone, Serialize)]
struct Component {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(rename = "bom-ref")]
    bom_ref: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    group: Option<String>,
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    version: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    hashes: Vec<Hash>,
    purl: String,
    properties: Vec<Property>,
}

#[derive(Debug, Clone, Serialize)]
struct Hash {
    alg: &'static str,
    content: String,
}

#[derive(Debug, Clone, Serialize)]
struct Property {
    name: &'static str,
    value: String,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
struct Dependency {
    #[serde(rename = "ref")]
    of: String,
    depends_on: Vec<String>,
}

/// What one component is made from.
struct Item {
    kind: Kind,
    /// The file name it was published under.
    name: String,
    sha256: Option<String>,
    from: From,
}

/// Where an artifact came from, as far as the SBOM tells.
enum From {
    /// A Maven module: its coordinate, the modules that pulled it in, root first, and
    /// what its signatures' check found (`--verify-signatures`).
    Maven {
        coord: Coord,
        path: Vec<String>,
        signature: Option<Check>,
    },
    /// A URL (already redacted), or nothing worth naming (a local file, a
    /// staging bundle's file).
    Url(Option<String>),
}

/// The SBOM of a run: every artifact of `plan` that was localized (in plan
/// order; a staging bundle's files one by one), jars that `resolution` (the
/// packages resolved in the run, or the `--lock` read) names described by
/// their coordinates and linked by the path that pulled them in.
pub(crate) fn document(plan: &Plan, outcomes: &[Outcome], resolution: Option<&Resolution>) -> Bom {
    let by_name: HashMap<String, &crate::maven::Resolved> = resolution
        .iter()
        .flat_map(|r| &r.jars)
        .map(|jar| (jar.coord.spark_name(), jar))
        .collect();
    let mut items = Vec::new();
    for (a, o) in plan.artifacts.iter().zip(outcomes) {
        if o.failure.is_some() {
            continue;
        }
        if let Some(files) = o.bundle_files.as_ref().filter(|_| a.is_bundle()) {
            items.extend(files.iter().map(|f| Item {
                kind: if a.kind == Kind::Jar {
                    Kind::Jar
                } else {
                    Kind::File
                },
                name: f.name.clone(),
                sha256: Some(f.sha256.clone()),
                from: From::Url(None),
            }));
            continue;
        }
        let maven = by_name.get(&a.name).filter(|_| a.kind == Kind::Jar);
        // A `bundle` image's layer: the digest fetched is the layer's; the
        // component is the file it held (a tree has no one hash).
        let sha256 = match a.unpack.as_ref().filter(|u| u.strip.is_some()) {
            Some(u) => crate::layout::hash_file(&u.into)
                .ok()
                .map(|(_, digest)| hex::encode(digest)),
            None => o.sha256.clone(),
        };
        items.push(Item {
            kind: a.kind,
            name: a.name.clone(),
            sha256,
            from: match maven {
                Some(jar) => From::Maven {
                    coord: jar.coord.clone(),
                    path: jar.path.clone(),
                    signature: jar.signature.clone(),
                },
                None => From::Url(download_url(&a.display_uri)),
            },
        });
    }
    Bom::of(items)
}

/// The SBOM of `resolve`: the jars of the lockfile, in its order.
pub(crate) fn of_lock(locked: &[Locked]) -> Bom {
    Bom::of(
        locked
            .iter()
            .map(|l| Item {
                kind: Kind::Jar,
                name: l.jar.coord.spark_name(),
                sha256: Some(hex::encode(l.sha256)),
                from: From::Maven {
                    coord: l.jar.coord.clone(),
                    path: l.jar.path.clone(),
                    signature: l.jar.signature.clone(),
                },
            })
            .collect(),
    )
}

impl Bom {
    fn of(items: Vec<Item>) -> Bom {
        let mut seen = HashSet::new();
        let components: Vec<Component> = items
            .iter()
            .map(|item| component(item, &mut seen))
            .collect();
        let dependencies = graph(&items, &components);
        let tool = Tool {
            kind: "application",
            name: TOOL,
            version: env!("CARGO_PKG_VERSION"),
        };
        let content =
            serde_json::to_vec(&(&tool, &components, &dependencies)).expect("the SBOM serializes");
        Bom {
            schema: "http://cyclonedx.org/schema/bom-1.6.schema.json",
            bom_format: "CycloneDX",
            spec_version: "1.6",
            serial_number: serial_number(&content),
            version: 1,
            metadata: Metadata {
                tools: Tools {
                    components: vec![tool],
                },
            },
            components,
            dependencies,
        }
    }

    /// The document as written: pretty JSON, newline-terminated.
    pub(crate) fn to_json(&self) -> Vec<u8> {
        let mut out = serde_json::to_vec_pretty(self).expect("the SBOM serializes");
        out.push(b'\n');
        out
    }
}

/// The component of `item`; its `bom-ref` is `<kind>/<name>` (`jars/x.jar`),
/// made unique with `#2`, `#3`… should two items share it.
fn component(item: &Item, seen: &mut HashSet<String>) -> Component {
    let dir = match item.kind {
        Kind::Jar => "jars",
        Kind::File => "files",
        Kind::Archive => "archives",
    };
    let base = format!("{dir}/{}", item.name);
    let mut bom_ref = base.clone();
    let mut n = 1;
    while !seen.insert(bom_ref.clone()) {
        n += 1;
        bom_ref = format!("{base}#{n}");
    }
    let (group, name, version, purl) = match &item.from {
        From::Maven { coord, .. } => (
            Some(coord.group.clone()),
            coord.artifact.clone(),
            Some(coord.version.clone()),
            maven_purl(coord),
        ),
        From::Url(url) => (
            None,
            item.name.clone(),
            None,
            generic_purl(&item.name, url.as_deref()),
        ),
    };
    Component {
        kind: if item.kind == Kind::Jar {
            "library"
        } else {
            "file"
        },
        bom_ref,
        group,
        name,
        version,
        hashes: item
            .sha256
            .iter()
            .map(|content| Hash {
                alg: "SHA-256",
                content: content.clone(),
            })
            .collect(),
        purl,
        properties: properties(item, dir),
    }
}

/// The component's `spark-localizer:` properties: its kind and file, and for a jar whose
/// signatures were checked, its signer's fingerprint and user id, or why it is unverified.
fn properties(item: &Item, dir: &str) -> Vec<Property> {
    let mut all = vec![
        Property {
            name: "spark-localizer:kind",
            value: dir.to_owned(),
        },
        Property {
            name: "spark-localizer:file",
            value: item.name.clone(),
        },
    ];
    if let From::Maven {
        signature: Some(check),
        ..
    } = &item.from
    {
        match check {
            Check::Signed(signer) => {
                all.push(Property {
                    name: "spark-localizer:signed-by",
                    value: signer.fingerprint.clone(),
                });
                if let Some(uid) = &signer.user_id {
                    all.push(Property {
                        name: "spark-localizer:signer",
                        value: uid.clone(),
                    });
                }
            }
            Check::Unverified(why) => all.push(Property {
                name: "spark-localizer:unverified",
                value: why.clone(),
            }),
        }
    }
    all
}

/// Every component, with what it depends on: a jar pulled in by a module
/// depends from that module's jar (the nearest module on its path that has
/// one), in component order; components without dependencies have an empty list.
fn graph(items: &[Item], components: &[Component]) -> Vec<Dependency> {
    // A module's jar: the one without a classifier, else its first.
    let mut module_jar: HashMap<String, usize> = HashMap::new();
    for plain in [true, false] {
        for (i, item) in items.iter().enumerate() {
            if let From::Maven { coord, .. } = &item.from {
                if coord.classifier.is_none() == plain {
                    let module = format!("{}:{}:{}", coord.group, coord.artifact, coord.version);
                    module_jar.entry(module).or_insert(i);
                }
            }
        }
    }
    let mut children: Vec<Vec<String>> = vec![Vec::new(); items.len()];
    for (i, item) in items.iter().enumerate() {
        let From::Maven { path, .. } = &item.from else {
            continue;
        };
        let parent = path
            .iter()
            .rev()
            .filter_map(|m| module_jar.get(module_of(m)).copied())
            .find(|&p| p != i);
        if let Some(p) = parent {
            let child = &components[i].bom_ref;
            if !children[p].contains(child) {
                children[p].push(child.clone());
            }
        }
    }
    components
        .iter()
        .zip(children)
        .map(|(c, depends_on)| Dependency {
            of: c.bom_ref.clone(),
            depends_on,
        })
        .collect()
}

/// `g:a:v` of a path entry (`g:a:v` or `g:a:v:classifier`).
fn module_of(entry: &str) -> &str {
    match entry.match_indices(':').nth(2) {
        Some((at, _)) => &entry[..at],
        None => entry,
    }
}

/// A UUID (version 5 layout, RFC 9562 variant) from the SHA-256 of `content`.
fn serial_number(content: &[u8]) -> String {
    let mut b: [u8; 16] = Sha256::digest(content)[..16].try_into().expect("16 bytes");
    b[6] = (b[6] & 0x0f) | 0x50;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = hex::encode(b);
    format!(
        "urn:uuid:{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

/// Left as they are in a purl's namespace, name and version: the unreserved
/// characters and `:`; everything else is percent-encoded (UTF-8).
const PURL_PART: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~')
    .remove(b':');
/// In a qualifier's value `/` stays too.
const PURL_VALUE: &AsciiSet = &PURL_PART.remove(b'/');

fn encode(s: &str, set: &'static AsciiSet) -> String {
    utf8_percent_encode(s, set).to_string()
}

/// Qualifiers sorted by key, values encoded; empty values left out.
fn qualifiers(mut pairs: Vec<(&str, String)>) -> String {
    pairs.retain(|(_, v)| !v.is_empty());
    pairs.sort();
    let joined: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("{k}={}", encode(v, PURL_VALUE)))
        .collect();
    if joined.is_empty() {
        String::new()
    } else {
        format!("?{}", joined.join("&"))
    }
}

/// `pkg:maven/<group>/<artifact>@<version>`, with `classifier` and `type` (when
/// not `jar`) as qualifiers.
fn maven_purl(coord: &Coord) -> String {
    let mut pairs = Vec::new();
    if let Some(c) = &coord.classifier {
        pairs.push(("classifier", c.clone()));
    }
    if coord.ext != "jar" {
        pairs.push(("type", coord.ext.clone()));
    }
    format!(
        "pkg:maven/{}/{}@{}{}",
        encode(&coord.group, PURL_PART),
        encode(&coord.artifact, PURL_PART),
        encode(&coord.version, PURL_PART),
        qualifiers(pairs)
    )
}

/// `pkg:generic/<name>`, with `download_url` when there is one.
fn generic_purl(name: &str, url: Option<&str>) -> String {
    let pairs = url
        .map(|u| vec![("download_url", u.to_owned())])
        .unwrap_or_default();
    format!(
        "pkg:generic/{}{}",
        encode(name, PURL_PART),
        qualifiers(pairs)
    )
}

/// Where an artifact can be downloaded, as the SBOM may say it: no userinfo, no
/// query (a presigned URL's signature), no fragment; none for what is not
/// fetched over a network (`file://`, `local://`) or needs a secret to name
/// (`staging://`).
fn download_url(uri: &str) -> Option<String> {
    let mut url = url::Url::parse(uri).ok()?;
    if matches!(url.scheme(), "file" | "local" | "staging") {
        return None;
    }
    let _ = url.set_username("");
    let _ = url.set_password(None);
    url.set_query(None);
    url.set_fragment(None);
    Some(url.to_string())
}

/// Whether `path` holds an SBOM spark-localizer wrote: a failed run removes an
/// earlier run's, never a file of someone else's that `--sbom` happens to name.
pub(crate) fn written_by_us(path: &Path) -> bool {
    let Ok(bytes) = crate::util::fs::read_regular(path, 256 << 20) else {
        return false;
    };
    let Ok(doc) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
        return false;
    };
    doc["bomFormat"] == "CycloneDX" && doc["metadata"]["tools"]["components"][0]["name"] == TOOL
}

#[cfg(test)]
mod tests;
