//! What Maven repositories and users hand the resolver: POMs (and the
//! interpolation of their properties), `maven-metadata.xml`, version orders and
//! ranges, and coordinates.

use std::cmp::Ordering;

use crate::maven::coord::{glob, Coord, Exclusion};
use crate::maven::metadata;
use crate::maven::model::{interpolate, properties};
use crate::maven::pom;
use crate::maven::version::{ivy_cmp, maven_cmp, Requirement};

/// Fuzz entry point: a POM. An accepted one interpolates every value of every
/// dependency (its own properties naming each other any way they like) within
/// the bounds: 64 KiB per level, 32 levels, 4096 substitutions, so in bounded
/// time and to a bounded size.
pub fn pom(data: &[u8]) {
    let Ok(raw) = pom::parse(data) else {
        return;
    };
    let group = raw.group.clone().unwrap_or_else(|| "g".into());
    let version = raw.version.clone().unwrap_or_else(|| "1".into());
    let at = Coord::new(&group, &raw.artifact, &version);
    let props = properties(std::slice::from_ref(&raw), &group, &raw.artifact, &version);
    let bound = 33 * ((64 << 10) + data.len());
    for dep in raw.management.iter().chain(&raw.dependencies) {
        let values = [Some(&dep.group), Some(&dep.artifact)]
            .into_iter()
            .chain([&dep.version, &dep.kind, &dep.classifier, &dep.scope].map(Option::as_ref));
        for value in values.flatten() {
            if let Ok(out) = interpolate(value, &props, &at) {
                assert!(out.len() <= bound, "{} bytes from {value:?}", out.len());
            }
        }
    }
}

/// Fuzz entry point: a `maven-metadata.xml`. Every version it yields (listed or
/// timestamped) can name a directory and a file: no separator, no `..`, no
/// whitespace, no URL delimiter.
pub fn maven_metadata(data: &[u8]) {
    if let Ok(versions) = metadata::versions(data) {
        for v in &versions {
            assert!(metadata::usable_part(v), "{v:?}");
        }
    }
    for classifier in [None, Some("sources")] {
        let mut c = Coord::new("org.example", "a", "1.0-SNAPSHOT");
        c.classifier = classifier.map(str::to_owned);
        if let Ok(Some(v)) = metadata::snapshot_version(data, &c) {
            assert!(metadata::usable_part(&v), "{v:?}");
            let name = c.file_name_at(&v);
            assert!(
                !name.contains(['/', '\\']) && !name.starts_with('.'),
                "{name:?}"
            );
        }
    }
}

/// Fuzz entry point: lines of versions, the first a requirement. Both orders
/// are reflexive and antisymmetric. Neither is transitive on every input, and
/// neither reference is: Maven 3.8.7's `ComparableVersion` has `0-a0` < `` <
/// `v1.0` < `0-a0`, Ivy 2.5.1 has `3.5.03` = `3.5.3-SNAPSHOT` < `3.5.3` =
/// `3.5.03` (both found by this target, both checked against the real ones), so
/// transitivity is asserted only on versions of numbers (no leading zero) and dots. A range's pick
/// satisfies the range, and when every satisfying version is of digits and dots,
/// none is higher.
pub fn maven_version(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let mut lines = text.split('\n');
    let spec = lines.next().unwrap_or_default();
    let versions: Vec<String> = lines.take(8).map(str::to_owned).collect();
    // Numbers without leading zeros: Ivy has `1.1` = `01` = `1` < `1.1` too.
    let plain = |v: &str| {
        !v.is_empty()
            && v.split('.').all(|p| {
                !p.is_empty()
                    && p.len() < 10
                    && p.bytes().all(|b| b.is_ascii_digit())
                    && (p == "0" || !p.starts_with('0'))
            })
    };
    for cmp in [maven_cmp as fn(&str, &str) -> Ordering, ivy_cmp] {
        for a in &versions {
            assert_eq!(cmp(a, a), Ordering::Equal, "{a:?}");
            for b in &versions {
                let ab = cmp(a, b);
                assert_eq!(ab, cmp(b, a).reverse(), "{a:?} {b:?}");
                if !(plain(a) && plain(b)) {
                    continue;
                }
                for c in versions.iter().filter(|c| plain(c)) {
                    if ab != Ordering::Greater && cmp(b, c) != Ordering::Greater {
                        assert_ne!(cmp(a, c), Ordering::Greater, "{a:?} <= {b:?} <= {c:?}");
                    }
                }
            }
        }
    }
    let Ok(requirement) = Requirement::parse(spec) else {
        return;
    };
    let Requirement::Ranges(ranges) = &requirement else {
        assert!(requirement.pick(&versions).is_none());
        return;
    };
    assert!(!ranges.is_empty(), "{spec:?}");
    let satisfies = |v: &str| ranges.iter().any(|r| r.contains(v));
    match requirement.pick(&versions) {
        Some(picked) => {
            assert!(satisfies(picked), "{spec:?} picked {picked:?}");
            // (Maximal among them when the order is transitive on them.)
            let candidates: Vec<&String> = versions.iter().filter(|v| satisfies(v)).collect();
            let all_plain = candidates.iter().all(|v| plain(v));
            for v in candidates.into_iter().filter(|_| all_plain) {
                assert_ne!(
                    maven_cmp(v, picked),
                    Ordering::Greater,
                    "{spec:?}: {v:?} > {picked:?}"
                );
            }
        }
        None => assert!(!versions.iter().any(|v| satisfies(v)), "{spec:?}"),
    }
}

/// Fuzz entry point: a `--packages` or `--exclude-packages` entry. An accepted
/// coordinate writes back (`g:a:v[:c]`) to itself, and its path and file names
/// stay inside its directory; an exclusion writes back to itself and, without
/// glob syntax, matches its own group and artifact.
pub fn maven_coord(data: &[u8]) {
    let Ok(spec) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(c) = Coord::parse_package(spec) {
        assert_eq!(
            Coord::parse_package(&c.to_string()).as_ref(),
            Ok(&c),
            "{spec:?}"
        );
        for name in [c.file_name(), c.spark_name()] {
            assert!(
                !name.contains(['/', '\\']) && !name.starts_with('.'),
                "{name:?}"
            );
        }
        let path = c.path();
        assert!(
            path.split('/')
                .all(|p| !p.is_empty() && p != "." && p != ".."),
            "{path:?}"
        );
    }
    if let Ok(e) = Exclusion::parse(spec) {
        assert_eq!(
            Exclusion::parse(&e.to_string()).as_ref(),
            Ok(&e),
            "{spec:?}"
        );
        // Without glob syntax (`*`, `?`, `[…]`, as Ivy's glob matcher reads
        // it) a pattern is its own text.
        let literal = |s: &str| !s.contains(['*', '?', '[']);
        if literal(&e.group) && literal(&e.artifact) {
            assert!(e.matches(&e.group, &e.artifact), "{spec:?}");
        }
        assert!(glob("*", &e.group));
    }
}
