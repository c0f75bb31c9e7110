/* Source routing in the style of the p4lang tutorials' source_routing.p4: a header stack parsed with
 * .next/.last in a loop (unrolled by the front end), popped in ingress. Used by the front-end tests. */
#include <core.p4>
#include <v1model.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> type_; }
header srcRoute_t { bit<1> bos; bit<15> port; }
struct headers_t { eth_t eth; srcRoute_t[3] srcRoutes; }
struct meta_t { bit<32> n; }
parser P(packet_in pk, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pk.extract(hdr.eth); transition select(hdr.eth.type_) { 0x1234: parse_srcRouting; default: accept; } }
    state parse_srcRouting {
        pk.extract(hdr.srcRoutes.next);
        meta.n = hdr.srcRoutes.lastIndex;
        transition select(hdr.srcRoutes.last.bos) {
            1: accept;
            default: parse_srcRouting;
        }
    }
}
control C(inout headers_t hdr, inout meta_t meta) { apply { } }
control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        if (hdr.srcRoutes[0].isValid()) {
            sm.egress_spec = (bit<9>) hdr.srcRoutes[0].port;
            hdr.srcRoutes.pop_front(1);
        } else { mark_to_drop(sm); }
    }
}
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control D(packet_out pk, in headers_t hdr) { apply { pk.emit(hdr); } }
V1Switch(P(), C(), I(), E(), C(), D()) main;
