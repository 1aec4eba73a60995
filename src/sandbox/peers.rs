//! The second wall between tools and triage's listeners: a connection whose client socket
//! belongs to the tools' uid is closed before a byte of it is read.
//!
//! It holds where the first wall (the spawner thread's Landlock TCP rules) cannot: an older
//! kernel. It needs tools to run as a uid of their own (triage started as root), since a
//! socket's owner is all the kernel's tables tell. The owner is asked for the one socket with
//! sock_diag (netlink), by the connection's addresses: exact, and a few microseconds whatever
//! the number of open connections (reading `/proc/net/tcp` would grow with them). A remote
//! client's socket is not in this host's tables, and is let through.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Mutex;

use netlink_packet_core::{NLM_F_REQUEST, NetlinkHeader, NetlinkMessage, NetlinkPayload};
use netlink_packet_sock_diag::{
    SockDiagMessage,
    constants::{AF_INET, AF_INET6, IPPROTO_TCP},
    inet::{ExtensionFlags, InetRequest, SocketId, StateFlags},
};
use netlink_sys::{Socket, SocketAddr as NetlinkAddr, protocols::NETLINK_SOCK_DIAG};

/// Whose the client end of an accepted connection is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    /// A socket of the tools' uid on this host: refuse.
    Tool,
    /// A connection from this host whose client socket has no owner any more (closed or reset
    /// before triage accepted it: a time-wait socket reports uid 0) or cannot be found: a
    /// tool can send its request and close at once, so refuse.
    Unattributed,
    /// Another uid's socket on this host, or a remote client.
    Other,
}

/// Asks the kernel who owns a connection's client socket.
#[derive(Debug)]
pub struct PeerCheck {
    tools_uid: u32,
    socket: Mutex<Option<Socket>>,
}

impl PeerCheck {
    /// A check for `tools_uid`, proven on a connection of triage's own first (its socket must
    /// be found and be triage's): `Err` says why the kernel cannot answer.
    pub fn new(tools_uid: u32) -> Result<PeerCheck, String> {
        let check = PeerCheck {
            tools_uid,
            socket: Mutex::new(None),
        };
        check
            .prove()
            .map_err(|e| format!("sock_diag cannot name a socket's owner: {e}"))?;
        Ok(check)
    }

    fn prove(&self) -> io::Result<()> {
        let listener = std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))?;
        let client = std::net::TcpStream::connect(listener.local_addr()?)?;
        let (_server, client_addr) = listener.accept()?;
        let owner = self.owner(unmapped(client_addr), unmapped(client.peer_addr()?))?;
        // SAFETY: geteuid only reads the calling process's credentials.
        let me = unsafe { libc::geteuid() };
        match owner.map(|o| o.uid) {
            Some(uid) if uid == me => Ok(()),
            Some(uid) => Err(io::Error::other(format!(
                "it named uid {uid} for a socket of uid {me}"
            ))),
            None => Err(io::Error::other("it did not find a socket of triage's")),
        }
    }

    /// Who owns the client end of the connection `client` → `server` (as accepted).
    pub fn classify(&self, client: SocketAddr, server: SocketAddr) -> io::Result<Peer> {
        let (client, server) = (unmapped(client), unmapped(server));
        // Loopback, or the address the connection came in on: the client is on this host.
        let local = client.ip().is_loopback() || client.ip() == server.ip();
        Ok(match self.owner(client, server)? {
            Some(Owner { uid, .. }) if uid == self.tools_uid => Peer::Tool,
            Some(Owner { inode: 0, .. }) if local => Peer::Unattributed,
            None if local => Peer::Unattributed,
            _ => Peer::Other,
        })
    }

    /// The owner of the socket bound to `client` and connected to `server` (both unmapped);
    /// `None` when this host has no such socket.
    fn owner(&self, client: SocketAddr, server: SocketAddr) -> io::Result<Option<Owner>> {
        let found = self.ask(client, server)?;
        if found.is_some() || !(client.is_ipv4() && server.is_ipv4()) {
            return Ok(found);
        }
        // An IPv6 socket that connected to `::ffff:127.0.0.1` is in the IPv6 table.
        self.ask(mapped(client), mapped(server))
    }

    fn ask(&self, client: SocketAddr, server: SocketAddr) -> io::Result<Option<Owner>> {
        let mut guard = self
            .socket
            .lock()
            .map_err(|_| io::Error::other("the sock_diag socket's lock is poisoned"))?;
        if guard.is_none() {
            let mut socket = Socket::new(NETLINK_SOCK_DIAG)?;
            socket.bind_auto()?;
            socket.connect(&NetlinkAddr::new(0, 0))?;
            *guard = Some(socket);
        }
        let Some(socket) = guard.as_ref() else {
            return Err(io::Error::other("no sock_diag socket"));
        };
        let answer = query(socket, client, server);
        if answer.is_err() {
            // A socket in a bad state is made anew for the next question.
            *guard = None;
        }
        answer
    }
}

/// A socket's uid and inode (0: no file any more, such as a time-wait socket).
#[derive(Debug, Clone, Copy)]
struct Owner {
    uid: u32,
    inode: u32,
}

fn query(socket: &Socket, client: SocketAddr, server: SocketAddr) -> io::Result<Option<Owner>> {
    let mut header = NetlinkHeader::default();
    header.flags = NLM_F_REQUEST;
    let mut id = if client.is_ipv4() {
        SocketId::new_v4()
    } else {
        SocketId::new_v6()
    };
    id.source_address = client.ip();
    id.source_port = client.port();
    id.destination_address = server.ip();
    id.destination_port = server.port();
    // INET_DIAG_NOCOOKIE: find the socket by its addresses.
    id.cookie = [0xff; 8];
    let mut packet = NetlinkMessage::new(
        header,
        SockDiagMessage::InetRequest(InetRequest {
            family: if client.is_ipv4() { AF_INET } else { AF_INET6 },
            protocol: IPPROTO_TCP,
            extensions: ExtensionFlags::empty(),
            states: StateFlags::all(),
            socket_id: id,
        })
        .into(),
    );
    packet.finalize();
    let mut request = vec![0; packet.buffer_len()];
    packet.serialize(&mut request);
    socket.send(&request, 0)?;
    let mut reply = Vec::with_capacity(8192);
    socket.recv(&mut reply, 0)?;
    let message = <NetlinkMessage<SockDiagMessage>>::deserialize(&reply)
        .map_err(|e| io::Error::other(format!("sock_diag answer: {e}")))?;
    match message.payload {
        NetlinkPayload::InnerMessage(SockDiagMessage::InetResponse(response)) => Ok(Some(Owner {
            uid: response.header.uid,
            inode: response.header.inode,
        })),
        NetlinkPayload::Error(e) => match e.code {
            Some(code) if code.get() == -libc::ENOENT => Ok(None),
            _ => Err(io::Error::other(format!("sock_diag: {e}"))),
        },
        other => Err(io::Error::other(format!(
            "sock_diag: unexpected answer {other:?}"
        ))),
    }
}

/// `::ffff:a.b.c.d` as `a.b.c.d`: the form an IPv4 socket has.
fn unmapped(addr: SocketAddr) -> SocketAddr {
    match addr.ip() {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => SocketAddr::new(IpAddr::V4(v4), addr.port()),
            None => addr,
        },
        IpAddr::V4(_) => addr,
    }
}

fn mapped(addr: SocketAddr) -> SocketAddr {
    match addr.ip() {
        IpAddr::V4(v4) => SocketAddr::new(IpAddr::V6(v4.to_ipv6_mapped()), addr.port()),
        IpAddr::V6(_) => addr,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv6Addr, TcpListener, TcpStream};

    fn me() -> u32 {
        // SAFETY: geteuid only reads the calling process's credentials.
        unsafe { libc::geteuid() }
    }

    #[test]
    fn a_local_socket_is_named_by_its_owner_in_both_families() {
        let check = PeerCheck::new(me()).expect("sock_diag works here");
        for bind in [
            SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, 0)),
            SocketAddr::from((Ipv6Addr::LOCALHOST, 0)),
        ] {
            let Ok(listener) = TcpListener::bind(bind) else {
                continue; // no IPv6 here
            };
            let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
            let (_conn, from) = listener.accept().unwrap();
            assert_eq!(
                check.classify(from, client.peer_addr().unwrap()).unwrap(),
                Peer::Tool
            );
        }
        // A dual-stack listener sees an IPv4 client as `::ffff:127.0.0.1`.
        if let Ok(listener) = TcpListener::bind((Ipv6Addr::UNSPECIFIED, 0)) {
            let port = listener.local_addr().unwrap().port();
            let _client = TcpStream::connect((std::net::Ipv4Addr::LOCALHOST, port)).unwrap();
            let (conn, from) = listener.accept().unwrap();
            assert!(matches!(from.ip(), IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some()));
            assert_eq!(
                check.classify(from, conn.local_addr().unwrap()).unwrap(),
                Peer::Tool
            );
        }
        let other = PeerCheck::new(me().wrapping_add(1)).expect("sock_diag works here");
        let listener = TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0)).unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (_conn, from) = listener.accept().unwrap();
        assert_eq!(
            other.classify(from, client.peer_addr().unwrap()).unwrap(),
            Peer::Other
        );
    }

    #[test]
    fn a_socket_this_host_does_not_have_is_another_peer_unless_it_came_from_here() {
        let check = PeerCheck::new(me()).expect("sock_diag works here");
        let remote: SocketAddr = "192.0.2.7:40000".parse().unwrap();
        let here: SocketAddr = "192.0.2.8:5050".parse().unwrap();
        assert_eq!(check.classify(remote, here).unwrap(), Peer::Other);
        // A tool that sent its request and reset the connection before triage accepted it.
        let gone: SocketAddr = "127.0.0.1:40000".parse().unwrap();
        let listener: SocketAddr = "127.0.0.1:5050".parse().unwrap();
        assert_eq!(check.classify(gone, listener).unwrap(), Peer::Unattributed);
        let same_host: SocketAddr = "192.0.2.8:40000".parse().unwrap();
        assert_eq!(check.classify(same_host, here).unwrap(), Peer::Unattributed);
    }

    #[test]
    fn a_closed_client_socket_is_unattributed() {
        let check = PeerCheck::new(me().wrapping_add(1)).expect("sock_diag works here");
        let listener = TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0)).unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (conn, from) = listener.accept().unwrap();
        // The client closes first: its end becomes a time-wait socket with no file.
        drop(client);
        std::thread::sleep(std::time::Duration::from_millis(50));
        let verdict = check.classify(from, conn.local_addr().unwrap()).unwrap();
        assert_eq!(verdict, Peer::Unattributed);
    }
}
