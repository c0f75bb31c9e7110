/* Conformance: parser select with exact values, masks and ranges; lookahead; verify() with a
 * program-defined error; parser errors (PacketTooShort, NoMatch) that still reach ingress with
 * parser_error set; IPv4 checksum verify/update (csum16); hash(); set/check header validity. */
#include <core.p4>
#include <v1model.p4>

error { IpOptions }

header ethernet_t {
    bit<48> dst;
    bit<48> src;
    bit<16> ether_type;
}

header ipv4_t {
    bit<4>  version;
    bit<4>  ihl;
    bit<8>  diffserv;
    bit<16> total_len;
    bit<16> identification;
    bit<3>  flags;
    bit<13> frag_offset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> hdr_checksum;
    bit<32> src_addr;
    bit<32> dst_addr;
}

header tag_t {
    bit<8>  kind;
    bit<8>  pad;
    bit<16> value;
}

struct headers_t {
    ethernet_t ethernet;
    ipv4_t ipv4;
    tag_t tag;
}

struct metadata_t { }

parser PcParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            0x0800: parse_ipv4;
            0x8800 &&& 0xFF00: parse_tagged;
            0x9000 .. 0x90FF: accept;
        }
    }
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        verify(hdr.ipv4.ihl == 5, error.IpOptions);
        transition accept;
    }
    state parse_tagged {
        transition select(packet.lookahead<bit<8>>()) {
            0x01: parse_tag;
            default: accept;
        }
    }
    state parse_tag {
        packet.extract(hdr.tag);
        transition accept;
    }
}

control PcVerify(inout headers_t hdr, inout metadata_t meta) {
    apply {
        verify_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len, hdr.ipv4.identification,
              hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl, hdr.ipv4.protocol, hdr.ipv4.src_addr,
              hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

control PcIngress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    apply {
        standard_metadata.egress_spec = 1;
        if (standard_metadata.parser_error == error.PacketTooShort) {
            hdr.ethernet.dst = 1;
        } else if (standard_metadata.parser_error == error.NoMatch) {
            hdr.ethernet.dst = 2;
        } else if (standard_metadata.parser_error == error.IpOptions) {
            hdr.ethernet.dst = 3;
        } else if (standard_metadata.checksum_error == 1) {
            hdr.ethernet.dst = 4;
        } else if (hdr.ipv4.isValid()) {
            hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
            standard_metadata.egress_spec = 2;
        } else if (hdr.tag.isValid()) {
            hash(hdr.tag.value, HashAlgorithm.crc16, (bit<16>)100, { hdr.ethernet.src, hdr.tag.kind }, (bit<32>)1000);
            standard_metadata.egress_spec = 3;
        } else {
            hdr.tag.setValid();
            hdr.tag.kind = 0xEE;
            hdr.tag.pad = 0;
            hdr.tag.value = 0;
        }
    }
}

control PcEgress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    apply { }
}

control PcCompute(inout headers_t hdr, inout metadata_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len, hdr.ipv4.identification,
              hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl, hdr.ipv4.protocol, hdr.ipv4.src_addr,
              hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

control PcDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.tag);
    }
}

V1Switch(PcParser(), PcVerify(), PcIngress(), PcEgress(), PcCompute(), PcDeparser()) main;
