//! A connection that is plain TCP, TLS over TCP, or a Unix socket (a server
//! on the same host), for either side of the proxy.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpStream, UnixStream};

pub enum Stream {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::TlsStream<TcpStream>>),
    /// A server on the same host: no TCP stack on either end, so each send
    /// costs both processes less CPU than over loopback TCP.
    Unix(UnixStream),
    /// Moved out for an upgrade to TLS; any I/O is an error.
    Detached,
}

fn detached() -> io::Error {
    io::Error::new(
        io::ErrorKind::NotConnected,
        "connection is being upgraded to TLS",
    )
}

fn no_tls_on_unix() -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        "TLS over a Unix socket is not supported",
    )
}

impl Stream {
    pub fn is_tls(&self) -> bool {
        matches!(self, Stream::Tls(_))
    }

    /// The TLS version and cipher suite in use, named as OpenSSL (and so
    /// the servers' `Ssl_version` and `Ssl_cipher`) names them.
    pub fn tls_info(&self) -> Option<(&'static str, String)> {
        let Stream::Tls(t) = self else { return None };
        let conn: &rustls::CommonState = match &**t {
            tokio_rustls::TlsStream::Client(c) => c.get_ref().1,
            tokio_rustls::TlsStream::Server(c) => c.get_ref().1,
        };
        let version = match conn.protocol_version()? {
            rustls::ProtocolVersion::TLSv1_3 => "TLSv1.3",
            rustls::ProtocolVersion::TLSv1_2 => "TLSv1.2",
            _ => "",
        };
        let suite = conn.negotiated_cipher_suite()?.suite();
        Some((version, crate::tls::openssl_name(suite)))
    }

    /// Writes all of `bytes` and flushes (TLS buffers records until then).
    pub async fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.write_all(bytes).await?;
        if let Stream::Tls(_) = self {
            self.flush().await?;
        }
        Ok(())
    }

    /// Registers the socket with the calling thread's runtime, leaving the
    /// one it was registered with: a connection passed between threads then
    /// wakes only the thread that uses it. Whether it moved: TLS
    /// connections stay where they are (their socket is inside the TLS
    /// state). On error the stream is detached and must be dropped.
    pub fn rehome(&mut self) -> io::Result<bool> {
        match std::mem::replace(self, Stream::Detached) {
            Stream::Plain(s) => *self = Stream::Plain(TcpStream::from_std(s.into_std()?)?),
            Stream::Unix(s) => *self = Stream::Unix(UnixStream::from_std(s.into_std()?)?),
            other => {
                *self = other;
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// A non-blocking read on plain TCP; None for TLS (a TLS record may hold
    /// no application data, so a read proves nothing without blocking).
    pub fn try_read_plain(&self, buf: &mut [u8]) -> Option<io::Result<usize>> {
        match self {
            Stream::Plain(s) => Some(s.try_read(buf)),
            Stream::Unix(s) => Some(s.try_read(buf)),
            Stream::Tls(_) | Stream::Detached => None,
        }
    }

    /// The socket's descriptor (None once detached).
    pub fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
        use std::os::fd::AsRawFd;
        match self {
            Stream::Plain(s) => Some(s.as_raw_fd()),
            Stream::Tls(s) => Some(s.get_ref().0.as_raw_fd()),
            Stream::Unix(s) => Some(s.as_raw_fd()),
            Stream::Detached => None,
        }
    }

    /// A second handle on the same socket (a duplicated descriptor), for a
    /// writer that runs while another task reads. Plain TCP and Unix
    /// sockets only: a TLS session's state cannot be shared.
    pub fn duplicate(&self) -> io::Result<Stream> {
        use std::os::fd::AsFd;
        match self {
            Stream::Plain(s) => {
                let fd = s.as_fd().try_clone_to_owned()?;
                let std = std::net::TcpStream::from(fd);
                std.set_nonblocking(true)?;
                Ok(Stream::Plain(TcpStream::from_std(std)?))
            }
            Stream::Unix(s) => {
                let fd = s.as_fd().try_clone_to_owned()?;
                let std = std::os::unix::net::UnixStream::from(fd);
                std.set_nonblocking(true)?;
                Ok(Stream::Unix(UnixStream::from_std(std)?))
            }
            Stream::Tls(_) => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "a TLS connection cannot be shared by two tasks",
            )),
            Stream::Detached => Err(detached()),
        }
    }

    /// Writes all of `bytes` through a shared reference (plain TCP and
    /// Unix sockets only): for a writer that shares the socket with a
    /// reader holding the other handle.
    pub async fn write_shared(&self, mut bytes: &[u8]) -> io::Result<()> {
        while !bytes.is_empty() {
            let r = match self {
                Stream::Plain(s) => s.try_write(bytes),
                Stream::Unix(s) => s.try_write(bytes),
                Stream::Tls(_) | Stream::Detached => return Err(detached()),
            };
            match r {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => bytes = &bytes[n..],
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => match self {
                    Stream::Plain(s) => s.writable().await?,
                    Stream::Unix(s) => s.writable().await?,
                    Stream::Tls(_) | Stream::Detached => return Err(detached()),
                },
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Upgrades a plain connection to TLS as its client.
    pub async fn connect_tls(
        self,
        config: Arc<rustls::ClientConfig>,
        server_name: rustls::pki_types::ServerName<'static>,
    ) -> io::Result<Stream> {
        match self {
            Stream::Plain(tcp) => {
                let s = tokio_rustls::TlsConnector::from(config)
                    .connect(server_name, tcp)
                    .await?;
                Ok(Stream::Tls(Box::new(tokio_rustls::TlsStream::Client(s))))
            }
            Stream::Unix(_) => Err(no_tls_on_unix()),
            Stream::Detached => Err(detached()),
            tls => Ok(tls),
        }
    }

    /// Upgrades a plain connection to TLS as its server.
    pub async fn accept_tls(self, config: Arc<rustls::ServerConfig>) -> io::Result<Stream> {
        match self {
            Stream::Plain(tcp) => {
                let s = tokio_rustls::TlsAcceptor::from(config).accept(tcp).await?;
                Ok(Stream::Tls(Box::new(tokio_rustls::TlsStream::Server(s))))
            }
            Stream::Unix(_) => Err(no_tls_on_unix()),
            Stream::Detached => Err(detached()),
            tls => Ok(tls),
        }
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Unix(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
            Stream::Detached => Poll::Ready(Err(detached())),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Unix(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
            Stream::Detached => Poll::Ready(Err(detached())),
        }
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Unix(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
            Stream::Detached => Poll::Ready(Err(detached())),
        }
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Unix(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
            Stream::Detached => Poll::Ready(Err(detached())),
        }
    }
}

/// Connects to `host:port` over TCP (with Nagle off: every packet sextant
/// writes is a whole request) or to a Unix socket named by its absolute
/// path (the config accepts nothing else starting with '/').
pub async fn connect(addr: &str) -> io::Result<Stream> {
    if addr.starts_with('/') {
        return Ok(Stream::Unix(UnixStream::connect(addr).await?));
    }
    let tcp = TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    Ok(Stream::Plain(tcp))
}
