/* Conformance: header fields that are not bit<W>/int<W>: bool fields (one bit on the wire) and structs
 * inside a header (their fields laid out in order): extracted, read, written one by one and as a whole
 * struct (to and from a struct outside the header, by an initializer, as an in argument of a function
 * and an inout argument of an action), a table key on a field of such a struct, and emitted. */
#include <core.p4>
#include <v1model.p4>

struct pair_t {
    bit<4> hi;
    bit<4> lo;
}

struct nest_t {
    pair_t p;
    bit<8> n;
}

header h_t {
    bool   flag;
    bit<7> seven;
    nest_t nest;
    pair_t q;
}

struct headers_t {
    h_t h;
}

struct meta_t {
    pair_t saved;
}

parser HfParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        transition accept;
    }
}

control HfVerify(inout headers_t hdr, inout meta_t meta) { apply { } }

bit<4> hi_of(in pair_t p) {
    return p.hi;
}

control HfIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action swap(inout pair_t p) {
        bit<4> t = p.hi;
        p.hi = p.lo;
        p.lo = t;
    }

    action set_n(bit<8> n) {
        hdr.h.nest.n = n;
    }

    table by_lo {
        key = { hdr.h.nest.p.lo : exact; }
        actions = { set_n; NoAction; }
        const entries = { 5 : set_n(0x55); }
        default_action = NoAction();
    }

    apply {
        sm.egress_spec = 1;
        by_lo.apply();
        meta.saved = hdr.h.nest.p;       // a struct read out of a header
        if (hdr.h.flag) {
            hdr.h.nest.p = hdr.h.q;      // struct to struct inside the header
            hdr.h.q = meta.saved;        // and back from outside
            hdr.h.flag = false;
        } else {
            hdr.h.q = { hi = 0xA, lo = 0xB };
            hdr.h.flag = hdr.h.seven == 1;
        }
        hdr.h.seven = (bit<7>)meta.saved.hi;
        swap(hdr.h.q);
        hdr.h.nest.n = hdr.h.nest.n + (bit<8>)hi_of(hdr.h.q);
    }
}

control HfEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }

control HfCompute(inout headers_t hdr, inout meta_t meta) { apply { } }

control HfDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.h);
    }
}

V1Switch(HfParser(), HfVerify(), HfIngress(), HfEgress(), HfCompute(), HfDeparser()) main;
