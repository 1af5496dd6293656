//! The accept loop. axum's own `serve` has no header-read timeout and no connection limit, so a few
//! hundred clients that send their headers a byte at a time hold every file descriptor until
//! legitimate requests (and `/healthz`) time out. Here each connection is served by hyper with a
//! header-read timeout, at most `max_connections` are open at once and at most
//! `max_connections_per_peer` from one address: one over either limit gets a bare 503 and is closed,
//! so it costs a descriptor only for an instant. When every slot is taken by many peers, a small
//! reserve of connections still answers `/healthz` (and only that), so a supervisor can tell a busy
//! server from a dead one.

use std::collections::HashMap;
use std::future::Future;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};

use crate::error::Result;
use crate::state::AppState;

/// Written to a connection over the limit before it is closed.
const OVER_LIMIT: &[u8] =
    b"HTTP/1.1 503 Service Unavailable\r\nretry-after: 1\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";

/// Connections beyond `max_connections` that may still ask `/healthz`.
pub const HEALTH_RESERVE: usize = 8;

/// How long a reserve connection may take to send its headers: a health check is one short request.
const HEALTH_READ_TIMEOUT: Duration = Duration::from_secs(2);

/// Open connections per client address.
struct Peers {
    open: Mutex<HashMap<IpAddr, usize>>,
    cap: usize,
}

/// One connection counted against its peer's cap; dropping it gives the place back.
struct PeerPlace {
    peers: Arc<Peers>,
    ip: IpAddr,
}

impl Peers {
    fn take(self: &Arc<Self>, ip: IpAddr) -> Option<PeerPlace> {
        let mut open = self.open.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let count = open.entry(ip).or_insert(0);
        if *count >= self.cap {
            return None;
        }
        *count += 1;
        Some(PeerPlace { peers: self.clone(), ip })
    }
}

impl Drop for PeerPlace {
    fn drop(&mut self) {
        let mut open = self.peers.open.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(count) = open.get_mut(&self.ip) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.ip);
            }
        }
    }
}

/// What a connection holds while it is open: its peer's place and a slot, main or reserve.
struct Held {
    _peer: PeerPlace,
    _slot: OwnedSemaphorePermit,
}

/// Serves `app` on `listener` until `shutdown` resolves, then stops accepting, asks every open
/// connection to finish its request in flight, and returns when all are closed. `health` serves the
/// reserve connections.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    health: Router,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    let mut limits = state.limits().clone();
    if let Some(warning) = crate::descriptors::fit(&mut limits.max_connections, HEALTH_RESERVE) {
        tracing::warn!(target: "hopwise_serve", "{warning}");
    }
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let reserve = Arc::new(Semaphore::new(HEALTH_RESERVE));
    let peers = Arc::new(Peers { open: Mutex::default(), cap: limits.max_connections_per_peer.max(1) });
    let (closing, closing_rx) = watch::channel(false);
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of descriptors (EMFILE) or a connection reset before accept: keep serving,
                    // but do not spin while the condition lasts.
                    tracing::warn!(target: "hopwise_serve", "accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let place = peers.take(peer.ip());
        let main = place.as_ref().and_then(|_| slots.clone().try_acquire_owned().ok());
        let (held, router, read_timeout) = match (place, main) {
            (Some(place), Some(slot)) => (Held { _peer: place, _slot: slot }, app.clone(), limits.read_timeout),
            (Some(place), None) => match reserve.clone().try_acquire_owned() {
                Ok(slot) => {
                    (Held { _peer: place, _slot: slot }, health.clone(), limits.read_timeout.min(HEALTH_READ_TIMEOUT))
                }
                Err(_) => {
                    refuse(&stream, &state);
                    continue;
                }
            },
            (None, _) => {
                refuse(&stream, &state);
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        tokio::spawn(connection(stream, router, state.clone(), held, read_timeout, closing_rx.clone()));
    }
    drop(listener);
    let _ = closing.send(true);
    // Every connection holds a slot until it ends: all slots back means all connections closed.
    let all = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
    let _ = slots.acquire_many(all).await;
    let _ = reserve.acquire_many(HEALTH_RESERVE as u32).await;
    Ok(())
}

/// Over a limit: a bare 503 and the close.
fn refuse(stream: &TcpStream, state: &AppState) {
    state.metrics().rejected_connection();
    // Best effort, never blocking: the client learns why before the close.
    let _ = stream.try_write(OVER_LIMIT);
}

/// One connection, from its first byte to its close. Its slot is released when this returns.
async fn connection(
    stream: TcpStream,
    app: Router,
    state: AppState,
    _held: Held,
    read_timeout: Duration,
    mut closing: watch::Receiver<bool>,
) {
    let _open = state.metrics().connection_opened();
    let mut builder = http1::Builder::new();
    // Also bounds an idle keep-alive connection: waiting for the next request's headers is the same state.
    builder.timer(TokioTimer::new()).header_read_timeout(read_timeout);
    let conn = builder.serve_connection(TokioIo::new(stream), TowerToHyperService::new(app));
    tokio::pin!(conn);
    let stop = async move {
        // The guard it returns must not live across the graceful close below (it is not `Send`).
        let _ = closing.wait_for(|closing| *closing).await.is_ok();
    };
    let result = tokio::select! {
        result = conn.as_mut() => result,
        () = stop => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(e) = result {
        // Timeouts and clients that vanish are routine; they are not the server's errors.
        tracing::debug!(target: "hopwise_serve", "connection ended: {e}");
    }
}
