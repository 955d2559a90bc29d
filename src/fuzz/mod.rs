//! Entry points for fuzzing the parsers of untrusted input (`fuzz/`, cargo-fuzz):
//! each takes arbitrary bytes and asserts the parser's own invariants, not only
//! that it does not panic. Built with the `fuzzing` feature (the fuzz targets) and
//! in tests, where the committed seed corpora replay through them.

mod archive;
mod checksums;
mod hdfs;
mod maven;
mod maven_graph;
mod oci;
mod openpgp;
mod properties;
mod ranges;
mod retry_after;
mod secrets;
mod upload;

pub use archive::archive;
pub use checksums::checksums;
pub use hdfs::{hadoop_conf, hadoop_token, hdfs_warning, kerberos_files};
pub use maven::{maven_coord, maven_metadata, maven_version, pom};
pub use maven_graph::maven_graph;
pub use oci::{oci_manifest, oci_reference, www_authenticate};
pub use openpgp::openpgp;
pub use properties::properties;
pub use ranges::{content_range, range};
pub use retry_after::retry_after;
pub use secrets::secret_files;
pub use upload::upload;

/// A fuzz entry point.
#[cfg(test)]
type Target = fn(&[u8]);

/// Every fuzz target by name, as `fuzz/fuzz_targets/<name>.rs` calls it.
#[cfg(test)]
const TARGETS: &[(&str, Target)] = &[
    ("archive", archive),
    ("checksums", checksums),
    ("content_range", content_range),
    ("hadoop_conf", hadoop_conf),
    ("hadoop_token", hadoop_token),
    ("hdfs_warning", hdfs_warning),
    ("kerberos_files", kerberos_files),
    ("maven_coord", maven_coord),
    ("maven_graph", maven_graph),
    ("maven_metadata", maven_metadata),
    ("maven_version", maven_version),
    ("oci_manifest", oci_manifest),
    ("oci_reference", oci_reference),
    ("openpgp", openpgp),
    ("pom", pom),
    ("properties", properties),
    ("range", range),
    ("retry_after", retry_after),
    ("secret_files", secret_files),
    ("upload", upload),
    ("www_authenticate", www_authenticate),
];

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// The committed seed corpora (`fuzz/corpus/<target>/`) replay through their
    /// targets on every test run: the invariants hold on every seed, and each target
    /// has seeds.
    #[test]
    fn the_seed_corpora_hold_every_invariant() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus");
        for (name, target) in super::TARGETS {
            let dir = root.join(name);
            let seeds: Vec<_> = std::fs::read_dir(&dir)
                .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
                .map(|entry| entry.unwrap().path())
                .collect();
            assert!(!seeds.is_empty(), "no seeds in {}", dir.display());
            for seed in seeds {
                let data = std::fs::read(&seed).unwrap();
                let outcome = std::panic::catch_unwind(|| target(&data));
                assert!(
                    outcome.is_ok(),
                    "{name}: {} breaks an invariant",
                    seed.display()
                );
            }
        }
    }

    /// `fuzz/Cargo.lock` is the root `Cargo.lock` plus libFuzzer's crates: every
    /// crate both use is at the version that ships.
    #[test]
    fn the_fuzz_lock_file_pins_what_ships() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let packages = |file: &str| -> Vec<(String, String)> {
            let text = std::fs::read_to_string(root.join(file)).unwrap();
            text.split("[[package]]")
                .skip(1)
                .map(|block| {
                    let field = |key: &str| {
                        block
                            .lines()
                            .find_map(|l| l.strip_prefix(&format!("{key} = \"")))
                            .and_then(|v| v.strip_suffix('"'))
                            .unwrap()
                            .to_owned()
                    };
                    (field("name"), field("version"))
                })
                .collect()
        };
        let shipped = packages("Cargo.lock");
        let fuzzed = packages("fuzz/Cargo.lock");
        assert!(fuzzed.len() > 100);
        for (name, version) in &fuzzed {
            let versions: Vec<&String> = shipped
                .iter()
                .filter(|(n, _)| n == name)
                .map(|(_, v)| v)
                .collect();
            assert!(
                versions.is_empty() || versions.contains(&version),
                "fuzz/Cargo.lock has {name} {version}, Cargo.lock {versions:?}"
            );
        }
        let only_fuzzed: Vec<&str> = fuzzed
            .iter()
            .filter(|(n, _)| !shipped.iter().any(|(s, _)| s == n))
            .map(|(n, _)| n.as_str())
            .collect();
        for name in &only_fuzzed {
            assert!(
                [
                    "arbitrary",
                    "libfuzzer-sys",
                    "spark-localizer-fuzz",
                    "jobserver",
                    "cc",
                    "shlex",
                    "find-msvc-tools"
                ]
                .contains(name),
                "{name} is only in fuzz/Cargo.lock"
            );
        }
    }

    /// Each fuzz target file calls the entry point of its name.
    #[test]
    fn every_target_has_a_fuzz_target_file() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/fuzz_targets");
        for (name, _) in super::TARGETS {
            let file = dir.join(format!("{name}.rs"));
            let text = std::fs::read_to_string(&file)
                .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            assert!(
                text.contains(&format!("spark_localizer::fuzz::{name}(data)")),
                "{}",
                file.display()
            );
        }
    }
}
