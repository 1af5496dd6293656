//! The accept loop. axum's own `serve` has no header-read timeout and no connection limit, so a few
//! hundred clients that send their headers a byte at a time hold every file descriptor until
//! legitimate requests (and `/healthz`) time out. Here each connection is served by hyper with a
//! header-read timeout, and at most `max_connections` are open at once: one over the limit gets a
//! bare 503 and is closed, so it costs a descriptor only for an instant.

use std::future::Future;
use std::sync::Arc;
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

/// Serves `app` on `listener` until `shutdown` resolves, then stops accepting, asks every open
/// connection to finish its request in flight, and returns when all are closed.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    let limits = state.limits().clone();
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let (closing, closing_rx) = watch::channel(false);
    tokio::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => stream,
                Err(e) => {
                    // Out of descriptors (EMFILE) or a connection reset before accept: keep serving,
                    // but do not spin while the condition lasts.
                    tracing::warn!(target: "hopwise_serve", "accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            state.metrics().rejected_connection();
            // Best effort, never blocking: the client learns why before the close.
            let _ = stream.try_write(OVER_LIMIT);
            continue;
        };
        let _ = stream.set_nodelay(true);
        tokio::spawn(connection(stream, app.clone(), state.clone(), slot, limits.read_timeout, closing_rx.clone()));
    }
    drop(listener);
    let _ = closing.send(true);
    // Every connection holds a slot until it ends: all slots back means all connections closed.
    let all = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
    let _ = slots.acquire_many(all).await;
    Ok(())
}

/// One connection, from its first byte to its close. Its slot is released when this returns.
async fn connection(
    stream: TcpStream,
    app: Router,
    state: AppState,
    _slot: OwnedSemaphorePermit,
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
