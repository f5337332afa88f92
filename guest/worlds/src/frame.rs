//! Ethernet frames made and read by hand, for the worlds' servers and the tests' own frames.

/// The big-endian u16 at `at`, if it is there.
pub fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

/// The IPv4 address at `at`, if it is there.
pub fn ip4(b: &[u8], at: usize) -> Option<[u8; 4]> {
    b.get(at..at + 4)?.try_into().ok()
}

/// The Internet checksum of an IPv4 header (its checksum field zero).
pub fn ip_checksum(header: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    for pair in header.chunks(2) {
        sum += u32::from(u16::from_be_bytes([pair[0], *pair.get(1).unwrap_or(&0)]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// An Ethernet frame holding a UDP datagram from `src`:`ports.0` to `dst`:`ports.1` (UDP
/// checksum 0: none, which IPv4 allows; the IPv4 header's checksum right).
pub fn udp_frame(
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    src: [u8; 4],
    dst: [u8; 4],
    ports: (u16, u16),
    payload: &[u8],
) -> Vec<u8> {
    let mut f = Vec::with_capacity(42 + payload.len());
    f.extend_from_slice(&dst_mac);
    f.extend_from_slice(&src_mac);
    f.extend_from_slice(&[0x08, 0x00]);
    let total = (28 + payload.len()) as u16;
    let mut ip = vec![0x45, 0];
    ip.extend_from_slice(&total.to_be_bytes());
    ip.extend_from_slice(&[0, 0, 0x40, 0, 64, 17, 0, 0]);
    ip.extend_from_slice(&src);
    ip.extend_from_slice(&dst);
    let sum = ip_checksum(&ip);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&ports.0.to_be_bytes());
    f.extend_from_slice(&ports.1.to_be_bytes());
    f.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(payload);
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_udp_frame_has_its_addresses_ports_and_a_right_header_checksum() {
        let f = udp_frame([1; 6], [2; 6], [10, 0, 2, 2], [10, 0, 2, 15], (67, 68), b"hi");
        assert_eq!(f.len(), 44);
        assert_eq!((&f[..6], &f[6..12], be16(&f, 12)), (&[2u8; 6][..], &[1u8; 6][..], Some(0x0800)));
        assert_eq!((ip4(&f, 26), ip4(&f, 30)), (Some([10, 0, 2, 2]), Some([10, 0, 2, 15])));
        assert_eq!((be16(&f, 34), be16(&f, 36), be16(&f, 38)), (Some(67), Some(68), Some(10)));
        // A header with its checksum in place sums to zero.
        assert_eq!(ip_checksum(&f[14..34]), 0);
        assert_eq!(&f[42..], b"hi");
    }
}
