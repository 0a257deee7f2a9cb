//! The chaos proxy: a tiny HTTP/1.1 relay on 127.0.0.1 between the kit and the backend
//! that loses, duplicates or delays what passes through it, the way a train, a load
//! balancer or a slow network does.
//!
//! The kit says per request which fault to apply (header [`FAULT_HEADER`], stripped
//! before forwarding), so every check knows exactly what happened on the wire. The
//! backend side goes through reqwest, so an `https://` staging backend works as well.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// Request header naming the fault for this request.
pub const FAULT_HEADER: &str = "x-sendonce-chaos";

/// Largest request head the proxy reads; the kit's own requests are far smaller.
const MAX_HEAD: usize = 64 * 1024;

/// What the proxy does to one request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fault {
    /// Pass it through.
    None,
    /// Forward it, wait for the backend's answer, then close the connection without it.
    DropAnswer,
    /// Deliver it to the backend twice at once; answer with one of the two.
    Duplicate,
    /// Forward it, then hold the answer this long before sending it.
    Delay(Duration),
}

impl Fault {
    /// The header value for this fault.
    pub fn to_header(self) -> String {
        match self {
            Fault::None => "none".into(),
            Fault::DropAnswer => "drop".into(),
            Fault::Duplicate => "duplicate".into(),
            Fault::Delay(d) => format!("delay-{}", d.as_millis()),
        }
    }

    fn from_header(v: &str) -> Self {
        match v.trim() {
            "drop" => Fault::DropAnswer,
            "duplicate" => Fault::Duplicate,
            v => v
                .strip_prefix("delay-")
                .and_then(|ms| ms.parse().ok())
                .map(|ms| Fault::Delay(Duration::from_millis(ms)))
                .unwrap_or(Fault::None),
        }
    }
}

/// A running proxy; stops when dropped.
pub struct ChaosProxy {
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl ChaosProxy {
    /// Starts a proxy on 127.0.0.1 (a free port) in front of `backend`.
    pub async fn start(backend: &str) -> std::io::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let client = reqwest::Client::builder()
            .no_proxy()
            .build()
            .map_err(std::io::Error::other)?;
        let backend = backend.trim_end_matches('/').to_string();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (client, backend) = (client.clone(), backend.clone());
                tokio::spawn(async move {
                    let _ = relay(stream, &client, &backend).await;
                });
            }
        });
        Ok(Self { addr, task })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for ChaosProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct Request {
    method: reqwest::Method,
    target: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    fault: Fault,
}

struct Reply {
    status: u16,
    headers: Vec<(String, Vec<u8>)>,
    body: Vec<u8>,
}

/// One request per connection (the kit's proxy client never reuses one).
async fn relay(
    mut stream: TcpStream,
    client: &reqwest::Client,
    backend: &str,
) -> std::io::Result<()> {
    let Some(req) = read_request(&mut stream).await? else {
        return Ok(());
    };
    let reply = match req.fault {
        Fault::Duplicate => {
            let (a, _b) = tokio::join!(
                forward(client, backend, &req),
                forward(client, backend, &req)
            );
            a
        }
        _ => forward(client, backend, &req).await,
    };
    match req.fault {
        // The backend has answered; the client never hears it.
        Fault::DropAnswer => return Ok(()),
        Fault::Delay(d) => tokio::time::sleep(d).await,
        Fault::None | Fault::Duplicate => {}
    }
    stream.write_all(&encode(&reply)).await?;
    stream.shutdown().await
}

async fn read_request(stream: &mut TcpStream) -> std::io::Result<Option<Request>> {
    let mut buf = Vec::with_capacity(4096);
    let head_end = loop {
        if let Some(i) = find(&buf, b"\r\n\r\n") {
            break i;
        }
        if buf.len() > MAX_HEAD {
            return Err(std::io::Error::other("request head too large"));
        }
        let mut chunk = [0u8; 4096];
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next().unwrap_or_default().split(' ');
    let method = first.next().unwrap_or("GET");
    let method = reqwest::Method::from_bytes(method.as_bytes()).map_err(std::io::Error::other)?;
    let target = first.next().unwrap_or("/").to_string();
    let mut headers = Vec::new();
    let mut fault = Fault::None;
    let mut length = 0usize;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let (name, value) = (name.trim().to_ascii_lowercase(), value.trim().to_string());
        match name.as_str() {
            FAULT_HEADER => fault = Fault::from_header(&value),
            "content-length" => length = value.parse().unwrap_or(0),
            "host" | "connection" | "transfer-encoding" | "keep-alive" => {}
            _ => headers.push((name, value)),
        }
    }
    // The head is re-read as lossy text above; the body is kept as exact bytes.
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < length {
        let mut chunk = vec![0u8; length - body.len()];
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        body.extend_from_slice(&chunk[..n]);
    }
    body.truncate(length);
    Ok(Some(Request {
        method,
        target,
        headers,
        body,
        fault,
    }))
}

/// Sends the request to the backend; a transport failure becomes a 502 from the proxy
/// (the kit treats it like any intermediary's answer: outcome unknown).
async fn forward(client: &reqwest::Client, backend: &str, req: &Request) -> Reply {
    let mut r = client
        .request(req.method.clone(), format!("{backend}{}", req.target))
        .timeout(Duration::from_secs(30))
        .body(req.body.clone());
    for (k, v) in &req.headers {
        r = r.header(k.as_str(), v.as_str());
    }
    let result = async {
        let resp = r.send().await?;
        let status = resp.status().as_u16();
        let headers = resp
            .headers()
            .iter()
            .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
            .collect();
        let body = resp.bytes().await?.to_vec();
        Ok::<_, reqwest::Error>(Reply {
            status,
            headers,
            body,
        })
    }
    .await;
    result.unwrap_or_else(|e| Reply {
        status: 502,
        headers: vec![("x-sendonce-proxy-error".into(), b"1".to_vec())],
        body: crate::error_text::error_chain(&e).into_bytes(),
    })
}

fn encode(reply: &Reply) -> Vec<u8> {
    let mut out = format!("HTTP/1.1 {} X\r\n", reply.status).into_bytes();
    for (k, v) in &reply.headers {
        if matches!(
            k.as_str(),
            "content-length" | "transfer-encoding" | "connection" | "keep-alive"
        ) {
            continue;
        }
        out.extend_from_slice(k.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(v);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(
        format!(
            "content-length: {}\r\nconnection: close\r\n\r\n",
            reply.body.len()
        )
        .as_bytes(),
    );
    out.extend_from_slice(&reply.body);
    out
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_survive_the_header() {
        for f in [
            Fault::None,
            Fault::DropAnswer,
            Fault::Duplicate,
            Fault::Delay(Duration::from_millis(1500)),
        ] {
            assert_eq!(Fault::from_header(&f.to_header()), f);
        }
        assert_eq!(Fault::from_header("nonsense"), Fault::None);
    }

    #[test]
    fn a_reply_is_framed_by_its_length_and_closes() {
        let reply = Reply {
            status: 201,
            headers: vec![
                ("content-length".into(), b"99".to_vec()),
                ("idempotent-replayed".into(), b"true".to_vec()),
            ],
            body: b"{}".to_vec(),
        };
        let text = String::from_utf8(encode(&reply)).unwrap();
        assert!(text.starts_with("HTTP/1.1 201 "));
        assert!(text.contains("idempotent-replayed: true\r\n"));
        assert!(
            text.ends_with("content-length: 2\r\nconnection: close\r\n\r\n{}"),
            "{text}"
        );
    }
}
