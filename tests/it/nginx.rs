//! Against a real nginx: 200 files of mixed sizes arrive byte-identical, classpath
//! in declared order (over HTTP/1.1); and over HTTPS the transfers use HTTP/2.

use std::time::Duration;

use crate::support::nginx::Nginx;
use crate::support::pki::Pki;
use crate::support::{data, s, sha256_hex, wait_for, Sandbox};

#[test]
fn two_hundred_files_from_nginx() {
    let root = tempfile::tempdir().unwrap();
    // Log-uniform sizes from 1 KiB to 2 MiB (about 55 MiB in all), deterministic.
    let mut rng = fastrand::Rng::with_seed(42);
    let mut names = Vec::new();
    for i in 0..200u64 {
        let size = match i {
            0 => 1024,
            1 => 2 << 20,
            _ => (1024.0 * 2f64.powf(11.0 * rng.f64())) as usize,
        };
        let name = if i % 2 == 0 {
            format!("lib-{i:03}.jar")
        } else {
            format!("data-{i:03}.bin")
        };
        std::fs::write(root.path().join(&name), data(i, size)).unwrap();
        names.push((name, i, size));
    }
    let Some(nginx) = Nginx::start(root.path()) else {
        return;
    };
    rng.shuffle(&mut names); // declared order is neither name nor size order
    let (jars, files): (Vec<_>, Vec<_>) = names.iter().partition(|(n, _, _)| n.ends_with(".jar"));
    let urls =
        |v: &[&(String, u64, usize)]| v.iter().map(|(n, _, _)| nginx.url(n)).collect::<Vec<_>>();
    let (jar_urls, file_urls) = (urls(&jars), urls(&files));
    assert_eq!((jar_urls.len(), file_urls.len()), (100, 100));

    let sb = Sandbox::new();
    let out = sb
        .fetch()
        .args([
            "--jars",
            &jar_urls[..50].join(","),
            "--jars",
            &jar_urls[50..].join(","),
        ])
        .args(["--files", &file_urls.join(",")])
        .run();
    out.expect_code(0);
    for (name, seed, size) in &names {
        let dir = if name.ends_with(".jar") {
            &sb.jars
        } else {
            &sb.files
        };
        let got = std::fs::read(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(got.len(), *size, "{name}");
        assert!(
            got == data(*seed, *size),
            "{name} differs from what nginx served"
        );
    }
    let expected: Vec<String> = jars.iter().map(|(n, _, _)| s(&sb.jar(n))).collect();
    assert_eq!(sb.classpath(), format!("{}\n", expected.join(":")));
    let report = sb.report();
    let artifacts = report["artifacts"].as_array().unwrap();
    assert_eq!(artifacts.len(), 200);
    for a in artifacts {
        assert_eq!(a["status"], "fetched", "{a:#}");
    }
    let (first, seed, size) = &jars[0];
    assert_eq!(
        sb.artifact(first)["sha256"],
        sha256_hex(&data(*seed, *size))
    );
    let log = nginx.access_log();
    assert!(
        log.iter()
            .any(|l| l.starts_with("GET ") && l.contains(" HTTP/1.1 ")),
        "plain HTTP should be HTTP/1.1: {:?}",
        &log[..log.len().min(5)]
    );
}

#[test]
fn https_nginx_serves_over_http2() {
    let root = tempfile::tempdir().unwrap();
    let names: Vec<String> = (0..20).map(|i| format!("h2-{i:02}.jar")).collect();
    for (i, name) in names.iter().enumerate() {
        let size = 1000 + i * 37_000;
        std::fs::write(root.path().join(name), data(500 + i as u64, size)).unwrap();
    }
    let pki = Pki::new();
    let Some(nginx) = Nginx::start_tls(root.path(), &pki) else {
        return;
    };
    let sb = Sandbox::new();
    let ca = sb.write("ca.pem", &pki.ca_pem);
    let urls: Vec<String> = names.iter().map(|n| nginx.url(n)).collect();
    sb.fetch()
        .args(["--jars", &urls.join(",")])
        .arg("--ca-cert")
        .arg(&ca)
        .run()
        .expect_code(0);
    for (i, name) in names.iter().enumerate() {
        let got = std::fs::read(sb.jar(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            got == data(500 + i as u64, 1000 + i * 37_000),
            "{name} differs from what nginx served"
        );
        assert_eq!(sb.artifact(name)["status"], "fetched");
    }

    // nginx logs a request when it finishes it, which may trail the client a little.
    let gets = || -> Vec<String> {
        nginx
            .access_log()
            .into_iter()
            .filter(|l| l.starts_with("GET "))
            .collect()
    };
    wait_for(Duration::from_secs(5), || gets().len() >= names.len());
    let gets = gets();
    assert_eq!(gets.len(), names.len(), "{gets:#?}");
    for line in &gets {
        assert!(
            line.contains(" HTTP/2.0 200"),
            "not an HTTP/2 GET: {line:?} (all: {gets:#?})"
        );
    }
}
