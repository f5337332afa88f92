//! The poke: one UDP datagram into the guest through the poke's forwarded host port,
//! sent once and never again (UDP does not resend, so the guest sees it at most once).
//!
//! What it proves: the datagram left the bench whole (the send returned its length).
//! What it cannot: that it arrived; slirp drops a datagram the guest's port does not take,
//! and only the guest's behaviour afterwards shows it was received.

use std::io;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};

/// The largest payload one UDP datagram over IPv4 carries.
pub const MAX_PAYLOAD: usize = 65_507;

/// Sends `payload` as one datagram to `127.0.0.1:host_port`, from a port the operating
/// system picks, once.
pub fn send(host_port: u16, payload: &[u8]) -> io::Result<()> {
    if payload.len() > MAX_PAYLOAD {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("a poke of {} bytes: one datagram holds at most {MAX_PAYLOAD}", payload.len()),
        ));
    }
    let socket = UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0))?;
    let sent = socket.send_to(payload, SocketAddrV4::new(Ipv4Addr::LOCALHOST, host_port))?;
    if sent != payload.len() {
        return Err(io::Error::other(format!("a poke to port {host_port}: sent {sent} of {} bytes", payload.len())));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn one_datagram_arrives_once() {
        let rx = UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)).unwrap();
        let port = rx.local_addr().unwrap().port();
        send(port, b"poke").unwrap();
        rx.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut buf = [0u8; 64];
        let (n, from) = rx.recv_from(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"poke");
        assert!(from.ip().is_loopback());
        rx.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
        let second = rx.recv_from(&mut buf).expect_err("a second datagram came");
        assert!(matches!(second.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut), "{second}");
    }

    #[test]
    fn too_large_is_refused() {
        let err = send(9, &vec![0u8; MAX_PAYLOAD + 1]).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    }
}
