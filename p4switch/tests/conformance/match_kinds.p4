/* Conformance: every match kind (exact, lpm, ternary, range, optional, mixed keys), the priority rules
 * (a larger P4Runtime priority wins; const entries without priorities rank by their order), default
 * actions, .hit and switch (action_run). Each table writes its own result field of the "m" header. */
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dst;
    bit<48> src;
    bit<16> ether_type;
}

header m_t {
    bit<16> k16;
    bit<8>  k8;
    bit<32> addr;
    bit<8>  r_exact;
    bit<8>  r_lpm;
    bit<8>  r_tern;
    bit<8>  r_range;
    bit<8>  r_opt;
    bit<8>  r_mixed;
    bit<8>  r_const;
    bit<8>  flags;
}

struct headers_t {
    ethernet_t ethernet;
    m_t m;
}

struct metadata_t { }

parser MatchParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                   inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        packet.extract(hdr.m);
        transition accept;
    }
}

control MatchVerify(inout headers_t hdr, inout metadata_t meta) { apply { } }

control MatchIngress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    action set_exact(bit<8> v) { hdr.m.r_exact = v; }
    action set_lpm(bit<8> v) { hdr.m.r_lpm = v; }
    action set_tern(bit<8> v) { hdr.m.r_tern = v; }
    action set_range(bit<8> v) { hdr.m.r_range = v; }
    action set_opt(bit<8> v) { hdr.m.r_opt = v; }
    action set_mixed(bit<8> v) { hdr.m.r_mixed = v; }
    action set_const(bit<8> v) { hdr.m.r_const = v; }

    table t_exact {
        key = { hdr.m.k16: exact; }
        actions = { set_exact; }
        default_action = set_exact(0xEE);
    }
    table t_lpm {
        key = { hdr.m.addr: lpm; }
        actions = { set_lpm; NoAction; }
        default_action = NoAction();
    }
    table t_ternary {
        key = { hdr.m.k16: ternary; }
        actions = { set_tern; }
    }
    table t_range {
        key = { hdr.m.k16: range; }
        actions = { set_range; }
    }
    table t_optional {
        key = {
            hdr.m.k8: optional;
            hdr.m.k16: exact;
        }
        actions = { set_opt; }
    }
    table t_mixed {
        key = {
            hdr.m.addr: lpm;
            hdr.m.k8: ternary;
            hdr.m.k16: range;
        }
        actions = { set_mixed; }
    }
    table t_const {
        key = { hdr.m.k8: ternary; }
        actions = { set_const; }
        const entries = {
            0x10 &&& 0xF0 : set_const(1);
            0x11 : set_const(2);
            _ : set_const(3);
        }
    }

    apply {
        if (t_exact.apply().hit) {
            hdr.m.flags = hdr.m.flags | 1;
        }
        switch (t_lpm.apply().action_run) {
            set_lpm: { hdr.m.flags = hdr.m.flags | 2; }
            default: { hdr.m.flags = hdr.m.flags | 4; }
        }
        t_ternary.apply();
        t_range.apply();
        t_optional.apply();
        t_mixed.apply();
        t_const.apply();
        standard_metadata.egress_spec = 1;
    }
}

control MatchEgress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    apply { }
}

control MatchCompute(inout headers_t hdr, inout metadata_t meta) { apply { } }

control MatchDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.m);
    }
}

V1Switch(MatchParser(), MatchVerify(), MatchIngress(), MatchEgress(), MatchCompute(), MatchDeparser()) main;
