//! Version findings: the image's versions, and added jars built for another
//! Scala, another Spark line, another Hadoop, or missing their AWS SDK.

use super::jar::{pom_dependency_version, Jar};
use super::names::{self, major_minor};
use super::{image_jar, Added, Finding, Image, Severity};

/// `image-versions` (note), `image-unknown`, `image-entry-skipped` and
/// `unreadable-jar` (warnings).
pub(super) fn image_versions(image: &Image) -> Vec<Finding> {
    let v = &image.versions;
    let mut out = vec![Finding::new(
        "image-versions",
        Severity::Note,
        Vec::new(),
        format!(
            "the image ({}, {} jars) runs {}",
            image.dir.display(),
            image.jars.len(),
            v.shown()
        ),
        "added jars are checked against these versions",
    )];
    if v.spark.is_none() {
        let skipped = if v.scala.is_none() {
            "the Spark and Scala versions are unknown, so the Scala, Spark-line and Spark-module checks are skipped"
        } else {
            "the Spark version is unknown, so the Spark-line and Spark-module checks are skipped (Scala is scala-library's)"
        };
        out.push(Finding::new(
            "image-unknown",
            Severity::Warning,
            Vec::new(),
            format!(
                "no spark-core_<scala> jar in {}: {skipped}",
                image.dir.display()
            ),
            "point --spark-home at the image's SPARK_HOME (or --spark-jars at its jars directory)",
        ));
    }
    for (name, what) in &image.skipped {
        out.push(Finding::new(
            "image-entry-skipped",
            Severity::Warning,
            vec![image_jar(name)],
            format!("the image's {name} is {what}, not a jar file: not looked into"),
            "the JVM cannot load classes from it either: check how the image's jars directory was built",
        ));
    }
    for (name, why) in &image.unreadable {
        out.push(Finding::new(
            "unreadable-jar",
            Severity::Warning,
            vec![image_jar(name)],
            format!("the image's {name} cannot be read as a jar: {why}"),
            "the image's own jars are not this run's to fix; its classes are left out of the checks",
        ));
    }
    out
}

/// Every version finding about the added jars.
pub(super) fn versions(image: &Image, added: &[Added]) -> Vec<Finding> {
    let mut out = Vec::new();
    for a in added {
        out.extend(scala(image, &a.jar));
        out.extend(spark_line(image, &a.jar));
        out.extend(spark_module(image, &a.jar));
        out.extend(hadoop(image, &a.jar));
    }
    out.extend(aws_sdk(image, added));
    out
}

/// `scala-suffix`: a jar built for another Scala binary version (its name, its
/// coordinates or an embedded POM says `_2.13` in a Scala 2.12 Spark).
fn scala(image: &Image, jar: &Jar) -> Option<Finding> {
    let want = image.versions.scala.as_deref()?;
    let from_name = names::from_file_name(&jar.name);
    // scala-library itself says its version, not a suffix.
    let library = (jar.coords.base() == "scala-library")
        .then(|| jar.coords.release().and_then(major_minor))
        .flatten()
        .map(|(a, b)| format!("{a}.{b}"));
    let said = library
        .into_iter()
        .chain(
            [from_name.scala(), jar.coords.scala()]
                .into_iter()
                .flatten()
                .chain(jar.embedded.iter().filter_map(|c| c.scala()))
                .map(str::to_owned),
        )
        .find(|s| s != want)?;
    let fixed = jar.name.replace(&format!("_{said}"), &format!("_{want}"));
    let build = if fixed == jar.name {
        format!("the _{want} build")
    } else {
        format!("the _{want} build ({fixed})")
    };
    Some(Finding::new(
        "scala-suffix",
        Severity::Error,
        vec![jar.name.clone()],
        format!(
            "{} ({}) is built for Scala {said}; this Spark runs Scala {want}",
            jar.name,
            jar.coords.shown()
        ),
        format!(
            "use {build}; a Scala {said} jar fails at run time with NoSuchMethodError or NoClassDefFoundError (scala.collection…)"
        ),
    ))
}

/// `spark-line`: a third-party jar for another Spark line (`iceberg-spark-runtime-3.4`
/// in Spark 3.5).
fn spark_line(image: &Image, jar: &Jar) -> Option<Finding> {
    let (major, minor) = image.versions.spark_line()?;
    let line = names::spark_line(&jar.coords)
        .or_else(|| names::spark_line(&names::from_file_name(&jar.name)))?;
    if line.admits(major, minor) {
        return None;
    }
    Some(Finding::new(
        "spark-line",
        Severity::Error,
        vec![jar.name.clone()],
        format!(
            "{} ({}) is built for Spark {line}; the image runs Spark {}",
            jar.name,
            jar.coords.shown(),
            image.versions.spark.as_deref().unwrap_or_default()
        ),
        format!(
            "use the artifact for Spark {major}.{minor}; Spark's internal APIs change between lines (AbstractMethodError, NoSuchMethodError at run time)"
        ),
    ))
}

/// `spark-module-version`: one of Spark's own modules (`org.apache.spark:spark-avro_2.12`)
/// of another Spark version than the image's.
fn spark_module(image: &Image, jar: &Jar) -> Option<Finding> {
    let spark = image.versions.spark.as_deref()?;
    let c = &jar.coords;
    if c.group.as_deref() != Some("org.apache.spark") || !c.base().starts_with("spark-") {
        return None;
    }
    let version = c.release()?;
    if version == spark {
        return None;
    }
    // Another line breaks; another patch release of the same line usually works.
    let severity = if major_minor(version) == major_minor(spark) {
        Severity::Warning
    } else {
        Severity::Error
    };
    Some(Finding::new(
        "spark-module-version",
        severity,
        vec![jar.name.clone()],
        format!(
            "{} is Spark's {} {version}; the image runs Spark {spark}",
            jar.name, c.artifact
        ),
        format!(
            "use {}:{}:{spark}, the image's version",
            "org.apache.spark", c.artifact
        ),
    ))
}

/// Hadoop's modules that must be of the image's Hadoop version when named by file
/// only (with embedded coordinates, any `org.apache.hadoop:hadoop-*` is).
const HADOOP_MODULES: [&str; 12] = [
    "hadoop-aws",
    "hadoop-azure",
    "hadoop-azure-datalake",
    "hadoop-aliyun",
    "hadoop-cos",
    "hadoop-huaweicloud",
    "hadoop-openstack",
    "hadoop-common",
    "hadoop-client",
    "hadoop-client-api",
    "hadoop-client-runtime",
    "hadoop-hdfs-client",
];

/// `hadoop-version`: a Hadoop module (`hadoop-aws`, `hadoop-azure`…) of another
/// Hadoop than the image's, or a GCS connector for another Hadoop major.
fn hadoop(image: &Image, jar: &Jar) -> Option<Finding> {
    let hadoop = image.versions.hadoop.as_deref()?;
    let c = &jar.coords;
    let version = c.release()?;
    let module = match c.group.as_deref() {
        Some(group) => group == "org.apache.hadoop" && c.artifact.starts_with("hadoop-"),
        None => HADOOP_MODULES.contains(&c.artifact.as_str()),
    };
    if module {
        if version == hadoop {
            return None;
        }
        return Some(Finding::new(
            "hadoop-version",
            Severity::Error,
            vec![jar.name.clone()],
            format!(
                "{} is {} {version}; the image's Hadoop (hadoop-client) is {hadoop}",
                jar.name, c.artifact
            ),
            format!(
                "use {}:{hadoop}: Hadoop's modules must all be of one version (mixing them fails with NoSuchMethodError or ClassNotFoundException in org.apache.hadoop)",
                c.artifact
            ),
        ));
    }
    // gcs-connector-hadoop2-* / -hadoop3-* (up to 2.2.x) name the Hadoop major;
    // from 3.0 (gcs-connector-3.x.y) the connector is for Hadoop 3 only.
    let (image_major, _) = major_minor(hadoop)?;
    let major = match c.artifact.strip_prefix("gcs-connector-hadoop") {
        Some(n) => n.parse::<u32>().ok()?,
        None if c.artifact == "gcs-connector" && major_minor(version)?.0 >= 3 => 3,
        None => return None,
    };
    (major != image_major).then(|| {
        Finding::new(
            "hadoop-version",
            Severity::Error,
            vec![jar.name.clone()],
            format!(
                "{} is the GCS connector for Hadoop {major}; the image's Hadoop is {hadoop}",
                jar.name
            ),
            if image_major == 2 {
                "use gcs-connector-hadoop2-2.2.x (the shaded jar)".to_owned()
            } else {
                format!(
                "use gcs-connector-hadoop{image_major}-2.2.x or gcs-connector 3.x (the shaded jar)"
            )
            },
        )
    })
}

/// The AWS SDK each Hadoop release's `hadoop-project` POM pins (the version
/// `hadoop-aws` is built and tested with): v1's `aws-java-sdk-bundle` up to
/// Hadoop 3.3, v2's `bundle` from 3.4. hadoop-aws's own POM leaves the version
/// to that parent, so it is not in the jar. Releases whose pin is not known
/// here get no version check (only the SDK generation's).
const AWS_SDK: [(&str, &str); 9] = [
    ("3.2.0", "1.11.375"),
    ("3.3.1", "1.11.901"),
    ("3.3.2", "1.11.1026"),
    ("3.3.4", "1.12.262"),
    ("3.3.5", "1.12.316"),
    ("3.3.6", "1.12.367"),
    ("3.4.0", "2.23.19"),
    ("3.4.1", "2.24.6"),
    ("3.4.2", "2.29.52"),
];

/// One generation of the AWS SDK: a class that shows it is there, the bundle's
/// coordinates.
struct Sdk {
    probe: &'static str,
    group: &'static str,
    artifact: &'static str,
    name: &'static str,
}

const SDK_V1: Sdk = Sdk {
    probe: "com/amazonaws/services/s3/AmazonS3",
    group: "com.amazonaws",
    artifact: "aws-java-sdk-bundle",
    name: "v1",
};
const SDK_V2: Sdk = Sdk {
    probe: "software/amazon/awssdk/services/s3/S3Client",
    group: "software.amazon.awssdk",
    artifact: "bundle",
    name: "v2",
};

/// `aws-sdk-missing` (error) and `aws-sdk-version` (warning): each `hadoop-aws`
/// against the AWS SDK present, when an added jar is one of them.
fn aws_sdk(image: &Image, added: &[Added]) -> Vec<Finding> {
    let all: Vec<(&Jar, bool)> = image
        .jars
        .iter()
        .map(|j| (j, false))
        .chain(added.iter().map(|a| (&a.jar, true)))
        .collect();
    let mut out = Vec::new();
    for (aws, aws_added) in all
        .iter()
        .filter(|(j, _)| j.coords.artifact == "hadoop-aws")
    {
        let Some(version) = aws.coords.release() else {
            continue;
        };
        let sdk = if major_minor(version).is_some_and(|v| v >= (3, 4)) {
            &SDK_V2
        } else {
            &SDK_V1
        };
        let pom = aws.entry_text("META-INF/maven/org.apache.hadoop/hadoop-aws/pom.xml");
        let expected = pom
            .and_then(|p| pom_dependency_version(&p, sdk.group, sdk.artifact))
            .or_else(|| {
                AWS_SDK
                    .iter()
                    .find(|(h, _)| *h == version)
                    .map(|(_, s)| (*s).to_owned())
            });
        let shown = |j: &Jar, added: bool| {
            if added {
                j.name.clone()
            } else {
                image_jar(&j.name)
            }
        };
        let holder = all.iter().find(|(j, _)| j.has(sdk.probe));
        let wanted = expected
            .as_deref()
            .map_or(String::new(), |v| format!(" {v}"));
        match holder {
            None if *aws_added => out.push(Finding::new(
                "aws-sdk-missing",
                Severity::Error,
                vec![shown(aws, *aws_added)],
                format!(
                    "{} ({version}) needs the AWS SDK {} ({}:{}{wanted}); no jar holds {}",
                    aws.name,
                    sdk.name,
                    sdk.group,
                    sdk.artifact,
                    sdk.probe.replace('/', ".")
                ),
                format!(
                    "add {}:{}{wanted} to --jars (or --packages): s3a:// fails with NoClassDefFoundError without it",
                    sdk.group, sdk.artifact
                ),
            ).with_classes(vec![sdk.probe.replace('/', ".")])),
            Some((holder, holder_added)) if *aws_added || *holder_added => {
                let have = holder.coords.release();
                if let (Some(want), Some(have)) = (expected.as_deref(), have) {
                    if want != have && holder.coords.artifact == sdk.artifact {
                        out.push(Finding::new(
                            "aws-sdk-version",
                            Severity::Warning,
                            vec![shown(aws, *aws_added), shown(holder, *holder_added)],
                            format!(
                                "{} ({version}) is built against the AWS SDK {want}; {} is {have}",
                                aws.name, holder.name
                            ),
                            format!(
                                "use {}:{}:{want}, the version hadoop-aws {version} is tested with",
                                sdk.group, sdk.artifact
                            ),
                        ));
                    }
                }
            }
            _ => {}
        }
    }
    out
}
