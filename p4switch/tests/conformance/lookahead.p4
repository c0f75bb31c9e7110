/* Conformance: lookahead of a struct (a header, bit fields, a header stack) as a whole value: its headers
 * valid, its fields the next bits in order, nothing consumed; a select on one of its fields. */
#include <core.p4>
#include <v1model.p4>

header h1_t {
    bit<8> f1;
}

struct look_t {
    h1_t    a;
    bit<4>  x;
    bit<4>  y;
    h1_t[2] s;
}

header out_t {
    bit<8> a;
    bit<8> yx;     // y ++ x
    bit<8> s1;
    bit<8> valid;  // s[1] valid
    bit<8> big;    // 1 when s[1] >= 0x80 (by the select)
}

struct headers_t {
    out_t o;
}

struct meta_t {
    bit<8> a;
    bit<8> yx;
    bit<8> s1;
    bit<8> valid;
    bit<8> big;
}

parser LaParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        look_t l = pkt.lookahead<look_t>();
        meta.a = l.a.f1;
        meta.yx = l.y ++ l.x;
        meta.s1 = l.s[1].f1;
        meta.valid = (bit<8>)(bit<1>)l.s[1].isValid();
        transition select(l.s[1].f1[7:7]) {
            1: big;
            default: accept;
        }
    }

    state big {
        meta.big = 1;
        transition accept;
    }
}

control LaVerify(inout headers_t hdr, inout meta_t meta) { apply { } }

control LaIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        hdr.o.setValid();
        hdr.o.a = meta.a;
        hdr.o.yx = meta.yx;
        hdr.o.s1 = meta.s1;
        hdr.o.valid = meta.valid;
        hdr.o.big = meta.big;
    }
}

control LaEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }

control LaCompute(inout headers_t hdr, inout meta_t meta) { apply { } }

control LaDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr);
    }
}

V1Switch(LaParser(), LaVerify(), LaIngress(), LaEgress(), LaCompute(), LaDeparser()) main;
