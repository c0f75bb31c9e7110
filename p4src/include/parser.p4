// ibsec-fabric data plane: parser.
//
// Ethernet / IPv6 / UDP 4791 / BTH, then the extension headers the opcode calls for, the STH when the
// security mode says so and the MAD common header on QP1. Anything else stops at the last header
// recognised and is forwarded as plain IPv6 or handled by the non-IPv6 policy. A frame too short for a
// header it announces ends in a parser error, which the ingress counts and drops (never forwarded
// half-parsed).

#ifndef IBSEC_PARSER_P4
#define IBSEC_PARSER_P4

#include "headers.p4"

parser IbsecParser(packet_in packet,
                   out headers_t hdr,
                   inout local_metadata_t meta,
                   inout standard_metadata_t standard_metadata) {

    state start {
        transition select(standard_metadata.ingress_port) {
            CPU_PORT: parse_packet_out;
            default: parse_ethernet;
        }
    }

    state parse_packet_out {
        packet.extract(hdr.packet_out);
        transition parse_ethernet;
    }

    state parse_ethernet {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV6: parse_ipv6;
            default: accept;
        }
    }

    state parse_ipv6 {
        packet.extract(hdr.ipv6);
        meta.dst_prefix = hdr.ipv6.dst_addr[127:118];
        meta.mf = hdr.ipv6.dst_addr[117:80];
        meta.dst_id = hdr.ipv6.dst_addr[79:0];
        transition select(hdr.ipv6.next_hdr) {
            IP_PROTO_UDP: parse_udp;
            default: accept;
        }
    }

    state parse_udp {
        packet.extract(hdr.udp);
        transition select(hdr.udp.dst_port) {
            ROCEV2_UDP_PORT: parse_bth;
            default: accept;
        }
    }

    state parse_bth {
        packet.extract(hdr.bth);
        meta.flow_qp = hdr.bth.dest_qp;
        transition select(hdr.bth.opcode) {
            OP_RC_SEND_FIRST: parse_security;
            OP_RC_SEND_MIDDLE: parse_security;
            OP_RC_SEND_LAST: parse_security;
            OP_RC_SEND_ONLY: parse_security;
            OP_RC_WRITE_MIDDLE: parse_security;
            OP_RC_WRITE_LAST: parse_security;
            OP_RC_READ_RESPONSE_MIDDLE: parse_security;
            OP_UC_SEND_FIRST: parse_security;
            OP_UC_SEND_MIDDLE: parse_security;
            OP_UC_SEND_LAST: parse_security;
            OP_UC_SEND_ONLY: parse_security;
            OP_UC_WRITE_MIDDLE: parse_security;
            OP_UC_WRITE_LAST: parse_security;
            OP_RC_SEND_LAST_IMM: parse_immdt;
            OP_RC_SEND_ONLY_IMM: parse_immdt;
            OP_RC_WRITE_LAST_IMM: parse_immdt;
            OP_UC_SEND_LAST_IMM: parse_immdt;
            OP_UC_SEND_ONLY_IMM: parse_immdt;
            OP_UC_WRITE_LAST_IMM: parse_immdt;
            OP_RC_WRITE_FIRST: parse_reth;
            OP_RC_WRITE_ONLY: parse_reth;
            OP_RC_WRITE_ONLY_IMM: parse_reth;
            OP_RC_READ_REQUEST: parse_reth;
            OP_UC_WRITE_FIRST: parse_reth;
            OP_UC_WRITE_ONLY: parse_reth;
            OP_UC_WRITE_ONLY_IMM: parse_reth;
            OP_RC_READ_RESPONSE_FIRST: parse_aeth;
            OP_RC_READ_RESPONSE_LAST: parse_aeth;
            OP_RC_READ_RESPONSE_ONLY: parse_aeth;
            OP_RC_ACKNOWLEDGE: parse_aeth;
            OP_RC_ATOMIC_ACKNOWLEDGE: parse_aeth;
            OP_RC_COMPARE_SWAP: parse_atomic_eth;
            OP_RC_FETCH_ADD: parse_atomic_eth;
            OP_RC_SEND_LAST_INVALIDATE: parse_ieth;
            OP_RC_SEND_ONLY_INVALIDATE: parse_ieth;
            OP_UD_SEND_ONLY: parse_deth;
            OP_UD_SEND_ONLY_IMM: parse_deth;
            // RD, CNP and unknown opcodes: forwarded on the BTH alone.
            default: accept;
        }
    }

    state parse_deth {
        packet.extract(hdr.deth);
        transition select(hdr.bth.opcode) {
            OP_UD_SEND_ONLY_IMM: parse_immdt;
            default: parse_security;
        }
    }

    state parse_reth {
        packet.extract(hdr.reth);
        transition select(hdr.bth.opcode) {
            OP_RC_WRITE_ONLY_IMM: parse_immdt;
            OP_UC_WRITE_ONLY_IMM: parse_immdt;
            default: parse_security;
        }
    }

    state parse_aeth {
        packet.extract(hdr.aeth);
        transition select(hdr.bth.opcode) {
            OP_RC_ATOMIC_ACKNOWLEDGE: parse_atomic_ack_eth;
            default: parse_security;
        }
    }

    state parse_atomic_eth {
        packet.extract(hdr.atomic_eth);
        transition parse_security;
    }

    state parse_atomic_ack_eth {
        packet.extract(hdr.atomic_ack_eth);
        transition parse_security;
    }

    state parse_immdt {
        packet.extract(hdr.immdt);
        transition parse_security;
    }

    state parse_ieth {
        packet.extract(hdr.ieth);
        transition parse_security;
    }

    // After the last extension header: an STH follows in security modes 2-4.
    state parse_security {
        transition select(hdr.bth.sec_mode) {
            SEC_MODE_STH_AEAD: parse_sth;
            SEC_MODE_STH_AUTH: parse_sth;
            SEC_MODE_STH_HDR: parse_sth;
            default: parse_management;
        }
    }

    state parse_sth {
        packet.extract(hdr.sth);
        transition accept;
    }

    // A UD SEND to QP1 carries a MAD.
    state parse_management {
        transition select(hdr.bth.opcode, hdr.bth.dest_qp) {
            (OP_UD_SEND_ONLY, GSI_QP): parse_mad;
            default: accept;
        }
    }

    state parse_mad {
        packet.extract(hdr.mad);
        transition accept;
    }
}

#endif  // IBSEC_PARSER_P4
