/* Conformance: the order and the conditions of side effects inside expressions. `&&`, `||` and `?:`
 * run only the calls of the operands they evaluate; operands and arguments are read left to right,
 * before a later call changes them; `exit` in an action called from the apply block still copies out
 * its inout parameters, but (as p4c and BMv2) not those of an action that action or a table's action
 * calls; an `out` header parameter comes back invalid. */
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dst;
    bit<48> src;
    bit<16> ether_type;
}

header se_t {
    bit<8> op;
    bit<8> a;
    bit<8> b;
    bit<8> c;
    bit<8> d;
    bit<8> e;
    bit<8> f;
}

header extra_t {
    bit<8> x;
}

struct headers_t {
    ethernet_t ethernet;
    se_t se;
    extra_t extra;
}

struct metadata_t { }

bool touch(inout bit<8> v) {
    v = v + 1;
    return true;
}

bit<8> bump(inout bit<8> v) {
    v = v + 1;
    return v;
}

bit<8> first(in bit<8> x, in bit<8> y) {
    return x;
}

bool forget(out extra_t h) {
    return true;
}

parser SeParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        packet.extract(hdr.se);
        transition select(hdr.se.op) {
            0x10: parse_extra;
            default: accept;
        }
    }
    state parse_extra {
        packet.extract(hdr.extra);
        transition accept;
    }
}

control SeVerify(inout headers_t hdr, inout metadata_t meta) { apply { } }

control SeIngress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    action set_and_exit(inout bit<8> v) {
        v = 0x33;
        exit;
    }
    action outer(inout bit<8> v) {
        set_and_exit(v);
        v = 0x44;
    }
    action from_table() {
        set_and_exit(hdr.se.b);
    }
    table exits {
        key = { hdr.se.op: exact; }
        actions = { from_table; NoAction; }
        const entries = { 5: from_table(); }
        default_action = NoAction();
    }

    apply {
        standard_metadata.egress_spec = 1;
        if (hdr.se.op == 1) {
            bool never_or = true || touch(hdr.se.a);
            bool never_and = false && touch(hdr.se.b);
            bool c_or = hdr.se.c == 0 || touch(hdr.se.c);
            bool d_and = hdr.se.d == 0 && touch(hdr.se.d);
            hdr.se.e = (never_or ? 8w0x80 : 8w0) | (never_and ? 8w0x40 : 8w0)
                     | (c_or ? 8w0x10 : 8w0) | (d_and ? 8w0x01 : 8w0);
        } else if (hdr.se.op == 2) {
            hdr.se.e = hdr.se.a == 1 ? bump(hdr.se.b) : bump(hdr.se.c);
        } else if (hdr.se.op == 3) {
            hdr.se.e = hdr.se.a + bump(hdr.se.a);
            if (hdr.se.b == bump(hdr.se.b)) {
                hdr.se.c = 1;
            } else {
                hdr.se.c = 2;
            }
            hdr.se.d = first(hdr.se.d, bump(hdr.se.d));
        } else if (hdr.se.op == 4) {
            set_and_exit(hdr.se.c);
        } else if (hdr.se.op == 6) {
            outer(hdr.se.a);
        } else if (hdr.se.op == 0x10) {
            bool kept = false || forget(hdr.extra);
            hdr.se.e = kept ? 8w1 : 8w0;
        }
        exits.apply();
        hdr.se.f = 0xff;  // not reached after an exit
    }
}

control SeEgress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    apply {
        hdr.se.op = hdr.se.op | 0x80;
    }
}

control SeCompute(inout headers_t hdr, inout metadata_t meta) { apply { } }

control SeDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr);
    }
}

V1Switch(SeParser(), SeVerify(), SeIngress(), SeEgress(), SeCompute(), SeDeparser()) main;
