//! The classpath fragment with a real JVM: jars localized from a server are what
//! `java -cp "$SPARK_CLASSPATH"` loads, in declared order, after sourcing
//! `spark-classpath.env` the way a Spark container's entrypoint would.

use std::path::Path;
use std::process::Command;

use crate::support::{s, FaultServer, Sandbox};

/// Compiles `class_name` printing `message` into a jar; `None` without a JDK.
pub(crate) fn jar_with_class(
    dir: &Path,
    jar_name: &str,
    class_name: &str,
    message: &str,
) -> Option<Vec<u8>> {
    let (Ok(_), Ok(_)) = (which("javac"), which("jar")) else {
        return None;
    };
    let src = dir.join(format!("src-{jar_name}"));
    let classes = dir.join(format!("classes-{jar_name}"));
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(
        src.join(format!("{class_name}.java")),
        format!(
            "public class {class_name} {{ public static void main(String[] a) {{ System.out.println(\"{message}\"); }} }}\n"
        ),
    )
    .unwrap();
    let ok = Command::new("javac")
        .arg("-d")
        .arg(&classes)
        .arg(src.join(format!("{class_name}.java")))
        .status()
        .unwrap()
        .success();
    assert!(ok, "javac failed");
    let jar = dir.join(jar_name);
    let ok = Command::new("jar")
        .arg("cf")
        .arg(&jar)
        .arg("-C")
        .arg(&classes)
        .arg(".")
        .status()
        .unwrap()
        .success();
    assert!(ok, "jar failed");
    Some(std::fs::read(jar).unwrap())
}

fn which(tool: &str) -> Result<(), ()> {
    let found = Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {tool}"))
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if found {
        Ok(())
    } else {
        Err(())
    }
}

#[test]
fn a_real_jvm_loads_classes_from_the_localized_jars_in_declared_order() {
    let work = tempfile::tempdir().unwrap();
    let Some(first) = jar_with_class(work.path(), "plugin-first.jar", "Main", "from plugin-first")
    else {
        if std::env::var_os("CI").is_some() {
            panic!("no JDK (javac, jar) found; scripts/test.sh installs default-jdk-headless");
        }
        eprintln!("SKIP: no JDK installed; run scripts/test.sh");
        return;
    };
    // The same class in a later jar: the JVM must take the first on the classpath.
    let second = jar_with_class(
        work.path(),
        "plugin-second.jar",
        "Main",
        "from plugin-second",
    )
    .unwrap();
    let server = FaultServer::start();
    server.put("/repo/plugin-first.jar", first);
    server.put("/repo/plugin-second.jar", second);
    let sb = Sandbox::with_jars_dir("spark jars");
    sb.fetch()
        .args([
            "--jars",
            &format!(
                "{},{}",
                server.url("/repo/plugin-first.jar"),
                server.url("/repo/plugin-second.jar")
            ),
        ])
        .run()
        .expect_code(0);

    // As a Spark container would: source the snippet, then start the JVM with it,
    // keeping what the image had on SPARK_CLASSPATH after the localized jars.
    let env_file = sb.jars.join("spark-classpath.env");
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            ". '{}' && exec java -cp \"$SPARK_CLASSPATH\" Main",
            s(&env_file)
        ))
        .env("SPARK_CLASSPATH", "/opt/spark/jars/*")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "java failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout.trim(), "from plugin-first");

    // And with the classpath file directly (spark.executor.extraClassPath style).
    let classpath = std::fs::read_to_string(sb.jars.join("classpath")).unwrap();
    let out = Command::new("java")
        .arg("-cp")
        .arg(classpath.trim_end())
        .arg("Main")
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "from plugin-first"
    );
}
