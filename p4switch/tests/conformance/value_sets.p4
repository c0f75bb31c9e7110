/* Conformance: parser value sets, empty until the control plane sets them: one of bit<16> matching one
 * select key and one of a struct matching two keys at once; the control plane replaces their members. */
#include <core.p4>
#include <v1model.p4>

header r_t {
    bit<8> flags;  // 1: port in `ports`; 2: (kind, tag) in `pairs`
}

header h_t {
    bit<8>  kind;
    bit<16> port;
    bit<8>  tag;
}

struct pair_t {
    bit<8> kind;
    bit<8> tag;
}

struct headers_t {
    r_t r;
    h_t h;
}

struct meta_t {
    bit<8> flags;
}

parser VsParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    value_set<bit<16>>(4) ports;
    value_set<pair_t>(2) pairs;

    state start {
        pkt.extract(hdr.h);
        transition select(hdr.h.port) {
            ports: in_ports;
            default: second;
        }
    }

    state in_ports {
        meta.flags = meta.flags | 1;
        transition second;
    }

    state second {
        transition select(hdr.h.kind, hdr.h.tag) {
            pairs: in_pairs;
            default: accept;
        }
    }

    state in_pairs {
        meta.flags = meta.flags | 2;
        transition accept;
    }
}

control VsVerify(inout headers_t hdr, inout meta_t meta) { apply { } }

control VsIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        hdr.r.setValid();
        hdr.r.flags = meta.flags;
    }
}

control VsEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }

control VsCompute(inout headers_t hdr, inout meta_t meta) { apply { } }

control VsDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr);
    }
}

V1Switch(VsParser(), VsVerify(), VsIngress(), VsEgress(), VsCompute(), VsDeparser()) main;
