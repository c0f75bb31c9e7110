/* Conformance: varbit fields. A header with fields before and after its varbit is extracted with a length
 * known at run time (a multiple of 8 up to the maximum; else ParserInvalidArgument, HeaderTooShort, or
 * PacketTooShort when the packet ends first), the varbit copied through a struct member into another
 * header, and both emitted at their current lengths. */
#include <core.p4>
#include <v1model.p4>

header res_t {
    bit<8> code;  // the parser error, numbered as below
}

header len_t {
    bit<8> bits;  // the length of v.opt
}

header v_t {
    bit<8>     before;
    varbit<160> opt;
    bit<8>     after;
}

header w_t {
    bit<8>     tag;
    varbit<160> opt;
}

struct headers_t {
    res_t res;
    len_t l;
    v_t   v;
    w_t   w;
}

struct meta_t {
    varbit<160> saved;
}

parser VbParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.l);
        pkt.extract(hdr.v, (bit<32>)hdr.l.bits);
        transition accept;
    }
}

control VbVerify(inout headers_t hdr, inout meta_t meta) { apply { } }

control VbIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
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
        if (hdr.v.isValid()) {
            meta.saved = hdr.v.opt;
            hdr.w.setValid();
            hdr.w.tag = 0xAA;
            hdr.w.opt = meta.saved;
        }
    }
}

control VbEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }

control VbCompute(inout headers_t hdr, inout meta_t meta) { apply { } }

control VbDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.res);
        pkt.emit(hdr.l);
        pkt.emit(hdr.v);
        pkt.emit(hdr.w);
    }
}

V1Switch(VbParser(), VbVerify(), VbIngress(), VbEgress(), VbCompute(), VbDeparser()) main;
