/* P4_16 functions: value-returning ones in expressions and in a parser select, a void one with an inout
 * parameter, one calling another. The front end inlines them. Used by the front-end tests. */
#include <core.p4>
#include <v1model.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> type_; }
struct headers_t { eth_t eth; }
struct meta_t { bit<16> x; }
bit<16> twice(in bit<16> v) { return v + v; }
bit<16> add3(in bit<16> a, bit<16> b) {
    bit<16> t = twice(a);
    return t + b + 1;
}
void bump(inout bit<16> v) { v = v + 100; }
bool is_special(in bit<16> t) { return t == 0x1234; }
parser P(packet_in pk, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pk.extract(hdr.eth); transition select(is_special(hdr.eth.type_)) { true: accept; default: reject; } }
}
control C(inout headers_t hdr, inout meta_t meta) { apply { } }
control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        meta.x = add3(hdr.eth.type_, 2);
        bump(meta.x);
        hdr.eth.type_ = meta.x;
        if (twice(meta.x) > 5) { sm.egress_spec = 3; }
    }
}
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control D(packet_out pk, in headers_t hdr) { apply { pk.emit(hdr); } }
V1Switch(P(), C(), I(), E(), C(), D()) main;
