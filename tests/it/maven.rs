//! `--packages`, `resolve` and `--lock` against a real Maven repository: Debian's
//! `/usr/share/maven-repo` (filled by the `maven` and `lib*-java` packages
//! `scripts/test.sh` installs) served by nginx on 127.0.0.1, with Spark's own
//! resolver (pyspark's `spark-submit --packages`) as the reference; and hostile
//! repositories played by the fault server.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::support::nginx::Nginx;
use crate::support::{s, Fault, FaultServer, Sandbox};

pub(crate) const DEBIAN_REPO: &str = "/usr/share/maven-repo";

fn ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "false")
}

/// Debian's repository served by nginx; `None` (SKIP) locally when missing.
pub(crate) fn debian_repo() -> Option<Nginx> {
    let core = Path::new(DEBIAN_REPO).join("org/apache/maven/maven-core/3.8.7");
    if !core.is_dir() {
        assert!(
            !ci(),
            "{DEBIAN_REPO} has no maven-core 3.8.7: `bash scripts/test.sh` installs Debian's maven"
        );
        eprintln!("SKIP: no {DEBIAN_REPO} (Debian's maven package)");
        return None;
    }
    Nginx::start(Path::new(DEBIAN_REPO))
}

/// The jar names of a lockfile (what follows each URL's `#`).
fn locked_names(lock: &str) -> BTreeSet<String> {
    lock.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| l.rsplit_once('#').map(|(_, name)| name.to_owned()))
        .collect()
}

/// An Ivy settings file whose only resolver is `repo` (what both resolvers read
/// in the differential test).
fn ivy_settings(work: &Path, repo: &str) -> PathBuf {
    let settings = work.join("ivysettings.xml");
    std::fs::write(
        &settings,
        format!(
            r#"<ivysettings><settings defaultResolver="repo"/><resolvers><ibiblio name="repo" m2compatible="true" root="{repo}"/></resolvers></ivysettings>"#
        ),
    )
    .unwrap();
    settings
}

/// What Spark's own `--packages` resolves for `coordinate` with `settings` (a
/// fresh Ivy home): the jar names it hands the driver.
fn spark_resolves(
    spark_home: &Path,
    work: &Path,
    settings: &Path,
    coordinate: &str,
    excludes: &str,
) -> BTreeSet<String> {
    let app = work.join("app.py");
    std::fs::write(&app, "pass\n").unwrap();
    let ivy = tempfile::tempdir_in(work).unwrap().keep();
    let mut command = Command::new(spark_home.join("bin/spark-submit"));
    if !excludes.is_empty() {
        command.args(["--exclude-packages", excludes]);
    }
    let out = command
        .env("SPARK_HOME", spark_home)
        .args(["--packages", coordinate])
        .arg("--conf")
        .arg(format!("spark.jars.ivy={}", ivy.display()))
        .arg("--conf")
        .arg(format!("spark.jars.ivySettings={}", settings.display()))
        .arg(&app)
        .output()
        .expect("run spark-submit");
    assert!(
        out.status.success(),
        "spark-submit --packages {coordinate} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read_dir(ivy.join("jars"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn spark_home() -> Option<PathBuf> {
    spark_home_from("SPARK_LOCALIZER_TEST_SPARK_HOME", "")
}

/// Spark 4's (`scripts/setup/spark.sh 4.0.1`).
fn spark4_home() -> Option<PathBuf> {
    spark_home_from("SPARK_LOCALIZER_TEST_SPARK4_HOME", " 4.0.1")
}

fn spark_home_from(var: &str, version: &str) -> Option<PathBuf> {
    match std::env::var(var) {
        Ok(home) if !home.is_empty() => Some(PathBuf::from(home)),
        _ => {
            assert!(
                !ci(),
                "{var} is not set (`bash scripts/setup/spark.sh{version}`)"
            );
            eprintln!("SKIP: {var} is not set");
            None
        }
    }
}

/// What Spark 4 (Ivy 2.5.3) gives differently from Spark 3.5 (Ivy 2.5.1), which
/// `--resolution spark` follows: Ivy 2.5.1 carries a classifier asked of an
/// evicted version to the winner when the winner is a package declared
/// earlier (docs/packages.md); 2.5.2 (IVY-1642) and later never do.
const NOT_CARRIED_BY_SPARK_4: &[(&str, &str)] = &[
    (
        "com.google.inject:guice:4.2.3,org.apache.maven:maven-embedder:3.8.7",
        "com.google.inject_guice-4.2.3-no_aop.jar",
    ),
    (
        "com.google.inject:guice:4.2.3,org.apache.maven:maven-compat:3.8.7",
        "com.google.inject_guice-4.2.3-no_aop.jar",
    ),
];

/// The differential test: for each coordinate, the jars `resolve` pins are the
/// jars Spark's own `--packages` (Ivy) resolves on the same repository, Spark
/// 3.5.3's exactly and Spark 4.0.1's but for [`NOT_CARRIED_BY_SPARK_4`].
#[test]
fn packages_resolve_to_what_spark_resolves() {
    let Some(repo) = debian_repo() else { return };
    let Some(spark) = spark_home() else { return };
    let Some(spark4) = spark4_home() else { return };
    let root = repo.url("/");
    let work = tempfile::tempdir().unwrap();
    let sb = Sandbox::new();
    // (packages, --exclude-packages)
    let coordinates: Vec<(&str, &str)> = [
        // Deep trees, parents (maven-parent, apache), version properties,
        // relocations (plexus-component-annotations 1.5.5 -> debian), and
        // exclusions that one path makes and another does not (embedder).
        "org.apache.maven:maven-core:3.8.7",
        "org.apache.maven:maven-embedder:3.8.7",
        "org.apache.maven:maven-compat:3.8.7",
        "org.apache.maven:maven-resolver-provider:3.8.7",
        "org.apache.maven.resolver:maven-resolver-impl:1.6.3",
        "org.apache.maven.resolver:maven-resolver-transport-wagon:1.6.3",
        "org.eclipse.sisu:org.eclipse.sisu.plexus:0.3.4",
        "com.google.inject:guice:4.2.3",
        "com.google.inject.extensions:guice-assistedinject:4.2.3",
        "com.google.guava:guava:31.1-jre",
        "org.apache.maven.wagon:wagon-provider-api:3.5.3",
        "org.slf4j:slf4j-simple:1.7.32",
        "com.fasterxml.jackson.core:jackson-databind:2.14.0",
    ]
    .into_iter()
    .map(|c| (c, ""))
    .chain([
        // --exclude-packages applies to the packages asked for too.
        (
            "org.slf4j:slf4j-api:1.7.32,org.slf4j:jul-to-slf4j:1.7.32",
            "org.slf4j:slf4j-api",
        ),
        ("org.apache.maven:maven-model:3.8.7", "org.apache.maven:*"),
        ("com.google.inject:guice:4.2.3", "*:*"),
        // Relocated to itself: nothing to fetch.
        ("org.codehaus.plexus:plexus-component-annotations:1.5.5", ""),
        // A classifier asked of a version that loses (maven-core asks for
        // guice:debian:no_aop): Ivy 2.5.1 carries it to 4.2.3 in one order only.
        (
            "org.apache.maven:maven-embedder:3.8.7,com.google.inject:guice:4.2.3",
            "",
        ),
        (
            "com.google.inject:guice:4.2.3,org.apache.maven:maven-embedder:3.8.7",
            "",
        ),
        (
            "com.google.inject:guice:4.2.3,org.apache.maven:maven-compat:3.8.7",
            "",
        ),
        // The same module twice, the version that loses first: no jar of it.
        (
            "org.apache.maven:maven-model:3.x,org.apache.maven:maven-model:3.8.7",
            "",
        ),
        (
            "org.apache.maven:maven-model:3.8.7,org.apache.maven:maven-model:3.x",
            "",
        ),
        // [x] is x, listing nothing (Debian's repository has no metadata).
        ("com.google.inject:guice:[4.2.3]", ""),
        // A relocation is a dependency on the new coordinates: it meets
        // conflicts and --exclude-packages (found by a black-box round).
        (
            "org.apache.maven:maven-aether-provider:3.x,org.apache.maven:maven-resolver-provider:3.8.7",
            "",
        ),
        (
            "org.apache.maven:maven-aether-provider:3.x",
            "org.apache.maven:maven-resolver-provider",
        ),
        // Declared twice with a package between that asks for it: no jar of it.
        (
            "org.slf4j:slf4j-api:debian,org.slf4j:slf4j-simple:1.7.32,org.slf4j:slf4j-api:1.7.32",
            "",
        ),
        // Ivy's glob: ? and [..].
        ("org.apache.maven:maven-core:3.8.7", "org.codehaus.plexu?:*,*:plexus-[cu]*"),
    ])
    .collect();
    // Both read the same Ivy settings file, as spark.jars.ivySettings.
    let settings = ivy_settings(work.path(), &root);
    let props = sb.write(
        "spark-defaults.conf",
        format!("spark.jars.ivySettings {}\n", settings.display()),
    );
    let mut compared = 0;
    for &(coordinate, excludes) in &coordinates {
        let mut resolve =
            sb.resolve()
                .args(["--properties-file", &s(&props), "--packages", coordinate]);
        if !excludes.is_empty() {
            resolve = resolve.args(["--exclude-packages", excludes]);
        }
        let out = resolve.run();
        out.expect_code(0);
        let ours = locked_names(&out.stdout);
        // Both Sparks at once (each is a JVM start and an Ivy resolution).
        let (theirs, theirs4) = std::thread::scope(|scope| {
            let four = scope
                .spawn(|| spark_resolves(&spark4, work.path(), &settings, coordinate, excludes));
            let three = spark_resolves(&spark, work.path(), &settings, coordinate, excludes);
            (three, four.join().unwrap())
        });
        assert_eq!(
            ours, theirs,
            "{coordinate} excluding '{excludes}': ours (left) vs Spark 3.5's (right)"
        );
        assert!(!ours.is_empty() || theirs.is_empty(), "{coordinate}");
        let mut expected4 = ours.clone();
        for (packages, jar) in NOT_CARRIED_BY_SPARK_4 {
            if *packages == coordinate {
                assert!(expected4.remove(*jar), "{coordinate}: {jar}");
            }
        }
        assert_eq!(
            expected4, theirs4,
            "{coordinate} excluding '{excludes}': ours (left, less what Ivy 2.5.1 alone carries) vs Spark 4's (right)"
        );
        compared += 1;
    }
    assert_eq!(compared, coordinates.len());
}

/// Resolve once, fetch many: `resolve --lock` pins every jar; `fetch --lock`
/// fetches exactly those (byte-exact, named as Spark names them, on the
/// classpath in the lockfile's order) without reading a POM; a rerun keeps them.
#[test]
fn resolve_writes_a_lock_that_fetch_fetches_exactly() {
    let Some(repo) = debian_repo() else { return };
    let root = repo.url("/");
    let sb = Sandbox::new();
    let lock = sb.root.join("packages.lock");
    sb.resolve()
        .args([
            "--packages",
            "org.eclipse.sisu:org.eclipse.sisu.plexus:0.3.4",
        ])
        .args([
            "--repositories",
            &root,
            "--only-repositories",
            "--lock",
            &s(&lock),
        ])
        .run()
        .expect_code(0);
    let text = std::fs::read_to_string(&lock).unwrap();
    assert!(
        text.contains("# packages: org.eclipse.sisu:org.eclipse.sisu.plexus:0.3.4"),
        "{text}"
    );
    assert!(
        text.contains("# org.slf4j:slf4j-api:debian (") && text.contains(" via org.eclipse.sisu:org.eclipse.sisu.inject:debian <- org.eclipse.sisu:org.eclipse.sisu.plexus:0.3.4 <- --packages"),
        "{text}"
    );
    let names = locked_names(&text);
    assert_eq!(names.len(), 8, "{text}");

    let before = repo.access_log().len();
    let out = sb.fetch().args(["--lock", &s(&lock)]).run();
    out.expect_code(0);
    let log = repo.access_log();
    assert!(
        log[before..].iter().all(|l| l.contains(".jar ")),
        "fetch --lock read something else than jars: {:?}",
        &log[before..]
    );
    for name in &names {
        assert!(sb.jar(name).is_file(), "{name}");
    }
    let plexus = sb.jar("org.eclipse.sisu_org.eclipse.sisu.plexus-0.3.4.jar");
    assert_eq!(
        std::fs::read(&plexus).unwrap(),
        std::fs::read(Path::new(DEBIAN_REPO).join(
            "org/eclipse/sisu/org.eclipse.sisu.plexus/0.3.4/org.eclipse.sisu.plexus-0.3.4.jar"
        ))
        .unwrap()
    );
    let classpath = sb.classpath();
    assert!(
        classpath.starts_with(&s(&plexus)),
        "the package asked for comes first: {classpath}"
    );
    let out = sb.fetch().args(["--lock", &s(&lock)]).run();
    out.expect_code(0).expect_stderr("8 kept");
    // A lock pins every jar it fetches: --require-pins is satisfied by it, and
    // refuses the same packages resolved without one (the repository's .sha1
    // files are not pins), naming the jars, before any jar is fetched.
    let pinned = Sandbox::new();
    pinned
        .fetch()
        .args(["--lock", &s(&lock), "--require-pins"])
        .run()
        .expect_code(0);
    assert_eq!(
        std::fs::read(pinned.jar("org.eclipse.sisu_org.eclipse.sisu.plexus-0.3.4.jar")).unwrap(),
        std::fs::read(&plexus).unwrap()
    );
    let unpinned = Sandbox::new();
    let before = repo.access_log().len();
    let strict_packages = [
        "--packages",
        "org.eclipse.sisu:org.eclipse.sisu.plexus:0.3.4",
        "--repositories",
        &root,
        "--only-repositories",
        "--require-pins",
    ];
    let out = unpinned.fetch().args(strict_packages).run();
    out.expect_code(2)
        .expect_stderr("org.eclipse.sisu.plexus-0.3.4.jar (--packages) is not pinned");
    // With another problem in the way the packages are not resolved: their
    // pins are not called stray for it.
    let names_pinned = unpinned.write(
        "names",
        text.lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .map(|l| {
                format!(
                    "{}\n",
                    l.split_whitespace().take(2).collect::<Vec<_>>().join("  ")
                )
            })
            .collect::<String>(),
    );
    let out = unpinned
        .fetch()
        .args(strict_packages)
        .args(["--jars", "htp:/bad.jar"])
        .arg("--checksums")
        .arg(&names_pinned)
        .run();
    out.expect_code(2).expect_stderr("htp:/bad.jar");
    assert!(!out.stderr.contains("matches no artifact"), "{out}");
    assert!(
        repo.access_log()[before..]
            .iter()
            .all(|l| !l.contains(".jar ")),
        "a jar was fetched: {:?}",
        &repo.access_log()[before..]
    );
    assert!(!unpinned
        .jar("org.eclipse.sisu_org.eclipse.sisu.plexus-0.3.4.jar")
        .exists());

    // A jar that is not what was locked fails its pin; nothing is published.
    let first_pin = text
        .lines()
        .find(|l| !l.starts_with('#'))
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap();
    let bad = sb.write("tampered.lock", text.replace(first_pin, &"0".repeat(64)));
    let sb2 = Sandbox::new();
    let out = sb2.fetch().args(["--lock", &s(&bad)]).run();
    out.expect_code(4).expect_stderr("sha256 mismatch");
    assert!(!sb2
        .jar("org.eclipse.sisu_org.eclipse.sisu.plexus-0.3.4.jar")
        .exists());
    // A lock made for other packages than the ones declared is refused.
    let out = sb2
        .fetch()
        .args([
            "--lock",
            &s(&lock),
            "--packages",
            "com.google.guava:guava:31.1-jre",
        ])
        .run();
    out.expect_code(2)
        .expect_stderr("run `spark-localizer resolve` again");
}

/// `fetch --packages` resolves in the pod (verifying each jar against the
/// repository's `.sha1` while fetching it); `check --packages` prints the tree.
#[test]
fn fetch_and_check_resolve_packages_in_the_pod() {
    let Some(repo) = debian_repo() else { return };
    let root = repo.url("/");
    let sb = Sandbox::new();
    let packages = [
        "--packages",
        "com.google.inject:guice:4.2.3",
        "--repositories",
        &root,
        "--only-repositories",
    ];
    let out = sb.check().args(packages).run();
    out.expect_code(0);
    for line in [
        "packages (repositories: ",
        "com.google.inject:guice:4.2.3:jar:compile",
        "+- javax.inject:javax.inject:debian:jar:compile",
        "jar com.google.inject_guice-4.2.3.jar from ",
    ] {
        assert!(out.stdout.contains(line), "{line}\n{out}");
    }
    assert!(sb.jar_names().is_empty());
    let out = sb.fetch().args(packages).run();
    out.expect_code(0)
        .expect_stderr("resolved 6 jar(s) for --packages");
    assert!(sb.jar("com.google.inject_guice-4.2.3.jar").is_file());
    assert_eq!(sb.jar_names().len(), 6, "{:?}", sb.jar_names());
    // The report says where each jar comes from and why.
    let packages = &sb.report()["packages"];
    assert_eq!(
        packages["jars"][0]["coordinate"],
        "com.google.inject:guice:4.2.3"
    );
    let guava = packages["jars"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["name"] == "com.google.guava_guava-debian.jar")
        .unwrap();
    assert_eq!(
        guava["required_by"],
        serde_json::json!(["com.google.inject:guice:4.2.3"])
    );
    assert_eq!(guava["repository"], root.as_str());
}

/// A repository with `.sha1` files: a jar that does not match its `.sha1` is an
/// integrity failure (exit 4), for `fetch --packages` and for `resolve`, and
/// nothing is published.
#[test]
fn a_jar_that_does_not_match_the_repository_sha1_is_refused() {
    use sha1::Digest;
    let server = FaultServer::start();
    let pom =
        "<project><groupId>g</groupId><artifactId>a</artifactId><version>1</version></project>";
    let jar = b"PK\x03\x04 the real jar".to_vec();
    server.put("/m2/g/a/1/a-1.pom", pom.as_bytes().to_vec());
    server.put(
        "/m2/g/a/1/a-1.pom.sha1",
        hex::encode(sha1::Sha1::digest(pom.as_bytes())),
    );
    server.put("/m2/g/a/1/a-1.jar", b"PK\x03\x04 a replaced jar".to_vec());
    server.put(
        "/m2/g/a/1/a-1.jar.sha1",
        format!("{}  a-1.jar\n", hex::encode(sha1::Sha1::digest(&jar))),
    );
    let repo = server.url("/m2/");
    let sb = Sandbox::new();
    let args = [
        "--packages",
        "g:a:1",
        "--repositories",
        &repo,
        "--only-repositories",
    ];
    let out = sb.fetch().args(args).run();
    out.expect_code(4)
        .expect_stderr("does not match the repository's .sha1");
    assert!(sb.jar_names().is_empty(), "{:?}", sb.jar_names());
    let out = sb.resolve().args(args).run();
    out.expect_code(4)
        .expect_stderr("does not match the repository's .sha1");
    assert!(out.stdout.is_empty());
}

/// Hostile and broken repositories: an HTML page as a POM, a missing dependency
/// (coordinate, path and every repository's answer named), an unreachable
/// repository tried once and skipped quickly.
#[test]
fn broken_repositories_fail_clearly_and_quickly() {
    let server = FaultServer::start();
    server.put(
        "/m2/g/html/1/html-1.pom",
        "<!DOCTYPE html><html><body>Please sign in</body></html>",
    );
    server.put(
        "/m2/g/a/1/a-1.pom",
        "<project><groupId>g</groupId><artifactId>a</artifactId><version>1</version><dependencies><dependency><groupId>g</groupId><artifactId>gone</artifactId><version>2</version></dependency></dependencies></project>",
    );
    server.put("/m2/g/a/1/a-1.jar", b"jar".to_vec());
    server.always("/m2/g/flaky/1/flaky-1.pom", Fault::Status(503));
    let repo = server.url("/m2/");
    // Nothing listens on port 9 of loopback: refused at once.
    let dead = "http://127.0.0.1:9/maven2/";
    let sb = Sandbox::new();
    let run = |pkg: &str| {
        sb.resolve()
            .args(["--packages", pkg, "--only-repositories"])
            .args(["--repositories", &format!("{dead},{repo}")])
            .run()
    };
    let out = run("g:html:1");
    out.expect_code(3)
        .expect_stderr("html-1.pom: an HTML page, not a POM");
    let out = run("g:a:1");
    out.expect_code(3)
        .expect_stderr("cannot find the POM of g:gone:2 (required by g:a:1 <- --packages)")
        .expect_stderr(&format!("{repo}: not found"))
        .expect_stderr("http://127.0.0.1:9/maven2/: ");
    assert_eq!(
        out.stderr.matches("cannot be reached").count(),
        1,
        "the unreachable repository is warned about once: {out}"
    );
    assert!(out.elapsed < Duration::from_secs(10), "{out}");
    let out = run("g:flaky:1");
    out.expect_code(3).expect_stderr("503");
    // A coordinate that is not one is a configuration error.
    let out = sb.fetch().args(["--packages", "not-a-coordinate"]).run();
    out.expect_code(2)
        .expect_stderr("groupId:artifactId:version");
}

/// Repository credentials (`--http-header-file`, URL userinfo) go to the
/// repository's origin only; a redirect (an Artifactory serving jars from a
/// bucket) is followed without them.
#[test]
fn repository_credentials_stay_on_the_repository_and_redirects_are_followed() {
    let repo = FaultServer::start();
    let cdn = FaultServer::start();
    let pom =
        "<project><groupId>g</groupId><artifactId>a</artifactId><version>1</version></project>";
    repo.put("/m2/g/a/1/a-1.pom", pom);
    cdn.put("/blobs/a-1.jar", b"the jar".to_vec());
    repo.always(
        "/m2/g/a/1/a-1.jar",
        Fault::Redirect(302, cdn.url("/blobs/a-1.jar")),
    );
    let sb = Sandbox::new();
    // The URL's userinfo wins over the header file's Authorization, as for --jars.
    let headers = sb.write(
        "headers",
        "X-Repo-Token: tok-SECRET-1234\nAuthorization: Bearer hdr-SECRET-0000\n",
    );
    let root = repo
        .url("/m2/")
        .replace("http://", "http://ci:pw-SECRET-5678@");
    let out = sb
        .resolve()
        .args([
            "--packages",
            "g:a:1",
            "--only-repositories",
            "--repositories",
            &root,
        ])
        .args(["--http-header-file", &s(&headers)])
        .run();
    out.expect_code(0);
    assert!(out.stdout.contains("#g_a-1.jar"), "{out}");
    assert!(
        !out.stdout.contains("SECRET") && !out.stderr.contains("SECRET"),
        "{out}"
    );
    for r in repo.requests() {
        assert_eq!(r.header("x-repo-token"), Some("tok-SECRET-1234"), "{r:?}");
        let auth: Vec<&String> = r
            .headers
            .iter()
            .filter(|(n, _)| n == "authorization")
            .map(|(_, v)| v)
            .collect();
        assert!(auth.len() == 1 && auth[0].starts_with("Basic "), "{r:?}");
    }
    let at_cdn = cdn.requests();
    assert!(!at_cdn.is_empty());
    for r in at_cdn {
        assert!(
            r.header("x-repo-token").is_none() && r.header("authorization").is_none(),
            "{r:?}"
        );
    }
}

/// What Maven's own resolver (maven-resolver with Maven's default session, from
/// Debian's `/usr/share/maven/lib`) resolves for `coordinate`, read from the same
/// repository directory nginx serves: `tests/maven/MvnResolve.java`, compiled once.
fn maven_resolves(classes: &Path, coordinate: &str) -> BTreeSet<String> {
    let out = Command::new("java")
        .arg("-cp")
        .arg(format!("/usr/share/maven/lib/*:{}", classes.display()))
        .args(["MvnResolve", DEBIAN_REPO, coordinate])
        .output()
        .expect("run java");
    assert!(
        out.status.success(),
        "MvnResolve {coordinate} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .filter(|l| !l.starts_with("spark-localizer_differential"))
        .collect()
}

/// The differential test of `--resolution maven`: the jars are the ones Maven's
/// own resolver (nearest wins) resolves on the same repository — which differ
/// from Spark's where the two disagree (maven-embedder: 34 jars, not 36).
#[test]
fn maven_resolution_resolves_what_maven_resolves() {
    let Some(repo) = debian_repo() else { return };
    let lib = Path::new("/usr/share/maven/lib");
    let javac = Command::new("javac").arg("-version").output();
    if !lib.is_dir() || javac.is_err() {
        assert!(
            !ci(),
            "Debian's maven (/usr/share/maven/lib) and a JDK are needed"
        );
        eprintln!("SKIP: no /usr/share/maven/lib or javac");
        return;
    }
    let classes = tempfile::tempdir().unwrap();
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/maven/MvnResolve.java");
    let compiled = Command::new("javac")
        .arg("-cp")
        .arg("/usr/share/maven/lib/*")
        .arg("-d")
        .arg(classes.path())
        .arg(&source)
        .output()
        .unwrap();
    assert!(
        compiled.status.success(),
        "{}",
        String::from_utf8_lossy(&compiled.stderr)
    );
    let root = repo.url("/");
    let sb = Sandbox::new();
    let coordinates = [
        "org.apache.maven:maven-core:3.8.7",
        "org.apache.maven:maven-embedder:3.8.7",
        "org.apache.maven:maven-compat:3.8.7",
        "org.apache.maven:maven-resolver-provider:3.8.7",
        "org.apache.maven.resolver:maven-resolver-impl:1.6.3",
        "org.eclipse.sisu:org.eclipse.sisu.plexus:0.3.4",
        "com.google.inject:guice:4.2.3",
        "com.google.guava:guava:31.1-jre",
        "org.apache.maven.wagon:wagon-provider-api:3.5.3",
        "org.slf4j:slf4j-simple:1.7.32",
        "com.fasterxml.jackson.core:jackson-databind:2.14.0",
    ];
    for coordinate in coordinates {
        let out = sb
            .resolve()
            .args(["--resolution", "maven", "--packages", coordinate])
            .args(["--repositories", &root, "--only-repositories"])
            .run();
        out.expect_code(0);
        let ours = locked_names(&out.stdout);
        let theirs = maven_resolves(classes.path(), coordinate);
        assert_eq!(ours, theirs, "{coordinate}: ours (left) vs Maven's (right)");
        assert!(!ours.is_empty(), "{coordinate}");
    }
}

/// A mounted Secret directory of repository credentials (a file per host holding
/// `username:password`) serves both `resolve` and `fetch --lock`: the lock itself
/// never holds them.
#[test]
fn a_credentials_directory_serves_resolve_and_fetch_lock() {
    let repo = FaultServer::start();
    let pom =
        "<project><groupId>g</groupId><artifactId>a</artifactId><version>1</version></project>";
    repo.put("/m2/g/a/1/a-1.pom", pom);
    repo.put("/m2/g/a/1/a-1.jar", b"the jar".to_vec());
    let sb = Sandbox::new();
    let creds = sb.root.join("repo-creds");
    std::fs::create_dir_all(&creds).unwrap();
    std::fs::write(creds.join("127.0.0.1"), "ci:pw-SECRET-9876\n").unwrap();
    let lock = sb.root.join("packages.lock");
    let out = sb
        .resolve()
        .args([
            "--packages",
            "g:a:1",
            "--only-repositories",
            "--repositories",
            &repo.url("/m2/"),
        ])
        .args([
            "--repository-credentials-dir",
            &s(&creds),
            "--lock",
            &s(&lock),
        ])
        .run();
    out.expect_code(0);
    let text = std::fs::read_to_string(&lock).unwrap();
    assert!(!text.contains("SECRET") && !text.contains("ci:"), "{text}");
    let basic = |r: &crate::support::Request| {
        r.header("authorization")
            .is_some_and(|a| a.starts_with("Basic "))
    };
    assert!(repo.requests().iter().all(basic), "{:?}", repo.requests());
    repo.clear_log();
    let out = sb
        .fetch()
        .args([
            "--lock",
            &s(&lock),
            "--repository-credentials-dir",
            &s(&creds),
        ])
        .run();
    out.expect_code(0);
    assert!(!out.stderr.contains("SECRET"), "{out}");
    assert_eq!(std::fs::read(sb.jar("g_a-1.jar")).unwrap(), b"the jar");
    assert!(repo.requests().iter().all(basic), "{:?}", repo.requests());
    // A file that holds no username:password is a configuration error.
    std::fs::write(creds.join("127.0.0.1"), "just-a-token\n").unwrap();
    let out = sb
        .resolve()
        .args([
            "--packages",
            "g:a:1",
            "--only-repositories",
            "--repositories",
            &repo.url("/m2/"),
        ])
        .args(["--repository-credentials-dir", &s(&creds)])
        .run();
    out.expect_code(2)
        .expect_stderr("holds no username:password");
}

/// Resolution obeys `--deadline` and a stop, for `fetch --packages` and `resolve`:
/// a repository that never answers does not hold the pod for the stall timeout.
#[test]
fn resolution_obeys_the_deadline_and_a_stop() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let repo = format!("http://{}/m2/", silent.local_addr().unwrap());
    let sb = Sandbox::new();
    let args = [
        "--packages",
        "g:a:1",
        "--only-repositories",
        "--repositories",
        &repo,
    ];
    let out = sb.fetch().args(args).args(["--deadline", "2s"]).run();
    out.expect_code(5)
        .expect_stderr("not resolved within the deadline");
    assert!(out.elapsed < Duration::from_secs(6), "{out}");
    assert!(
        sb.term_log_text().is_some_and(|t| t.contains("deadline")),
        "{:?}",
        sb.term_log_text()
    );
    let out = sb.resolve().args(args).args(["--deadline", "2s"]).run();
    out.expect_code(5);
    let running = sb.fetch().args(args).start();
    // Stopped once it is resolving (not before its handler is in place).
    assert!(
        crate::support::wait_for(Duration::from_secs(30), || running
            .stderr_so_far()
            .contains("resolving 1 package(s)")),
        "{}",
        running.stderr_so_far()
    );
    running.signal("TERM");
    let out = running.finish();
    out.expect_code(7)
        .expect_stderr("stopped by a signal while resolving");
    assert!(out.elapsed < Duration::from_secs(5), "{out}");
}

/// Lockfiles that cannot be trusted are configuration errors: an empty one (a
/// mis-mounted ConfigMap), one without its `# packages:` line next to declared
/// packages, a missing one, an entry with a trailing comment, a malformed pin, a
/// jar pinned twice.
#[test]
fn untrustworthy_lockfiles_are_refused() {
    let sb = Sandbox::new();
    let pin = "0".repeat(64);
    let entry = format!("{pin}  http://127.0.0.1:9/m2/g/a/1/a-1.jar#g_a-1.jar\n");
    for (name, text, extra, needle) in [
        ("empty.lock", String::new(), vec![], "pins no jar"),
        (
            "headerless.lock",
            entry.clone(),
            vec!["--packages", "g:a:1"],
            "has no '# packages:' line",
        ),
        (
            "comment.lock",
            format!("{pin}  http://127.0.0.1:9/m2/g/a/1/a-1.jar#g_a-1.jar # pinned by hand\n"),
            vec![],
            "is not a lockfile entry",
        ),
        // Errors of the pins' syntax say "lockfile", not "checksums file" (issue 35).
        (
            "short.lock",
            format!(
                "{}  http://127.0.0.1:9/m2/g/a/1/a-1.jar#g_a-1.jar\n",
                &pin[1..]
            ),
            vec![],
            "invalid lockfile ",
        ),
        (
            "twice.lock",
            format!(
                "{entry}{}  http://127.0.0.1:9/m2/g/a/1/a-1.jar#g_a-1.jar\n",
                "1".repeat(64)
            ),
            vec![],
            "is already pinned to a different digest",
        ),
    ] {
        let lock = sb.write(name, text);
        let out = sb.fetch().args(["--lock", &s(&lock)]).args(extra).run();
        out.expect_code(2).expect_stderr(needle);
        assert!(!out.stderr.contains("checksums file"), "{out}");
    }
    let out = sb
        .fetch()
        .args(["--lock", &s(&sb.root.join("missing.lock"))])
        .run();
    out.expect_code(2).expect_stderr("cannot read the lockfile");
    assert!(!out.stderr.contains("--checksums"), "{out}");
}

/// A resolution of nothing (a package relocated to itself, as Spark sees it;
/// or every package excluded) is a lock of nothing, which `fetch --lock`
/// fetches as nothing; a lock that lost entries is refused.
#[test]
fn a_lock_of_nothing_fetches_nothing() {
    let Some(repo) = debian_repo() else { return };
    let root = repo.url("/");
    let sb = Sandbox::new();
    let lock = sb.root.join("empty.lock");
    let package = "org.codehaus.plexus:plexus-component-annotations:1.5.5";
    sb.resolve()
        .args(["--packages", package, "--repositories", &root])
        .args(["--only-repositories", "--lock", &s(&lock)])
        .run()
        .expect_code(0);
    let text = std::fs::read_to_string(&lock).unwrap();
    assert!(text.contains("# jars: 0"), "{text}");
    let out = sb
        .fetch()
        .args(["--lock", &s(&lock), "--packages", package])
        .run();
    out.expect_code(0);
    assert_eq!(sb.classpath(), "", "{out}");
    // Every package excluded: the same.
    let out = sb
        .resolve()
        .args([
            "--packages",
            "com.google.inject:guice:4.2.3",
            "--repositories",
            &root,
        ])
        .args(["--only-repositories", "--exclude-packages", "*:*"])
        .run();
    out.expect_code(0);
    assert!(locked_names(&out.stdout).is_empty() && out.stdout.contains("# jars: 0"));
    // A lock that says it pins more than it holds was cut short.
    let full = sb.root.join("full.lock");
    sb.resolve()
        .args([
            "--packages",
            "org.slf4j:slf4j-simple:1.7.32",
            "--repositories",
            &root,
        ])
        .args(["--only-repositories", "--lock", &s(&full)])
        .run()
        .expect_code(0);
    let text = std::fs::read_to_string(&full).unwrap();
    let cut: String = text
        .lines()
        .filter(|l| !l.contains("slf4j-api"))
        .map(|l| format!("{l}\n"))
        .collect();
    let cut = sb.write("cut.lock", cut);
    let out = sb.fetch().args(["--lock", &s(&cut)]).run();
    out.expect_code(2)
        .expect_stderr("a truncated or edited lockfile");
}

/// Writes a POM (and a jar) of `g:a:v` with `deps` (`(gav, excluded g:a…)`)
/// into the repository directory `root`.
fn write_module(root: &Path, gav: &str, deps: &[(String, Vec<String>)]) {
    let [g, a, v]: [&str; 3] = gav.split(':').collect::<Vec<_>>().try_into().unwrap();
    let dir = root.join(g.replace('.', "/")).join(a).join(v);
    std::fs::create_dir_all(&dir).unwrap();
    let deps: String = deps
        .iter()
        .map(|(dep, excluded)| {
            let [dg, da, dv]: [&str; 3] = dep.split(':').collect::<Vec<_>>().try_into().unwrap();
            let exclusions: String = excluded
                .iter()
                .map(|e| {
                    let (eg, ea) = e.split_once(':').unwrap();
                    format!("<exclusion><groupId>{eg}</groupId><artifactId>{ea}</artifactId></exclusion>")
                })
                .collect();
            format!("<dependency><groupId>{dg}</groupId><artifactId>{da}</artifactId><version>{dv}</version><exclusions>{exclusions}</exclusions></dependency>")
        })
        .collect();
    std::fs::write(
        dir.join(format!("{a}-{v}.pom")),
        format!("<project><groupId>{g}</groupId><artifactId>{a}</artifactId><version>{v}</version><dependencies>{deps}</dependencies></project>"),
    )
    .unwrap();
    std::fs::write(dir.join(format!("{a}-{v}.jar")), gav).unwrap();
}

/// The shape that hung pods (exponential in `spark` mode, deaf to the deadline
/// and SIGTERM): a 2-wide, 22-deep lattice of POMs served by nginx, one module
/// of each pair excluding another artifact. Both modes resolve it (`spark`: every
/// `x`, since the path through the `b`s excludes none); a stop mid-resolution
/// is exit 7 with the termination message.
#[test]
fn exclusion_lattices_resolve_and_stop() {
    const L: usize = 22;
    let repo_dir = tempfile::tempdir().unwrap();
    let root = repo_dir.path();
    let xs: Vec<(String, Vec<String>)> = (0..L).map(|i| (format!("lat:x{i}:1"), vec![])).collect();
    for i in 0..L {
        let (a, b) = (format!("lat:a{}:1", i + 1), format!("lat:b{}:1", i + 1));
        write_module(
            root,
            &format!("lat:a{i}:1"),
            &[
                (a.clone(), vec![format!("lat:x{i}")]),
                (b.clone(), vec!["lat:y".into()]),
            ],
        );
        write_module(root, &format!("lat:b{i}:1"), &[(a, vec![]), (b, vec![])]);
        write_module(root, &format!("lat:x{i}:1"), &[]);
    }
    write_module(root, &format!("lat:a{L}:1"), &xs);
    write_module(root, &format!("lat:b{L}:1"), &xs);
    let Some(nginx) = Nginx::start(root) else {
        return;
    };
    let url = nginx.url("/");
    let sb = Sandbox::new();
    for (mode, jars) in [("spark", 2 * (L + 1) + L), ("maven", 2 * (L + 1) + 1)] {
        let out = sb
            .resolve()
            .args(["--packages", "lat:a0:1,lat:b0:1", "--resolution", mode])
            .args(["--repositories", &url, "--only-repositories"])
            .run();
        out.expect_code(0);
        assert_eq!(locked_names(&out.stdout).len(), jars, "{mode}: {out}");
        eprintln!("{mode}: L={L} resolved in {:?}", out.elapsed);
    }
    // A stop while resolving (a repository that never answers): exit 7, the
    // termination message written, soon after the signal.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let never = format!("http://{}/m2/", silent.local_addr().unwrap());
    let running = sb
        .fetch()
        .args(["--packages", "lat:a0:1,lat:b0:1"])
        .args(["--repositories", &never, "--only-repositories"])
        .start();
    // Waits for the connection the resolution opens, then signals.
    silent.set_nonblocking(false).unwrap();
    let _held = silent.accept().unwrap();
    let signalled = std::time::Instant::now();
    running.signal("TERM");
    let out = running.finish();
    out.expect_code(7)
        .expect_stderr("stopped by a signal while resolving");
    assert!(
        signalled.elapsed() < Duration::from_secs(3),
        "took {:?} after the signal",
        signalled.elapsed()
    );
    assert!(
        sb.term_log_text().is_some_and(|t| t.contains("signal")),
        "{:?}",
        sb.term_log_text()
    );
}
