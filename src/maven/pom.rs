//! One POM as written (before inheritance and interpolation): the parts
//! resolution reads. Parsed with roxmltree, which refuses DTDs (so no entity
//! expansion), after a size check; anything that is not a `<project>` (an HTML
//! error page served as a POM) is refused with what it looks like.

/// The largest POM read.
pub(crate) const MAX_POM: usize = 4 << 20;

/// A `<dependency>` as written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RawDep {
    pub group: String,
    pub artifact: String,
    pub version: Option<String>,
    pub kind: Option<String>,
    pub classifier: Option<String>,
    pub scope: Option<String>,
    pub optional: Option<String>,
    /// `(group, artifact)` patterns.
    pub exclusions: Vec<(String, String)>,
}

impl RawDep {
    /// What dependencyManagement entries are matched on: group, artifact, type,
    /// classifier.
    pub(crate) fn management_key(&self) -> (String, String, String, String) {
        (
            self.group.clone(),
            self.artifact.clone(),
            self.kind.clone().unwrap_or_else(|| "jar".into()),
            self.classifier.clone().unwrap_or_default(),
        )
    }
}

/// A `<parent>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RawParent {
    pub group: String,
    pub artifact: String,
    pub version: String,
}

/// `<distributionManagement><relocation>`: the parts given replace the module's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Relocation {
    pub group: Option<String>,
    pub artifact: Option<String>,
    pub version: Option<String>,
}

/// A POM as written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RawPom {
    pub group: Option<String>,
    pub artifact: String,
    pub version: Option<String>,
    pub packaging: Option<String>,
    pub parent: Option<RawParent>,
    /// In document order.
    pub properties: Vec<(String, String)>,
    pub management: Vec<RawDep>,
    pub dependencies: Vec<RawDep>,
    pub relocation: Option<Relocation>,
}

/// Parses POM bytes; the error says what is wrong and where (line).
pub(crate) fn parse(bytes: &[u8]) -> Result<RawPom, String> {
    if bytes.len() > MAX_POM {
        return Err(format!(
            "{} bytes, more than a POM ({MAX_POM} bytes at most)",
            bytes.len()
        ));
    }
    let decoded = decode(bytes)?;
    let text = decoded.trim_start_matches('\u{feff}');
    let doc = roxmltree::Document::parse(text).map_err(|e| {
        let looks_html = text.trim_start().get(..15).is_some_and(|head| {
            let head = head.to_ascii_lowercase();
            head.starts_with("<!doctype html") || head.starts_with("<html")
        });
        if looks_html {
            "an HTML page, not a POM (a repository's error or login page?)".to_owned()
        } else {
            format!("not well-formed XML: {e}")
        }
    })?;
    let root = doc.root_element();
    if root.tag_name().name() != "project" {
        return Err(format!(
            "the root element is <{}>, not <project> (line {})",
            root.tag_name().name(),
            doc.text_pos_at(root.range().start).row
        ));
    }
    let artifact =
        text_of(root, "artifactId").ok_or_else(|| "no <artifactId> in <project>".to_owned())?;
    let parent = child(root, "parent")
        .map(|p| -> Result<RawParent, String> {
            let line = doc.text_pos_at(p.range().start).row;
            let need = |name: &str| {
                text_of(p, name).ok_or_else(|| format!("<parent> (line {line}) has no <{name}>"))
            };
            Ok(RawParent {
                group: need("groupId")?,
                artifact: need("artifactId")?,
                version: need("version")?,
            })
        })
        .transpose()?;
    let properties = child(root, "properties")
        .map(|props| {
            props
                .children()
                .filter(|n| n.is_element())
                .map(|n| (n.tag_name().name().to_owned(), element_text(n)))
                .collect()
        })
        .unwrap_or_default();
    let deps_of = |node: Option<roxmltree::Node<'_, '_>>| -> Result<Vec<RawDep>, String> {
        let Some(deps) = node.and_then(|n| child(n, "dependencies")) else {
            return Ok(Vec::new());
        };
        deps.children()
            .filter(|n| n.is_element() && n.tag_name().name() == "dependency")
            .map(|d| dependency(&doc, d))
            .collect()
    };
    let management = deps_of(child(root, "dependencyManagement"))?;
    let dependencies = deps_of(Some(root))?;
    let relocation = child(root, "distributionManagement")
        .and_then(|d| child(d, "relocation"))
        .map(|r| Relocation {
            group: text_of(r, "groupId"),
            artifact: text_of(r, "artifactId"),
            version: text_of(r, "version"),
        });
    Ok(RawPom {
        group: text_of(root, "groupId"),
        artifact,
        version: text_of(root, "version"),
        packaging: text_of(root, "packaging"),
        parent,
        properties,
        management,
        dependencies,
        relocation,
    })
}

/// The POM's text: UTF-8, UTF-16 (with its byte order mark), or ISO-8859-1
/// (Latin-1, as older POMs declare) when the XML declaration says so.
fn decode(bytes: &[u8]) -> Result<String, String> {
    let utf16 = |le: bool| {
        let units: Vec<u16> = bytes[2..]
            .chunks_exact(2)
            .map(|c| {
                if le {
                    u16::from_le_bytes([c[0], c[1]])
                } else {
                    u16::from_be_bytes([c[0], c[1]])
                }
            })
            .collect();
        String::from_utf16(&units).map_err(|e| format!("not UTF-16: {e}"))
    };
    match bytes {
        [0xff, 0xfe, ..] => return utf16(true),
        [0xfe, 0xff, ..] => return utf16(false),
        _ => {}
    }
    let head = String::from_utf8_lossy(&bytes[..bytes.len().min(200)]).to_ascii_lowercase();
    let declared = head
        .split_once("encoding=")
        .and_then(|(_, rest)| rest.get(1..))
        .and_then(|rest| rest.split(['"', '\'']).next())
        .unwrap_or("utf-8")
        .to_owned();
    match declared.as_str() {
        "iso-8859-1" | "latin1" | "latin-1" | "iso8859-1" | "us-ascii" | "ascii" => {
            Ok(bytes.iter().map(|&b| char::from(b)).collect())
        }
        _ => String::from_utf8(bytes.to_vec()).map_err(|e| format!("not UTF-8: {e}")),
    }
}

fn dependency(doc: &roxmltree::Document<'_>, d: roxmltree::Node<'_, '_>) -> Result<RawDep, String> {
    let line = doc.text_pos_at(d.range().start).row;
    let need = |name: &str| {
        text_of(d, name).ok_or_else(|| format!("a <dependency> (line {line}) has no <{name}>"))
    };
    let exclusions = child(d, "exclusions")
        .map(|ex| {
            ex.children()
                .filter(|n| n.is_element() && n.tag_name().name() == "exclusion")
                .map(|e| {
                    (
                        text_of(e, "groupId").unwrap_or_else(|| "*".into()),
                        text_of(e, "artifactId").unwrap_or_else(|| "*".into()),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(RawDep {
        group: need("groupId")?,
        artifact: need("artifactId")?,
        version: text_of(d, "version"),
        kind: text_of(d, "type"),
        classifier: text_of(d, "classifier"),
        scope: text_of(d, "scope"),
        optional: text_of(d, "optional"),
        exclusions,
    })
}

fn child<'a, 'i>(node: roxmltree::Node<'a, 'i>, name: &str) -> Option<roxmltree::Node<'a, 'i>> {
    node.children()
        .find(|n| n.is_element() && n.tag_name().name() == name)
}

/// The trimmed text of child `name`, if present and not empty.
fn text_of(node: roxmltree::Node<'_, '_>, name: &str) -> Option<String> {
    child(node, name)
        .map(element_text)
        .filter(|t| !t.is_empty())
}

fn element_text(node: roxmltree::Node<'_, '_>) -> String {
    node.children()
        .filter(|n| n.is_text())
        .filter_map(|n| n.text())
        .collect::<String>()
        .trim()
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pom_with_everything() {
        let pom = br#"<?xml version="1.0"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <parent><groupId>org.x</groupId><artifactId>parent</artifactId><version>1</version></parent>
  <artifactId>child</artifactId>
  <packaging>bundle</packaging>
  <properties><guava.version>32.0</guava.version><empty/></properties>
  <dependencyManagement><dependencies>
    <dependency><groupId>org.x</groupId><artifactId>bom</artifactId><version>2</version><type>pom</type><scope>import</scope></dependency>
  </dependencies></dependencyManagement>
  <dependencies>
    <dependency>
      <groupId>com.google.guava</groupId><artifactId>guava</artifactId><version>${guava.version}</version>
      <exclusions><exclusion><groupId>*</groupId><artifactId>*</artifactId></exclusion></exclusions>
    </dependency>
    <dependency><groupId>junit</groupId><artifactId>junit</artifactId><scope>test</scope><optional>true</optional></dependency>
  </dependencies>
</project>"#;
        let p = parse(pom).unwrap();
        assert_eq!(p.group, None);
        assert_eq!(p.artifact, "child");
        assert_eq!(p.packaging.as_deref(), Some("bundle"));
        assert_eq!(p.parent.unwrap().artifact, "parent");
        assert_eq!(
            p.properties,
            vec![
                ("guava.version".into(), "32.0".into()),
                ("empty".into(), "".into())
            ]
        );
        assert_eq!(p.management[0].scope.as_deref(), Some("import"));
        assert_eq!(p.dependencies.len(), 2);
        assert_eq!(p.dependencies[0].exclusions, vec![("*".into(), "*".into())]);
        assert_eq!(p.dependencies[1].optional.as_deref(), Some("true"));
    }

    #[test]
    fn hostile_and_broken_poms_are_refused_clearly() {
        let html = b"<!DOCTYPE html><html><body>Login</body></html>";
        assert!(parse(html).unwrap_err().contains("HTML page"));
        let bomb = br#"<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;">]><project><artifactId>&lol2;</artifactId></project>"#;
        assert!(parse(bomb).is_err());
        let broken = b"<project>\n<artifactId>x</artifactId>\n<dependencies><dependency></project>";
        let err = parse(broken).unwrap_err();
        assert!(
            err.contains("not well-formed XML") && err.contains('3'),
            "{err}"
        );
        let no_group = b"<project><artifactId>x</artifactId><dependencies>\n<dependency><artifactId>y</artifactId></dependency></dependencies></project>";
        assert!(parse(no_group).unwrap_err().contains("line 2"));
        assert!(parse(b"<settings/>").unwrap_err().contains("<settings>"));
        let latin = b"<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?><project><artifactId>caf\xe9</artifactId></project>";
        assert_eq!(parse(latin).unwrap().artifact, "caf\u{e9}");
        let mut utf16 = vec![0xff, 0xfe];
        for unit in "<project><artifactId>x</artifactId></project>".encode_utf16() {
            utf16.extend(unit.to_le_bytes());
        }
        assert_eq!(parse(&utf16).unwrap().artifact, "x");
        let huge = vec![b' '; MAX_POM + 1];
        assert!(parse(&huge).unwrap_err().contains("more than a POM"));
    }
}
