//! Entry points for fuzzing the parsers of untrusted input (`fuzz/`, cargo-fuzz):
//! each takes arbitrary bytes and asserts the parser's own invariants, not only
//! that it does not panic. Built with the `fuzzing` feature (the fuzz targets) and
//! in tests, where the committed seed corpora replay through them.

mod checksums;
mod properties;
mod ranges;

pub use checksums::checksums;
pub use properties::properties;
pub use ranges::{content_range, range};

/// A fuzz entry point.
#[cfg(test)]
type Target = fn(&[u8]);

/// Every fuzz target by name, as `fuzz/fuzz_targets/<name>.rs` calls it.
#[cfg(test)]
const TARGETS: &[(&str, Target)] = &[
    ("checksums", checksums),
    ("content_range", content_range),
    ("properties", properties),
    ("range", range),
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
