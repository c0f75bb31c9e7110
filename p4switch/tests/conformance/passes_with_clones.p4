/* resubmit and recirculate together with clones and multicast, as BMv2 simple_switch orders them: an
 * ingress clone (I2E) and a resubmit asked in the same ingress both happen (the clone's egress pass does
 * not cancel the resubmit); an egress clone (E2E) and a recirculate asked in the same egress both happen;
 * a multicast replica may recirculate while the other replicas leave. A resubmitted or recirculated pass
 * writes its instance_type and the preserved field into the frame. */
#include <core.p4>
#include <v1model.p4>

header eth_t { bit<48> dst; bit<48> src; bit<16> type_; }
header t_t { bit<8> op; bit<8> passes; bit<8> inst; bit<8> kept; }
struct headers_t { eth_t eth; t_t t; }
struct meta_t {
    @field_list(1) bit<8> n;
    bit<8> lost;
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
        hdr.t.passes = hdr.t.passes + 1;
        if (sm.instance_type == 0 && hdr.t.op == 1) {
            meta.n = 8w7;
            meta.lost = 8w0x55;
            clone_preserving_field_list(CloneType.I2E, 5, 1);
            resubmit_preserving_field_list(1);
        }
        if (sm.instance_type == 0 && hdr.t.op == 3) {
            sm.mcast_grp = 1;
        }
        if (sm.instance_type != 0) {
            hdr.t.inst = (bit<8>) sm.instance_type;
            hdr.t.kept = meta.n | meta.lost;
        }
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        if (sm.instance_type == 0 && hdr.t.op == 2) {
            meta.n = 8w9;
            clone_preserving_field_list(CloneType.E2E, 6, 1);
            recirculate_preserving_field_list(1);
        }
        if (sm.instance_type == 5 && sm.egress_rid == 1) {
            meta.n = 8w0x0b;
            recirculate_preserving_field_list(1);
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
