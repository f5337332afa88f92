//! The egress check on frames made by hand.

use net::egress::check;
use net::Refusal;

const MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
const OTHER: [u8; 6] = [2, 0, 0, 0, 0, 2];
const ME: [u8; 4] = [10, 0, 2, 15];

fn ipv4(mac: [u8; 6], src: [u8; 4], proto: u8, sport: u16, dport: u16) -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&mac);
    f.extend_from_slice(&[0x08, 0x00, 0x45, 0, 0, 28, 0, 0, 0, 0, 64, proto, 0, 0]);
    f.extend_from_slice(&src);
    f.extend_from_slice(&[255; 4]);
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&dport.to_be_bytes());
    f.extend_from_slice(&[0, 8, 0, 0]);
    f
}

fn arp(mac: [u8; 6], sender_mac: [u8; 6], sender_ip: [u8; 4]) -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&mac);
    f.extend_from_slice(&[0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, 1]);
    f.extend_from_slice(&sender_mac);
    f.extend_from_slice(&sender_ip);
    f.extend_from_slice(&[0; 10]);
    f
}

#[test]
fn ipv4_leaves_only_as_the_card_and_the_lease() {
    assert_eq!(check(&ipv4(MAC, ME, 6, 1, 2), MAC, Some(ME)), Ok(()));
    assert_eq!(check(&ipv4(OTHER, ME, 6, 1, 2), MAC, Some(ME)), Err(Refusal::SourceMac(OTHER)));
    assert_eq!(check(&ipv4(MAC, [10, 0, 2, 16], 6, 1, 2), MAC, Some(ME)), Err(Refusal::SourceIp([10, 0, 2, 16])));
    assert_eq!(check(&ipv4(MAC, ME, 6, 1, 2), MAC, None), Err(Refusal::SourceIp(ME)));
}

#[test]
fn zero_source_only_for_the_dhcp_client() {
    assert_eq!(check(&ipv4(MAC, [0; 4], 17, 68, 67), MAC, None), Ok(()));
    assert_eq!(check(&ipv4(MAC, [0; 4], 17, 68, 67), MAC, Some(ME)), Ok(()));
    assert_eq!(check(&ipv4(MAC, [0; 4], 17, 67, 68), MAC, None), Err(Refusal::SourceIp([0; 4])));
    assert_eq!(check(&ipv4(MAC, [0; 4], 6, 68, 67), MAC, None), Err(Refusal::SourceIp([0; 4])));
    // A UDP header cut short after a 0.0.0.0 source.
    let cut = ipv4(MAC, [0; 4], 17, 68, 67);
    assert_eq!(check(&cut[..36], MAC, None), Err(Refusal::Short));
    // An IHL that puts the UDP header past the frame.
    let mut long_header = ipv4(MAC, [0; 4], 17, 68, 67);
    long_header[14] = 0x4f;
    assert_eq!(check(&long_header, MAC, None), Err(Refusal::Short));
}

#[test]
fn arp_only_as_the_card_and_the_lease() {
    assert_eq!(check(&arp(MAC, MAC, ME), MAC, Some(ME)), Ok(()));
    assert_eq!(check(&arp(MAC, OTHER, ME), MAC, Some(ME)), Err(Refusal::SourceMac(OTHER)));
    assert_eq!(check(&arp(MAC, MAC, [10, 0, 2, 9]), MAC, Some(ME)), Err(Refusal::SourceIp([10, 0, 2, 9])));
    assert_eq!(check(&arp(MAC, MAC, ME), MAC, None), Err(Refusal::SourceIp(ME)));
    assert_eq!(check(&arp(MAC, MAC, ME)[..41], MAC, Some(ME)), Err(Refusal::Short));
}

#[test]
fn other_types_and_short_frames_never_leave() {
    let mut v6 = ipv4(MAC, ME, 6, 1, 2);
    v6[12..14].copy_from_slice(&[0x86, 0xdd]);
    assert_eq!(check(&v6, MAC, Some(ME)), Err(Refusal::EtherType(0x86dd)));
    assert_eq!(check(&[], MAC, Some(ME)), Err(Refusal::Short));
    assert_eq!(check(&ipv4(MAC, ME, 6, 1, 2)[..13], MAC, Some(ME)), Err(Refusal::Short));
    assert_eq!(check(&ipv4(MAC, ME, 6, 1, 2)[..33], MAC, Some(ME)), Err(Refusal::Short));
}
