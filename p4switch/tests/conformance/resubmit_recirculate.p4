/* resubmit and recirculate with preserved user metadata (@field_list), as BMv2 runs them: a resubmitted
 * frame starts ingress again as it came in (instance_type 6), a recirculated one is the deparsed frame
 * (instance_type 4); fields outside the field list start at zero. Expected outputs are BMv2's. */
#include <core.p4>
#include <v1model.p4>

header eth_t { bit<48> dst; bit<48> src; bit<16> type_; }
header t_t { bit<8> op; bit<8> a; bit<8> b; bit<8> c; bit<8> d; bit<8> e; }
struct headers_t { eth_t eth; t_t t; }
struct meta_t {
    @field_list(1) bit<8> kept;
    bit<8> lost;
    @field_list(1, 2) bit<8> rounds;
}

parser P(packet_in pk, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pk.extract(hdr.eth);
        pk.extract(hdr.t);
        transition accept;
    }
}

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        hdr.t.b = hdr.t.b + 1;  // lost on a resubmit: the frame comes back as it came in
        if (hdr.t.op == 1 && sm.instance_type == 0) {
            meta.kept = 8w0x11;
            meta.lost = 8w0x22;
            resubmit_preserving_field_list(1);
        }
        if (sm.instance_type != 0) {
            hdr.t.c = meta.kept | meta.lost;
            hdr.t.d = meta.rounds;
            hdr.t.e = (bit<8>) sm.instance_type;
        }
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        if (hdr.t.op == 2 && meta.rounds < 3) {
            meta.rounds = meta.rounds + 1;
            meta.kept = 8w0x33;
            recirculate_preserving_field_list(2);
        }
    }
}

control V(inout headers_t hdr, inout meta_t meta) { apply { } }
control C(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pk, in headers_t hdr) {
    apply {
        pk.emit(hdr.eth);
        pk.emit(hdr.t);
    }
}

V1Switch(P(), V(), I(), E(), C(), D()) main;
