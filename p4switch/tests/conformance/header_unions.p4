/* Conformance: header unions. A member becomes valid by extract, setValid or a copy of a valid header, and
 * the other members then become invalid; isValid() of a union (also as a table key); a union copied as a
 * whole (also into a local); emit of a union (its valid member); a stack of unions parsed with .next. */
#include <core.p4>
#include <v1model.p4>

header tag_t {
    bit<8> kind;  // low nibble: which member the parser extracts (1: a, 2: b); high nibble 1: the stack
}

header a_t {
    bit<8> a;
}

header b_t {
    bit<16> b;
}

header_union ab_u {
    a_t a;
    b_t b;
}

struct headers_t {
    tag_t    tag;
    ab_u     u;
    ab_u[2]  us;
    ab_u     copy;
    a_t      spare;
}

struct meta_t { }

parser HuParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.tag);
        transition select(hdr.tag.kind[3:0]) {
            1: get_a;
            2: get_b;
            default: more;
        }
    }

    state get_a {
        pkt.extract(hdr.u.a);
        transition more;
    }

    state get_b {
        pkt.extract(hdr.u.b);
        transition more;
    }

    state more {
        transition select(hdr.tag.kind[7:4]) {
            1: stack;
            default: accept;
        }
    }

    state stack {
        pkt.extract(hdr.us.next.a);
        pkt.extract(hdr.us.next.b);
        transition accept;
    }
}

control HuVerify(inout headers_t hdr, inout meta_t meta) { apply { } }

control HuIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action mark() {
        hdr.tag.kind = hdr.tag.kind | 0x80;
    }

    table valid_u {
        key = { hdr.u.isValid() : exact; }
        actions = { mark; NoAction; }
        const entries = { true : mark(); }
        default_action = NoAction();
    }

    apply {
        sm.egress_spec = 1;
        valid_u.apply();
        ab_u local = hdr.u;  // a local union
        if (local.a.isValid()) {
            hdr.tag.kind = hdr.tag.kind | 0x40;
        }
        hdr.copy = hdr.u;
        if (hdr.copy.b.isValid()) {
            hdr.copy.a.setValid();  // copy.b becomes invalid
            hdr.copy.a.a = 0x77;
        }
        if (hdr.tag.kind[3:0] == 3) {
            hdr.spare.setValid();
            hdr.spare.a = 0x5A;
            hdr.u.a = hdr.spare;  // a valid header copied in: u is valid through a
        }
        if (hdr.us[0].a.isValid()) {
            hdr.us[1].a = hdr.us[0].a;  // us[1].b becomes invalid
            hdr.us[0].b.setValid();     // us[0].a becomes invalid
            hdr.us[0].b.b = 0xBEEF;
        }
    }
}

control HuEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }

control HuCompute(inout headers_t hdr, inout meta_t meta) { apply { } }

control HuDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.tag);
        pkt.emit(hdr.u);
        pkt.emit(hdr.us);
        pkt.emit(hdr.copy);
    }
}

V1Switch(HuParser(), HuVerify(), HuIngress(), HuEgress(), HuCompute(), HuDeparser()) main;
