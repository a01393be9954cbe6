//! [`UnixConnection`]: an accepted Unix socket connection whose client bytes go through
//! [`AuthorityRepair`] before the HTTP/2 server reads them.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::UnixStream;
use tonic::transport::server::{Connected, UdsConnectInfo};

use super::authority::{AuthorityRepair, REPLACEMENT_AUTHORITY};

/// Bytes read from the socket at a time.
const READ_CHUNK: usize = 16 * 1024;

/// A Unix socket connection that accepts any `:authority` (see [`super::authority`]).
#[derive(Debug)]
pub(crate) struct UnixConnection {
    stream: UnixStream,
    repair: AuthorityRepair,
    /// Repaired bytes not yet read by the server.
    ready: Vec<u8>,
    /// How much of `ready` was read.
    consumed: usize,
    /// Whether a repaired authority was logged on this connection (once is enough).
    logged: bool,
}

impl UnixConnection {
    pub(crate) fn new(stream: UnixStream) -> Self {
        Self {
            stream,
            repair: AuthorityRepair::default(),
            ready: Vec::new(),
            consumed: 0,
            logged: false,
        }
    }
}

impl Connected for UnixConnection {
    type ConnectInfo = UdsConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.stream.connect_info()
    }
}

impl AsyncRead for UnixConnection {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if this.consumed < this.ready.len() {
                let available = &this.ready[this.consumed..];
                let n = available.len().min(buf.remaining());
                buf.put_slice(&available[..n]);
                this.consumed += n;
                if this.consumed == this.ready.len() {
                    this.ready.clear();
                    this.consumed = 0;
                }
                return Poll::Ready(Ok(()));
            }
            let mut chunk = [0u8; READ_CHUNK];
            let mut read = ReadBuf::new(&mut chunk);
            match Pin::new(&mut this.stream).poll_read(cx, &mut read) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(error)) => return Poll::Ready(Err(error)),
                Poll::Ready(Ok(())) if read.filled().is_empty() => return Poll::Ready(Ok(())),
                Poll::Ready(Ok(())) => {
                    match this.repair.feed(read.filled(), &mut this.ready) {
                        Ok(repaired) => {
                            if let Some(first) = repaired.first()
                                && !this.logged
                            {
                                this.logged = true;
                                tracing::debug!(
                                    authority = %first.authority,
                                    served_as = REPLACEMENT_AUTHORITY,
                                    "Unix socket client sent an :authority that is not a URI authority (grpc-core sends the socket path); accepted"
                                );
                            }
                        }
                        Err(error) => {
                            tracing::warn!(%error, "rejecting a Unix socket connection: its HTTP/2 request headers cannot be read");
                            return Poll::Ready(Err(io::Error::new(
                                io::ErrorKind::InvalidData,
                                error.to_string(),
                            )));
                        }
                    }
                    // Loop: return what was repaired, or read more if a frame is still partial.
                }
            }
        }
    }
}

impl AsyncWrite for UnixConnection {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, data)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}
