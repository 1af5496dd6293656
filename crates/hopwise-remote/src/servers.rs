//! Real servers for integration tests: Typesense, Milvus (inside its own network namespace) and
//! llama.cpp's HTTP server, installed by `scripts/servers.sh install` into a venv under
//! `$HOPWISE_HOME`. Each binds 127.0.0.1 on a free port, is health-waited, and is killed (its whole
//! process group) when its handle drops.
//!
//! Tests call [`require`]: a missing install is a skip (printed as `skipped: …`) unless `CI` is set,
//! where it is a failure, so CI cannot silently test nothing.

use std::fs::File;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The server venv: `$HOPWISE_SERVERS_VENV`, else `$HOPWISE_HOME/venv-servers`, else
/// `~/.cache/hopwise/venv-servers`.
pub fn venv_dir() -> PathBuf {
    if let Some(v) = std::env::var_os("HOPWISE_SERVERS_VENV").filter(|v| !v.is_empty()) {
        return PathBuf::from(v);
    }
    let home = std::env::var_os("HOPWISE_HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/hopwise")))
        .unwrap_or_else(|| PathBuf::from(".hopwise"));
    home.join("venv-servers")
}

/// `venv/bin/<name>` if installed. Otherwise: under `CI`, a panic (the test fails); elsewhere
/// `None` after printing why the test is skipped.
pub fn require(name: &str) -> Option<PathBuf> {
    let path = venv_dir().join("bin").join(name);
    if path.exists() {
        return Some(path);
    }
    let why = format!("{} is not installed; run `scripts/servers.sh install`", path.display());
    if std::env::var_os("CI").is_some() {
        panic!("{why} (CI is set, so a missing server fails the test)");
    }
    hopwise_core::test_skips::skipped(&why);
    None
}

/// A port free on 127.0.0.1 right now.
pub fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?.local_addr()?.port())
}

/// A child process in its own process group, killed with the group on drop.
pub struct ServerProcess {
    child: Option<Child>,
    log: PathBuf,
}

impl ServerProcess {
    fn spawn(mut cmd: Command, log: PathBuf) -> std::io::Result<Self> {
        let out = File::create(&log)?;
        let err = out.try_clone()?;
        cmd.stdin(Stdio::null()).stdout(out).stderr(err).process_group(0);
        Ok(Self { child: Some(cmd.spawn()?), log })
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.as_mut().map(|c| c.try_wait()), Some(Ok(None)))
    }

    /// The end of the server's log, for failure messages.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let start = text.len().saturating_sub(2000);
        let start = (start..text.len()).find(|&i| text.is_char_boundary(i)).unwrap_or(text.len());
        text[start..].to_string()
    }

    /// SIGKILL to the whole group (servers that fork helpers go with them), then reap.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            if let Ok(pid) = i32::try_from(child.id()) {
                // SAFETY: kill(2) with a negative pid signals that process group; no memory involved.
                unsafe {
                    libc::kill(-pid, libc::SIGKILL);
                }
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A scratch directory removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> std::io::Result<Self> {
        let nanos =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
        let dir = std::env::temp_dir().join(format!("hopwise-{tag}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        Ok(Self(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A bare HTTP/1.0 GET (no client library, so the helpers work from sync code); the status and body.
pub fn http_get(addr: SocketAddr, path: &str, timeout: Duration) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&addr, timeout)?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\nConnection: close\r\n\r\n")?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf)?;
    let text = String::from_utf8_lossy(&buf).into_owned();
    let status = text.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    Ok((status, body))
}

fn wait_healthy(
    proc: &mut ServerProcess,
    what: &str,
    deadline: Duration,
    mut ok: impl FnMut() -> bool,
) -> Result<(), String> {
    let started = Instant::now();
    loop {
        if ok() {
            return Ok(());
        }
        if !proc.alive() {
            return Err(format!("{what} exited during start-up; log:\n{}", proc.log_tail()));
        }
        if started.elapsed() > deadline {
            return Err(format!("{what} not healthy after {deadline:?}; log:\n{}", proc.log_tail()));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A Typesense server on 127.0.0.1 with a scratch data directory.
pub struct TypesenseServer {
    pub url: String,
    pub api_key: String,
    pub port: u16,
    process: ServerProcess,
    data: PathBuf,
    binary: PathBuf,
    _scratch: Scratch,
}

impl TypesenseServer {
    pub fn start(binary: &Path) -> Result<Self, String> {
        let scratch = Scratch::new("typesense").map_err(|e| e.to_string())?;
        let data = scratch.0.join("data");
        std::fs::create_dir_all(&data).map_err(|e| e.to_string())?;
        let port = free_port().map_err(|e| e.to_string())?;
        let api_key = format!("test-{port}");
        let process = Self::launch(binary, &data, port, &api_key, &scratch.0)?;
        Ok(Self {
            url: format!("http://127.0.0.1:{port}"),
            api_key,
            port,
            process,
            data,
            binary: binary.to_path_buf(),
            _scratch: scratch,
        })
    }

    fn launch(binary: &Path, data: &Path, port: u16, key: &str, scratch: &Path) -> Result<ServerProcess, String> {
        let peering = free_port().map_err(|e| e.to_string())?;
        let mut cmd = Command::new(binary);
        cmd.arg("--data-dir")
            .arg(data)
            .args(["--api-key", key, "--api-address", "127.0.0.1", "--api-port", &port.to_string()])
            .args(["--peering-address", "127.0.0.1", "--peering-port", &peering.to_string()]);
        let mut process = ServerProcess::spawn(cmd, scratch.join(format!("typesense-{port}.log")))
            .map_err(|e| format!("starting {}: {e}", binary.display()))?;
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        wait_healthy(
            &mut process,
            "typesense",
            Duration::from_secs(60),
            || matches!(http_get(addr, "/health", Duration::from_secs(2)), Ok((200, b)) if b.contains("true")),
        )?;
        Ok(process)
    }

    /// Kills the server (SIGKILL, no clean shutdown), as a crash would.
    pub fn kill(&mut self) {
        self.process.kill();
    }

    /// Starts it again on the same port and data directory.
    pub fn restart(&mut self) -> Result<(), String> {
        self.process.kill();
        self.process = Self::launch(&self.binary, &self.data, self.port, &self.api_key, &self._scratch.0)?;
        Ok(())
    }
}

/// Milvus standalone inside its own network namespace (its many servers bind every interface, so
/// they must not be reachable from outside), reached through a forwarder listening on 127.0.0.1.
pub struct MilvusServer {
    pub url: String,
    _forwarder: Forwarder,
    process: ServerProcess,
    binary: PathBuf,
    _scratch: Scratch,
}

/// The port Milvus's proxy listens on inside its namespace (nothing else is there to collide).
const MILVUS_INNER_PORT: u16 = 19530;

impl MilvusServer {
    pub fn start(binary: &Path) -> Result<Self, String> {
        let scratch = Scratch::new("milvus").map_err(|e| e.to_string())?;
        let (process, forwarder) = Self::launch(binary, &scratch.0)?;
        Ok(Self {
            url: format!("http://{}", forwarder.addr),
            _forwarder: forwarder,
            process,
            binary: binary.to_path_buf(),
            _scratch: scratch,
        })
    }

    fn launch(binary: &Path, scratch: &Path) -> Result<(ServerProcess, Forwarder), String> {
        let mut cmd = Command::new("unshare");
        // `unshare` execs the shell in the new namespace, which brings loopback up and execs Milvus:
        // the spawned pid is Milvus's, and /proc/PID/ns/net is the namespace.
        cmd.args(["-n", "sh", "-c", "ip link set lo up && exec \"$0\" --data \"$1\" --proxy-port \"$2\""])
            .arg(binary)
            .arg(scratch.join("data"))
            .arg(MILVUS_INNER_PORT.to_string());
        let log = scratch.join(format!("milvus-{}.log", free_port().unwrap_or(0)));
        let mut process =
            ServerProcess::spawn(cmd, log).map_err(|e| format!("starting unshare/{}: {e}", binary.display()))?;
        let pid = process.pid().ok_or("milvus: no pid")?;
        // Give unshare a moment to create the namespace before entering it.
        std::thread::sleep(Duration::from_millis(300));
        let forwarder = Forwarder::start(pid, MILVUS_INNER_PORT).map_err(|e| {
            format!(
                "forwarder into milvus's namespace: {e} (needs root or CAP_SYS_ADMIN); log:\n{}",
                process.log_tail()
            )
        })?;
        let addr = forwarder.addr;
        wait_healthy(
            &mut process,
            "milvus",
            Duration::from_secs(180),
            || matches!(http_get(addr, "/v1/vector/collections", Duration::from_secs(5)), Ok((200, b)) if b.contains("\"code\":200")),
        )?;
        Ok((process, forwarder))
    }

    /// Kills Milvus (SIGKILL, as a crash would).
    pub fn kill(&mut self) {
        self.process.kill();
    }

    /// Starts it again on the same data directory, in a fresh namespace; `url` changes.
    pub fn restart(&mut self) -> Result<(), String> {
        self.process.kill();
        let (process, forwarder) = Self::launch(&self.binary, &self._scratch.0)?;
        self.url = format!("http://{}", forwarder.addr);
        self.process = process;
        self._forwarder = forwarder;
        Ok(())
    }
}

/// Accepts on 127.0.0.1 in this namespace and connects each client to `127.0.0.1:inner` inside
/// another process's network namespace. Network namespaces are per thread, so one thread enters the
/// target namespace and makes the inner connections; sockets keep their namespace when another
/// thread uses them.
pub struct Forwarder {
    pub addr: SocketAddr,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Forwarder {
    pub fn start(pid: u32, inner: u16) -> std::io::Result<Self> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
        let addr = listener.local_addr()?;
        let ns = File::open(format!("/proc/{pid}/ns/net"))?;
        let (req_tx, req_rx) = mpsc::channel::<mpsc::Sender<std::io::Result<TcpStream>>>();
        let (ready_tx, ready_rx) = mpsc::channel::<std::io::Result<()>>();
        std::thread::spawn(move || {
            // SAFETY: setns(2) on a namespace fd we own; affects only this thread.
            let rc = unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) };
            if rc != 0 {
                let _ = ready_tx.send(Err(std::io::Error::last_os_error()));
                return;
            }
            let _ = ready_tx.send(Ok(()));
            for reply in req_rx {
                let conn =
                    TcpStream::connect_timeout(&SocketAddr::from((Ipv4Addr::LOCALHOST, inner)), Duration::from_secs(5));
                let _ = reply.send(conn);
            }
        });
        ready_rx.recv().map_err(|_| std::io::Error::other("namespace thread died"))??;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stop_flag = stop.clone();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if stop_flag.load(std::sync::atomic::Ordering::Relaxed) {
                    break;
                }
                let Ok(client) = client else { continue };
                let (tx, rx) = mpsc::channel();
                if req_tx.send(tx).is_err() {
                    break;
                }
                let Ok(Ok(server)) = rx.recv() else { continue };
                pump(client, server);
            }
        });
        Ok(Self { addr, stop })
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(200));
    }
}

/// Copies bytes both ways until either side closes.
fn pump(a: TcpStream, b: TcpStream) {
    // Without this, Nagle's algorithm and delayed ACKs stall small request/response pairs.
    let _ = a.set_nodelay(true);
    let _ = b.set_nodelay(true);
    let (Ok(a2), Ok(b2)) = (a.try_clone(), b.try_clone()) else { return };
    let one = move |mut from: TcpStream, mut to: TcpStream| {
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut from, &mut to);
            let _ = to.shutdown(std::net::Shutdown::Write);
        });
    };
    one(a, b2);
    one(b, a2);
}

/// llama.cpp's server (via xllamacpp) on 127.0.0.1 serving one GGUF with `threads` threads.
pub struct LlamaServer {
    /// The OpenAI-compatible API root (`…/v1`).
    pub base_url: String,
    process: ServerProcess,
    _scratch: Scratch,
}

const LLAMA_SCRIPT: &str = include_str!("llama_server.py");

impl LlamaServer {
    pub fn start(python: &Path, model: &Path, threads: usize, ctx: usize) -> Result<Self, String> {
        Self::start_parallel(python, model, threads, ctx, 1)
    }

    /// [`Self::start`] with `parallel` slots (continuous batching) sharing one KV cache of `ctx` cells.
    pub fn start_parallel(
        python: &Path,
        model: &Path,
        threads: usize,
        ctx: usize,
        parallel: usize,
    ) -> Result<Self, String> {
        let scratch = Scratch::new("llama").map_err(|e| e.to_string())?;
        let script = scratch.0.join("llama_server.py");
        std::fs::write(&script, LLAMA_SCRIPT).map_err(|e| e.to_string())?;
        let port = free_port().map_err(|e| e.to_string())?;
        let mut cmd = Command::new(python);
        cmd.arg(&script).arg(model).arg(port.to_string()).arg(threads.to_string()).arg(ctx.to_string());
        cmd.arg(parallel.max(1).to_string());
        let mut process = ServerProcess::spawn(cmd, scratch.0.join("llama.log")).map_err(|e| e.to_string())?;
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        wait_healthy(&mut process, "llama.cpp server", Duration::from_secs(120), || {
            matches!(http_get(addr, "/health", Duration::from_secs(2)), Ok((200, _)))
        })?;
        Ok(Self { base_url: format!("http://127.0.0.1:{port}/v1"), process, _scratch: scratch })
    }

    pub fn log_tail(&self) -> String {
        self.process.log_tail()
    }
}
