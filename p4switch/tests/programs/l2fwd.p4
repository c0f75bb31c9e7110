/* One-table L2 forwarder: the p4switch IR example and the benchmark's reference program.
 * dmac maps the destination MAC to an egress port; unknown destinations are dropped. */
#include <core.p4>
#include <v1model.p4>

typedef bit<48> mac_addr_t;
typedef bit<9>  port_t;

header ethernet_t {
    mac_addr_t dst_addr;
    mac_addr_t src_addr;
    bit<16>    ether_type;
}

struct headers_t {
    ethernet_t ethernet;
}

struct metadata_t {
}

parser L2Parser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition accept;
    }
}

control L2VerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control L2Ingress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    action drop() {
        mark_to_drop(standard_metadata);
    }

    action forward(port_t port) {
        standard_metadata.egress_spec = port;
    }

    table dmac {
        key = {
            hdr.ethernet.dst_addr: exact;
        }
        actions = {
            forward;
            drop;
        }
        default_action = drop();
        size = 1024;
    }

    apply {
        if (hdr.ethernet.isValid()) {
            dmac.apply();
        } else {
            drop();
        }
    }
}

control L2Egress(inout headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    apply { }
}

control L2ComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control L2Deparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
    }
}

V1Switch(L2Parser(), L2VerifyChecksum(), L2Ingress(), L2Egress(), L2ComputeChecksum(), L2Deparser()) main;
