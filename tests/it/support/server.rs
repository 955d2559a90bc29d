//! A tiny HTTP/1.1 server on 127.0.0.1:0 that misbehaves on purpose.
//!
//! It serves a map of path -> bytes (with a strong ETag, `Range: bytes=N-` /
//! `bytes=N-M` and `If-Range`), keeps connections alive, records every request,
//! and applies per-path fault scripts: a fault bound to the Nth GET of a path
//! fires once, an "always" fault fires on every request (HEAD included). An
//! object can also be replaced right after its Nth GET (the object changing
//! under a transfer). It runs on its own thread and tokio runtime so
//! synchronous tests can use it.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

/// One way to misbehave.
#[derive(Clone, Debug)]
pub enum Fault {
    /// Answer with this status (and a tiny body) instead of the file.
    Status(u16),
    /// As `Status`, with these extra headers (e.g. `Retry-After`).
    StatusWith(u16, Vec<(String, String)>),
    /// As `StatusWith`, with this body (e.g. an S3 error document).
    StatusBody(u16, Vec<(String, String)>, String),
    /// Send the headers and the first K body bytes, then reset the connection (RST).
    ResetAfter(usize),
    /// Announce the full Content-Length, send only K body bytes, then close cleanly.
    ShortBody(usize),
    /// Send K body bytes, then nothing for this long, then close.
    StallAfter(usize, Duration),
    /// Redirect with this status (301, 302, 307, ...) to an absolute URL.
    Redirect(u16, String),
    /// Ignore `Range`/`If-Range`, answer 200 with the whole body, no `Accept-Ranges`.
    NoRange,
    /// Announce `Accept-Ranges: bytes` but answer every request with a 200 of
    /// the whole body (a server or proxy that lies about ranges).
    IgnoreRange,
    /// Serve the requested range even when `If-Range` names another version
    /// (a broken cache or origin): a 206 of whatever the object is now.
    IgnoreIfRange,
    /// Send K body bytes, then wait until [`FaultServer::release`], then the rest.
    Hold(usize),
    /// Send K body bytes, then wait until [`FaultServer::release`], then reset
    /// the connection (an outage that hits every request in flight at once).
    HoldThenReset(usize),
    /// A source growing under the transfer: a 206 (even to a plain GET) whose
    /// `Content-Range` announces the object as stored, from the requested offset
    /// or 0, while its `Content-Length` frames 2K bytes more. The server sends the
    /// object and K of those bytes, then nothing until [`FaultServer::release`]
    /// (then closes): a client that stops at the announced size never waits.
    GrowsPast(usize),
    /// Send the body at this many bytes per second (in 8 KiB steps): an origin
    /// that caps each connection.
    Paced(u64),
    /// Answer after this long, with `Connection: close`, then close the
    /// connection: a small server that takes one connection per request.
    Closing(Duration),
    /// As `Paced`, without announcing the size of a whole body: no
    /// `Content-Length`, the end is the connection's close (ranges keep theirs).
    Unsized(u64),
}

/// A request as the server saw it. Header names are lower-case.
#[derive(Clone, Debug)]
pub struct Request {
    pub method: String,
    /// Path and query, as sent.
    pub target: String,
    /// Path without the query.
    pub path: String,
    pub headers: Vec<(String, String)>,
    /// When its head had been read.
    pub at: Instant,
    /// The client's address: one per connection.
    pub peer: Option<SocketAddr>,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Whether the request announced a body (which this server never reads).
    fn has_body(&self) -> bool {
        self.header("transfer-encoding").is_some()
            || self
                .header("content-length")
                .is_some_and(|n| n.trim() != "0")
    }
}

/// An object and its ETag (quoted, as sent).
type Object = (Arc<Vec<u8>>, String);

#[derive(Default)]
struct Script {
    nth: HashMap<usize, Fault>,
    always: Option<Fault>,
    /// The object becomes this once the Nth GET has taken what it serves.
    replace_after: HashMap<usize, Object>,
}

struct State {
    files: HashMap<String, Object>,
    scripts: HashMap<String, Script>,
    gets: HashMap<String, usize>,
    log: Vec<Request>,
    /// Opened by `release()`; `Fault::Hold` waits for it.
    gate: tokio::sync::watch::Sender<bool>,
    /// Requests between their head being read and their response written, now
    /// and at most so far.
    in_flight: usize,
    peak_in_flight: usize,
}

/// The running server; stops (and drops every connection) on Drop.
pub struct FaultServer {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl FaultServer {
    pub fn start() -> FaultServer {
        let state = Arc::new(Mutex::new(State {
            files: HashMap::new(),
            scripts: HashMap::new(),
            gets: HashMap::new(),
            log: Vec::new(),
            gate: tokio::sync::watch::Sender::new(false),
            in_flight: 0,
            peak_in_flight: 0,
        }));
        let (stop, stopped) = oneshot::channel::<()>();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let shared = state.clone();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("test server runtime");
            rt.block_on(async move {
                let listener = TcpListener::bind("127.0.0.1:0")
                    .await
                    .expect("bind 127.0.0.1:0");
                ready_tx.send(listener.local_addr().unwrap()).unwrap();
                let accept = async {
                    while let Ok((stream, _)) = listener.accept().await {
                        tokio::spawn(serve(stream, shared.clone()));
                    }
                };
                tokio::select! { _ = accept => {}, _ = stopped => {} }
            });
            // Dropping the runtime cancels every connection task (stalls included).
        });
        let addr = ready_rx.recv().expect("test server failed to start");
        FaultServer {
            addr,
            state,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// `http://127.0.0.1:PORT{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{}", self.port(), path)
    }

    /// Serves `body` at `path` (replacing what was there, with a new ETag).
    pub fn put(&self, path: &str, body: impl Into<Vec<u8>>) {
        let body = body.into();
        let etag = format!("\"{}\"", &super::sha256_hex(&body)[..16]);
        self.put_tagged(path, body, &etag);
    }

    /// Serves `body` at `path` with this ETag (quoted, e.g. `"e1"`), even a wrong one.
    pub fn put_tagged(&self, path: &str, body: impl Into<Vec<u8>>, etag: &str) {
        self.state()
            .files
            .insert(path.to_string(), (Arc::new(body.into()), etag.to_string()));
    }

    /// Replaces the object at `path` with `body` / `etag` as soon as its `nth`
    /// GET has started (that GET still serves the old object).
    pub fn replace_after(&self, path: &str, nth: usize, body: impl Into<Vec<u8>>, etag: &str) {
        self.state()
            .scripts
            .entry(path.to_string())
            .or_default()
            .replace_after
            .insert(nth, (Arc::new(body.into()), etag.to_string()));
    }

    /// Lets every `Fault::Hold` response (now and later) send the rest of its body.
    pub fn release(&self) {
        self.state().gate.send_replace(true);
    }

    pub fn etag(&self, path: &str) -> String {
        self.state().files[path].1.clone()
    }

    /// Applies `fault` to the `nth` (1-based) GET of `path`, once.
    pub fn on(&self, path: &str, nth: usize, fault: Fault) {
        self.state()
            .scripts
            .entry(path.to_string())
            .or_default()
            .nth
            .insert(nth, fault);
    }

    /// Applies `fault` to every request of `path`.
    pub fn always(&self, path: &str, fault: Fault) {
        self.state()
            .scripts
            .entry(path.to_string())
            .or_default()
            .always = Some(fault);
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<Request> {
        self.state().log.clone()
    }

    pub fn requests_for(&self, path: &str) -> Vec<Request> {
        self.requests()
            .into_iter()
            .filter(|r| r.path == path)
            .collect()
    }

    /// GET requests for `path` since the last `clear_log`.
    pub fn gets(&self, path: &str) -> Vec<Request> {
        self.requests_for(path)
            .into_iter()
            .filter(|r| r.method == "GET")
            .collect()
    }

    pub fn clear_log(&self) {
        self.state().log.clear();
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The most requests served at once so far (from a request's head read to its
    /// response written): a bound on the client's concurrent transfers that a
    /// replaced connection does not inflate, as a count of connections would.
    pub fn peak_in_flight(&self) -> usize {
        self.state().peak_in_flight
    }
}

/// Counts one request in flight until dropped.
struct InFlight(Arc<Mutex<State>>);

impl InFlight {
    fn start(state: &Arc<Mutex<State>>) -> InFlight {
        let mut s = state.lock().unwrap_or_else(|e| e.into_inner());
        s.in_flight += 1;
        s.peak_in_flight = s.peak_in_flight.max(s.in_flight);
        InFlight(state.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut s = self.0.lock().unwrap_or_else(|e| e.into_inner());
        s.in_flight -= 1;
    }
}

impl Drop for FaultServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A URL on 127.0.0.1 where nothing listens (connection refused).
pub fn refused_url(path: &str) -> String {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    format!("http://127.0.0.1:{port}{path}")
}

/// What one response looks like before any fault mangles its body.
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

async fn serve(stream: TcpStream, state: Arc<Mutex<State>>) {
    let peer = stream.peer_addr().ok();
    let mut conn = BufReader::new(stream);
    loop {
        let Some(mut req) = read_request(&mut conn).await else {
            return;
        };
        req.peer = peer;
        let in_flight = InFlight::start(&state);
        let close = req
            .header("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"));
        let (fault, file, mut gate) = {
            let mut s = state.lock().unwrap_or_else(|e| e.into_inner());
            s.log.push(req.clone());
            let nth = if req.method == "GET" {
                let n = s.gets.entry(req.path.clone()).or_default();
                *n += 1;
                *n
            } else {
                0
            };
            let script = s.scripts.get_mut(&req.path);
            let (fault, replacement) = match script {
                Some(sc) => (
                    sc.nth.get(&nth).or(sc.always.as_ref()).cloned(),
                    sc.replace_after.remove(&nth),
                ),
                None => (None, None),
            };
            let file = s.files.get(&req.path).cloned();
            if let Some(new) = replacement {
                s.files.insert(req.path.clone(), new);
            }
            (fault, file, s.gate.subscribe())
        };
        let mut reply = respond(&req, fault.as_ref(), file);
        if let Some(Fault::Closing(after)) = fault {
            tokio::time::sleep(after).await;
            reply.headers.push(("Connection".into(), "close".into()));
        }
        let mut head = format!("HTTP/1.1 {} {}\r\n", reply.status, reason(reply.status));
        for (name, value) in &reply.headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        let body: &[u8] = if req.method == "HEAD" {
            &[]
        } else {
            &reply.body
        };
        let out = conn.get_mut();
        let cut = match fault {
            Some(
                Fault::ResetAfter(k)
                | Fault::ShortBody(k)
                | Fault::StallAfter(k, _)
                | Fault::Hold(k)
                | Fault::HoldThenReset(k),
            ) => k.min(body.len()),
            // The announced object plus K bytes; the body framing asks for K more.
            Some(Fault::GrowsPast(k)) if reply.status == 206 => body.len().saturating_sub(k),
            _ => body.len(),
        };
        if out.write_all(head.as_bytes()).await.is_err() {
            return;
        }
        if let Some(Fault::Paced(rate) | Fault::Unsized(rate)) = fault {
            let started = tokio::time::Instant::now();
            for (i, step) in body[..cut].chunks(8 << 10).enumerate() {
                let due = Duration::from_secs_f64((i * (8 << 10)) as f64 / rate as f64);
                tokio::time::sleep_until(started + due).await;
                if out.write_all(step).await.is_err() || out.flush().await.is_err() {
                    return;
                }
            }
        } else if out.write_all(&body[..cut]).await.is_err() {
            return;
        }
        let _ = out.flush().await;
        drop(in_flight);
        if let Some(Fault::Closing(_)) = fault {
            let _ = out.shutdown().await;
            return;
        }
        if req.method != "HEAD" && reply.status < 300 {
            match fault {
                // Give the client time to read the prefix, then abort with an RST.
                Some(Fault::ResetAfter(_)) => {
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    let _ = out.set_zero_linger();
                    return;
                }
                Some(Fault::ShortBody(_)) => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    let _ = out.shutdown().await;
                    return;
                }
                Some(Fault::StallAfter(_, d)) => {
                    tokio::time::sleep(d).await;
                    return;
                }
                Some(Fault::GrowsPast(_)) => {
                    // Never send the rest: a client still reading waits for a stall.
                    let _ = gate.wait_for(|open| *open).await;
                    return;
                }
                Some(Fault::HoldThenReset(_)) => {
                    let _ = gate.wait_for(|open| *open).await;
                    let _ = out.set_zero_linger();
                    return;
                }
                Some(Fault::Hold(_)) => {
                    if gate.wait_for(|open| *open).await.is_err()
                        || out.write_all(&body[cut..]).await.is_err()
                    {
                        return;
                    }
                    let _ = out.flush().await;
                }
                _ => {}
            }
        }
        if req.has_body() {
            // The body was never read: the connection cannot carry another request.
            // Close as nginx does (lingering), whatever the request asked: end the
            // answer, then drain what the client still sends, so that closing with
            // unread data does not reset the connection (an RST can discard the
            // answer before the client reads it).
            let _ = conn.get_mut().shutdown().await;
            let _ = tokio::time::timeout(
                Duration::from_secs(10),
                tokio::io::copy(&mut conn, &mut tokio::io::sink()),
            )
            .await;
            return;
        }
        if close || matches!(fault, Some(Fault::Unsized(_))) {
            return;
        }
    }
}

fn respond(req: &Request, fault: Option<&Fault>, file: Option<Object>) -> Reply {
    match fault {
        Some(Fault::Status(code)) => return text(*code, "injected fault\n"),
        Some(Fault::StatusWith(code, extra)) => {
            let mut r = text(*code, "injected fault\n");
            r.headers.extend(extra.iter().cloned());
            return r;
        }
        Some(Fault::StatusBody(code, extra, body)) => {
            let mut r = text(*code, body);
            r.headers.extend(extra.iter().cloned());
            return r;
        }
        Some(Fault::Redirect(code, to)) => {
            let mut r = text(*code, "");
            r.headers.push(("Location".into(), to.clone()));
            return r;
        }
        _ => {}
    }
    let Some((data, etag)) = file else {
        return text(404, "not found\n");
    };
    let ranges = !matches!(fault, Some(Fault::NoRange));
    let len = data.len();
    let mut headers = vec![
        ("ETag".to_string(), etag.clone()),
        ("Content-Type".into(), "application/octet-stream".into()),
    ];
    if ranges {
        headers.push(("Accept-Ranges".into(), "bytes".into()));
    }
    let fresh = matches!(fault, Some(Fault::IgnoreIfRange))
        || req.header("if-range").is_none_or(|v| v == etag);
    let range = req
        .header("range")
        .filter(|_| ranges && fresh && !matches!(fault, Some(Fault::IgnoreRange)))
        .and_then(parse_range);
    let (status, start, end) = match range {
        Some((s, _)) if s >= len => {
            let mut r = text(416, "");
            r.headers
                .push(("Content-Range".into(), format!("bytes */{len}")));
            return r;
        }
        Some((s, e)) => (206, s, e.map_or(len, |e| (e + 1).min(len))),
        None => (200, 0, len),
    };
    if let Some(Fault::GrowsPast(k)) = fault {
        // Announce the object as stored, send past its end: it grew.
        let mut body = data[start..].to_vec();
        body.extend(std::iter::repeat_n(0x5a, 2 * k));
        headers.push((
            "Content-Range".into(),
            format!("bytes {start}-{}/{len}", len - 1),
        ));
        headers.push(("Content-Length".into(), body.len().to_string()));
        return Reply {
            status: 206,
            headers,
            body,
        };
    }
    if status == 206 {
        headers.push((
            "Content-Range".into(),
            format!("bytes {start}-{}/{len}", end - 1),
        ));
    }
    if matches!(fault, Some(Fault::Unsized(_))) && status == 200 {
        headers.push(("Connection".into(), "close".into()));
    } else {
        headers.push(("Content-Length".into(), (end - start).to_string()));
    }
    Reply {
        status,
        headers,
        body: data[start..end].to_vec(),
    }
}

fn text(status: u16, body: &str) -> Reply {
    let headers = vec![
        ("Content-Length".to_string(), body.len().to_string()),
        ("Content-Type".into(), "text/plain".into()),
    ];
    Reply {
        status,
        headers,
        body: body.as_bytes().to_vec(),
    }
}

/// `bytes=N-` or `bytes=N-M` (inclusive end); anything else is ignored.
fn parse_range(v: &str) -> Option<(usize, Option<usize>)> {
    let (start, end) = v.trim().strip_prefix("bytes=")?.split_once('-')?;
    let end = if end.is_empty() {
        None
    } else {
        Some(end.parse().ok()?)
    };
    Some((start.parse().ok()?, end))
}

async fn read_request(conn: &mut BufReader<TcpStream>) -> Option<Request> {
    let mut line = String::new();
    conn.read_line(&mut line).await.ok().filter(|n| *n > 0)?;
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_string();
    let target = parts.next()?.to_string();
    let mut headers = Vec::new();
    loop {
        line.clear();
        conn.read_line(&mut line).await.ok().filter(|n| *n > 0)?;
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        let (name, value) = l.split_once(':')?;
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
    }
    let path = target.split('?').next().unwrap_or_default().to_string();
    Some(Request {
        method,
        target,
        path,
        headers,
        at: Instant::now(),
        peer: None,
    })
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        206 => "Partial Content",
        301 => "Moved Permanently",
        302 => "Found",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        408 => "Request Timeout",
        416 => "Range Not Satisfiable",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Whatever",
    }
}
