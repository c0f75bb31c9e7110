/* Conformance: an action profile with an action selector (crc16 over the selector fields, as BMv2):
 * one flow always takes the same member, many flows spread over the group; an entry can also point at
 * one member directly. A selector's outputWidth does not narrow the hash, as on BMv2 (p4c-bm2-ss does
 * not write it): narrow_selector's member is crc16 % group size, not (crc16 & 0xf) % group size.
 * p4c-bm2-ss leaves out the default_action of a table with an action profile ("Target does not support
 * default_action ... due to action profiles") and BMv2 then runs no action on a miss, so the drop is
 * also set before the tables: a miss drops on both compilers' output. */
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dst;
    bit<48> src;
    bit<16> ether_type;
}

header flow_t {
    bit<32> src;
    bit<32> dst;
    bit<16> sport;
}

struct headers_t {
    ethernet_t ethernet;
    flow_t flow;
}

struct metadata_t { }

parser SelParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        packet.extract(hdr.flow);
        transition accept;
    }
}

control SelVerify(inout headers_t hdr, inout metadata_t meta) { apply { } }

control SelIngress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    action_selector(HashAlgorithm.crc16, 32w1024, 32w16) ecmp_selector;

    action set_port(bit<9> port) {
        standard_metadata.egress_spec = port;
    }
    action drop() {
        mark_to_drop(standard_metadata);
    }

    action_selector(HashAlgorithm.crc16, 32w1024, 32w4) narrow_selector;

    table narrow {
        key = {
            hdr.flow.dst: exact;
            hdr.flow.src: selector;
            hdr.flow.sport: selector;
        }
        actions = { set_port; drop; }
        implementation = narrow_selector;
        default_action = drop();
    }

    table ecmp {
        key = {
            hdr.flow.dst: exact;
            hdr.flow.src: selector;
            hdr.flow.sport: selector;
        }
        actions = { set_port; drop; }
        implementation = ecmp_selector;
        default_action = drop();
    }

    apply {
        mark_to_drop(standard_metadata);
        if (!ecmp.apply().hit) {
            narrow.apply();
        }
    }
}

control SelEgress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    apply { }
}

control SelCompute(inout headers_t hdr, inout metadata_t meta) { apply { } }

control SelDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.flow);
    }
}

V1Switch(SelParser(), SelVerify(), SelIngress(), SelEgress(), SelCompute(), SelDeparser()) main;
