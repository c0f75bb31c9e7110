/* Conformance: the order of a table's own entries as p4c + BMv2 run them. Entries win by position
 * (the first that matches), unless `@priority(N)` gives them a number: then the smallest number wins
 * and the others keep their position as number (a tie goes to the earlier entry). `priority = N:` in
 * non-const `entries` (with largest_priority_wins and priority_delta) is accepted and, as in p4c's
 * BMv2 back end, does not change that order. */
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dst;
    bit<48> src;
    bit<16> ether_type;
}

header prio_t {
    bit<8> sel;
    bit<8> k;
}

struct headers_t {
    ethernet_t ethernet;
    prio_t p;
}

struct metadata_t { }

parser PrioParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        packet.extract(hdr.p);
        transition accept;
    }
}

control PrioVerify(inout headers_t hdr, inout metadata_t meta) { apply { } }

control PrioIngress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    action set_port(bit<9> port) {
        standard_metadata.egress_spec = port;
    }
    table annotated {
        key = { hdr.p.k: ternary; }
        actions = { set_port; NoAction; }
        const entries = {
            0x01 &&& 0x0F : set_port(1) @priority(3);
            0x21          : set_port(2);
            0x20 &&& 0xF0 : set_port(3) @priority(1);
        }
        default_action = NoAction();
    }
    table tie {
        key = { hdr.p.k: ternary; }
        actions = { set_port; NoAction; }
        const entries = {
            0x01 &&& 0x0F : set_port(1) @priority(2);
            0x31          : set_port(2);
        }
        default_action = NoAction();
    }
    table numbered {
        key = { hdr.p.k: ternary; }
        actions = { set_port; NoAction; }
        largest_priority_wins = false;
        priority_delta = 10;
        entries = {
            const priority = 30: 0x0F &&& 0x0F : set_port(4);
                                 0xFF          : set_port(5);
                  priority = 20: 0xF0 &&& 0xF0 : set_port(6);
        }
        default_action = NoAction();
    }

    apply {
        if (hdr.p.sel == 0) {
            annotated.apply();
        } else if (hdr.p.sel == 1) {
            tie.apply();
        } else {
            numbered.apply();
        }
    }
}

control PrioEgress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    apply { }
}

control PrioCompute(inout headers_t hdr, inout metadata_t meta) { apply { } }

control PrioDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr);
    }
}

V1Switch(PrioParser(), PrioVerify(), PrioIngress(), PrioEgress(), PrioCompute(), PrioDeparser()) main;
