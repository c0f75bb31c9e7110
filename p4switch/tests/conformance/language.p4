/* Conformance: typedef, serializable and plain enums, an action with directional parameters called
 * from apply, bool locals and ?:, a plain action_profile (members only), .miss, and an explicit
 * `transition reject` (v1model: the packet still runs ingress, parser_error stays NoError). */
#include <core.p4>
#include <v1model.p4>

typedef bit<9> port_t;
const port_t OUT_PORT = 1;

enum bit<8> Kind {
    A = 1,
    B = 2
}

enum Color { RED, BLUE }

header ethernet_t {
    bit<48> dst;
    bit<48> src;
    bit<16> ether_type;
}

header l_t {
    Kind   kind;
    bit<8> v;
    bit<8> w;
    bit<8> res;
}

struct headers_t {
    ethernet_t ethernet;
    l_t l;
}

struct metadata_t { }

parser LangParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        packet.extract(hdr.l);
        transition select(hdr.l.kind) {
            Kind.A: accept;
            Kind.B: accept;
            default: reject;
        }
    }
}

control LangVerify(inout headers_t hdr, inout metadata_t meta) { apply { } }

control LangIngress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    action_profile(4) outs;

    action add_to(inout bit<8> x, in bit<8> d) {
        x = x + d;
    }
    action set_out(bit<8> o) {
        hdr.l.res = o;
    }
    table by_kind {
        key = { hdr.l.kind: exact; }
        actions = { set_out; NoAction; }
        implementation = outs;
        default_action = NoAction();
    }

    apply {
        Color c = Color.RED;
        bool big = hdr.l.v > 100;
        if (hdr.l.kind == Kind.B) {
            c = Color.BLUE;
        }
        add_to(hdr.l.v, 5);
        hdr.l.w = big ? 8w1 : 8w2;
        if (c == Color.BLUE) {
            hdr.l.w = hdr.l.w | 0x10;
        }
        if (by_kind.apply().miss) {
            hdr.l.res = 0xFF;
        }
        standard_metadata.egress_spec = OUT_PORT;
    }
}

control LangEgress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    apply { }
}

control LangCompute(inout headers_t hdr, inout metadata_t meta) { apply { } }

control LangDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.l);
    }
}

V1Switch(LangParser(), LangVerify(), LangIngress(), LangEgress(), LangCompute(), LangDeparser()) main;
