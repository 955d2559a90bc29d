//! A TCP proxy on 127.0.0.1 in front of a real server that cuts the first N
//! connections after forwarding a given number of response bytes (a reset in
//! the middle of a body), or slows every response down to a trickle — with the
//! real server's signatures, ETags and ranges untouched (the bytes pass
//! through verbatim, Host header included).

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;

pub struct CutProxy {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    cuts: Arc<AtomicUsize>,
}

impl CutProxy {
    /// Forwards to `upstream`; the first `times` connections are closed after
    /// `after` bytes of response.
    pub fn start(upstream: SocketAddr, after: u64, times: usize) -> CutProxy {
        CutProxy::launch(upstream, after, times, None)
    }

    /// Forwards to `upstream`, sending responses `chunk` bytes at a time with
    /// `pause` between chunks.
    pub fn slow(upstream: SocketAddr, chunk: usize, pause: std::time::Duration) -> CutProxy {
        CutProxy::launch(upstream, 0, 0, Some((chunk, pause)))
    }

    fn launch(
        upstream: SocketAddr,
        after: u64,
        times: usize,
        trickle: Option<(usize, std::time::Duration)>,
    ) -> CutProxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let cuts = Arc::new(AtomicUsize::new(0));
        let (stop2, cuts2) = (stop.clone(), cuts.clone());
        let budget = Arc::new(AtomicUsize::new(times));
        thread::spawn(move || {
            for client in listener.incoming() {
                if stop2.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(client) = client else { continue };
                let cut = budget
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                    .is_ok();
                let cuts = cuts2.clone();
                thread::spawn(move || {
                    relay(client, upstream, cut.then_some(after), trickle, &cuts)
                });
            }
        });
        CutProxy { addr, stop, cuts }
    }

    /// `http://127.0.0.1:PORT`
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// How many connections were cut so far.
    pub fn cuts(&self) -> usize {
        self.cuts.load(Ordering::SeqCst)
    }
}

impl Drop for CutProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect(self.addr);
    }
}

fn relay(
    client: TcpStream,
    upstream: SocketAddr,
    cut_after: Option<u64>,
    trickle: Option<(usize, std::time::Duration)>,
    cuts: &AtomicUsize,
) {
    let Ok(server) = TcpStream::connect(upstream) else {
        return;
    };
    let (mut c_read, mut s_write) = (client.try_clone().unwrap(), server.try_clone().unwrap());
    let up = thread::spawn(move || {
        let _ = std::io::copy(&mut c_read, &mut s_write);
        let _ = s_write.shutdown(Shutdown::Write);
    });
    let (mut s_read, mut c_write) = (server, client);
    let mut sent = 0u64;
    let mut buf = [0u8; 64 << 10];
    let size = trickle.map_or(buf.len(), |(chunk, _)| chunk.min(buf.len()));
    loop {
        if let Some((_, pause)) = trickle {
            thread::sleep(pause);
        }
        let n = match s_read.read(&mut buf[..size]) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let n = match cut_after {
            Some(limit) if sent + n as u64 >= limit => {
                let keep = (limit - sent) as usize;
                let _ = c_write.write_all(&buf[..keep]);
                cuts.fetch_add(1, Ordering::SeqCst);
                let _ = c_write.shutdown(Shutdown::Both);
                let _ = s_read.shutdown(Shutdown::Both);
                return;
            }
            _ => n,
        };
        if c_write.write_all(&buf[..n]).is_err() {
            break;
        }
        sent += n as u64;
    }
    let _ = c_write.shutdown(Shutdown::Both);
    let _ = up.join();
}
