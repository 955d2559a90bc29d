//! The Hadoop configuration an HDFS client sees: `core-site.xml` and
//! `hdfs-site.xml` from `--hadoop-conf-dir` (else `HADOOP_CONF_DIR`, else
//! `$HADOOP_HOME/etc/hadoop`), overridden by the properties file's
//! `spark.hadoop.*` keys (as Spark does). Read here too (not only by
//! hdfs-native) to refuse a broken file up front, to name a nameservice's
//! NameNodes in errors, and to notice a Kerberos cluster.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::properties::Properties;

/// The properties-file prefix of Hadoop settings.
pub(crate) const SPARK_HADOOP_PREFIX: &str = "spark.hadoop.";

#[derive(Debug, Clone, Default)]
pub(crate) struct HadoopConf {
    /// The configuration directory and where it was named.
    pub dir: Option<(PathBuf, String)>,
    /// Keys from the directory's files, then the overrides.
    values: BTreeMap<String, String>,
    /// `spark.hadoop.*` keys with the prefix removed.
    pub overrides: BTreeMap<String, String>,
}

impl HadoopConf {
    /// Loads the directory's files (when there is a directory) and the overrides.
    /// `dir` is the flag's value with its origin; the environment is consulted after.
    pub(crate) fn load(
        dir: Option<(PathBuf, String)>,
        props: Option<&Properties>,
    ) -> Result<Self, String> {
        let dir = dir.or_else(|| {
            std::env::var_os(crate::env_vars::hadoop::CONF_DIR)
                .filter(|v| !v.is_empty())
                .map(|v| (PathBuf::from(v), "HADOOP_CONF_DIR".to_owned()))
                .or_else(|| {
                    std::env::var_os(crate::env_vars::hadoop::HOME)
                        .filter(|v| !v.is_empty())
                        .map(|v| (Path::new(&v).join("etc/hadoop"), "HADOOP_HOME".to_owned()))
                })
        });
        let mut values = BTreeMap::new();
        if let Some((path, origin)) = &dir {
            if !path.is_dir() {
                return Err(format!(
                    "{origin}: {} is not a readable directory",
                    path.display()
                ));
            }
            for file in ["core-site.xml", "hdfs-site.xml"] {
                let p = path.join(file);
                if p.exists() {
                    values.extend(read_site_file(&p)?);
                }
            }
        }
        let overrides: BTreeMap<String, String> = props
            .map(|p| {
                p.iter()
                    .filter_map(|(k, v)| {
                        k.strip_prefix(SPARK_HADOOP_PREFIX)
                            .filter(|k| !k.starts_with("fs.s3a."))
                            .map(|k| (k.to_owned(), v.trim().to_owned()))
                    })
                    .collect()
            })
            .unwrap_or_default();
        values.extend(overrides.clone());
        Ok(HadoopConf {
            dir,
            values,
            overrides,
        })
    }

    pub(crate) fn get(&self, key: &str) -> Option<&str> {
        self.values.get(key).map(String::as_str)
    }

    /// Whether the cluster wants Kerberos (`hadoop.security.authentication`).
    pub(crate) fn kerberos(&self) -> bool {
        self.get("hadoop.security.authentication")
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("kerberos"))
    }

    /// The NameNodes of `host` when it is a nameservice: `(id, address)` pairs.
    pub(crate) fn namenodes(&self, host: &str) -> Vec<(String, String)> {
        let is_service = self
            .get("dfs.nameservices")
            .is_some_and(|v| v.split(',').any(|s| s.trim() == host));
        if !is_service {
            return Vec::new();
        }
        self.get(&format!("dfs.ha.namenodes.{host}"))
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|id| !id.is_empty())
            .map(|id| {
                let addr = self
                    .get(&format!("dfs.namenode.rpc-address.{host}.{id}"))
                    .unwrap_or("no rpc-address")
                    .to_owned();
                (id.to_owned(), addr)
            })
            .collect()
    }
}

/// Reads a Hadoop `*-site.xml`: `<configuration><property><name/><value/>…`.
fn read_site_file(path: &Path) -> Result<Vec<(String, String)>, String> {
    let text = crate::util::fs::read_config_text(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    parse_site(&text).map_err(|e| format!("{} is not usable XML: {e}", path.display()))
}

/// The `(name, value)` pairs of a `*-site.xml`'s text, trimmed, in document order.
pub(crate) fn parse_site(text: &str) -> Result<Vec<(String, String)>, roxmltree::Error> {
    let doc = roxmltree::Document::parse(text)?;
    let mut out = Vec::new();
    for prop in doc.descendants().filter(|n| n.has_tag_name("property")) {
        // All the element's text (a comment may split it), as Hadoop reads it;
        // an empty element is an empty string.
        let child = |tag: &str| {
            prop.children().find(|c| c.has_tag_name(tag)).map(|c| {
                let text: String = c
                    .children()
                    .filter_map(|t| t.is_text().then(|| t.text()).flatten())
                    .collect();
                text.trim().to_owned()
            })
        };
        if let (Some(name), Some(value)) = (child("name"), child("value")) {
            out.push((name, value));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn site_values_are_all_their_text() {
        let pairs = parse_site(
            "<configuration><property><name> a </name><value>x<!-- c -->y<![CDATA[<z>]]></value></property>\
             <property><name>empty</name><value/></property><property><name>n</name></property></configuration>",
        )
        .unwrap();
        assert_eq!(
            pairs,
            [
                ("a".to_owned(), "xy<z>".to_owned()),
                ("empty".to_owned(), String::new())
            ]
        );
    }

    #[test]
    fn files_then_overrides_and_nameservices() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("core-site.xml"),
            "<configuration><property><name>fs.defaultFS</name><value>hdfs://ns1</value></property>\
             <property><name>hadoop.security.authentication</name><value>simple</value></property></configuration>",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("hdfs-site.xml"),
            "<?xml version=\"1.0\"?><configuration>\
             <property><name>dfs.nameservices</name><value>ns1</value></property>\
             <property><name>dfs.ha.namenodes.ns1</name><value>nn1, nn2</value></property>\
             <property><name>dfs.namenode.rpc-address.ns1.nn1</name><value>h1:8020</value></property>\
             <property><name>dfs.namenode.rpc-address.ns1.nn2</name><value>h2:8020</value></property>\
             </configuration>",
        )
        .unwrap();
        let props = Properties::parse(
            "spark.hadoop.hadoop.security.authentication=Kerberos\nspark.hadoop.fs.s3a.endpoint=x\n",
        )
        .unwrap();
        let c = HadoopConf::load(
            Some((dir.path().to_owned(), "--hadoop-conf-dir".into())),
            Some(&props),
        )
        .unwrap();
        assert!(c.kerberos());
        assert_eq!(c.get("fs.defaultFS"), Some("hdfs://ns1"));
        assert!(c.get("fs.s3a.endpoint").is_none());
        assert_eq!(
            c.namenodes("ns1"),
            vec![
                ("nn1".to_owned(), "h1:8020".to_owned()),
                ("nn2".to_owned(), "h2:8020".to_owned())
            ]
        );
        assert!(c.namenodes("h1").is_empty());

        std::fs::write(
            dir.path().join("core-site.xml"),
            "<configuration><property>",
        )
        .unwrap();
        let e = HadoopConf::load(Some((dir.path().to_owned(), "x".into())), None).unwrap_err();
        assert!(e.contains("core-site.xml is not usable XML"), "{e}");
    }
}
