//! Deadlines on an accepted connection, below HTTP:
//! - the first byte: hyper's header-read timer starts only once the first bytes have arrived
//!   (the HTTP/1-or-2 detection waits for them without a limit), so a client that connects
//!   and sends nothing would hold its connection forever;
//! - write progress: a client that stops reading its response fills the socket buffers, and
//!   hyper then waits forever to write. When no byte could be written for the write timeout,
//!   the connection fails: hyper drops the response, which frees the request's slot and
//!   cancels its LLM call and tools, as when a client disconnects.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

pub struct Deadlines<I> {
    io: I,
    /// Armed until the first byte (or EOF) arrives.
    first_byte: Option<Pin<Box<Sleep>>>,
    first_byte_timeout: Duration,
    write_timeout: Duration,
    /// Armed while writes make no progress.
    write_stall: Option<Pin<Box<Sleep>>>,
}

impl<I> Deadlines<I> {
    /// `accepted` is when the connection was accepted: the first byte is due
    /// `first_byte_timeout` after it, whatever happened in between (a TLS handshake).
    pub fn new(
        io: I,
        accepted: Instant,
        first_byte_timeout: Duration,
        write_timeout: Duration,
    ) -> Deadlines<I> {
        Deadlines {
            io,
            first_byte: Some(Box::pin(tokio::time::sleep_until(
                accepted + first_byte_timeout,
            ))),
            first_byte_timeout,
            write_timeout,
            write_stall: None,
        }
    }

    /// Passes a finished write through (progress: the stall timer stops); on `Pending`,
    /// fails once the peer has taken nothing for the write timeout.
    fn on_write<T>(
        &mut self,
        cx: &mut Context<'_>,
        poll: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        if poll.is_ready() {
            self.write_stall = None;
            return poll;
        }
        let timeout = self.write_timeout;
        let stall = self
            .write_stall
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        if stall.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "the client read nothing for {} s (server.write_timeout_secs)",
                    timeout.as_secs_f64()
                ),
            )));
        }
        Poll::Pending
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for Deadlines<I> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.io).poll_read(cx, buf);
        if poll.is_ready() {
            this.first_byte = None;
            return poll;
        }
        if let Some(deadline) = &mut this.first_byte
            && deadline.as_mut().poll(cx).is_ready()
        {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "the client sent nothing for {} s (server.header_read_timeout_secs)",
                    this.first_byte_timeout.as_secs_f64()
                ),
            )));
        }
        Poll::Pending
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for Deadlines<I> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.io).poll_write(cx, buf);
        this.on_write(cx, poll)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        this.on_write(cx, poll)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.io).poll_flush(cx);
        this.on_write(cx, poll)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.io).poll_shutdown(cx);
        this.on_write(cx, poll)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test(start_paused = true)]
    async fn a_silent_peer_times_out_and_a_talking_one_does_not() {
        let (client, server) = tokio::io::duplex(64);
        let secs = Duration::from_secs;
        let mut silent = Deadlines::new(server, Instant::now(), secs(5), secs(60));
        let err = silent.read(&mut [0u8; 8]).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        drop(client);

        let (mut client, server) = tokio::io::duplex(64);
        let mut talking = Deadlines::new(server, Instant::now(), secs(5), secs(60));
        client.write_all(b"G").await.unwrap();
        assert_eq!(talking.read(&mut [0u8; 8]).await.unwrap(), 1);
        // Armed no more: a later silence is hyper's header timeout's business.
        let waited = tokio::time::timeout(secs(30), talking.read(&mut [0u8; 8])).await;
        assert!(
            waited.is_err(),
            "the first-byte deadline fired after the first byte"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn writes_fail_only_when_the_peer_reads_nothing() {
        let (mut client, server) = tokio::io::duplex(16);
        let mut io = Deadlines::new(
            server,
            Instant::now(),
            Duration::from_secs(5),
            Duration::from_secs(10),
        );
        io.write_all(&[b'x'; 16]).await.unwrap();
        // A slow reader: every 8 s one byte. Progress resets the timer.
        let reader = tokio::spawn(async move {
            let mut byte = [0u8; 1];
            for _ in 0..4 {
                tokio::time::sleep(Duration::from_secs(8)).await;
                client.read_exact(&mut byte).await.unwrap();
            }
            client
        });
        io.write_all(&[b'y'; 4]).await.unwrap();
        let _client = reader.await.unwrap();
        // The reader stopped: the next write times out.
        let err = io.write_all(&[b'z'; 4]).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
    }
}
