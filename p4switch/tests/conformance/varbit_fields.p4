/* Conformance: what else a varbit field does. A header whose fixed fields around its varbit are not whole
 * bytes (a nibble, a signed nibble, then 72 bits after it), extracted into both elements of a stack with
 * lengths (up to 256 bits) the first header gives; the two varbits compared with == and !=, the two
 * headers compared whole (equal when both are invalid, or both valid with every field equal), one header
 * copied whole, its varbit replaced through a struct member and its other fields computed with; an
 * element set invalid; every header emitted at its current length. */
#include <core.p4>
#include <v1model.p4>

header len_t {
    bit<16> first;   // the length of v[0].opt
    bit<16> second;  // the length of v[1].opt
}

header res_t {
    bit<8> code;    // the parser error, numbered as below
    bit<8> same;    // v[0].opt == v[1].opt
    bit<8> differ;  // v[0].opt != v[1].opt
    bit<8> whole;   // v[0] == v[1]
}

header v_t {
    bit<4>      nib;
    int<4>      s;
    varbit<256> opt;
    bit<72>     wide;
}

struct headers_t {
    res_t  res;
    len_t  l;
    v_t[2] v;
    v_t    c;
}

struct meta_t {
    varbit<256> saved;
}

parser VfParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.l);
        pkt.extract(hdr.v[0], (bit<32>)hdr.l.first);
        pkt.extract(hdr.v[1], (bit<32>)hdr.l.second);
        transition accept;
    }
}

control VfVerify(inout headers_t hdr, inout meta_t meta) { apply { } }

control VfIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        hdr.res.setValid();
        if (sm.parser_error == error.NoError) {
            hdr.res.code = 0;
        } else if (sm.parser_error == error.PacketTooShort) {
            hdr.res.code = 1;
        } else if (sm.parser_error == error.HeaderTooShort) {
            hdr.res.code = 4;
        } else if (sm.parser_error == error.ParserInvalidArgument) {
            hdr.res.code = 6;
        } else {
            hdr.res.code = 0xff;
        }
        hdr.res.same = hdr.v[0].opt == hdr.v[1].opt ? 8w1 : 8w0;
        hdr.res.differ = hdr.v[0].opt != hdr.v[1].opt ? 8w1 : 8w0;
        hdr.res.whole = hdr.v[0] == hdr.v[1] ? 8w1 : 8w0;
        if (hdr.v[1].isValid()) {
            meta.saved = hdr.v[1].opt;
            hdr.c = hdr.v[0];
            hdr.c.opt = meta.saved;
            hdr.c.s = hdr.c.s - 4s1;
            hdr.c.wide = hdr.c.wide + 1;
        }
        if (hdr.v[0].s < 0) {
            hdr.v[0].setInvalid();
        }
    }
}

control VfEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }

control VfCompute(inout headers_t hdr, inout meta_t meta) { apply { } }

control VfDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.res);
        pkt.emit(hdr.l);
        pkt.emit(hdr.v);
        pkt.emit(hdr.c);
    }
}

V1Switch(VfParser(), VfVerify(), VfIngress(), VfEgress(), VfCompute(), VfDeparser()) main;
