use super::*;

fn coord(spec: &str, ext: &str) -> Coord {
    let mut c = Coord::parse_package(spec).unwrap();
    c.ext = ext.to_owned();
    c
}

#[test]
fn maven_purls() {
    let cases = [
        (
            "org.slf4j:slf4j-api:1.7.32",
            "jar",
            "pkg:maven/org.slf4j/slf4j-api@1.7.32",
        ),
        (
            "com.google.inject:guice:4.2.3:no_aop",
            "jar",
            "pkg:maven/com.google.inject/guice@4.2.3?classifier=no_aop",
        ),
        // Qualifiers sorted by key.
        (
            "org.x:natives:1.0:linux-x86_64",
            "zip",
            "pkg:maven/org.x/natives@1.0?classifier=linux-x86_64&type=zip",
        ),
        ("org.x:a:1.0+build", "jar", "pkg:maven/org.x/a@1.0%2Bbuild"),
        (
            "org.x:a:1.0-SNAPSHOT",
            "jar",
            "pkg:maven/org.x/a@1.0-SNAPSHOT",
        ),
    ];
    for (spec, ext, want) in cases {
        assert_eq!(maven_purl(&coord(spec, ext)), want, "{spec}");
    }
}

#[test]
fn generic_purls_are_percent_encoded() {
    let cases = [
        ("a.jar", None, "pkg:generic/a.jar"),
        ("a b@1?.jar", None, "pkg:generic/a%20b%401%3F.jar"),
        ("é.txt", None, "pkg:generic/%C3%A9.txt"),
        (
            "x.jar",
            Some("https://h:8443/p/x%20y.jar"),
            "pkg:generic/x.jar?download_url=https://h:8443/p/x%2520y.jar",
        ),
        (
            "x.jar",
            Some("s3://bucket/a&b=c.jar"),
            "pkg:generic/x.jar?download_url=s3://bucket/a%26b%3Dc.jar",
        ),
    ];
    for (name, url, want) in cases {
        assert_eq!(generic_purl(name, url), want, "{name}");
    }
}

#[test]
fn download_urls_hold_no_secret() {
    let cases = [
        (
            "https://user:SECRETPW@h/x.jar?X-Amz-Signature=SECRETSIG&a=b#alias.jar",
            Some("https://h/x.jar"),
        ),
        ("https://***@h/x.jar?sig=***", Some("https://h/x.jar")),
        ("s3://bucket/key/x.jar", Some("s3://bucket/key/x.jar")),
        ("file:///home/me/x.jar", None),
        ("local:///opt/spark/jars/x.jar", None),
        ("staging://abc", None),
        ("not a url", None),
    ];
    for (uri, want) in cases {
        assert_eq!(download_url(uri).as_deref(), want, "{uri}");
    }
}

#[test]
fn serial_numbers_are_uuids_of_the_content() {
    let a = serial_number(b"one");
    assert_eq!(a, serial_number(b"one"));
    assert_ne!(a, serial_number(b"two"));
    let hex = a.strip_prefix("urn:uuid:").unwrap();
    let parts: Vec<&str> = hex.split('-').collect();
    assert_eq!(
        parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
        [8, 4, 4, 4, 12]
    );
    assert!(parts[2].starts_with('5'));
    assert!(parts[3].starts_with(['8', '9', 'a', 'b']));
}

fn locked(spec: &str, path: &[&str]) -> Locked {
    Locked {
        jar: crate::maven::Resolved {
            coord: coord(spec, "jar"),
            repo: "http://r/".into(),
            url: url::Url::parse("http://r/x.jar").unwrap(),
            path: path.iter().map(|s| s.to_string()).collect(),
            sha1: None,
            signature: None,
            checked_sha256: None,
        },
        sha256: [7; 32],
        size: 1,
    }
}

#[test]
fn the_graph_follows_the_paths() {
    let jars = [
        locked("g:root:1", &[]),
        locked("g:mid:2", &["g:root:1"]),
        locked("g:mid:2:natives", &["g:root:1"]),
        // Pulled in through a module without a jar (a parent POM, a stub).
        locked("g:leaf:3", &["g:root:1", "g:mid:2", "g:nojar:9"]),
    ];
    let bom = of_lock(&jars);
    let deps: Vec<(&str, Vec<&str>)> = bom
        .dependencies
        .iter()
        .map(|d| {
            (
                d.of.as_str(),
                d.depends_on.iter().map(String::as_str).collect(),
            )
        })
        .collect();
    assert_eq!(
        deps,
        [
            (
                "jars/g_root-1.jar",
                vec!["jars/g_mid-2.jar", "jars/g_mid-2-natives.jar"]
            ),
            ("jars/g_mid-2.jar", vec!["jars/g_leaf-3.jar"]),
            ("jars/g_mid-2-natives.jar", vec![]),
            ("jars/g_leaf-3.jar", vec![]),
        ]
    );
    // Deterministic, and a pure function of the jars.
    assert_eq!(bom.to_json(), of_lock(&jars).to_json());
    assert_ne!(bom.serial_number, of_lock(&jars[..3]).serial_number);
}
