//! `local:///dir/*.jar` and `file:///dir/*.jar`: jars already on the node,
//! named by a pattern, expand in sorted order; each is checked against pins.

use crate::support::{data, s, sha256_hex, Sandbox};

#[test]
fn patterns_of_jars_on_the_node_expand_in_sorted_order() {
    let sb = Sandbox::new();
    let image = sb.root.join("opt/extra");
    let mount = sb.root.join("mnt/jars");
    std::fs::create_dir_all(&image).unwrap();
    std::fs::create_dir_all(&mount).unwrap();
    for (dir, names) in [
        (&image, ["zeta.jar", "alpha.jar"]),
        (&mount, ["m2.jar", "m1.jar"]),
    ] {
        for (i, name) in names.iter().enumerate() {
            std::fs::write(dir.join(name), data(50 + i as u64, 1000)).unwrap();
        }
    }
    std::fs::write(image.join("README.txt"), b"not a jar").unwrap();
    let alpha = std::fs::read(image.join("alpha.jar")).unwrap();
    let m1 = std::fs::read(mount.join("m1.jar")).unwrap();
    let sums = sb.write(
        "sums",
        format!(
            "{}  alpha.jar\n{}  m1.jar\n",
            sha256_hex(&alpha),
            sha256_hex(&m1)
        ),
    );
    let jars = format!("local://{}/*.jar,file://{}/m*.jar", s(&image), s(&mount));
    let out = sb
        .fetch()
        .args(["--jars", &jars, "--checksums", &s(&sums)])
        .run();
    out.expect_code(0);
    let want = [
        s(&image.join("alpha.jar")),
        s(&image.join("zeta.jar")),
        s(&sb.jar("m1.jar")),
        s(&sb.jar("m2.jar")),
    ];
    assert_eq!(sb.classpath().trim_end(), want.join(":"), "{out}");
    assert_eq!(std::fs::read(sb.jar("m1.jar")).unwrap(), m1);
    assert_eq!(sb.artifact("alpha.jar")["sha256"], sha256_hex(&alpha));
    assert!(!out.stderr.contains("which no artifact matches"), "{out}");

    // A jar in the image that is not what its pin says: exit 4, named.
    std::fs::write(image.join("alpha.jar"), b"tampered").unwrap();
    let sb2 = Sandbox::new();
    let out = sb2
        .fetch()
        .args(["--jars", &jars, "--checksums", &s(&sums)])
        .run();
    out.expect_code(4)
        .expect_stderr("alpha.jar in the image is");

    // A pattern that matches nothing: a configuration error naming it.
    let empty = format!("local://{}/*.jar", s(&sb.root.join("nothing-here")));
    let out = sb2.fetch().args(["--jars", &empty]).run();
    out.expect_code(2).expect_stderr("matches no file");
    assert!(out.stderr.contains("nothing-here/*.jar"), "{out}");
}
