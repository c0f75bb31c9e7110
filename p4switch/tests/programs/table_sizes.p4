/* Large tables of each kind of entry lookup, for the P4Runtime write/read benchmark
 * (python -m p4switch.tests.runtime.bench): what one write or one read costs as a table fills up.
 *   by_mac    exact dst MAC with a direct counter (dict lookup in the engine);
 *   by_type   ternary EtherType and src MAC, so entries take a priority (priority-ordered scan);
 *   by_flow   exact src MAC through an action selector, written with one-shot action sets.
 * Each holds more entries than the benchmark's largest size. */
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

parser SizesParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                   inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition accept;
    }
}

control SizesVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control SizesIngress(inout headers_t hdr, inout metadata_t meta,
                     inout standard_metadata_t standard_metadata) {
    direct_counter(CounterType.packets_and_bytes) by_mac_counter;
    action_selector(HashAlgorithm.crc16, 32w40000, 32w16) flow_selector;

    action drop() {
        mark_to_drop(standard_metadata);
    }

    action forward(port_t port) {
        standard_metadata.egress_spec = port;
    }

    action forward_counted(port_t port) {
        standard_metadata.egress_spec = port;
        by_mac_counter.count();
    }

    table by_mac {
        key = {
            hdr.ethernet.dst_addr: exact;
        }
        actions = {
            forward_counted;
            drop;
        }
        default_action = drop();
        counters = by_mac_counter;
        size = 20000;
    }

    table by_type {
        key = {
            hdr.ethernet.ether_type: ternary;
            hdr.ethernet.src_addr: ternary;
        }
        actions = {
            forward;
            drop;
        }
        default_action = drop();
        size = 20000;
    }

    table by_flow {
        key = {
            hdr.ethernet.src_addr: exact;
            hdr.ethernet.dst_addr: selector;
        }
        actions = {
            forward;
        }
        implementation = flow_selector;
        size = 20000;
    }

    apply {
        by_mac.apply();
        by_type.apply();
        by_flow.apply();
    }
}

control SizesEgress(inout headers_t hdr, inout metadata_t meta,
                    inout standard_metadata_t standard_metadata) {
    apply { }
}

control SizesComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control SizesDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
    }
}

V1Switch(SizesParser(), SizesVerifyChecksum(), SizesIngress(), SizesEgress(), SizesComputeChecksum(),
         SizesDeparser()) main;
