/* Conformance: header stack elements at indices known only at run time (reads, writes, setValid /
 * setInvalid, isValid, whole-header copies, a table key, the parser, an inout argument whose place
 * is fixed when the call starts), out of range as the spec says (reads see an invalid, all-zero header;
 * writes change nothing), and a local header stack. */
#include <core.p4>
#include <v1model.p4>

header idx_t {
    bit<8> i;      // read index
    bit<8> j;      // write index
    int<8> k;      // signed index: negative is out of range
    bit<8> flags;  // what the program saw
}

header elem_t {
    bit<8> v;
}

struct headers_t {
    idx_t     idx;
    elem_t[3] s;
    elem_t    copy;
    elem_t[2] outs;
}

struct meta_t {
    bit<8> first;  // the parser's read at a run-time index
}

parser HsParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.idx);
        pkt.extract(hdr.s.next);
        pkt.extract(hdr.s.next);
        pkt.extract(hdr.s.next);
        meta.first = hdr.s[hdr.idx.i].v;
        transition accept;
    }
}

control HsVerify(inout headers_t hdr, inout meta_t meta) { apply { } }

control HsIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    elem_t[2] local;

    action hit() {
        hdr.idx.flags = hdr.idx.flags | 0x40;
    }

    action bump_and_move(inout elem_t e) {
        hdr.idx.i = hdr.idx.i + 1;  // the index moves, the copy-out still goes where e came from
        e.v = e.v + 1;
    }

    table by_elem {
        key = { hdr.s[hdr.idx.j].v : exact; }
        actions = { hit; NoAction; }
        const entries = { 0x33 : hit(); }
        default_action = NoAction();
    }

    apply {
        sm.egress_spec = 1;
        if (meta.first == 0xEE) {
            hdr.idx.flags = 0x80;
        }
        if (hdr.s[hdr.idx.i].isValid()) {
            hdr.idx.flags = hdr.idx.flags | 1;
        }
        hdr.copy = hdr.s[hdr.idx.i];
        by_elem.apply();
        hdr.s[hdr.idx.j].v = hdr.s[hdr.idx.j].v + 0x10;
        bump_and_move(hdr.s[hdr.idx.i]);
        hdr.s[hdr.idx.k].setInvalid();
        local[hdr.idx.j & 1].setValid();
        local[hdr.idx.j & 1].v = 0xAB;
        hdr.outs = local;
    }
}

control HsEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }

control HsCompute(inout headers_t hdr, inout meta_t meta) { apply { } }

control HsDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr);
    }
}

V1Switch(HsParser(), HsVerify(), HsIngress(), HsEgress(), HsCompute(), HsDeparser()) main;
