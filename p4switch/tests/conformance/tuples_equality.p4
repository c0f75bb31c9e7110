/* Conformance: tuples (declared, initialized by a list whose later element's call changes what an earlier
 * one read, read and written by index, compared) and == / != on headers (equal when both are invalid, or
 * both valid with equal fields), structs and tuples. */
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> a;
    bit<8> b;
}

header res_t {
    bit<8> t0;
    bit<8> t1;
    bit<8> flags;
}

struct headers_t {
    res_t res;
    h_t   x;
    h_t   y;
}

struct pair_s {
    bit<8> p;
    bit<8> q;
}

struct meta_t { }

parser TeParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.x);
        transition select(hdr.x.a) {
            0: accept;
            default: get_y;
        }
    }

    state get_y {
        pkt.extract(hdr.y);
        transition accept;
    }
}

control TeVerify(inout headers_t hdr, inout meta_t meta) { apply { } }

bit<8> bump(inout bit<8> v) {
    v = v + 1;
    return v;
}

control TeIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        tuple<bit<8>, bit<8>> t = { hdr.x.a, bump(hdr.x.a) };  // t[0]: x.a before the bump
        t[0] = t[0] + 0x10;
        pair_s s1 = { hdr.x.b, hdr.x.b };
        pair_s s2 = { p = hdr.x.b, q = 0 };
        tuple<bit<8>, bit<8>> t2 = { 0x10, hdr.x.a };
        h_t l;
        hdr.res.setValid();
        hdr.res.t0 = t[0];
        hdr.res.t1 = t[1];
        hdr.res.flags = 0;
        if (hdr.x == hdr.y) {
            hdr.res.flags = hdr.res.flags | 1;
        }
        if (hdr.x != hdr.y) {
            hdr.res.flags = hdr.res.flags | 2;
        }
        if (s1 == s2) {
            hdr.res.flags = hdr.res.flags | 4;
        }
        if (t == t2) {
            hdr.res.flags = hdr.res.flags | 8;
        }
        if (l == hdr.y) {
            hdr.res.flags = hdr.res.flags | 0x10;
        }
    }
}

control TeEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }

control TeCompute(inout headers_t hdr, inout meta_t meta) { apply { } }

control TeDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr);
    }
}

V1Switch(TeParser(), TeVerify(), TeIngress(), TeEgress(), TeCompute(), TeDeparser()) main;
