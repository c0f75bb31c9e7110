/* Conformance: the packet replication engine. Multicast copies carry their egress_rid and
 * instance_type REPLICATION (5); an ingress clone (I2E) is the packet as received, with the metadata
 * fields of its field list preserved and truncated as its session says; an egress clone (E2E) copies
 * the packet as egress left it and runs egress again with instance_type EGRESS_CLONE (2). */
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dst;
    bit<48> src;
    bit<16> ether_type;
}

header rep_t {
    bit<8>  op;
    bit<16> rid;
    bit<8>  instance;
    bit<8>  tag;
}

struct headers_t {
    ethernet_t ethernet;
    rep_t rep;
}

struct metadata_t {
    @field_list(1)
    bit<8> tag;
}

parser RepParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        packet.extract(hdr.rep);
        transition accept;
    }
}

control RepVerify(inout headers_t hdr, inout metadata_t meta) { apply { } }

control RepIngress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    apply {
        hdr.rep.tag = 0xAA;
        if (hdr.rep.op == 1) {
            standard_metadata.mcast_grp = 5;
        } else if (hdr.rep.op == 2) {
            standard_metadata.egress_spec = 1;
            meta.tag = 0x77;
            clone_preserving_field_list(CloneType.I2E, 7, 1);
        } else {
            standard_metadata.egress_spec = 1;
        }
    }
}

control RepEgress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    apply {
        hdr.rep.rid = standard_metadata.egress_rid;
        hdr.rep.instance = (bit<8>)standard_metadata.instance_type;
        if (standard_metadata.instance_type == 1) {
            hdr.rep.tag = meta.tag;
        }
        if (hdr.rep.op == 3 && standard_metadata.instance_type == 0) {
            clone(CloneType.E2E, 8);
        }
    }
}

control RepCompute(inout headers_t hdr, inout metadata_t meta) { apply { } }

control RepDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.rep);
    }
}

V1Switch(RepParser(), RepVerify(), RepIngress(), RepEgress(), RepCompute(), RepDeparser()) main;
