// ibsec-fabric data plane: deparser. Headers in wire order (IBA: BTH, DETH, RETH, AtomicETH, AETH,
// AtomicAckETH, ImmDt, IETH); the STH follows the last extension header (DESIGN 3).

#ifndef IBSEC_DEPARSER_P4
#define IBSEC_DEPARSER_P4

#include "headers.p4"

control IbsecDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.packet_in);
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv6);
        packet.emit(hdr.udp);
        packet.emit(hdr.bth);
        packet.emit(hdr.deth);
        packet.emit(hdr.reth);
        packet.emit(hdr.atomic_eth);
        packet.emit(hdr.aeth);
        packet.emit(hdr.atomic_ack_eth);
        packet.emit(hdr.immdt);
        packet.emit(hdr.ieth);
        packet.emit(hdr.sth);
        packet.emit(hdr.mad);
    }
}

#endif  // IBSEC_DEPARSER_P4
