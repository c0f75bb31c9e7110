/* Calculator in the style of the p4lang tutorials' calc.p4: select on fields of lookahead<header>(), const
 * entries on an exact key. Used by the front-end tests (lookahead of a header's fields). */
#include <core.p4>
#include <v1model.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> type_; }
header calc_t { bit<8> p; bit<8> four; bit<8> ver; bit<8> op; bit<32> a; bit<32> b; bit<32> res; }
struct headers_t { eth_t eth; calc_t calc; }
struct meta_t { }
const bit<8> CALC_P = 0x50;
parser P(packet_in pk, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pk.extract(hdr.eth);
        transition select(pk.lookahead<calc_t>().p, pk.lookahead<calc_t>().four, pk.lookahead<calc_t>().ver) {
            (CALC_P, 0x34, 0x01): parse_calc;
            default: accept;
        }
    }
    state parse_calc { pk.extract(hdr.calc); transition accept; }
}
control C(inout headers_t hdr, inout meta_t meta) { apply { } }
control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action add() { hdr.calc.res = hdr.calc.a + hdr.calc.b; sm.egress_spec = sm.ingress_port; }
    action sub() { hdr.calc.res = hdr.calc.a - hdr.calc.b; sm.egress_spec = sm.ingress_port; }
    action drop() { mark_to_drop(sm); }
    table calculate {
        key = { hdr.calc.op: exact; }
        actions = { add; sub; drop; }
        const default_action = drop();
        const entries = { 0x2b: add(); 0x2d: sub(); }
    }
    apply { if (hdr.calc.isValid()) { calculate.apply(); } else { drop(); } }
}
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control D(packet_out pk, in headers_t hdr) { apply { pk.emit(hdr); } }
V1Switch(P(), C(), I(), E(), C(), D()) main;
