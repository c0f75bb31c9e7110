/* Conformance: header stacks with constant indices, header assignment (a copy, validity included),
 * setValid/setInvalid, slice assignment, advance, random with a one-value range, and
 * update_checksum_with_payload (csum16 over fields and payload, as v1model). */
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dst;
    bit<48> src;
    bit<16> ether_type;
}

header tag_t {
    bit<8> value;
    bit<8> next;
}

header sum_t {
    bit<16> csum;
    bit<8>  rnd;
    bit<8>  bits;
}

struct headers_t {
    ethernet_t ethernet;
    tag_t[2] tags;
    tag_t copy;
    sum_t sum;
}

struct metadata_t {
    bit<8> rnd;
}

parser HmParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        packet.extract(hdr.tags[0]);
        packet.extract(hdr.tags[1]);
        packet.advance(16);
        packet.extract(hdr.sum);
        transition accept;
    }
}

control HmVerify(inout headers_t hdr, inout metadata_t meta) { apply { } }

control HmIngress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    apply {
        standard_metadata.egress_spec = 1;
        hdr.copy = hdr.tags[1];
        hdr.tags[1].setInvalid();
        hdr.tags[0].value = hdr.tags[0].value + 1;
        hdr.sum.bits[3:0] = 0xF;
        hdr.sum.bits[7:7] = 1;
        random(meta.rnd, 3, 3);
        hdr.sum.rnd = meta.rnd;
    }
}

control HmEgress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    apply { }
}

control HmCompute(inout headers_t hdr, inout metadata_t meta) {
    apply {
        update_checksum_with_payload(hdr.sum.isValid(), { hdr.sum.rnd, hdr.sum.bits }, hdr.sum.csum,
                                     HashAlgorithm.csum16);
    }
}

control HmDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.tags);
        packet.emit(hdr.copy);
        packet.emit(hdr.sum);
    }
}

V1Switch(HmParser(), HmVerify(), HmIngress(), HmEgress(), HmCompute(), HmDeparser()) main;
