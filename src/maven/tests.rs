//! The resolver against in-memory repositories: every POM semantic and every
//! hostile case, each in a few lines of POM.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use sha1::Digest;

use super::coord::{Coord, Exclusion};
use super::repo::{Repo, Transport, TransportError};
use super::*;

/// Files by URL; a URL listed in `down` does not answer; every GET is logged.
#[derive(Default)]
struct Mem {
    files: HashMap<String, Vec<u8>>,
    down: Vec<String>,
    log: Mutex<Vec<String>>,
    /// Times each GET yields before it answers (requests then overlap).
    yields: usize,
}

const REPO: &str = "http://repo.test/m2/";

impl Mem {
    fn pom(&mut self, gav: &str, body: &str) {
        let [g, a, v]: [&str; 3] = gav.split(':').collect::<Vec<_>>().try_into().unwrap();
        let c = Coord::new(g, a, v);
        let xml = format!(
            "<project><groupId>{g}</groupId><artifactId>{a}</artifactId><version>{v}</version>{body}</project>"
        );
        self.put(&c.pom().path(), xml.as_bytes(), true);
        self.put(&c.path(), format!("jar of {gav}").as_bytes(), true);
    }

    fn put(&mut self, path: &str, bytes: &[u8], sha1: bool) {
        self.files.insert(format!("{REPO}{path}"), bytes.to_vec());
        if sha1 {
            self.files.insert(
                format!("{REPO}{path}.sha1"),
                hex::encode(sha1::Sha1::digest(bytes)).into_bytes(),
            );
        }
    }

    fn gets(&self, suffix: &str) -> usize {
        self.log
            .lock()
            .unwrap()
            .iter()
            .filter(|u| u.ends_with(suffix))
            .count()
    }
}

#[async_trait]
impl Transport for Mem {
    async fn get(&self, url: &url::Url, limit: usize) -> Result<Option<Bytes>, TransportError> {
        self.log.lock().unwrap().push(url.to_string());
        for _ in 0..self.yields {
            tokio::task::yield_now().await;
        }
        if self.down.iter().any(|d| url.as_str().starts_with(d)) {
            return Err(TransportError::Unreachable("connection refused".into()));
        }
        match self.files.get(url.as_str()) {
            Some(b) if b.len() > limit => Err(TransportError::TooLarge(limit)),
            Some(b) => Ok(Some(Bytes::from(b.clone()))),
            None => Ok(None),
        }
    }
}

fn dep(gav: &str) -> String {
    let parts: Vec<&str> = gav.split(':').collect();
    let version = parts
        .get(2)
        .map(|v| format!("<version>{v}</version>"))
        .unwrap_or_default();
    format!(
        "<dependency><groupId>{}</groupId><artifactId>{}</artifactId>{version}</dependency>",
        parts[0], parts[1]
    )
}

fn deps(list: &[&str]) -> String {
    format!(
        "<dependencies>{}</dependencies>",
        list.iter().map(|d| dep(d)).collect::<String>()
    )
}

async fn run(
    mem: Mem,
    packages: &[&str],
    mode: Mode,
) -> (Result<Resolution, MavenError>, Arc<Mem>) {
    run_excluding(mem, packages, &[], mode).await
}

/// [`run`] with `--exclude-packages`.
async fn run_excluding(
    mem: Mem,
    packages: &[&str],
    excludes: &[&str],
    mode: Mode,
) -> (Result<Resolution, MavenError>, Arc<Mem>) {
    let mem = Arc::new(mem);
    let request = Request {
        packages: packages
            .iter()
            .map(|p| Coord::parse_package(p).unwrap())
            .collect(),
        repositories: vec![Repo::new(REPO).unwrap()],
        excludes: excludes
            .iter()
            .map(|e| Exclusion::parse(e).unwrap())
            .collect(),
        mode,
    };
    (resolve(&request, mem.clone()).await, mem)
}

fn names(r: &Resolution) -> Vec<String> {
    r.jars.iter().map(|j| j.coord.to_string()).collect()
}

#[tokio::test]
async fn parents_properties_boms_and_scopes() {
    let mut m = Mem::default();
    m.pom(
        "org.x:grand:1",
        "<packaging>pom</packaging><properties><lib.version>2.0</lib.version></properties>",
    );
    m.pom(
        "org.x:parent:1",
        "<packaging>pom</packaging><parent><groupId>org.x</groupId><artifactId>grand</artifactId><version>1</version></parent>\
         <dependencyManagement><dependencies>\
           <dependency><groupId>org.x</groupId><artifactId>bom</artifactId><version>${project.version}</version><type>pom</type><scope>import</scope></dependency>\
         </dependencies></dependencyManagement>",
    );
    m.pom(
        "org.x:bom:1",
        &format!(
            "<packaging>pom</packaging><dependencyManagement>{}</dependencyManagement>",
            deps(&["org.y:managed:3.1"])
        ),
    );
    m.pom(
        "org.x:app:1",
        "<parent><groupId>org.x</groupId><artifactId>parent</artifactId><version>1</version></parent>\
         <dependencies>\
           <dependency><groupId>org.y</groupId><artifactId>lib</artifactId><version>${lib.version}</version></dependency>\
           <dependency><groupId>org.y</groupId><artifactId>managed</artifactId></dependency>\
           <dependency><groupId>org.y</groupId><artifactId>rt</artifactId><version>1</version><scope>runtime</scope></dependency>\
           <dependency><groupId>org.y</groupId><artifactId>test</artifactId><version>1</version><scope>test</scope></dependency>\
           <dependency><groupId>org.y</groupId><artifactId>prov</artifactId><version>1</version><scope>provided</scope></dependency>\
           <dependency><groupId>org.y</groupId><artifactId>opt</artifactId><version>1</version><optional>true</optional></dependency>\
           <dependency><groupId>org.y</groupId><artifactId>types</artifactId><version>1</version><type>pom</type></dependency>\
         </dependencies>",
    );
    for gav in [
        "org.y:lib:2.0",
        "org.y:managed:3.1",
        "org.y:rt:1",
        "org.y:types:1",
    ] {
        m.pom(gav, "");
    }
    let (r, mem) = run(m, &["org.x:app:1"], Mode::Spark).await;
    let r = r.unwrap();
    assert_eq!(
        names(&r),
        vec![
            "org.x:app:1",
            "org.y:lib:2.0",
            "org.y:managed:3.1",
            "org.y:rt:1"
        ]
    );
    assert!(r.jars.iter().all(|j| j.sha1.is_some()));
    assert_eq!(r.jars[1].path, vec!["org.x:app:1".to_owned()]);
    assert_eq!(r.jars[0].coord.spark_name(), "org.x_app-1.jar");
    // Every POM once, however often it is needed.
    assert_eq!(mem.gets("/parent-1.pom"), 1);
    assert_eq!(
        r.tree,
        vec![
            "org.x:app:1:jar:compile",
            "+- org.y:lib:2.0:jar:compile",
            "+- org.y:managed:3.1:jar:compile",
            "+- org.y:rt:1:jar:runtime",
            "\\- org.y:types:1:pom:compile",
        ]
    );
}

#[tokio::test]
async fn conflicts_latest_for_spark_nearest_for_maven() {
    let mut m = Mem::default();
    // a -> b -> c:1 ; a -> d -> c:2 (same depth; c:1 first); c:1 -> only1
    m.pom("g:a:1", &deps(&["g:b:1", "g:d:1"]));
    m.pom("g:b:1", &deps(&["g:c:1"]));
    m.pom("g:d:1", &deps(&["g:c:2"]));
    m.pom("g:c:1", &deps(&["g:only1:1"]));
    m.pom("g:c:2", "");
    m.pom("g:only1:1", "");
    let mem = m;
    let (spark, _) = run(clone_mem(&mem), &["g:a:1"], Mode::Spark).await;
    let spark = spark.unwrap();
    assert_eq!(names(&spark), vec!["g:a:1", "g:b:1", "g:d:1", "g:c:2"]);
    assert!(
        spark.evicted[0].starts_with("g:c:1 -> 2"),
        "{:?}",
        spark.evicted
    );
    // c:2 is credited to d, which asked for it (not to b, which asked for c:1).
    let c = spark.jars.iter().find(|j| j.coord.artifact == "c").unwrap();
    assert_eq!(c.path, vec!["g:a:1".to_owned(), "g:d:1".to_owned()]);
    let (maven, _) = run(mem, &["g:a:1"], Mode::Maven).await;
    let maven = maven.unwrap();
    assert_eq!(
        names(&maven),
        vec!["g:a:1", "g:b:1", "g:d:1", "g:c:1", "g:only1:1"]
    );
    assert!(maven
        .tree
        .iter()
        .any(|l| l.contains("(g:c:2 - omitted for conflict with 1)")));
}

fn clone_mem(m: &Mem) -> Mem {
    Mem {
        files: m.files.clone(),
        down: m.down.clone(),
        log: Mutex::new(Vec::new()),
        yields: m.yields,
    }
}

#[tokio::test]
async fn exclusions_ranges_relocations_and_classifiers() {
    let mut m = Mem::default();
    m.pom(
        "g:a:1",
        "<dependencies>\
           <dependency><groupId>g</groupId><artifactId>b</artifactId><version>1</version>\
             <exclusions><exclusion><groupId>g</groupId><artifactId>x*</artifactId></exclusion></exclusions></dependency>\
           <dependency><groupId>g</groupId><artifactId>ranged</artifactId><version>[1.0,2.0)</version></dependency>\
           <dependency><groupId>g</groupId><artifactId>old</artifactId><version>1</version></dependency>\
           <dependency><groupId>g</groupId><artifactId>native</artifactId><version>1</version><classifier>linux</classifier></dependency>\
         </dependencies>",
    );
    m.pom("g:b:1", &deps(&["g:xa:1", "g:kept:1"]));
    m.pom("g:kept:1", "");
    m.put(
        "g/ranged/maven-metadata.xml",
        b"<metadata><versioning><versions><version>0.9</version><version>1.0</version><version>1.5</version><version>2.0</version></versions></versioning></metadata>",
        true,
    );
    m.pom("g:ranged:1.5", "");
    m.pom(
        "g:old:1",
        "<distributionManagement><relocation><groupId>g2</groupId></relocation></distributionManagement>",
    );
    m.pom("g2:old:1", "");
    m.pom("g:native:1", "");
    let (r, _) = run(m, &["g:a:1"], Mode::Spark).await;
    let r = r.unwrap();
    assert_eq!(
        names(&r),
        vec![
            "g:a:1",
            "g:b:1",
            "g:ranged:1.5",
            "g:native:1:linux",
            "g:kept:1",
            // A relocation is, as Ivy reads it, a dependency on the new
            // coordinates: one level further.
            "g2:old:1"
        ]
    );
}

#[tokio::test]
async fn spark_excludes_its_own_modules_and_scala_library() {
    let mut m = Mem::default();
    m.pom(
        "g:a:1",
        &deps(&[
            "org.apache.spark:spark-core_2.12:3.5.1",
            "org.scala-lang:scala-library:2.12.18",
            "org.apache.spark:spark-avro_2.12:3.5.1",
        ]),
    );
    m.pom("org.apache.spark:spark-avro_2.12:3.5.1", "");
    let (r, _) = run(m, &["g:a:1"], Mode::Spark).await;
    assert_eq!(
        names(&r.unwrap()),
        vec!["g:a:1", "org.apache.spark:spark-avro_2.12:3.5.1"]
    );
}

#[tokio::test]
async fn hostile_repositories_fail_clearly() {
    // A missing dependency names the coordinate, the path and the repository.
    let mut m = Mem::default();
    m.pom("g:a:1", &deps(&["g:b:1"]));
    m.pom("g:b:1", &deps(&["g:gone:1"]));
    let (r, _) = run(m, &["g:a:1"], Mode::Spark).await;
    let e = r.unwrap_err().to_string();
    assert!(
        e.contains("cannot find the POM of g:gone:1 (required by g:b:1 <- g:a:1 <- --packages)")
            && e.contains("http://repo.test/m2/: not found"),
        "{e}"
    );
    // A parent cycle, a property cycle.
    let mut m = Mem::default();
    m.pom(
        "g:p:1",
        "<parent><groupId>g</groupId><artifactId>q</artifactId><version>1</version></parent>",
    );
    m.pom(
        "g:q:1",
        "<parent><groupId>g</groupId><artifactId>p</artifactId><version>1</version></parent>",
    );
    let (r, _) = run(m, &["g:p:1"], Mode::Spark).await;
    assert!(r.unwrap_err().to_string().contains("cycle"));
    let mut m = Mem::default();
    m.pom(
        "g:a:1",
        "<properties><x>${y}</x><y>${x}</y></properties><dependencies><dependency><groupId>g</groupId><artifactId>b</artifactId><version>${x}</version></dependency></dependencies>",
    );
    let (r, _) = run(m, &["g:a:1"], Mode::Spark).await;
    assert!(r.unwrap_err().to_string().contains("refers to itself"));
    // An HTML page as a POM; a damaged POM (sha1 mismatch).
    let mut m = Mem::default();
    m.put(
        "g/a/1/a-1.pom",
        b"<!DOCTYPE html><html><body>Sign in</body></html>",
        false,
    );
    let (r, _) = run(m, &["g:a:1"], Mode::Spark).await;
    let e = r.unwrap_err().to_string();
    assert!(e.contains("a-1.pom: an HTML page, not a POM"), "{e}");
    let mut m = Mem::default();
    m.pom("g:a:1", "");
    m.files.insert(
        format!("{REPO}g/a/1/a-1.pom.sha1"),
        b"0000000000000000000000000000000000000000".to_vec(),
    );
    let (r, _) = run(m, &["g:a:1"], Mode::Spark).await;
    let e = r.unwrap_err();
    assert!(matches!(e, MavenError::Integrity(_)), "{e}");
    // A POM may not lead requests out of the repository.
    let mut m = Mem::default();
    m.pom("g:a:1", &deps(&["g:e/../../../../x:1"]));
    let (r, mem) = run(m, &["g:a:1"], Mode::Spark).await;
    let e = r.unwrap_err().to_string();
    assert!(e.contains("artifactId 'e/../../../../x'"), "{e}");
    assert!(
        mem.log.lock().unwrap().iter().all(|u| u.starts_with(REPO)),
        "{:?}",
        mem.log
    );
    // A range nothing satisfies.
    let mut m = Mem::default();
    m.pom("g:a:1", &deps(&["g:r:[5,6)"]));
    m.put(
        "g/r/maven-metadata.xml",
        b"<metadata><versioning><versions><version>1</version></versions></versioning></metadata>",
        false,
    );
    let (r, _) = run(m, &["g:a:1"], Mode::Spark).await;
    let e = r.unwrap_err().to_string();
    // (The metadata was found: no "tried:" list.)
    assert!(!e.contains("tried"), "{e}");
    assert!(
        e.contains("a version of g:r in [5,6) (available: 1)"),
        "{e}"
    );
}

/// Versions come from POMs and metadata too: none may be a path. (Found while
/// writing the fuzz targets' invariants: only groupId, artifactId, type and
/// classifier were checked, so `<version>../../../../x</version>` led requests out
/// of the repository and into the jar's file name.)
#[tokio::test]
async fn versions_from_repositories_are_never_paths() {
    let in_repo = |mem: &Mem| {
        let log = mem.log.lock().unwrap();
        assert!(
            log.iter().all(|u| u.starts_with(REPO) && !u.contains("..")),
            "{log:?}"
        );
    };
    // A dependency's version.
    let mut m = Mem::default();
    m.pom("g:a:1", &deps(&["g:b:../../../../x"]));
    let (r, mem) = run(m, &["g:a:1"], Mode::Spark).await;
    let e = r.unwrap_err().to_string();
    assert!(e.contains("version '../../../../x' cannot be one"), "{e}");
    in_repo(&mem);
    // A parent's version.
    let mut m = Mem::default();
    m.pom(
        "g:a:1",
        "<parent><groupId>g</groupId><artifactId>p</artifactId><version>1/../../evil</version></parent>",
    );
    let (r, mem) = run(m, &["g:a:1"], Mode::Maven).await;
    let e = r.unwrap_err().to_string();
    assert!(
        e.contains("version '1/../../evil', which cannot be part of a repository path"),
        "{e}"
    );
    in_repo(&mem);
    // A range resolved through metadata listing a path: that entry is never picked.
    let mut m = Mem::default();
    m.pom("g:a:1", &deps(&["g:r:[1,)"]));
    m.pom("g:r:1.5", "");
    m.put(
        "g/r/maven-metadata.xml",
        b"<metadata><versioning><versions><version>1.5</version><version>9/../../../../x</version><version>9 z</version></versions></versioning></metadata>",
        false,
    );
    let (r, mem) = run(m, &["g:a:1"], Mode::Spark).await;
    assert_eq!(names(&r.unwrap()), ["g:a:1", "g:r:1.5"]);
    in_repo(&mem);
}

/// A range whose module no repository has metadata for names what each
/// repository answered (QA found an empty "tried:" list); one that the metadata
/// cannot satisfy lists the versions and no "tried:" (in
/// `hostile_repositories_fail_clearly`).
#[tokio::test]
async fn an_unsatisfied_range_says_what_was_tried() {
    let mut m = Mem::default();
    m.pom("g:a:1", &deps(&["g:nope:[1,2)"]));
    let (r, _) = run(m, &["g:a:1"], Mode::Spark).await;
    let e = r.unwrap_err().to_string();
    assert!(
        e.contains("no repository lists them")
            && e.ends_with("tried: http://repo.test/m2/: not found"),
        "{e}"
    );
}

/// Properties that name each other many times over take a bounded number of
/// substitutions, even when they expand to nothing (time exponential in the
/// nesting otherwise: 40^5 here).
#[tokio::test]
async fn interpolation_takes_bounded_work() {
    let mut props = String::from("<properties><p0></p0>");
    for i in 1..6 {
        props += &format!("<p{i}>{}</p{i}>", format!("${{p{}}}", i - 1).repeat(40));
    }
    props += "</properties>";
    let mut m = Mem::default();
    m.pom(
        "g:a:1",
        &format!("{props}<dependencies><dependency><groupId>g</groupId><artifactId>b${{p5}}</artifactId><version>1</version></dependency></dependencies>"),
    );
    let started = std::time::Instant::now();
    let (r, _) = run(m, &["g:a:1"], Mode::Spark).await;
    let e = r.unwrap_err().to_string();
    assert!(e.contains("more than 4096 substitutions"), "{e}");
    // Named as the POM wrote it: the property its value names, not the
    // innermost one the limit was met in.
    assert!(e.contains("the property p5 (through ${p4}"), "{e}");
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    // Two names of a 60 KiB value in one: past the limit too.
    let mut m = Mem::default();
    m.pom(
        "g:a:1",
        &format!(
            "<properties><p0>{}</p0></properties><dependencies><dependency><groupId>g</groupId><artifactId>b</artifactId><version>${{p0}}${{p0}}</version></dependency></dependencies>",
            "x".repeat(60_000)
        ),
    );
    let (r, _) = run(m, &["g:a:1"], Mode::Spark).await;
    let e = r.unwrap_err().to_string();
    assert!(
        e.contains("expands to more than 64 KiB") && e.len() < 1000,
        "{}",
        &e[..e.len().min(300)]
    );
}

#[tokio::test]
async fn an_unreachable_repository_is_tried_once() {
    let mut m = Mem::default();
    m.pom("g:a:1", &deps(&["g:b:1", "g:c:1"]));
    m.pom("g:b:1", "");
    m.pom("g:c:1", "");
    m.down.push("http://down.test/".into());
    let mem = Arc::new(m);
    let request = Request {
        packages: vec![Coord::parse_package("g:a:1").unwrap()],
        repositories: vec![
            Repo::new("http://down.test/maven2").unwrap(),
            Repo::new(REPO).unwrap(),
        ],
        excludes: vec![Exclusion::parse("g:c").unwrap()],
        mode: Mode::Spark,
    };
    let r = resolve(&request, mem.clone()).await.unwrap();
    assert_eq!(names(&r), vec!["g:a:1", "g:b:1"]);
    // Asked once: for the first POM and its .sha1 (at once), never after.
    let down: Vec<String> = mem
        .log
        .lock()
        .unwrap()
        .iter()
        .filter(|u| u.starts_with("http://down.test/"))
        .cloned()
        .collect();
    assert_eq!(
        down,
        vec![
            "http://down.test/maven2/g/a/1/a-1.pom",
            "http://down.test/maven2/g/a/1/a-1.pom.sha1"
        ]
    );
}

#[tokio::test]
async fn snapshots_resolve_to_their_timestamped_files() {
    let mut m = Mem::default();
    m.put(
        "g/snap/1.0-SNAPSHOT/maven-metadata.xml",
        b"<metadata><versioning><snapshotVersions>\
            <snapshotVersion><extension>jar</extension><value>1.0-20240102.030405-7</value></snapshotVersion>\
            <snapshotVersion><extension>pom</extension><value>1.0-20240102.030405-7</value></snapshotVersion>\
          </snapshotVersions></versioning></metadata>",
        true,
    );
    m.put(
        "g/snap/1.0-SNAPSHOT/snap-1.0-20240102.030405-7.pom",
        b"<project><groupId>g</groupId><artifactId>snap</artifactId><version>1.0-SNAPSHOT</version></project>",
        true,
    );
    m.put(
        "g/snap/1.0-SNAPSHOT/snap-1.0-20240102.030405-7.jar",
        b"jar",
        true,
    );
    // An old-style one: <snapshot><timestamp/><buildNumber/>.
    m.put(
        "g/old/2-SNAPSHOT/maven-metadata.xml",
        b"<metadata><versioning><snapshot><timestamp>20200101.000000</timestamp><buildNumber>3</buildNumber></snapshot></versioning></metadata>",
        true,
    );
    m.put(
        "g/old/2-SNAPSHOT/old-2-20200101.000000-3.pom",
        b"<project><groupId>g</groupId><artifactId>old</artifactId><version>2-SNAPSHOT</version></project>",
        true,
    );
    m.put("g/old/2-SNAPSHOT/old-2-20200101.000000-3.jar", b"jar", true);
    let (r, _) = run(m, &["g:snap:1.0-SNAPSHOT", "g:old:2-SNAPSHOT"], Mode::Spark).await;
    let r = r.unwrap();
    let urls: Vec<String> = r.jars.iter().map(|j| j.url.to_string()).collect();
    assert_eq!(
        urls,
        vec![
            format!("{REPO}g/snap/1.0-SNAPSHOT/snap-1.0-20240102.030405-7.jar"),
            format!("{REPO}g/old/2-SNAPSHOT/old-2-20200101.000000-3.jar"),
        ]
    );
    assert_eq!(r.jars[0].coord.spark_name(), "g_snap-1.0-SNAPSHOT.jar");
}

#[tokio::test]
async fn a_module_asked_for_with_a_classifier_adds_that_jar() {
    let mut m = Mem::default();
    m.pom(
        "g:a:1",
        "<dependencies>\
           <dependency><groupId>g</groupId><artifactId>lib</artifactId><version>1</version></dependency>\
           <dependency><groupId>g</groupId><artifactId>lib</artifactId><version>1</version><classifier>natives</classifier></dependency>\
         </dependencies>",
    );
    m.pom("g:lib:1", "");
    m.put("g/lib/1/lib-1-natives.jar", b"natives", true);
    for mode in [Mode::Spark, Mode::Maven] {
        let (r, _) = run(clone_mem(&m), &["g:a:1"], mode).await;
        assert_eq!(
            names(&r.unwrap()),
            vec!["g:a:1", "g:lib:1", "g:lib:1:natives"]
        );
    }
}

#[tokio::test]
async fn spark_and_maven_precedence_of_direct_versions_and_boms() {
    let mut m = Mem::default();
    // root2 -> c:1 and root2 -> x -> c:2: Ivy keeps the version root2 declares.
    m.pom("t:root2:1", &deps(&["t:c:1", "t:x:1"]));
    m.pom("t:x:1", &deps(&["t:c:2"]));
    m.pom("t:c:1", &deps(&["t:e:1"]));
    m.pom("t:c:2", &deps(&["t:f:1"]));
    m.pom("t:e:1", "");
    m.pom("t:f:1", "");
    // Two BOMs managing c: Maven keeps the first import, Ivy the last; the POM's
    // own management beats both, whatever the order.
    m.pom(
        "t:bom1:1",
        &format!(
            "<packaging>pom</packaging><dependencyManagement>{}</dependencyManagement>",
            deps(&["t:c:1"])
        ),
    );
    m.pom(
        "t:bom2:1",
        &format!(
            "<packaging>pom</packaging><dependencyManagement>{}</dependencyManagement>",
            deps(&["t:c:2"])
        ),
    );
    let import = |bom: &str| {
        format!("<dependency><groupId>t</groupId><artifactId>{bom}</artifactId><version>1</version><type>pom</type><scope>import</scope></dependency>")
    };
    let uses = "<dependencies><dependency><groupId>t</groupId><artifactId>c</artifactId></dependency></dependencies>";
    m.pom(
        "t:use12:1",
        &format!(
            "<dependencyManagement><dependencies>{}{}</dependencies></dependencyManagement>{uses}",
            import("bom1"),
            import("bom2")
        ),
    );
    m.pom(
        "t:local:1",
        &format!(
            "<dependencyManagement><dependencies>{}{}</dependencies></dependencyManagement>{uses}",
            import("bom2"),
            dep("t:c:1")
        ),
    );
    let jars = |r: Resolution| names(&r);
    let (r, _) = run(clone_mem(&m), &["t:root2:1"], Mode::Spark).await;
    assert_eq!(
        jars(r.unwrap()),
        vec!["t:root2:1", "t:c:1", "t:x:1", "t:e:1"]
    );
    let (r, _) = run(clone_mem(&m), &["t:use12:1"], Mode::Spark).await;
    assert_eq!(jars(r.unwrap()), vec!["t:use12:1", "t:c:2", "t:f:1"]);
    let (r, _) = run(clone_mem(&m), &["t:use12:1"], Mode::Maven).await;
    assert_eq!(jars(r.unwrap()), vec!["t:use12:1", "t:c:1", "t:e:1"]);
    for mode in [Mode::Spark, Mode::Maven] {
        let (r, _) = run(clone_mem(&m), &["t:local:1"], mode).await;
        assert_eq!(jars(r.unwrap()), vec!["t:local:1", "t:c:1", "t:e:1"]);
    }
}

#[tokio::test]
async fn a_wildcard_exclusion_matching_its_own_dependency_drops_it_in_spark_mode() {
    let mut m = Mem::default();
    m.pom(
        "t:wild:1",
        "<dependencies><dependency><groupId>t.e</groupId><artifactId>b</artifactId><version>1</version>\
           <exclusions><exclusion><groupId>t.e</groupId><artifactId>*</artifactId></exclusion></exclusions>\
         </dependency></dependencies>",
    );
    m.pom("t.e:b:1", "");
    let (r, _) = run(clone_mem(&m), &["t:wild:1"], Mode::Spark).await;
    assert_eq!(names(&r.unwrap()), vec!["t:wild:1"]);
    let (r, _) = run(m, &["t:wild:1"], Mode::Maven).await;
    assert_eq!(names(&r.unwrap()), vec!["t:wild:1", "t.e:b:1"]);
}

/// A dependency with exclusions, for the lattices below.
fn dep_excluding(gav: &str, excluded: &[&str]) -> String {
    let exclusions: String = excluded
        .iter()
        .map(|e| {
            let (g, a) = e.split_once(':').unwrap();
            format!("<exclusion><groupId>{g}</groupId><artifactId>{a}</artifactId></exclusion>")
        })
        .collect();
    dep(gav).replace(
        "</dependency>",
        &format!("<exclusions>{exclusions}</exclusions></dependency>"),
    )
}

/// The shape that was exponential in `spark` mode (one set of exclusions per
/// path, 2^L of them): a 2-wide, L-deep lattice where one module of each pair
/// excludes another artifact, every leaf needing all of them. Polynomial in
/// both modes now; bounded by a generous timeout so that a regression fails
/// instead of hanging the suite. Ivy's rule: an artifact is left out only where
/// every path excludes it, so the path through the `b`s keeps every `x`.
#[tokio::test]
async fn exclusion_lattices_resolve_in_polynomial_time() {
    const L: usize = 22;
    let mut m = Mem::default();
    for i in 0..L {
        let (a, b) = (format!("g:a{}:1", i + 1), format!("g:b{}:1", i + 1));
        let excluding = format!("g:x{i}");
        m.pom(
            &format!("g:a{i}:1"),
            &format!(
                "<dependencies>{}{}</dependencies>",
                dep_excluding(&a, &[&excluding]),
                dep_excluding(&b, &["g:y"])
            ),
        );
        m.pom(&format!("g:b{i}:1"), &deps(&[&a, &b]));
        m.pom(&format!("g:x{i}:1"), "");
    }
    let xs: Vec<String> = (0..L).map(|i| format!("g:x{i}:1")).collect();
    let xs: Vec<&str> = xs.iter().map(String::as_str).collect();
    m.pom(&format!("g:a{L}:1"), &deps(&xs));
    m.pom(&format!("g:b{L}:1"), &deps(&xs));
    for mode in [Mode::Spark, Mode::Maven] {
        let started = std::time::Instant::now();
        let run = run(clone_mem(&m), &["g:a0:1", "g:b0:1"], mode);
        let (r, mem) = tokio::time::timeout(std::time::Duration::from_secs(120), run)
            .await
            .unwrap_or_else(|_| panic!("{mode:?}: the lattice did not resolve in 120 s"));
        let r = r.unwrap();
        let got = names(&r);
        if mode == Mode::Spark {
            for x in &xs {
                assert!(got.iter().any(|n| n == x), "{x} missing: {got:?}");
            }
            assert_eq!(got.len(), 2 * (L + 1) + L, "{got:?}");
        } else {
            // Maven: the nearest path to each leaf (through the `a`s, then a
            // `b` at the last level) excludes all but the last `x`.
            assert_eq!(got.len(), 2 * (L + 1) + 1, "{got:?}");
        }
        // Each POM read once, whatever the number of paths.
        assert_eq!(mem.gets("/g/a7/1/a7-1.pom"), 1);
        eprintln!("{mode:?}: L={L} in {:?}", started.elapsed());
    }
    // Wider and with wildcards: every module of a level excludes `*` of
    // another group, and a diamond below each.
    let mut m = Mem::default();
    let width = 6;
    for i in 0..12 {
        for j in 0..width {
            let below: Vec<String> = (0..width)
                .map(|k| dep_excluding(&format!("g:m{}-{k}:1", i + 1), &[&format!("e{j}:*")]))
                .collect();
            m.pom(
                &format!("g:m{i}-{j}:1"),
                &format!("<dependencies>{}</dependencies>", below.concat()),
            );
        }
    }
    for j in 0..width {
        m.pom(&format!("g:m12-{j}:1"), &deps(&[&format!("e{j}:z:1")]));
        m.pom(&format!("e{j}:z:1"), "");
    }
    for mode in [Mode::Spark, Mode::Maven] {
        let run = run(clone_mem(&m), &["g:m0-0:1", "g:m0-1:1"], mode);
        let (r, _) = tokio::time::timeout(std::time::Duration::from_secs(120), run)
            .await
            .unwrap_or_else(|_| panic!("{mode:?}: the wide lattice did not resolve in 120 s"));
        let got = names(&r.unwrap());
        // Two paths into every module excluding different groups: nothing is
        // excluded everywhere in `spark` mode.
        if mode == Mode::Spark {
            assert_eq!(got.len(), 2 + 12 * width + width, "{got:?}");
        }
    }
}

/// `--exclude-packages` (and Spark's own excludes) apply to the packages asked
/// for too, as Spark puts them on the module that asks: nothing may remain.
#[tokio::test]
async fn excludes_apply_to_the_packages_asked_for() {
    let mut m = Mem::default();
    m.pom("org.slf4j:slf4j-api:1", "");
    m.pom(
        "org.slf4j:jul-to-slf4j:1",
        &deps(&["org.slf4j:slf4j-api:1"]),
    );
    let resolve_with = |excludes: &'static [&'static str], packages: &'static [&'static str]| {
        let mem = clone_mem(&m);
        async move {
            let (r, _) = run_excluding(mem, packages, excludes, Mode::Spark).await;
            names(&r.unwrap())
        }
    };
    assert_eq!(
        resolve_with(
            &["org.slf4j:slf4j-api"],
            &["org.slf4j:slf4j-api:1", "org.slf4j:jul-to-slf4j:1"]
        )
        .await,
        vec!["org.slf4j:jul-to-slf4j:1"]
    );
    assert!(resolve_with(&["*:*"], &["org.slf4j:jul-to-slf4j:1"])
        .await
        .is_empty());
    assert!(
        resolve_with(&[], &["org.apache.spark:spark-core_2.12:3.5.3"])
            .await
            .is_empty()
    );
}

/// A classifier asked of a version that loses, as Spark 3.5's Ivy (2.5.1)
/// treats it: carried (with the main jar) to the winner only when the winner is
/// a package declared before the one whose dependencies ask for it, and no POM
/// asked for it first. Each case as Spark 3.5.3 resolved it.
#[tokio::test]
async fn a_classifier_of_an_evicted_version_follows_ivy() {
    let mut m = Mem::default();
    m.pom(
        "g:mid:1",
        "<dependencies><dependency><groupId>g</groupId><artifactId>lib</artifactId>\
         <version>1.0</version><classifier>cls</classifier></dependency></dependencies>",
    );
    m.pom("g:top:1", &deps(&["g:mid:1"]));
    m.pom("g:mid2:1", &deps(&["g:lib:2.0"]));
    m.pom("g:top2:1", &deps(&["g:mid2:1"]));
    m.pom("g:lib:1.0", "");
    m.pom("g:lib:2.0", "");
    m.put("g/lib/1.0/lib-1.0-cls.jar", b"cls 1", true);
    m.put("g/lib/2.0/lib-2.0-cls.jar", b"cls 2", true);
    for (packages, lib) in [
        (&["g:mid:1", "g:lib:2.0"][..], &["g:lib:2.0"][..]),
        (&["g:lib:2.0", "g:mid:1"], &["g:lib:2.0", "g:lib:2.0:cls"]),
        (&["g:lib:2.0", "g:top:1"], &["g:lib:2.0", "g:lib:2.0:cls"]),
        (&["g:top2:1", "g:mid:1"], &["g:lib:2.0"]),
    ] {
        let (r, _) = run(clone_mem(&m), packages, Mode::Spark).await;
        let got: Vec<String> = names(&r.unwrap())
            .into_iter()
            .filter(|n| n.starts_with("g:lib:"))
            .collect();
        assert_eq!(got, lib, "{packages:?}");
    }
}

/// A package declared twice: when its first declaration asks for the version
/// that loses, Spark's Ivy retrieves the winner's dependencies but not its jar,
/// unless a POM asks for the module too. Each case as Spark 3.5.3 resolved it.
#[tokio::test]
async fn a_package_declared_twice_follows_ivy() {
    let mut m = Mem::default();
    for v in ["1", "2", "3"] {
        m.pom(&format!("g:m:{v}"), &deps(&["g:dep:1"]));
    }
    m.pom("g:dep:1", "");
    m.pom("g:user:1", &deps(&["g:m:3"]));
    m.pom("g:user2:1", &deps(&["g:m:2"]));
    for (packages, m_jar) in [
        (&["g:m:1", "g:m:2"][..], None),
        (&["g:m:2", "g:m:1"], Some("g:m:2")),
        (&["g:m:2", "g:m:1", "g:m:3"], None),
        (&["g:m:3", "g:m:1", "g:m:2"], Some("g:m:3")),
        (&["g:m:1", "g:m:2", "g:user2:1"], Some("g:m:2")),
        (&["g:m:1", "g:m:2", "g:user:1"], Some("g:m:3")),
    ] {
        let (r, _) = run(clone_mem(&m), packages, Mode::Spark).await;
        let got = names(&r.unwrap());
        let ms: Vec<&String> = got.iter().filter(|n| n.starts_with("g:m:")).collect();
        assert_eq!(
            ms.first().map(|s| s.as_str()),
            m_jar,
            "{packages:?}: {got:?}"
        );
        assert!(got.iter().any(|n| n == "g:dep:1"), "{packages:?}: {got:?}");
    }
}

/// Spark's dynamic revisions in --packages and in POMs, picked from
/// maven-metadata.xml in Ivy's order; `[x]` is x without any listing; a
/// repository that lists nothing is named.
#[tokio::test]
async fn dynamic_revisions_resolve_as_spark_does() {
    let mut m = Mem::default();
    for v in ["4.0", "4.2.3", "4.10", "5.0-rc1", "5.1-SNAPSHOT"] {
        m.pom(&format!("g:lib:{v}"), "");
    }
    m.put(
        "g/lib/maven-metadata.xml",
        b"<metadata><versioning><versions><version>4.0</version><version>4.2.3</version><version>4.10</version><version>5.0-rc1</version><version>5.1-SNAPSHOT</version></versions></versioning></metadata>",
        true,
    );
    m.pom("g:user:1", &deps(&["g:lib:4.+"]));
    m.pom("g:nolist:1", "");
    for (package, want) in [
        ("g:lib:4.+", "g:lib:4.10"),
        ("g:lib:latest.release", "g:lib:5.0-rc1"),
        ("g:lib:latest.integration", "g:lib:5.1-SNAPSHOT"),
        ("g:lib:+", "g:lib:5.1-SNAPSHOT"),
        ("g:lib:[4.2.3]", "g:lib:4.2.3"),
        ("g:user:1", "g:lib:4.10"),
    ] {
        let (r, _) = run(clone_mem(&m), &[package], Mode::Spark).await;
        let got = names(&r.unwrap());
        assert!(got.iter().any(|n| n == want), "{package}: {got:?}");
    }
    let (r, _) = run(clone_mem(&m), &["g:nolist:1.+"], Mode::Spark).await;
    let e = r.unwrap_err().to_string();
    assert!(e.contains("no repository lists them"), "{e}");
    let (r, _) = run(clone_mem(&m), &["g:lib:4.+"], Mode::Maven).await;
    let e = r.unwrap_err().to_string();
    assert!(e.contains("--resolution spark"), "{e}");
}

/// Two BOMs that import each other, asked for at once (two packages, and the
/// POMs fetched ahead of the walk): a cycle named, not two builds waiting on
/// each other until the deadline.
#[tokio::test]
async fn boms_importing_each_other_are_a_cycle_not_a_hang() {
    let mut m = Mem::default();
    let import = |gav: &str| {
        let [g, a, v]: [&str; 3] = gav.split(':').collect::<Vec<_>>().try_into().unwrap();
        format!("<dependencyManagement><dependencies><dependency><groupId>{g}</groupId><artifactId>{a}</artifactId><version>{v}</version><type>pom</type><scope>import</scope></dependency></dependencies></dependencyManagement>")
    };
    m.pom("g:a:1", &format!("{}{}", import("g:b:1"), deps(&["g:b:1"])));
    m.pom("g:b:1", &format!("{}{}", import("g:a:1"), deps(&["g:a:1"])));
    m.yields = 3;
    for packages in [&["g:a:1", "g:b:1"][..], &["g:a:1"]] {
        let run = run(clone_mem(&m), packages, Mode::Spark);
        let (r, _) = tokio::time::timeout(std::time::Duration::from_secs(60), run)
            .await
            .expect("a cycle of imports hung");
        let e = r.unwrap_err().to_string();
        assert!(e.contains("cycle"), "{e}");
    }
}
