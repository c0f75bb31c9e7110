/* Conformance: sub-parsers. A parser type instantiated twice and applied in the middle of a state (the
 * state's own local read after the applies), its out header and a header stack shared with the caller
 * (stack positions carry over both ways), its select's NoMatch and its stack overflow ending the whole
 * parser with that error; a parser type applied directly (`Peek.apply(...)`) with a parameter left to its
 * default value. */
#include <core.p4>
#include <v1model.p4>

header r_t {
    bit<8> sum;  // s[0] + a, computed between the two applies
    bit<8> err;  // 0 NoError, 2 NoMatch, 3 StackOutOfBounds
    bit<8> peek; // the byte after s[0], plus one
}

header t_t {
    bit<8> v;  // high nibble 1: then extract an s; 2: done; else NoMatch
}

header s_t {
    bit<8> v;
}

struct headers_t {
    r_t    r;
    s_t[2] s;
    t_t    a;
    t_t    b;
}

struct meta_t {
    bit<8> sum;
    bit<8> peek;
}

parser Peek(packet_in pkt, out bit<8> v, in bit<8> add = 1) {
    state start {
        v = pkt.lookahead<bit<8>>() + add;
        transition accept;
    }
}

parser Sub(packet_in pkt, out t_t t, inout s_t[2] s) {
    state start {
        pkt.extract(t);
        transition select(t.v[7:4]) {
            1: more;
            2: accept;
        }
    }

    state more {
        pkt.extract(s.next);
        transition accept;
    }
}

parser SpParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    Sub() p1;
    Sub() p2;

    state start {
        pkt.extract(hdr.s.next);
        Peek.apply(pkt, meta.peek);
        bit<8> first = hdr.s[0].v;
        p1.apply(pkt, hdr.a, hdr.s);
        meta.sum = first + hdr.a.v;
        p2.apply(pkt, hdr.b, hdr.s);
        transition accept;
    }
}

control SpVerify(inout headers_t hdr, inout meta_t meta) { apply { } }

control SpIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        hdr.r.setValid();
        hdr.r.sum = meta.sum;
        hdr.r.peek = meta.peek;
        if (sm.parser_error == error.NoError) {
            hdr.r.err = 0;
        } else if (sm.parser_error == error.NoMatch) {
            hdr.r.err = 2;
        } else if (sm.parser_error == error.StackOutOfBounds) {
            hdr.r.err = 3;
        } else {
            hdr.r.err = 0xff;
        }
    }
}

control SpEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }

control SpCompute(inout headers_t hdr, inout meta_t meta) { apply { } }

control SpDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr);
    }
}

V1Switch(SpParser(), SpVerify(), SpIngress(), SpEgress(), SpCompute(), SpDeparser()) main;
