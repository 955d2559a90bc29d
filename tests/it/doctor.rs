//! The classpath doctor (`check --spark-home`, `fetch --doctor-jars`) against a real
//! Spark's jars (pyspark 3.5.3: Spark 3.5.3, Scala 2.12, Hadoop 3.3.4): every finding
//! fires on a set of jars that should trigger it and stays silent on a clean one.
//!
//! The added jars are small zips assembled here (classes compiled once per test binary
//! by `javac`, `META-INF/maven/<g>/<a>/pom.properties` where a case needs coordinates),
//! Debian's jackson-databind 2.14.0 (the image has 2.15.2) and a byte-for-byte copy of
//! one of the image's own jars. They are served with file:// URIs, and over HTTP where
//! `check`'s temporary download is the point.
//!
//! Needs `SPARK_LOCALIZER_TEST_SPARK_HOME` (`bash scripts/setup/spark.sh`, last line)
//! and a JDK; without them each test prints "SKIP:" locally and fails under CI.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::Value;

use crate::support::{assert_no_secrets, s, Fault, FaultServer, Outcome, Sandbox};

/// The image's versions, as pyspark 3.5.3's jars say them.
const SPARK: &str = "3.5.3";
const HADOOP: &str = "3.3.4";
/// A small jar of the image, copied as an added jar (identical bytes).
const IMAGE_JAR: &str = "spark-tags_2.12-3.5.3.jar";
/// Debian's jackson-databind (2.14.0; the image's is 2.15.2).
const DEBIAN_JACKSON: &str =
    "/usr/share/maven-repo/com/fasterxml/jackson/core/jackson-databind/2.14.0/jackson-databind-2.14.0.jar";

fn ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "false")
}

fn skip<T>(why: &str) -> Option<T> {
    assert!(!ci(), "{why}");
    eprintln!("SKIP: {why}");
    None
}

/// `SPARK_LOCALIZER_TEST_SPARK_HOME`, checked to hold Spark's jars.
fn spark_home() -> Option<PathBuf> {
    match std::env::var("SPARK_LOCALIZER_TEST_SPARK_HOME") {
        Ok(home) if !home.is_empty() => {
            let home = PathBuf::from(home);
            assert!(
                home.join("jars").join(IMAGE_JAR).is_file(),
                "SPARK_LOCALIZER_TEST_SPARK_HOME={} has no jars/{IMAGE_JAR} (pyspark 3.5.3)",
                home.display()
            );
            Some(home)
        }
        _ => skip("SPARK_LOCALIZER_TEST_SPARK_HOME is not set (`bash scripts/setup/spark.sh`)"),
    }
}

// --- Classes, compiled once per test binary ------------------------------------------

/// Class files by name (`com/example/MyPlugin`), compiled by `javac`.
struct Classes(BTreeMap<String, Vec<u8>>);

impl Classes {
    fn get(&self, name: &str) -> &[u8] {
        self.0
            .get(name)
            .unwrap_or_else(|| panic!("no compiled class {name}"))
    }
}

/// Sources of the first compilation: one javac call for all of them.
const SOURCES: [(&str, &str); 5] = [
    (
        "com/example/MyPlugin",
        "package com.example; public class MyPlugin { public String name() { return \"plugin\"; } }",
    ),
    (
        "com/example/MyShuffleManager",
        "package com.example; public class MyShuffleManager { public int shuffles() { return 0; } }",
    ),
    (
        "com/example/Dup",
        "package com.example; public class Dup { public static String v() { return \"one\"; } }",
    ),
    (
        "com/amazonaws/services/s3/AmazonS3",
        "package com.amazonaws.services.s3; public interface AmazonS3 { String getRegionName(); }",
    ),
    (
        "software/amazon/awssdk/services/s3/S3Client",
        "package software.amazon.awssdk.services.s3; public interface S3Client { String serviceName(); }",
    ),
];

/// The second version of `com.example.Dup` (another method body, other bytes).
const DUP_V2: &str = "package com.example; public class Dup { public static String v() { int n = 40; return \"two, a longer body \" + (n + 2); } }";

fn javac(sources: &[(&str, &str)], dir: &Path) -> std::process::Child {
    let src = dir.join("src");
    let mut files = Vec::new();
    for (name, text) in sources {
        let path = src.join(format!("{name}.java"));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        files.push(path);
    }
    Command::new("javac")
        .arg("-d")
        .arg(dir.join("classes"))
        .args(&files)
        .spawn()
        .expect("run javac")
}

fn read_classes(root: &Path, names: &[&str], suffix: &str, into: &mut BTreeMap<String, Vec<u8>>) {
    for name in names {
        let bytes = std::fs::read(root.join(format!("{name}.class")))
            .unwrap_or_else(|e| panic!("{name}.class: {e}"));
        into.insert(format!("{name}{suffix}"), bytes);
    }
}

/// Every class the tests use; `None` (SKIP locally) without a JDK. `com/example/Dup`
/// and `com/example/Dup#2` are the two versions of one class.
fn classes() -> Option<&'static Classes> {
    static CLASSES: OnceLock<Option<Classes>> = OnceLock::new();
    CLASSES
        .get_or_init(|| {
            let found = Command::new("sh")
                .args(["-c", "command -v javac"])
                .output()
                .is_ok_and(|o| o.status.success());
            if !found {
                return skip("no javac; scripts/setup/spark.sh installs a JDK");
            }
            let tmp = tempfile::Builder::new()
                .prefix("sl-doctor-classes-")
                .tempdir()
                .unwrap();
            let (one, two) = (tmp.path().join("one"), tmp.path().join("two"));
            // Both compilations at once: javac's start-up is most of its time.
            let mut first = javac(&SOURCES, &one);
            let mut second = javac(&[("com/example/Dup", DUP_V2)], &two);
            assert!(first.wait().unwrap().success(), "javac failed");
            assert!(second.wait().unwrap().success(), "javac failed");
            let mut map = BTreeMap::new();
            let names: Vec<&str> = SOURCES.iter().map(|(n, _)| *n).collect();
            read_classes(&one.join("classes"), &names, "", &mut map);
            read_classes(&two.join("classes"), &["com/example/Dup"], "#2", &mut map);
            assert_ne!(map["com/example/Dup"], map["com/example/Dup#2"]);
            Some(Classes(map))
        })
        .as_ref()
}

// --- Jars assembled with the zip crate -----------------------------------------------

/// A jar being assembled: a manifest, classes, embedded `pom.properties`.
#[derive(Default)]
struct JarSpec {
    entries: Vec<(String, Vec<u8>)>,
}

impl JarSpec {
    fn new() -> JarSpec {
        let mut j = JarSpec::default();
        j.entries.push((
            "META-INF/MANIFEST.MF".into(),
            b"Manifest-Version: 1.0\r\nCreated-By: spark-localizer tests\r\n\r\n".to_vec(),
        ));
        j
    }

    /// A class file: `name` in slash form (`com/example/Dup`), bytes from `classes()`.
    fn class(mut self, c: &Classes, name: &str) -> JarSpec {
        let file = name.split('#').next().unwrap();
        self.entries
            .push((format!("{file}.class"), c.get(name).to_vec()));
        self
    }

    /// `META-INF/maven/<group>/<artifact>/pom.properties`.
    fn pom(mut self, group: &str, artifact: &str, version: &str) -> JarSpec {
        self.entries.push((
            format!("META-INF/maven/{group}/{artifact}/pom.properties"),
            format!(
                "#Generated by Maven\ngroupId={group}\nartifactId={artifact}\nversion={version}\n"
            )
            .into_bytes(),
        ));
        self
    }

    /// A resource, so that a jar without classes is not empty.
    fn resource(mut self, name: &str, body: &str) -> JarSpec {
        self.entries.push((name.into(), body.as_bytes().to_vec()));
        self
    }

    fn bytes(&self) -> Vec<u8> {
        let mut out = std::io::Cursor::new(Vec::new());
        let mut zip = zip::ZipWriter::new(&mut out);
        let options = zip::write::SimpleFileOptions::default();
        for (name, body) in &self.entries {
            zip.start_file(name.as_str(), options).unwrap();
            zip.write_all(body).unwrap();
        }
        zip.finish().unwrap();
        out.into_inner()
    }
}

// --- The fixture: a sandbox, the image, a directory of jars to add --------------------

struct Fx {
    sb: Sandbox,
    spark: PathBuf,
    c: &'static Classes,
    /// Where the jars to add are written (served as file:// URIs).
    repo: PathBuf,
}

fn fx() -> Option<Fx> {
    let spark = spark_home()?;
    let c = classes()?;
    let sb = Sandbox::new();
    let repo = sb.root.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    Some(Fx { sb, spark, c, repo })
}

fn uri(path: &Path) -> String {
    format!("file://{}", s(path))
}

fn uris(paths: &[&Path]) -> String {
    paths.iter().map(|p| uri(p)).collect::<Vec<_>>().join(",")
}

impl Fx {
    /// Writes `spec` as `repo/name`.
    fn jar(&self, name: &str, spec: JarSpec) -> PathBuf {
        let path = self.repo.join(name);
        std::fs::write(&path, spec.bytes()).unwrap();
        path
    }

    /// A jar with nothing but a resource (and `pom.properties` when `coords` is given).
    fn plain(&self, name: &str, coords: Option<(&str, &str, &str)>) -> PathBuf {
        let mut spec = JarSpec::new().resource("README.txt", name);
        if let Some((g, a, v)) = coords {
            spec = spec.pom(g, a, v);
        }
        self.jar(name, spec)
    }

    /// `plugin-1.0.jar`: `com.example.MyPlugin` and `com.example.MyShuffleManager`.
    fn plugin(&self) -> PathBuf {
        self.jar(
            "plugin-1.0.jar",
            JarSpec::new()
                .class(self.c, "com/example/MyPlugin")
                .class(self.c, "com/example/MyShuffleManager")
                .pom("com.example", "plugin", "1.0"),
        )
    }

    fn hadoop_aws(&self, version: &str) -> PathBuf {
        self.plain(
            &format!("hadoop-aws-{version}.jar"),
            Some(("org.apache.hadoop", "hadoop-aws", version)),
        )
    }

    /// AWS SDK v1's bundle: holds `com.amazonaws.services.s3.AmazonS3`.
    fn sdk_v1(&self, version: &str) -> PathBuf {
        self.jar(
            &format!("aws-java-sdk-bundle-{version}.jar"),
            JarSpec::new()
                .class(self.c, "com/amazonaws/services/s3/AmazonS3")
                .pom("com.amazonaws", "aws-java-sdk-bundle", version),
        )
    }

    /// AWS SDK v2's bundle: holds `software.amazon.awssdk.services.s3.S3Client`.
    fn sdk_v2(&self, version: &str) -> PathBuf {
        self.jar(
            &format!("bundle-{version}.jar"),
            JarSpec::new()
                .class(self.c, "software/amazon/awssdk/services/s3/S3Client")
                .pom("software.amazon.awssdk", "bundle", version),
        )
    }

    fn properties(&self, text: &str) -> PathBuf {
        self.sb.write("spark.properties", text)
    }

    fn image_jars(&self) -> PathBuf {
        self.spark.join("jars")
    }

    /// `check --spark-home <spark> --output json --jars <jars> <extra>`, parsed.
    fn check_json(&self, jars: &[&Path], extra: &[&str]) -> (Outcome, Value) {
        let mut run = self
            .sb
            .check()
            .arg("--spark-home")
            .arg(&self.spark)
            .args(["--output", "json"]);
        if !jars.is_empty() {
            run = run.arg("--jars").arg(uris(jars));
        }
        let out = run.args(extra).run();
        let doc = json(&out);
        (out, doc)
    }

    /// As `check_json`, in text.
    fn check_text(&self, jars: &[&Path], extra: &[&str]) -> Outcome {
        self.sb
            .check()
            .arg("--spark-home")
            .arg(&self.spark)
            .arg("--jars")
            .arg(uris(jars))
            .args(extra)
            .run()
    }
}

/// stdout as the one JSON document `check --output json` prints.
#[track_caller]
fn json(out: &Outcome) -> Value {
    serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e})\n{out}"))
}

/// `severity:id` of every finding but the `image-versions` note, sorted.
fn ids(doctor: &Value) -> Vec<String> {
    let mut ids: Vec<String> = doctor["findings"]
        .as_array()
        .unwrap_or_else(|| panic!("no doctor.findings in {doctor:#}"))
        .iter()
        .filter(|f| f["id"] != "image-versions")
        .map(|f| {
            format!(
                "{}:{}",
                f["severity"].as_str().unwrap(),
                f["id"].as_str().unwrap()
            )
        })
        .collect();
    ids.sort();
    ids
}

/// The findings with this id.
fn with_id<'a>(doctor: &'a Value, id: &str) -> Vec<&'a Value> {
    doctor["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["id"] == id)
        .collect()
}

/// The one finding with this id whose `jars` include `jar`.
#[track_caller]
fn finding<'a>(doctor: &'a Value, id: &str, jar: &str) -> &'a Value {
    let found: Vec<&Value> = with_id(doctor, id)
        .into_iter()
        .filter(|f| f["jars"].as_array().unwrap().iter().any(|j| j == jar))
        .collect();
    assert_eq!(
        found.len(),
        1,
        "want one {id} finding about {jar}\n{doctor:#}"
    );
    found[0]
}

fn message(f: &Value) -> &str {
    f["message"].as_str().unwrap()
}

fn jars_of(f: &Value) -> Vec<&str> {
    f["jars"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j.as_str().unwrap())
        .collect()
}

/// Expects exit `code` and exactly these `severity:id` findings (the note aside).
#[track_caller]
fn expect(out: &Outcome, doc: &Value, code: i32, want: &[&str]) {
    out.expect_code(code);
    let mut want: Vec<String> = want.iter().map(|s| s.to_string()).collect();
    want.sort();
    assert_eq!(ids(&doc["doctor"]), want, "{out}");
    assert_eq!(doc["exit_code"], code, "{doc:#}");
    assert_eq!(doc["ok"], code == 0, "{doc:#}");
}

// --- 1. A clean set ---------------------------------------------------------------------

#[test]
fn a_clean_set_has_only_the_image_note() {
    let Some(fx) = fx() else { return };
    let plugin = fx.plugin();
    // One of the image's own jars, byte for byte: the same classes, no duplicate.
    let copy = fx.repo.join(IMAGE_JAR);
    std::fs::copy(fx.image_jars().join(IMAGE_JAR), &copy).unwrap();
    // The same class, the same bytes, in two added jars: not a duplicate either.
    let same_a = fx.jar(
        "same-a-1.0.jar",
        JarSpec::new().class(fx.c, "com/example/Dup"),
    );
    let same_b = fx.jar(
        "same-b-1.0.jar",
        JarSpec::new().class(fx.c, "com/example/Dup"),
    );
    let props = fx.properties(
        "spark.plugins=com.example.MyPlugin\n\
         spark.shuffle.manager=sort\n\
         spark.serializer=org.apache.spark.serializer.KryoSerializer\n\
         spark.sql.catalog.mine=com.example.MyPlugin\n\
         spark.sql.catalog.mine.type=hadoop\n",
    );
    let jars = [plugin.as_path(), &copy, &same_a, &same_b];
    let props_arg = ["--properties-file", &s(&props)];

    let out = fx.check_text(&jars, &props_arg);
    out.expect_code(0);
    assert!(
        out.stdout.contains(&format!(
            "doctor: 4 added jars against {} (",
            s(&fx.image_jars())
        )),
        "{out}"
    );
    assert!(
        out.stdout
            .contains("Spark 3.5.3, Scala 2.12 (2.12.18), Hadoop 3.3.4"),
        "{out}"
    );
    assert!(
        out.stdout
            .trim_end()
            .ends_with("doctor: 0 errors, 0 warnings"),
        "{out}"
    );
    assert!(
        !out.stdout.contains("  ERROR ") && !out.stdout.contains("  WARN "),
        "{out}"
    );

    let (out, doc) = fx.check_json(&jars, &props_arg);
    expect(&out, &doc, 0, &[]);
    let findings = doc["doctor"]["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 1, "{doc:#}");
    assert_eq!(findings[0]["id"], "image-versions");
    assert_eq!(findings[0]["severity"], "note");
    assert!(
        message(&findings[0]).contains("Spark 3.5.3, Scala 2.12 (2.12.18), Hadoop 3.3.4"),
        "{doc:#}"
    );
}

/// local:// jars are looked at where they are; one of the image's own is not "added".
#[test]
fn local_jars_are_read_in_place_and_the_images_own_are_not_added() {
    let Some(fx) = fx() else { return };
    let bad = fx.plain("foo-lib_2.13-1.0.jar", None);
    let own = fx.image_jars().join(IMAGE_JAR);
    let (out, doc) = fx.check_json(
        &[],
        &[
            "--jars",
            &format!("local://{},local://{}", s(&own), s(&bad)),
        ],
    );
    expect(&out, &doc, 8, &["error:scala-suffix"]);
    let added = doc["doctor"]["added"].as_array().unwrap();
    assert_eq!(added.len(), 1, "{doc:#}");
    assert_eq!(added[0]["path"], s(&bad));
}

// --- 2. Scala suffix ----------------------------------------------------------------------

#[test]
fn scala_suffix_by_file_name_and_by_embedded_pom() {
    let Some(fx) = fx() else { return };
    let by_name = fx.plain("foo-lib_2.13-1.0.jar", None);
    let scala3 = fx.plain("qux-lib_3-1.0.jar", None);
    // Renamed: only its embedded pom.properties says _2.13.
    let renamed = fx.plain("foo.jar", Some(("com.example", "bar-lib_2.13", "2.0")));
    let good = fx.plain(
        "baz-lib_2.12-1.0.jar",
        Some(("com.example", "baz-lib_2.12", "1.0")),
    );
    let (out, doc) = fx.check_json(&[&by_name, &scala3, &renamed, &good], &[]);
    let d = &doc["doctor"];
    expect(
        &out,
        &doc,
        8,
        &[
            "error:scala-suffix",
            "error:scala-suffix",
            "error:scala-suffix",
        ],
    );
    assert!(
        message(finding(d, "scala-suffix", "foo-lib_2.13-1.0.jar"))
            .contains("built for Scala 2.13; this Spark runs Scala 2.12"),
        "{d:#}"
    );
    assert!(
        message(finding(d, "scala-suffix", "qux-lib_3-1.0.jar")).contains("built for Scala 3;"),
        "{d:#}"
    );
    let f = finding(d, "scala-suffix", "foo.jar");
    assert!(
        message(f).contains("com.example:bar-lib_2.13:2.0") && message(f).contains("Scala 2.13"),
        "{f:#}"
    );
    assert!(f["advice"].as_str().unwrap().contains("_2.12"), "{f:#}");

    // The same in text: one ERROR line each, and the count.
    let out = fx.check_text(&[&by_name, &renamed, &good], &[]);
    out.expect_code(8);
    assert_eq!(
        out.stdout.matches("  ERROR scala-suffix: ").count(),
        2,
        "{out}"
    );
    assert!(
        out.stdout
            .trim_end()
            .ends_with("doctor: 2 errors, 0 warnings"),
        "{out}"
    );
}

// --- 3. Spark line ------------------------------------------------------------------------

#[test]
fn third_party_jars_for_another_spark_line() {
    let Some(fx) = fx() else { return };
    let bad = [
        fx.plain("iceberg-spark-runtime-3.4_2.12-1.5.0.jar", None),
        fx.plain("hudi-spark3.4-bundle_2.12-0.14.1.jar", None),
        fx.plain("kyuubi-extension-spark-3-4_2.12-1.8.0.jar", None),
        // Renamed: the line is in its embedded coordinates only.
        fx.plain(
            "runtime.jar",
            Some((
                "org.apache.iceberg",
                "iceberg-spark-runtime-3.3_2.12",
                "1.4.3",
            )),
        ),
    ];
    let good = [
        fx.plain("iceberg-spark-runtime-3.5_2.12-1.5.0.jar", None),
        fx.plain("hudi-spark3.5-bundle_2.12-0.15.0.jar", None),
        fx.plain("kyuubi-extension-spark-3-5_2.12-1.9.0.jar", None),
        // -30: any Spark 3.x.
        fx.plain("elasticsearch-spark-30_2.12-8.14.0.jar", None),
    ];
    let all: Vec<&Path> = bad.iter().chain(&good).map(PathBuf::as_path).collect();
    let (out, doc) = fx.check_json(&all, &[]);
    expect(&out, &doc, 8, &["error:spark-line"; 4]);
    let d = &doc["doctor"];
    let f = finding(d, "spark-line", "iceberg-spark-runtime-3.4_2.12-1.5.0.jar");
    assert!(
        message(f).contains("built for Spark 3.4; the image runs Spark 3.5.3"),
        "{f:#}"
    );
    assert!(
        message(finding(d, "spark-line", "runtime.jar")).contains("Spark 3.3"),
        "{d:#}"
    );
    finding(d, "spark-line", "hudi-spark3.4-bundle_2.12-0.14.1.jar");
    finding(d, "spark-line", "kyuubi-extension-spark-3-4_2.12-1.8.0.jar");

    // The 3.5 ones alone: clean.
    let good: Vec<&Path> = good.iter().map(PathBuf::as_path).collect();
    let (out, doc) = fx.check_json(&good, &[]);
    expect(&out, &doc, 0, &[]);
}

// --- 4. Spark's own modules ---------------------------------------------------------------

#[test]
fn spark_modules_of_another_version() {
    let Some(fx) = fx() else { return };
    let module = |artifact: &str, version: &str| {
        fx.plain(
            &format!("{artifact}-{version}.jar"),
            Some(("org.apache.spark", artifact, version)),
        )
    };
    // Another minor: an error.
    let old = module("spark-avro_2.12", "3.4.1");
    let (out, doc) = fx.check_json(&[&old], &[]);
    expect(&out, &doc, 8, &["error:spark-module-version"]);
    let f = finding(
        &doc["doctor"],
        "spark-module-version",
        "spark-avro_2.12-3.4.1.jar",
    );
    assert!(
        message(f).contains("spark-avro_2.12 3.4.1; the image runs Spark 3.5.3"),
        "{f:#}"
    );
    assert!(
        f["advice"]
            .as_str()
            .unwrap()
            .contains("org.apache.spark:spark-avro_2.12:3.5.3"),
        "{f:#}"
    );

    // Another patch release: a warning (exit 0); the image's own version: nothing.
    let patch = module("spark-protobuf_2.12", "3.5.1");
    let same = module("spark-avro_2.12", SPARK);
    let (out, doc) = fx.check_json(&[&patch, &same], &[]);
    expect(&out, &doc, 0, &["warning:spark-module-version"]);
    finding(
        &doc["doctor"],
        "spark-module-version",
        "spark-protobuf_2.12-3.5.1.jar",
    );
}

// --- 5. Hadoop modules --------------------------------------------------------------------

#[test]
fn hadoop_modules_of_another_hadoop() {
    let Some(fx) = fx() else { return };
    // hadoop-aws 3.3.6 with the SDK it pins (no AWS finding), hadoop-azure named by its
    // file only, and the GCS connector for Hadoop 2.
    let aws = fx.hadoop_aws("3.3.6");
    let sdk = fx.sdk_v1("1.12.367");
    let azure = fx.plain("hadoop-azure-3.3.6.jar", None);
    let gcs2 = fx.plain("gcs-connector-hadoop2-2.2.22-shaded.jar", None);
    let (out, doc) = fx.check_json(&[&aws, &sdk, &azure, &gcs2], &[]);
    expect(&out, &doc, 8, &["error:hadoop-version"; 3]);
    let d = &doc["doctor"];
    let f = finding(d, "hadoop-version", "hadoop-aws-3.3.6.jar");
    assert!(
        message(f).contains("hadoop-aws 3.3.6; the image's Hadoop (hadoop-client) is 3.3.4"),
        "{f:#}"
    );
    finding(d, "hadoop-version", "hadoop-azure-3.3.6.jar");
    assert!(
        message(finding(
            d,
            "hadoop-version",
            "gcs-connector-hadoop2-2.2.22-shaded.jar"
        ))
        .contains("GCS connector for Hadoop 2"),
        "{d:#}"
    );

    // The image's Hadoop (with the SDK it pins) and the Hadoop 3 connector: clean.
    let aws = fx.hadoop_aws(HADOOP);
    let sdk = fx.sdk_v1("1.12.262");
    let azure = fx.plain("hadoop-azure-3.3.4.jar", None);
    let gcs3 = fx.plain("gcs-connector-hadoop3-2.2.22-shaded.jar", None);
    let (out, doc) = fx.check_json(&[&aws, &sdk, &azure, &gcs3], &[]);
    expect(&out, &doc, 0, &[]);
}

// --- 6. The AWS SDK hadoop-aws needs ------------------------------------------------------

#[test]
fn hadoop_aws_without_or_with_another_aws_sdk() {
    let Some(fx) = fx() else { return };
    let aws = fx.hadoop_aws(HADOOP);

    // No SDK at all.
    let (out, doc) = fx.check_json(&[&aws], &[]);
    expect(&out, &doc, 8, &["error:aws-sdk-missing"]);
    let f = finding(&doc["doctor"], "aws-sdk-missing", "hadoop-aws-3.3.4.jar");
    assert!(
        message(f).contains("com.amazonaws:aws-java-sdk-bundle 1.12.262")
            && message(f).contains("no jar holds com.amazonaws.services.s3.AmazonS3"),
        "{f:#}"
    );
    assert_eq!(f["classes"][0], "com.amazonaws.services.s3.AmazonS3");

    // The v1 bundle of another version than Hadoop 3.3.4 pins: a warning.
    let other = fx.sdk_v1("1.12.367");
    let (out, doc) = fx.check_json(&[&aws, &other], &[]);
    expect(&out, &doc, 0, &["warning:aws-sdk-version"]);
    let f = &with_id(&doc["doctor"], "aws-sdk-version")[0];
    assert_eq!(
        jars_of(f),
        ["hadoop-aws-3.3.4.jar", "aws-java-sdk-bundle-1.12.367.jar"]
    );
    assert!(
        message(f).contains("built against the AWS SDK 1.12.262")
            && message(f).contains("is 1.12.367"),
        "{f:#}"
    );

    // The pinned one: clean.
    let pinned = fx.sdk_v1("1.12.262");
    let (out, doc) = fx.check_json(&[&aws, &pinned], &[]);
    expect(&out, &doc, 0, &[]);

    // hadoop-aws 3.4 needs SDK v2: the v1 bundle does not do (3.4.1 is also not the
    // image's Hadoop).
    let aws34 = fx.hadoop_aws("3.4.1");
    let (out, doc) = fx.check_json(&[&aws34, &pinned], &[]);
    expect(
        &out,
        &doc,
        8,
        &["error:aws-sdk-missing", "error:hadoop-version"],
    );
    let f = finding(&doc["doctor"], "aws-sdk-missing", "hadoop-aws-3.4.1.jar");
    assert!(
        message(f).contains("software.amazon.awssdk:bundle 2.24.6")
            && message(f).contains("software.amazon.awssdk.services.s3.S3Client"),
        "{f:#}"
    );
    // With v2's bundle, of another version: the SDK warning.
    let v2 = fx.sdk_v2("2.25.0");
    let (out, doc) = fx.check_json(&[&aws34, &v2], &[]);
    expect(
        &out,
        &doc,
        8,
        &["error:hadoop-version", "warning:aws-sdk-version"],
    );
}

// --- 7. Duplicate classes -----------------------------------------------------------------

#[test]
fn duplicate_classes_with_the_image_and_between_added_jars() {
    let Some(fx) = fx() else { return };
    if !Path::new(DEBIAN_JACKSON).is_file() {
        skip::<()>(&format!(
            "{DEBIAN_JACKSON} is missing (Debian's libjackson2-databind-java)"
        ));
        return;
    }
    // Debian's jackson-databind 2.14.0 against the image's 2.15.2.
    let jackson = Path::new(DEBIAN_JACKSON);
    let (out, doc) = fx.check_json(&[jackson], &[]);
    expect(&out, &doc, 0, &["warning:duplicate-classes"]);
    let f = &with_id(&doc["doctor"], "duplicate-classes")[0];
    assert_eq!(
        jars_of(f),
        [
            "jackson-databind-2.14.0.jar",
            "image:jackson-databind-2.15.2.jar"
        ]
    );
    let m = message(f);
    assert!(
        m.starts_with(
            "jackson-databind-2.14.0.jar and the image's jackson-databind-2.15.2.jar hold "
        ) && m.contains(" classes with different bytes (jackson-databind 2.14.0 and 2.15.2)"),
        "{f:#}"
    );
    let classes = f["classes"].as_array().unwrap();
    assert!(
        !classes.is_empty()
            && classes.len() <= 5
            && classes.iter().all(|c| c
                .as_str()
                .unwrap()
                .starts_with("com.fasterxml.jackson.databind.")),
        "{f:#}"
    );

    // Two added jars with one class of different bytes; a third with the first's bytes
    // is no duplicate.
    let a = fx.jar(
        "dup-a-1.0.jar",
        JarSpec::new().class(fx.c, "com/example/Dup"),
    );
    let b = fx.jar(
        "dup-b-1.0.jar",
        JarSpec::new().class(fx.c, "com/example/Dup#2"),
    );
    let same = fx.jar(
        "dup-c-1.0.jar",
        JarSpec::new().class(fx.c, "com/example/Dup"),
    );
    let (out, doc) = fx.check_json(&[&a, &b, &same], &[]);
    expect(&out, &doc, 0, &["warning:duplicate-classes"]);
    let f = &with_id(&doc["doctor"], "duplicate-classes")[0];
    assert_eq!(jars_of(f), ["dup-a-1.0.jar", "dup-b-1.0.jar"]);
    assert_eq!(f["classes"], serde_json::json!(["com.example.Dup"]));
    assert!(
        message(f).contains("hold 1 class with different bytes"),
        "{f:#}"
    );
}

// --- 8. Classes the properties name -------------------------------------------------------

#[test]
fn classes_named_by_properties_that_no_jar_holds() {
    let Some(fx) = fx() else { return };
    let plugin = fx.plugin();
    let props = fx.properties(
        "spark.plugins=com.example.MyPlugin, com.example.Missing\n\
         spark.shuffle.manager=org.apache.spark.shuffle.sort.SortShufleManager\n\
         spark.sql.extensions=com.example.MyPlugn\n\
         spark.sql.catalog.cat=com.example.NoCatalog\n\
         spark.sql.catalog.cat.type=hadoop\n",
    );
    let (out, doc) = fx.check_json(&[&plugin], &["--properties-file", &s(&props)]);
    expect(&out, &doc, 8, &["error:class-not-found"; 4]);
    let d = &doc["doctor"];
    let by_class = |class: &str| -> &Value {
        let found: Vec<&Value> = with_id(d, "class-not-found")
            .into_iter()
            .filter(|f| f["classes"][0] == class)
            .collect();
        assert_eq!(found.len(), 1, "want one finding about {class}\n{d:#}");
        found[0]
    };
    assert!(
        message(by_class("com.example.Missing"))
            .starts_with("spark.plugins names com.example.Missing, which no jar holds"),
        "{d:#}"
    );
    // Typos: the likeliest class meant, in the image or in an added jar.
    assert!(
        message(by_class("org.apache.spark.shuffle.sort.SortShufleManager"))
            .ends_with("did you mean org.apache.spark.shuffle.sort.SortShuffleManager?"),
        "{d:#}"
    );
    assert!(
        message(by_class("com.example.MyPlugn")).ends_with("did you mean com.example.MyPlugin?"),
        "{d:#}"
    );
    assert!(
        message(by_class("com.example.NoCatalog")).starts_with("spark.sql.catalog.cat names"),
        "{d:#}"
    );
    // The text form: the hint on the ERROR line.
    let out = fx.check_text(&[&plugin], &["--properties-file", &s(&props)]);
    out.expect_code(8);
    assert!(
        out.stdout.contains(
            "  ERROR class-not-found: spark.shuffle.manager names org.apache.spark.shuffle.sort.SortShufleManager"
        ) && out.stdout.contains("did you mean org.apache.spark.shuffle.sort.SortShuffleManager?"),
        "{out}"
    );
    assert!(
        out.stdout
            .trim_end()
            .ends_with("doctor: 4 errors, 0 warnings"),
        "{out}"
    );

    // The shuffle manager's short names are Spark's own.
    let props = fx.properties("spark.shuffle.manager=tungsten-sort\n");
    let (out, doc) = fx.check_json(&[&plugin], &["--properties-file", &s(&props)]);
    expect(&out, &doc, 0, &[]);
}

// --- 9. On no classpath -------------------------------------------------------------------

#[test]
fn a_class_in_a_jar_given_as_a_file_is_on_no_classpath() {
    let Some(fx) = fx() else { return };
    let plugin = fx.plugin();
    let other = fx.plain("other-1.0.jar", None);
    let props = fx.properties("spark.plugins=com.example.MyPlugin\n");
    let props_arg = s(&props);
    let (out, doc) = fx.check_json(
        &[&other],
        &["--files", &uri(&plugin), "--properties-file", &props_arg],
    );
    expect(&out, &doc, 8, &["error:class-not-on-classpath"]);
    let d = &doc["doctor"];
    let f = finding(d, "class-not-on-classpath", "plugin-1.0.jar");
    assert!(
        message(f)
            .contains("spark.plugins names com.example.MyPlugin, which only plugin-1.0.jar holds"),
        "{f:#}"
    );
    let reach: BTreeMap<String, String> = d["added"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            let path = a["path"].as_str().unwrap();
            let name = path.rsplit('/').next().unwrap().to_owned();
            (name, a["reach"].as_str().unwrap().to_owned())
        })
        .collect();
    assert_eq!(reach["plugin-1.0.jar"], "not-on-classpath", "{d:#}");
    assert_eq!(reach["other-1.0.jar"], "classpath", "{d:#}");

    // Given with --jars: on the classpath, clean.
    let (out, doc) = fx.check_json(&[&other, &plugin], &["--properties-file", &props_arg]);
    expect(&out, &doc, 0, &[]);
}

/// An archive's jars are on no classpath without --archive-classpath: `fetch` (which
/// unpacks it) says class-not-on-classpath.
#[test]
fn fetch_says_a_class_in_an_archive_without_archive_classpath_is_on_no_classpath() {
    let Some(fx) = fx() else { return };
    let plugin = fx.plugin();
    let zip_path = archive_of(&fx, &plugin);
    let props = fx.properties("spark.plugins=com.example.MyPlugin\n");
    let args = [
        "--archives".to_owned(),
        uri(&zip_path),
        "--properties-file".to_owned(),
        s(&props),
    ];
    let other = fx.plain("other-1.0.jar", None);
    let out = fx
        .sb
        .fetch()
        .arg("--doctor-jars")
        .arg(fx.image_jars())
        .arg("--jars")
        .arg(uri(&other))
        .args(&args)
        .run();
    out.expect_code(0);
    let report = fx.sb.report();
    assert_eq!(
        ids(&report["doctor"]),
        ["error:class-not-on-classpath"],
        "{report:#}"
    );
    // With --archive-classpath, on the classpath.
    let out = fx
        .sb
        .fetch()
        .arg("--doctor-jars")
        .arg(fx.image_jars())
        .arg("--jars")
        .arg(uri(&other))
        .arg("--archive-classpath")
        .args(&args)
        .run();
    out.expect_code(0);
    assert_eq!(ids(&fx.sb.report()["doctor"]), Vec::<String>::new());
}

/// `check` (which downloads only what goes on the classpath, and so leaves the
/// archive out) says class-not-found, "fix the class name", where `fetch` says
/// class-not-on-classpath.
#[test]
fn check_says_class_not_on_classpath_for_an_archive_too() {
    let Some(fx) = fx() else { return };
    let plugin = fx.plugin();
    let zip_path = archive_of(&fx, &plugin);
    let other = fx.plain("other-1.0.jar", None);
    let props = fx.properties("spark.plugins=com.example.MyPlugin\n");
    let (out, doc) = fx.check_json(
        &[&other],
        &[
            "--archives",
            &uri(&zip_path),
            "--properties-file",
            &s(&props),
        ],
    );
    expect(&out, &doc, 8, &["error:class-not-on-classpath"]);
}

/// `deps.zip` holding `jar` at its top level.
fn archive_of(fx: &Fx, jar: &Path) -> PathBuf {
    let zip_path = fx.repo.join("deps.zip");
    let mut z = zip::ZipWriter::new(std::fs::File::create(&zip_path).unwrap());
    z.start_file(
        jar.file_name().unwrap().to_str().unwrap(),
        zip::write::SimpleFileOptions::default(),
    )
    .unwrap();
    z.write_all(&std::fs::read(jar).unwrap()).unwrap();
    z.finish().unwrap();
    zip_path
}

// --- 10. Jars Spark fetches itself arrive too late -----------------------------------------

#[test]
fn classes_only_in_spark_jars_that_a_flag_overrides() {
    let Some(fx) = fx() else { return };
    let plugin = fx.plugin();
    // spark.jars (one with credentials) that this run does not localize: --jars wins.
    let props = fx.properties(
        "spark.jars=https://repo.invalid/libs/remote-shuffle.jar,https://user:SECRETPW@repo.invalid/libs/ser.jar\n\
         spark.shuffle.manager=com.example.RemoteShuffleManager\n\
         spark.serializer=com.example.RemoteSerializer\n",
    );
    let props_arg = s(&props);
    let (out, doc) = fx.check_json(&[&plugin], &["--properties-file", &props_arg]);
    expect(&out, &doc, 8, &["error:class-loaded-too-late"; 2]);
    assert_no_secrets("check output", &format!("{}\n{}", out.stdout, out.stderr));
    let d = &doc["doctor"];
    for (key, class) in [
        ("spark.shuffle.manager", "com.example.RemoteShuffleManager"),
        ("spark.serializer", "com.example.RemoteSerializer"),
    ] {
        let f = with_id(d, "class-loaded-too-late")
            .into_iter()
            .find(|f| f["classes"][0] == class)
            .unwrap_or_else(|| panic!("no class-loaded-too-late for {class}\n{d:#}"));
        assert!(
            message(f).starts_with(&format!(
                "{key} names {class}, which is in neither the image nor the classpath fragment"
            )),
            "{f:#}"
        );
        assert!(message(f).contains("on Spark 3.5.3"), "{f:#}");
        let jars = jars_of(f);
        assert_eq!(jars.len(), 2, "{f:#}");
        assert_eq!(jars[0], "https://repo.invalid/libs/remote-shuffle.jar");
        assert!(jars[1].ends_with("repo.invalid/libs/ser.jar"), "{f:#}");
    }
    // The jars given by env are a flag too.
    let out = fx
        .sb
        .check()
        .arg("--spark-home")
        .arg(&fx.spark)
        .args(["--output", "json", "--properties-file", &props_arg])
        .env("SPARK_LOCALIZER_JARS", &uri(&plugin))
        .run();
    let doc = json(&out);
    expect(&out, &doc, 8, &["error:class-loaded-too-late"; 2]);

    // spark.jars entries the flag also gives are localized, so looked into: only the
    // other one is Spark's to fetch.
    let props = fx.properties(&format!(
        "spark.jars={},https://repo.invalid/libs/remote-shuffle.jar\n\
         spark.shuffle.manager=com.example.RemoteShuffleManager\n",
        uri(&plugin)
    ));
    let (out, doc) = fx.check_json(&[&plugin], &["--properties-file", &s(&props)]);
    expect(&out, &doc, 8, &["error:class-loaded-too-late"]);
    let f = &with_id(&doc["doctor"], "class-loaded-too-late")[0];
    assert_eq!(jars_of(f), ["https://repo.invalid/libs/remote-shuffle.jar"]);
    // All of them given by the flag: nothing left for Spark to fetch, a plain error.
    let props = fx.properties(&format!(
        "spark.jars={}\nspark.shuffle.manager=com.example.RemoteShuffleManager\n",
        uri(&plugin)
    ));
    let (out, doc) = fx.check_json(&[&plugin], &["--properties-file", &s(&props)]);
    expect(&out, &doc, 8, &["error:class-not-found"]);

    // A plugin is loaded after spark.jars are fetched: not found here, but the jars
    // Spark fetches were not looked into, so only a warning.
    let props = fx.properties(
        "spark.jars=https://repo.invalid/libs/remote-plugin.jar\n\
         spark.plugins=com.example.RemotePlugin\n",
    );
    let (out, doc) = fx.check_json(&[&plugin], &["--properties-file", &s(&props)]);
    expect(&out, &doc, 0, &["warning:class-not-found"]);
    let f = &with_id(&doc["doctor"], "class-not-found")[0];
    assert_eq!(jars_of(f), ["https://repo.invalid/libs/remote-plugin.jar"]);
    assert!(message(f).contains("were not looked into"), "{f:#}");

    // Without --jars, spark.jars is the jar list: localized and looked into, clean.
    let props = fx.properties(&format!(
        "spark.jars={}\n\
         spark.shuffle.manager=com.example.MyShuffleManager\n\
         spark.plugins=com.example.MyPlugin\n",
        uri(&plugin)
    ));
    let (out, doc) = fx.check_json(&[], &["--properties-file", &s(&props)]);
    expect(&out, &doc, 0, &[]);
    assert_eq!(
        doc["doctor"]["added"].as_array().unwrap().len(),
        1,
        "{doc:#}"
    );
}

// --- 11. check --output json --------------------------------------------------------------

#[test]
fn check_output_json_is_one_document() {
    let Some(fx) = fx() else { return };
    let plugin = fx.plugin();
    let bad = fx.plain("foo-lib_2.13-1.0.jar", None);
    let (out, doc) = fx.check_json(&[&plugin, &bad], &[]);
    out.expect_code(8);
    assert_eq!(doc["version"], 1);
    assert_eq!(doc["ok"], false);
    assert_eq!(doc["exit_code"], 8);
    // Nothing but the document: no text sections.
    assert!(!out.stdout.contains("probes:") && !out.stdout.contains("settings:"));
    let probes = doc["probes"].as_array().unwrap();
    assert_eq!(probes.len(), 2, "{doc:#}");
    for (p, jar) in probes.iter().zip([&plugin, &bad]) {
        assert_eq!(p["uri"], uri(jar));
        assert_eq!(p["ok"], true);
        assert!(p["detail"].is_string());
    }
    let image = &doc["doctor"]["image"];
    assert_eq!(image["dir"], s(&fx.image_jars()));
    assert!(image["jars"].as_u64().unwrap() > 200, "{image:#}");
    assert_eq!(image["spark"], SPARK);
    assert_eq!(image["scala"], "2.12");
    assert_eq!(image["scala_library"], "2.12.18");
    assert_eq!(image["hadoop"], HADOOP);
    let added = doc["doctor"]["added"].as_array().unwrap();
    assert_eq!(added.len(), 2, "{doc:#}");
    assert_eq!(added[0]["coordinates"], "com.example:plugin:1.0");
    assert_eq!(added[0]["reach"], "classpath");
    assert!(added[0]["path"]
        .as_str()
        .unwrap()
        .ends_with("/plugin-1.0.jar"));
    assert_eq!(added[1]["coordinates"], "foo-lib_2.13:1.0");
    let findings = doc["doctor"]["findings"].as_array().unwrap();
    // Most severe first.
    assert_eq!(findings[0]["id"], "scala-suffix");
    assert_eq!(findings.last().unwrap()["id"], "image-versions");
    for f in findings {
        for key in ["id", "severity", "message", "advice"] {
            assert!(f[key].is_string(), "{key} in {f:#}");
        }
        assert!(f["jars"].is_array(), "{f:#}");
        assert!(
            ["error", "warning", "note"].contains(&f["severity"].as_str().unwrap()),
            "{f:#}"
        );
    }
    assert_eq!(
        findings[0]["jars"],
        serde_json::json!(["foo-lib_2.13-1.0.jar"])
    );
    assert!(findings[0].get("classes").is_none(), "{:#}", findings[0]);

    // SPARK_LOCALIZER_OUTPUT=json, a clean set: ok.
    let out = fx
        .sb
        .check()
        .arg("--spark-home")
        .arg(&fx.spark)
        .arg("--jars")
        .arg(uri(&plugin))
        .env("SPARK_LOCALIZER_OUTPUT", "json")
        .run();
    let doc = json(&out);
    expect(&out, &doc, 0, &[]);
}

// --- 12. fetch --doctor-jars, --doctor-strict ---------------------------------------------

#[test]
fn fetch_logs_findings_and_strict_fails_without_a_classpath() {
    let Some(fx) = fx() else { return };
    let plugin = fx.plugin();
    let bad = fx.plain("foo-lib_2.13-1.0.jar", None);
    let jars = uris(&[&plugin, &bad]);
    let sb = &fx.sb;

    // Findings are logged; the run succeeds and writes its classpath.
    let out = sb
        .fetch()
        .arg("--doctor-jars")
        .arg(fx.image_jars())
        .args(["--jars", &jars])
        .run();
    out.expect_code(0);
    out.expect_stderr("WARN doctor scala-suffix: foo-lib_2.13-1.0.jar");
    assert!(!out.stderr.contains("ERROR"), "{out}");
    assert_eq!(
        sb.classpath(),
        format!(
            "{}:{}\n",
            s(&sb.jar("plugin-1.0.jar")),
            s(&sb.jar("foo-lib_2.13-1.0.jar"))
        )
    );
    assert!(sb.jars.join("spark-classpath.env").is_file());
    let report = sb.report();
    assert_eq!(report["ok"], true);
    assert_eq!(ids(&report["doctor"]), ["error:scala-suffix"], "{report:#}");
    assert_eq!(report["doctor"]["image"]["spark"], SPARK);
    let added: Vec<&str> = report["doctor"]["added"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        added,
        [
            s(&sb.jar("plugin-1.0.jar")),
            s(&sb.jar("foo-lib_2.13-1.0.jar"))
        ]
    );
    assert!(sb.term_log_text().is_none());

    // --doctor-strict: exit 8, the earlier run's classpath and env file removed.
    let out = sb
        .fetch()
        .arg("--doctor-jars")
        .arg(fx.image_jars())
        .args(["--jars", &jars, "--doctor-strict"])
        .run();
    out.expect_code(8);
    out.expect_stderr("ERROR doctor scala-suffix: foo-lib_2.13-1.0.jar");
    assert!(!sb.jars.join("classpath").exists(), "{out}");
    assert!(!sb.jars.join("spark-classpath.env").exists(), "{out}");
    // The jars themselves are in place.
    assert!(sb.jar("foo-lib_2.13-1.0.jar").is_file());
    let report = sb.report();
    assert_eq!(report["ok"], false);
    assert_eq!(report["exit_code"], 8);
    assert_eq!(ids(&report["doctor"]), ["error:scala-suffix"]);
    let log = sb.term_log_text().expect("termination log");
    assert!(
        log.contains("the classpath doctor found 1 error (--doctor-strict)"),
        "{log}"
    );
    assert!(
        log.contains("- doctor scala-suffix: foo-lib_2.13-1.0.jar (foo-lib_2.13:1.0) is built for Scala 2.13"),
        "{log}"
    );

    // The env twins: SPARK_LOCALIZER_SPARK_JARS and SPARK_LOCALIZER_DOCTOR_STRICT.
    let out = sb
        .fetch()
        .args(["--jars", &jars])
        .env("SPARK_LOCALIZER_SPARK_JARS", &s(&fx.image_jars()))
        .env("SPARK_LOCALIZER_DOCTOR_STRICT", "true")
        .run();
    out.expect_code(8);
    assert!(!sb.jars.join("classpath").exists(), "{out}");

    // Warnings only (a Spark module of another patch release) pass --doctor-strict.
    let patch = fx.plain(
        "spark-avro_2.12-3.5.1.jar",
        Some(("org.apache.spark", "spark-avro_2.12", "3.5.1")),
    );
    let out = sb
        .fetch()
        .arg("--spark-home")
        .arg(&fx.spark)
        .args(["--jars", &uris(&[&plugin, &patch]), "--doctor-strict"])
        .run();
    out.expect_code(0);
    out.expect_stderr("WARN doctor spark-module-version");
    assert_eq!(
        sb.classpath(),
        format!(
            "{}:{}\n",
            s(&sb.jar("plugin-1.0.jar")),
            s(&sb.jar("spark-avro_2.12-3.5.1.jar"))
        )
    );
    let report = sb.report();
    assert_eq!(report["ok"], true);
    assert_eq!(ids(&report["doctor"]), ["warning:spark-module-version"]);
}

// --- 13. check after fetch -----------------------------------------------------------------

#[test]
fn check_after_fetch_reads_the_fetched_jars() {
    let Some(fx) = fx() else { return };
    let plugin = fx.plugin();
    let bad = fx.plain("foo-lib_2.13-1.0.jar", None);
    let props = fx.properties("spark.plugins=com.example.MyPlugin\n");
    let props_arg = s(&props);
    let jars = uris(&[&plugin, &bad]);
    fx.sb
        .fetch()
        .args(["--jars", &jars, "--files", &uri(&plugin)])
        .args(["--properties-file", &props_arg])
        .run()
        .expect_code(0);

    let check = || {
        fx.sb
            .check()
            .arg("--spark-home")
            .arg(&fx.spark)
            .args([
                "--output",
                "json",
                "--jars",
                &jars,
                "--files",
                &uri(&plugin),
            ])
            .args(["--properties-file", &props_arg])
            .run()
    };
    let out = check();
    let doc = json(&out);
    expect(&out, &doc, 8, &["error:scala-suffix"]);
    assert!(!out.stderr.contains("downloading"), "{out}");
    // The jars looked at are the fetched ones, the file's among them (on no classpath).
    let added: Vec<(String, String)> = doc["doctor"]["added"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["path"].as_str().unwrap().to_owned(),
                a["reach"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        added,
        [
            (s(&fx.sb.jar("plugin-1.0.jar")), "classpath".to_owned()),
            (
                s(&fx.sb.jar("foo-lib_2.13-1.0.jar")),
                "classpath".to_owned()
            ),
            (
                s(&fx.sb.files.join("plugin-1.0.jar")),
                "not-on-classpath".to_owned()
            ),
        ]
    );

    // A fetched jar gone: the fetch is not "done" any more, check downloads again.
    std::fs::remove_file(fx.sb.jar("foo-lib_2.13-1.0.jar")).unwrap();
    let out = check();
    let doc = json(&out);
    expect(&out, &doc, 8, &["error:scala-suffix"]);
    out.expect_stderr("classpath doctor: downloading 3 artifact(s)");

    // Another plan than the fetch's: downloaded too.
    let out = fx
        .sb
        .check()
        .arg("--spark-home")
        .arg(&fx.spark)
        .args(["--jars", &uri(&plugin)])
        .run();
    out.expect_code(0);
    out.expect_stderr("classpath doctor: downloading 1 artifact(s)");
}

// --- 14. check's temporary download, over HTTP ---------------------------------------------

#[test]
fn check_downloads_into_a_temporary_dir_it_removes() {
    let Some(fx) = fx() else { return };
    let server = FaultServer::start();
    let plugin = std::fs::read(fx.plugin()).unwrap();
    let bad = JarSpec::new().resource("README.txt", "x").bytes();
    server.put("/libs/plugin-1.0.jar", plugin.clone());
    server.put("/libs/foo-lib_2.13-1.0.jar", bad);
    server.put("/libs/extra-1.0.jar", plugin);
    server.put("/conf/app.conf", "a=1\n");
    let tmp = fx.sb.root.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let props = fx.properties("spark.plugins=com.example.MyPlugin\n");

    let out = fx
        .sb
        .check()
        .arg("--spark-home")
        .arg(&fx.spark)
        .args([
            "--jars",
            &format!(
                "{},{}",
                server.url("/libs/plugin-1.0.jar"),
                server.url("/libs/foo-lib_2.13-1.0.jar")
            ),
            "--files",
            &format!(
                "{},{}",
                server.url("/libs/extra-1.0.jar"),
                server.url("/conf/app.conf")
            ),
            "--properties-file",
            &s(&props),
        ])
        .env("TMPDIR", &s(&tmp))
        .run();
    out.expect_code(8);
    // The two jars and the jar given as a file; not the other file.
    out.expect_stderr(&format!(
        "classpath doctor: downloading 3 artifact(s) into {}/spark-localizer-doctor.",
        s(&tmp)
    ));
    assert!(
        out.stdout
            .contains("  ERROR scala-suffix: foo-lib_2.13-1.0.jar"),
        "{out}"
    );
    assert!(
        out.stdout
            .trim_end()
            .ends_with("doctor: 1 error, 0 warnings"),
        "{out}"
    );
    for path in [
        "/libs/plugin-1.0.jar",
        "/libs/foo-lib_2.13-1.0.jar",
        "/libs/extra-1.0.jar",
    ] {
        assert_eq!(server.gets(path).len(), 1, "{path} downloaded once");
    }
    assert_eq!(
        server.gets("/conf/app.conf").len(),
        0,
        "the file that is no jar was downloaded"
    );
    // The temporary directory is gone, nothing was written in the output directories.
    let left = |dir: &Path| -> Vec<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect()
    };
    assert_eq!(left(&tmp), Vec::<String>::new(), "TMPDIR");
    assert_eq!(left(&fx.sb.jars), Vec::<String>::new(), "--jars-dir");
    assert_eq!(left(&fx.sb.files), Vec::<String>::new(), "--files-dir");
}

/// Probe and download failures (exit 3) outrank the doctor's exit code.
#[test]
fn failed_probes_and_downloads_outrank_the_doctor() {
    let Some(fx) = fx() else { return };
    let bad = fx.plain("foo-lib_2.13-1.0.jar", None);
    let missing = fx.repo.join("missing-1.0.jar");
    let out = fx.check_text(&[&bad, &missing], &[]);
    // A source failed: exit 3, as without the doctor, not 8.
    out.expect_code(3);
    assert!(
        out.stdout.contains("doctor: skipped (1 probe(s) failed)"),
        "{out}"
    );
    assert!(!out.stdout.contains("ERROR scala-suffix"), "{out}");

    // fetch: a failed source, no doctor (it needs every jar).
    let out = fx
        .sb
        .fetch()
        .arg("--doctor-jars")
        .arg(fx.image_jars())
        .args(["--jars", &uris(&[&bad, &missing]), "--doctor-strict"])
        .run();
    out.expect_code(3);
    assert!(!out.stderr.contains("doctor scala-suffix"), "{out}");
    assert!(fx.sb.report().get("doctor").is_none());

    // The probe (a HEAD) succeeds, the download (a GET) fails: exit 3, the doctor says why.
    let server = FaultServer::start();
    server.put("/foo-lib_2.13-1.0.jar", std::fs::read(&bad).unwrap());
    for nth in 1..=10 {
        server.on("/foo-lib_2.13-1.0.jar", nth, Fault::Status(404));
    }
    let out = fx
        .sb
        .check()
        .arg("--spark-home")
        .arg(&fx.spark)
        .args(["--jars", &server.url("/foo-lib_2.13-1.0.jar")])
        .run();
    out.expect_code(3);
    assert!(
        out.stdout.contains("all 1 probes succeeded")
            && out
                .stdout
                .contains("doctor: the jars could not be downloaded: "),
        "{out}"
    );
    assert!(!server.gets("/foo-lib_2.13-1.0.jar").is_empty(), "{out}");
}

// --- 15. Configuration errors ---------------------------------------------------------------

/// Flags, environment, what stderr says.
type ConfigCase<'a> = (Vec<&'a str>, Vec<(&'a str, &'a str)>, &'a str);

#[test]
fn the_image_flags_are_checked_before_any_traffic() {
    let Some(fx) = fx() else { return };
    let server = FaultServer::start();
    server.put("/plugin-1.0.jar", std::fs::read(fx.plugin()).unwrap());
    let jars = server.url("/plugin-1.0.jar");
    let empty = fx.sb.root.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    std::fs::write(empty.join("README"), "no jars here").unwrap();
    let spark = s(&fx.spark);
    let image = s(&fx.image_jars());
    let nowhere = s(&fx.sb.root.join("nowhere"));
    let empty = s(&empty);

    let cases: Vec<ConfigCase> = vec![
        (
            vec!["--spark-home", &spark, "--spark-jars", &image],
            vec![],
            "invalid --spark-home and --spark-jars",
        ),
        (
            vec!["--spark-home", &spark],
            vec![("SPARK_LOCALIZER_SPARK_JARS", &image)],
            "not both",
        ),
        (vec!["--spark-jars", &empty], vec![], "invalid --spark-jars"),
        (
            vec!["--doctor-jars", &empty],
            vec![],
            "invalid --doctor-jars",
        ),
        (
            vec!["--spark-jars", &nowhere],
            vec![],
            "invalid --spark-jars",
        ),
        // A SPARK_HOME without jars/.
        (vec!["--spark-home", &empty], vec![], "invalid --spark-home"),
        (
            vec![],
            vec![("SPARK_LOCALIZER_SPARK_HOME", &nowhere)],
            "invalid SPARK_LOCALIZER_SPARK_HOME",
        ),
    ];
    for (args, env, said) in &cases {
        for sub in ["check", "fetch"] {
            let mut run = if sub == "check" {
                fx.sb.check()
            } else {
                fx.sb.fetch()
            };
            run = run.args(["--jars", &jars]).args(args);
            for (k, v) in env {
                run = run.env(k, v);
            }
            let out = run.run();
            out.expect_code(2).expect_stderr(said);
            assert!(out.stderr.contains("ERROR"), "{out}");
        }
    }
    assert!(
        server.requests().is_empty(),
        "traffic before the configuration was checked: {:?}",
        server.requests()
    );
    assert!(fx.sb.jar_names().is_empty());

    // check --output json: a document saying so.
    let out = fx
        .sb
        .check()
        .args(["--jars", &jars, "--spark-jars", &empty, "--output", "json"])
        .run();
    out.expect_code(2);
    let doc = json(&out);
    assert_eq!(doc["ok"], false);
    assert_eq!(doc["exit_code"], 2);
    assert!(doc["doctor"].is_null(), "{doc:#}");
}

// --- 16. SPARK_HOME ----------------------------------------------------------------------

#[test]
fn check_defaults_to_spark_home_and_fetch_ignores_it() {
    let Some(fx) = fx() else { return };
    let bad = fx.plain("foo-lib_2.13-1.0.jar", None);
    let spark = s(&fx.spark);
    let out = fx
        .sb
        .check()
        .args(["--jars", &uri(&bad), "--output", "json"])
        .env("SPARK_HOME", &spark)
        .run();
    let doc = json(&out);
    expect(&out, &doc, 8, &["error:scala-suffix"]);
    assert_eq!(doc["doctor"]["image"]["dir"], s(&fx.image_jars()));

    // --spark-jars wins over SPARK_HOME.
    let other = fx.sb.root.join("other-image");
    std::fs::create_dir_all(&other).unwrap();
    std::os::unix::fs::symlink(fx.image_jars().join(IMAGE_JAR), other.join(IMAGE_JAR)).unwrap();
    let out = fx
        .sb
        .check()
        .args([
            "--jars",
            &uri(&bad),
            "--output",
            "json",
            "--spark-jars",
            &s(&other),
        ])
        .env("SPARK_HOME", &spark)
        .run();
    let doc = json(&out);
    assert_eq!(doc["doctor"]["image"]["dir"], s(&other), "{out}");

    // A SPARK_HOME without jars/: no doctor, a warning, exit 0.
    let out = fx
        .sb
        .check()
        .args(["--jars", &uri(&bad)])
        .env("SPARK_HOME", &s(&fx.repo))
        .run();
    out.expect_code(0).expect_stderr("SPARK_HOME has no jars");
    assert!(!out.stdout.contains("doctor:"), "{out}");

    // fetch: SPARK_HOME is not its image.
    let out = fx
        .sb
        .fetch()
        .args(["--jars", &uri(&bad)])
        .env("SPARK_HOME", &spark)
        .run();
    out.expect_code(0);
    assert!(!out.stderr.contains("doctor"), "{out}");
    assert!(fx.sb.report().get("doctor").is_none());
    // --doctor-strict without an image is a configuration error (flag or env), SPARK_HOME
    // notwithstanding.
    let out = fx
        .sb
        .fetch()
        .args(["--jars", &uri(&bad), "--doctor-strict"])
        .env("SPARK_HOME", &spark)
        .run();
    out.expect_code(2).expect_stderr("invalid --doctor-strict");
    let out = fx
        .sb
        .fetch()
        .args(["--jars", &uri(&bad)])
        .env("SPARK_HOME", &spark)
        .env("SPARK_LOCALIZER_DOCTOR_STRICT", "true")
        .run();
    out.expect_code(2)
        .expect_stderr("invalid SPARK_LOCALIZER_DOCTOR_STRICT");
}

// --- 17. Unreadable jars ----------------------------------------------------------------------

#[test]
fn an_html_page_named_jar_is_unreadable() {
    let Some(fx) = fx() else { return };
    let server = FaultServer::start();
    server.put(
        "/x.jar",
        "<!DOCTYPE html><html><body>Sign in to continue</body></html>\n",
    );
    let plugin = fx.plugin();
    let (out, doc) = fx.check_json(
        &[],
        &[
            "--jars",
            &format!("{},{}", server.url("/x.jar"), uri(&plugin)),
        ],
    );
    expect(&out, &doc, 8, &["error:unreadable-jar"]);
    let f = &with_id(&doc["doctor"], "unreadable-jar")[0];
    assert!(jars_of(f)[0].ends_with("/x.jar"), "{f:#}");
    assert!(message(f).contains("cannot be read as a jar"), "{f:#}");
    // The readable one is still looked at.
    assert_eq!(
        doc["doctor"]["added"].as_array().unwrap().len(),
        1,
        "{doc:#}"
    );

    // fetch --doctor-strict refuses it too.
    let out = fx
        .sb
        .fetch()
        .arg("--doctor-jars")
        .arg(fx.image_jars())
        .args(["--jars", &server.url("/x.jar"), "--doctor-strict"])
        .run();
    out.expect_code(8);
    assert!(!fx.sb.jars.join("classpath").exists());
}

/// An image of a few of the real image's jars (symlinked), and what the doctor makes
/// of an unreadable one and of an image without Spark.
#[test]
fn image_jars_that_are_unreadable_or_not_spark() {
    let Some(fx) = fx() else { return };
    let image = fx.sb.root.join("image");
    std::fs::create_dir_all(&image).unwrap();
    for name in [
        "spark-core_2.12-3.5.3.jar",
        "scala-library-2.12.18.jar",
        "hadoop-client-api-3.3.4.jar",
    ] {
        std::os::unix::fs::symlink(fx.image_jars().join(name), image.join(name)).unwrap();
    }
    std::fs::write(image.join("broken.jar"), "<html>404</html>").unwrap();
    let bad = fx.plain("foo-lib_2.13-1.0.jar", None);
    let out = fx
        .sb
        .check()
        .args([
            "--spark-jars",
            &s(&image),
            "--output",
            "json",
            "--jars",
            &uri(&bad),
        ])
        .run();
    let doc = json(&out);
    expect(
        &out,
        &doc,
        8,
        &["error:scala-suffix", "warning:unreadable-jar"],
    );
    let f = &with_id(&doc["doctor"], "unreadable-jar")[0];
    assert_eq!(jars_of(f), ["image:broken.jar"]);
    let image_doc = &doc["doctor"]["image"];
    assert_eq!(image_doc["spark"], SPARK);
    assert_eq!(image_doc["hadoop"], HADOOP);

    // An image without spark-core: its versions are unknown, the version checks skipped.
    let plain = fx.sb.root.join("not-spark");
    std::fs::create_dir_all(&plain).unwrap();
    std::os::unix::fs::symlink(
        fx.image_jars().join("jackson-core-2.15.2.jar"),
        plain.join("jackson-core-2.15.2.jar"),
    )
    .unwrap();
    let out = fx
        .sb
        .check()
        .args([
            "--spark-jars",
            &s(&plain),
            "--output",
            "json",
            "--jars",
            &uri(&bad),
        ])
        .run();
    let doc = json(&out);
    expect(&out, &doc, 0, &["warning:image-unknown"]);
    assert!(doc["doctor"]["image"]["spark"].is_null(), "{doc:#}");
}

// --- Regressions from the black-box round ------------------------------------------------

/// A local:// jar that is not in this container (it is in the main container's image) is a
/// note, never an error: a healthy pod passes --doctor-strict.
#[test]
fn a_local_jar_not_in_this_container_is_a_note() {
    let Some(fx) = fx() else { return };
    let plugin = fx.plugin();
    let jars = format!(
        "local:///opt/spark/extra/metrics-plugin-1.0.jar,{}",
        uri(&plugin)
    );
    let (out, doc) = fx.check_json(&[], &["--jars", &jars]);
    expect(&out, &doc, 0, &["note:jar-not-here"]);
    finding(
        &doc["doctor"],
        "jar-not-here",
        "/opt/spark/extra/metrics-plugin-1.0.jar",
    );
    let out = fx
        .sb
        .fetch()
        .arg("--doctor-jars")
        .arg(fx.image_jars())
        .args(["--doctor-strict", "--jars", &jars])
        .run();
    out.expect_code(0);
    assert!(
        std::path::Path::new(&fx.sb.jar("classpath")).exists(),
        "{out}"
    );
}

/// Azure's connectors spell the Spark line and the Scala version with dashes
/// (`azure-cosmos-spark_3-5_2-12`): the 3.5 / 2.12 build is clean, others are not.
#[test]
fn azure_connector_names_are_read_as_azure_spells_them() {
    let Some(fx) = fx() else { return };
    let good = [
        fx.plain("azure-cosmos-spark_3-5_2-12-4.33.0.jar", None),
        fx.plain(
            "cosmos.jar",
            Some((
                "com.azure.cosmos.spark",
                "azure-cosmos-spark_3-5_2-12",
                "4.33.0",
            )),
        ),
    ];
    let good: Vec<&Path> = good.iter().map(PathBuf::as_path).collect();
    let (out, doc) = fx.check_json(&good, &[]);
    expect(&out, &doc, 0, &[]);
    let scala = fx.plain("azure-cosmos-spark_3-5_2-13-4.33.0.jar", None);
    let line = fx.plain("azure-cosmos-spark_3-4_2-12-4.33.0.jar", None);
    let (out, doc) = fx.check_json(&[&scala, &line], &[]);
    expect(&out, &doc, 8, &["error:scala-suffix", "error:spark-line"]);
    assert!(
        message(finding(
            &doc["doctor"],
            "scala-suffix",
            "azure-cosmos-spark_3-5_2-13-4.33.0.jar"
        ))
        .contains("built for Scala 2.13"),
        "{doc:#}"
    );
}

/// A jar renamed to something version-like (`#s3a-1.0.jar`) is still known by its one
/// embedded POM; classifier jars (`-tests`) compare by their release.
#[test]
fn aliases_and_classifiers_do_not_hide_or_invent_versions() {
    let Some(fx) = fx() else { return };
    let aws = fx.hadoop_aws("3.3.6");
    let (out, doc) = fx.check_json(&[], &["--jars", &format!("{}#s3a-1.0.jar", uri(&aws))]);
    expect(
        &out,
        &doc,
        8,
        &["error:aws-sdk-missing", "error:hadoop-version"],
    );
    let tests = fx.plain("hadoop-common-3.3.4-tests.jar", None);
    let sources = fx.plain("hadoop-azure-3.3.4-sources.jar", None);
    let (out, doc) = fx.check_json(&[&tests, &sources], &[]);
    expect(&out, &doc, 0, &[]);
}

/// scala-library of another Scala is a scala-suffix error, not only duplicates; a
/// nested class written with dots is suggested with its `$`.
#[test]
fn another_scala_library_and_nested_class_names() {
    let Some(fx) = fx() else { return };
    let lib = fx.plain(
        "scala-library-2.13.14.jar",
        Some(("org.scala-lang", "scala-library", "2.13.14")),
    );
    let (out, doc) = fx.check_json(&[&lib], &[]);
    expect(&out, &doc, 8, &["error:scala-suffix"]);
    let props = fx.properties("spark.serializer=org.apache.spark.SparkConf.Foo\nspark.kryo.registrator=org.apache.spark.util.Utils.Lock\n");
    let (out, doc) = fx.check_json(&[], &["--properties-file", &s(&props)]);
    let d = &doc["doctor"];
    out.expect_code(8);
    let suggested: Vec<&str> = with_id(d, "class-not-found")
        .into_iter()
        .map(message)
        .collect();
    assert!(
        suggested
            .iter()
            .any(|m| m.contains("did you mean org.apache.spark.util.Utils$Lock?")),
        "{d:#}"
    );
}

/// Whether `text` holds a control character other than a line break: what could
/// clear or retitle the terminal of whoever reads it.
fn raw_controls(text: &str) -> Vec<char> {
    text.chars()
        .filter(|c| c.is_control() && *c != '\n')
        .collect()
}

/// A jar's coordinates and a property value holding ESC, BEL and NUL (issue 35):
/// `check`'s text, `fetch`'s log and its termination message show them escaped;
/// the JSON keeps them exact.
#[test]
fn control_characters_from_jars_and_properties_are_escaped_in_text() {
    let Some(fx) = fx() else { return };
    let evil = fx.jar(
        "evil_2.13-1.0.jar",
        JarSpec::new().resource("README.txt", "x").pom(
            "com.ex",
            "evil_2.13",
            "1.0\u{1b}]0;pwn\u{7}",
        ),
    );
    let props = fx.properties("spark.plugins=com.ex.Plug\\u001b[2J\\u001b]0;pwn\\u0007\\u0000\n");
    let props = s(&props);
    let out = fx.check_text(&[&evil], &["--properties-file", &props]);
    out.expect_code(8);
    assert_eq!(
        raw_controls(&out.stdout),
        Vec::<char>::new(),
        "{:?}",
        out.stdout
    );
    assert_eq!(
        raw_controls(&out.stderr),
        Vec::<char>::new(),
        "{:?}",
        out.stderr
    );
    assert!(
        out.stdout
            .contains("spark.plugins names com.ex.Plug\\x1b[2J\\x1b]0;pwn\\x07\\x00"),
        "{out}"
    );
    assert!(out.stdout.contains("1.0\\x1b]0;pwn\\x07"), "{out}");

    let (out, doc) = fx.check_json(&[&evil], &["--properties-file", &props]);
    out.expect_code(8);
    let f = &with_id(&doc["doctor"], "class-not-found")[0];
    assert_eq!(
        f["classes"][0], "com.ex.Plug\u{1b}[2J\u{1b}]0;pwn\u{7}\u{0}",
        "{f:#}"
    );

    let out = fx
        .sb
        .fetch()
        .arg("--doctor-jars")
        .arg(fx.image_jars())
        .args(["--properties-file", &props, "--jars", &uri(&evil)])
        .arg("--doctor-strict")
        .run();
    out.expect_code(8);
    assert_eq!(
        raw_controls(&out.stderr),
        Vec::<char>::new(),
        "{:?}",
        out.stderr
    );
    let term = fx.sb.term_log_text().expect("a termination message");
    assert_eq!(raw_controls(&term), Vec::<char>::new(), "{term:?}");
    assert!(term.contains("com.ex.Plug\\x1b[2J"), "{term}");
}

/// Entries of the image's jars directory named `*.jar` that are not files — a
/// directory, a FIFO, a symbolic-link loop — are named in a warning, not skipped
/// silently (issue 35); a name with control characters is shown escaped.
#[test]
fn image_entries_that_are_not_files_are_warned_about() {
    let Some(fx) = fx() else { return };
    let image = fx.sb.root.join("image");
    std::fs::create_dir_all(&image).unwrap();
    for name in ["spark-core_2.12-3.5.3.jar", "scala-library-2.12.18.jar"] {
        std::os::unix::fs::symlink(fx.image_jars().join(name), image.join(name)).unwrap();
    }
    std::fs::create_dir(image.join("dir\u{1b}]0;pwn\u{7}.jar")).unwrap();
    let fifo = std::ffi::CString::new(s(&image.join("fifo.jar"))).unwrap();
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    std::os::unix::fs::symlink(image.join("loop.jar"), image.join("loop.jar")).unwrap();
    let plugin = fx.plugin();
    let run = |json: bool| {
        let mut cmd = fx
            .sb
            .check()
            .args(["--spark-jars", &s(&image), "--jars", &uri(&plugin)]);
        if json {
            cmd = cmd.args(["--output", "json"]);
        }
        cmd.run()
    };
    let out = run(true);
    let doc = json(&out);
    expect(&out, &doc, 0, &["warning:image-entry-skipped"; 3]);
    let skipped: Vec<(Vec<&str>, &str)> = with_id(&doc["doctor"], "image-entry-skipped")
        .into_iter()
        .map(|f| (jars_of(f), message(f)))
        .collect();
    let about = |name: &str| -> &str {
        skipped
            .iter()
            .find(|(jars, _)| jars == &[format!("image:{name}").as_str()])
            .unwrap_or_else(|| panic!("no finding about {name:?}: {skipped:?}"))
            .1
    };
    assert!(about("dir\u{1b}]0;pwn\u{7}.jar").contains("is a directory"));
    assert!(about("fifo.jar").contains("is a FIFO"));
    assert!(about("loop.jar").contains("symbolic link"));

    let out = run(false);
    out.expect_code(0);
    assert_eq!(
        raw_controls(&out.stdout),
        Vec::<char>::new(),
        "{:?}",
        out.stdout
    );
    assert!(
        out.stdout.contains(
            "WARN  image-entry-skipped: the image's dir\\x1b]0;pwn\\x07.jar is a directory"
        ),
        "{out}"
    );
}
