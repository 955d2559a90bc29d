//! In-process stand-ins for the AWS services that hand out temporary
//! credentials: an STS answering `AssumeRoleWithWebIdentity` over TLS (test CA),
//! and an EKS Pod Identity agent. The credentials they hand out are real ones
//! for the test SeaweedFS: session tokens minted the way SeaweedFS's own STS
//! mints them (an HS256 JWT under the signing key of its IAM config, the
//! temporary key pair derived from the session id), so SeaweedFS checks the
//! SigV4 signature and the token of every request made with them.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

use super::pki::Pki;

/// The STS settings of the test SeaweedFS's IAM config.
pub const STS_ISSUER: &str = "spark-localizer-test-sts";
/// Base64 of the 32-byte HMAC key SeaweedFS verifies session tokens with.
pub const STS_SIGNING_KEY_B64: &str = "c3BhcmstbG9jYWxpemVyLXRlc3Qtc2lnbmluZy1rZXk=";
/// A role the IAM config lets read every bucket.
pub const READER_ROLE_ARN: &str = "arn:aws:iam::123456789012:role/SparkJarsReader";

/// The IAM config (`-s3.iam.config`) enabling those session tokens.
pub fn iam_config() -> String {
    serde_json::json!({
        "sts": {
            "tokenDuration": "1h",
            "maxSessionLength": "12h",
            "issuer": STS_ISSUER,
            "signingKey": STS_SIGNING_KEY_B64,
        },
        "policy": { "defaultEffect": "Deny", "storeType": "memory" },
        "roles": [{
            "roleName": "SparkJarsReader",
            "roleArn": READER_ROLE_ARN,
            "trustPolicy": {
                "Version": "2012-10-17",
                "Statement": [{
                    "Effect": "Allow",
                    "Principal": { "Federated": "*" },
                    "Action": ["sts:AssumeRoleWithWebIdentity"],
                }],
            },
            "attachedPolicies": ["ReadAll"],
        }],
        "policies": [{
            "name": "ReadAll",
            "document": {
                "Version": "2012-10-17",
                "Statement": [{
                    "Effect": "Allow",
                    "Action": ["s3:GetObject", "s3:ListBucket"],
                    "Resource": ["arn:aws:s3:::*", "arn:aws:s3:::*/*"],
                }],
            },
        }],
    })
    .to_string()
}

/// Temporary credentials.
#[derive(Debug, Clone)]
pub struct TempCreds {
    pub access_key_id: String,
    pub secret_access_key: String,
    pub session_token: String,
    pub expiration: String,
}

fn hmac_sha256(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).unwrap();
    mac.update(data);
    mac.finalize().into_bytes().to_vec()
}

/// Mints a session for `role_arn` as SeaweedFS's STS would.
pub fn mint(role_arn: &str) -> TempCreds {
    let key = STANDARD.decode(STS_SIGNING_KEY_B64).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let sid = hex::encode(super::data(now ^ 0x5eed, 16));
    let session = "spark-localizer-test";
    let role = role_arn.rsplit('/').next().unwrap();
    let assumed = format!("arn:aws:sts::assumed-role/{role}/{session}");
    let claims = serde_json::json!({
        "iss": STS_ISSUER, "sub": sid, "iat": now, "nbf": now, "exp": now + 3600,
        "sid": sid, "snam": session, "typ": "session", "role": role_arn,
        "assumed": assumed, "principal": assumed,
    });
    let head = URL_SAFE_NO_PAD.encode(br#"{"alg":"HS256","typ":"JWT"}"#);
    let body = URL_SAFE_NO_PAD.encode(claims.to_string());
    let signed = format!("{head}.{body}");
    let signature = URL_SAFE_NO_PAD.encode(hmac_sha256(&key, signed.as_bytes()));
    let digest = hex::encode(Sha256::digest(format!("access-key:{sid}")));
    TempCreds {
        access_key_id: format!("ASIA{}", &digest[..16]),
        secret_access_key: STANDARD
            .encode(hmac_sha256(&key, format!("secret-key:{sid}").as_bytes())),
        session_token: format!("{signed}.{signature}"),
        expiration: iso8601(now + 3600),
    }
}

/// `YYYY-MM-DDTHH:MM:SSZ` for a Unix time (civil-from-days, no date crate needed).
fn iso8601(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// One request as a credential service saw it (here, and Entra ID's stand-in in `cloud`).
#[derive(Debug, Clone)]
pub struct SeenRequest {
    pub method: String,
    pub path: String,
    pub query: HashMap<String, String>,
    pub headers: HashMap<String, String>,
}

pub(crate) fn read_request(stream: &mut impl Read) -> Option<SeenRequest> {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_owned();
    let target = parts.next()?.to_owned();
    let mut headers = HashMap::new();
    loop {
        line.clear();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => return None,
            Ok(_) if line == "\r\n" => break,
            Ok(_) => {
                if let Some((k, v)) = line.split_once(':') {
                    headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
                }
            }
        }
    }
    let len: usize = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; len];
    reader.read_exact(&mut body).ok()?;
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    let mut params: HashMap<String, String> = url::form_urlencoded::parse(query.as_bytes())
        .into_owned()
        .collect();
    params.extend(url::form_urlencoded::parse(&body).into_owned());
    Some(SeenRequest {
        method,
        path: path.to_owned(),
        query: params,
        headers,
    })
}

pub(crate) fn respond(stream: &mut impl Write, status: &str, content_type: &str, body: &str) {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(body.as_bytes());
    let _ = stream.flush();
}

/// An STS endpoint over TLS. It checks the web identity token against the one
/// it was given and answers with minted credentials for the requested role.
pub struct Sts {
    port: u16,
    seen: Arc<Mutex<Vec<SeenRequest>>>,
}

impl Sts {
    pub fn start(pki: &Pki, expected_token: &str) -> Sts {
        let config = pki.server_config();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let expected = expected_token.to_owned();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (config, log, expected) = (config.clone(), log.clone(), expected.clone());
                std::thread::spawn(move || {
                    let conn = rustls::ServerConnection::new(config).unwrap();
                    let mut tls = rustls::StreamOwned::new(conn, stream);
                    let Some(req) = read_request(&mut tls) else {
                        return;
                    };
                    log.lock().unwrap().push(req.clone());
                    let q = |k: &str| req.query.get(k).map(String::as_str).unwrap_or("");
                    if q("Action") != "AssumeRoleWithWebIdentity"
                        || q("WebIdentityToken") != expected
                    {
                        respond(
                            &mut tls,
                            "403 Forbidden",
                            "text/xml",
                            "<ErrorResponse><Error><Code>AccessDenied</Code><Message>Not authorized to perform sts:AssumeRoleWithWebIdentity</Message></Error></ErrorResponse>",
                        );
                    } else {
                        let c = mint(q("RoleArn"));
                        let xml = format!(
                            "<AssumeRoleWithWebIdentityResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><AssumeRoleWithWebIdentityResult><Credentials><AccessKeyId>{}</AccessKeyId><SecretAccessKey>{}</SecretAccessKey><SessionToken>{}</SessionToken><Expiration>{}</Expiration></Credentials></AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>",
                            c.access_key_id, c.secret_access_key, c.session_token, c.expiration
                        );
                        respond(&mut tls, "200 OK", "text/xml", &xml);
                    }
                    tls.conn.send_close_notify();
                    let _ = tls.flush();
                });
            }
        });
        Sts { port, seen }
    }

    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    pub fn requests(&self) -> Vec<SeenRequest> {
        self.seen.lock().unwrap().clone()
    }
}

/// An EKS Pod Identity agent (plain HTTP, as the real one on 169.254.170.23):
/// checks the `Authorization` header against the service-account token and
/// answers with minted credentials for `role_arn`.
pub struct PodIdentityAgent {
    port: u16,
    seen: Arc<Mutex<Vec<SeenRequest>>>,
}

impl PodIdentityAgent {
    pub fn start(expected_token: &str, role_arn: &str) -> PodIdentityAgent {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let (expected, role) = (expected_token.to_owned(), role_arn.to_owned());
        std::thread::spawn(move || {
            for mut stream in listener.incoming().flatten() {
                let Some(req) = read_request(&mut stream) else {
                    continue;
                };
                log.lock().unwrap().push(req.clone());
                if req.headers.get("authorization").map(|v| v.trim()) != Some(expected.trim()) {
                    respond(&mut stream, "401 Unauthorized", "application/json", "{}");
                    continue;
                }
                let c = mint(&role);
                let json = serde_json::json!({
                    "AccessKeyId": c.access_key_id,
                    "SecretAccessKey": c.secret_access_key,
                    "Token": c.session_token,
                    "Expiration": c.expiration,
                    "AccountId": "123456789012",
                });
                respond(&mut stream, "200 OK", "application/json", &json.to_string());
            }
        });
        PodIdentityAgent { port, seen }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/v1/credentials", self.port)
    }

    pub fn requests(&self) -> Vec<SeenRequest> {
        self.seen.lock().unwrap().clone()
    }
}

#[test]
fn iso8601_is_civil_time() {
    assert_eq!(iso8601(0), "1970-01-01T00:00:00Z");
    assert_eq!(iso8601(1_795_363_521), "2026-11-22T16:05:21Z");
    assert_eq!(iso8601(951_782_400), "2000-02-29T00:00:00Z");
}
