/* Conformance: bit<W> wrap-around, int<W> two's complement, saturating ops, shifts (including shifts
 * past the width), slices, concatenation, casts and signed comparisons. The operands come in an
 * "ops" header; ingress writes every result into the same header and sends the packet back out. */
#include <core.p4>
#include <v1model.p4>

const bit<16> ETHERTYPE_OPS = 0x88B5;

header ethernet_t {
    bit<48> dst;
    bit<48> src;
    bit<16> ether_type;
}

header ops_t {
    bit<8> a;
    bit<8> b;
    int<8> sa;
    int<8> sb;
    bit<8> n;
    bit<8> sum;
    bit<8> diff;
    bit<8> prod;
    int<8> ssum;
    int<8> sdiff;
    bit<8> sat_add;
    bit<8> sat_sub;
    int<8> ssat_add;
    int<8> ssat_sub;
    bit<8> shl;
    bit<8> shr;
    int<8> sshr;
    bit<8> big_shift;
    bit<4> hi_nibble;
    bit<4> lo_nibble;
    bit<16> cat;
    int<16> widen;
    bit<8> neg;
    bit<8> inv;
    bit<8> flags;
}

struct headers_t {
    ethernet_t ethernet;
    ops_t ops;
}

struct metadata_t { }

parser ArithParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                   inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_OPS: parse_ops;
            default: accept;
        }
    }
    state parse_ops {
        packet.extract(hdr.ops);
        transition accept;
    }
}

control ArithVerify(inout headers_t hdr, inout metadata_t meta) { apply { } }

control ArithIngress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    apply {
        if (!hdr.ops.isValid()) {
            mark_to_drop(standard_metadata);
            return;
        }
        hdr.ops.sum = hdr.ops.a + hdr.ops.b;
        hdr.ops.diff = hdr.ops.a - hdr.ops.b;
        hdr.ops.prod = hdr.ops.a * hdr.ops.b;
        hdr.ops.ssum = hdr.ops.sa + hdr.ops.sb;
        hdr.ops.sdiff = hdr.ops.sa - hdr.ops.sb;
        hdr.ops.sat_add = hdr.ops.a |+| hdr.ops.b;
        hdr.ops.sat_sub = hdr.ops.a |-| hdr.ops.b;
        hdr.ops.ssat_add = hdr.ops.sa |+| hdr.ops.sb;
        hdr.ops.ssat_sub = hdr.ops.sa |-| hdr.ops.sb;
        hdr.ops.shl = hdr.ops.a << 4;
        hdr.ops.shr = hdr.ops.a >> 3;
        hdr.ops.sshr = hdr.ops.ssum >> 2;
        hdr.ops.big_shift = hdr.ops.a << hdr.ops.n;
        hdr.ops.hi_nibble = hdr.ops.a[7:4];
        hdr.ops.lo_nibble = hdr.ops.b[3:0];
        hdr.ops.cat = hdr.ops.a ++ hdr.ops.b;
        hdr.ops.widen = (int<16>)hdr.ops.ssum;
        hdr.ops.neg = -hdr.ops.a;
        hdr.ops.inv = ~hdr.ops.a;
        hdr.ops.flags = 6w0 ++ (bit<1>)(hdr.ops.a > hdr.ops.b) ++ (bit<1>)(hdr.ops.ssum < hdr.ops.sb);
        standard_metadata.egress_spec = 1;
    }
}

control ArithEgress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    apply { }
}

control ArithCompute(inout headers_t hdr, inout metadata_t meta) { apply { } }

control ArithDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ops);
    }
}

V1Switch(ArithParser(), ArithVerify(), ArithIngress(), ArithEgress(), ArithCompute(), ArithDeparser()) main;
