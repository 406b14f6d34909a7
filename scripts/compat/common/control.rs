//! A tiny HTTP/1.1 client for the simulator's control API (`Connection:
//! close`, no chunking: the simulator answers with `Content-Length`), so the
//! bot needs no HTTP crate of its own beside twilight-http.

use serde_json::Value;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// `http://127.0.0.1:P/control` split into `127.0.0.1:P` and `/control`.
pub struct Control {
    host: String,
    prefix: String,
}

impl Control {
    pub fn new(url: &str) -> Result<Control, String> {
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| format!("control URL {url:?} is not http://"))?;
        let (host, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        Ok(Control {
            host: host.to_owned(),
            prefix: format!("/{prefix}"),
        })
    }

    /// GET or POST `path` (under the control prefix); the JSON answer.
    pub async fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, String> {
        let what = format!("{method} {}{path}", self.prefix);
        let exchange = async {
            let mut stream = TcpStream::connect(&self.host)
                .await
                .map_err(|err| format!("{what}: connect {}: {err}", self.host))?;
            let body = body.map(Value::to_string).unwrap_or_default();
            let request = format!(
                "{method} {}{path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\
                 Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                self.prefix,
                self.host,
                body.len()
            );
            stream
                .write_all(request.as_bytes())
                .await
                .map_err(|err| format!("{what}: write: {err}"))?;
            let mut answer = Vec::new();
            stream
                .read_to_end(&mut answer)
                .await
                .map_err(|err| format!("{what}: read: {err}"))?;
            let answer = String::from_utf8_lossy(&answer);
            let (head, json) = answer
                .split_once("\r\n\r\n")
                .ok_or_else(|| format!("{what}: no HTTP header end in the answer"))?;
            if !head.starts_with("HTTP/1.1 200") {
                return Err(format!(
                    "{what}: {}: {json}",
                    head.lines().next().unwrap_or("")
                ));
            }
            serde_json::from_str(json).map_err(|err| format!("{what}: bad JSON: {err}"))
        };
        tokio::time::timeout(Duration::from_secs(10), exchange)
            .await
            .map_err(|_| format!("{what}: no answer within 10 s"))?
    }

    /// Heartbeats on the busiest live connection of a session (identified
    /// or resumed).
    pub async fn session_beats(&self) -> Result<u64, String> {
        let stats = self.call("GET", "/stats", None).await?;
        let conns = stats["connections"].as_array().cloned().unwrap_or_default();
        Ok(conns
            .iter()
            .filter(|c| {
                let identified = c["identifies"].as_u64().unwrap_or(0) > 0;
                let resumed = c["resumes"].as_u64().unwrap_or(0) > 0;
                (identified || resumed) && c["ended"].is_null()
            })
            .filter_map(|c| c["heartbeats"].as_u64())
            .max()
            .unwrap_or(0))
    }
}
