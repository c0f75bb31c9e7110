/* Front-end coverage program: one of every construct p4switch-cc supports (see docs/p4switch-ir.md). */
#include <core.p4>
#include <v1model.p4>

#define CPU_PORT 255
#ifndef FEATURE_LEVEL
#define FEATURE_LEVEL 1
#endif

typedef bit<48> mac_t;
enum bit<16> EtherType { IPV4 = 0x0800, VLAN = 0x8100, PROBE = 0x88B5 }
enum Verdict { ALLOW, DENY }
error { BadVersion }

@controller_header("packet_in")
header packet_in_t {
    bit<9> ingress_port;
    bit<7> _pad;
}

@controller_header("packet_out")
header packet_out_t {
    bit<9> egress_port;
    bit<7> _pad;
}

header ethernet_t { mac_t dst; mac_t src; bit<16> ether_type; }
header vlan_t { bit<3> pcp; bit<1> dei; bit<12> vid; bit<16> ether_type; }
header probe_t { bit<8> version; int<8> delta; bit<16> value; }

struct headers_t {
    packet_out_t packet_out;
    packet_in_t  packet_in;
    ethernet_t   ethernet;
    vlan_t[2]    vlan;
    probe_t      probe;
}

struct learn_t { mac_t src; bit<9> port; }

struct metadata_t {
    @field_list(1) bit<16> flow_hash;
    bit<8> color;
    bit<16> scratch;
    bool    seen;
    Verdict verdict;
    learn_t learn;
}

parser FParser(packet_in pkt, out headers_t hdr, inout metadata_t meta, inout standard_metadata_t sm) {
    bit<8> first_byte;
    state start {
        transition select(sm.ingress_port) {
            CPU_PORT: parse_packet_out;
            default: parse_ethernet;
        }
    }
    state parse_packet_out {
        pkt.extract(hdr.packet_out);
        transition parse_ethernet;
    }
    state parse_ethernet {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            EtherType.VLAN: parse_vlan0;
            EtherType.PROBE: parse_probe;
            default: accept;
        }
    }
    state parse_vlan0 {
        pkt.extract(hdr.vlan[0]);
        transition select(hdr.vlan[0].ether_type, pkt.lookahead<bit<16>>()) {
            (0x8100, _): parse_vlan1;
            (0x88B5 &&& 0xFFFF, 0x0100 .. 0x01FF): parse_probe;
            (_, _): accept;
        }
    }
    state parse_vlan1 {
        pkt.extract(hdr.vlan[1]);
        transition accept;
    }
    state parse_probe {
        first_byte = pkt.lookahead<bit<8>>();
        verify(first_byte == 1, error.BadVersion);
        pkt.extract(hdr.probe);
        transition accept;
    }
}

control FVerify(inout headers_t hdr, inout metadata_t meta) { apply { } }

control Stats(inout headers_t hdr, inout metadata_t meta, in bit<9> port) {
    @id(7) counter(32, CounterType.bytes) per_port;
    apply {
        per_port.count((bit<32>) port);
    }
}

control FIngress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t sm) {
    meter(16, MeterType.packets) port_meter;
    direct_meter<bit<8>>(MeterType.bytes) acl_meter;
    register<bit<16>>(64) last_value;
    action_profile(128) l2_profile;
    Stats() stats;

    action set_port(bit<9> port) { sm.egress_spec = port; }
    @id(0x01000042) action drop() { mark_to_drop(sm); }
    action swap(inout mac_t a, inout mac_t b) { mac_t t = a; a = b; b = t; }
    action to_cpu() {
        sm.egress_spec = CPU_PORT;
        hdr.packet_in.setValid();
        hdr.packet_in.ingress_port = sm.ingress_port;
        hdr.packet_in._pad = 0;
    }
    action acl_color() { acl_meter.read(meta.color); }
    @name(".global_learn") action learn() {
        meta.learn.src = hdr.ethernet.src;
        meta.learn.port = sm.ingress_port;
        digest<learn_t>(1, meta.learn);
    }

    table l2 {
        key = { hdr.ethernet.dst: exact; }
        actions = { set_port; drop; }
        implementation = l2_profile;
        size = 256;
    }

    table ecmp {
        key = {
            hdr.ethernet.dst: optional;
            hdr.ethernet.src: selector;
            hdr.ethernet.ether_type: selector;
        }
        actions = { set_port; }
        implementation = action_selector(HashAlgorithm.crc32, 32w64, 32w14);
    }

    table acl {
        key = {
            sm.ingress_port: ternary;
            hdr.ethernet.ether_type: range;
            hdr.ethernet.dst: lpm;
        }
        actions = { acl_color; @tableonly to_cpu; @defaultonly NoAction; drop; }
        meters = acl_meter;
        const default_action = NoAction();
        entries = {
            priority = 10: (_, 0x0800 .. 0x08FF, 0xFFFF00000000 &&& 0xFFFF00000000): to_cpu();
            priority = 20: (9w1 &&& 0x1FF, _, _): drop();
        }
    }

    table learned {
        key = { hdr.ethernet.src: exact; }
        actions = { NoAction; learn; }
        default_action = learn;
        support_timeout = true;
    }

    apply {
        if (hdr.packet_out.isValid()) {
            sm.egress_spec = hdr.packet_out.egress_port;
            hdr.packet_out.setInvalid();
            exit;
        }
        bit<16> x = 16w0xFFFF;
        int<8> signed_delta = -8s1;
        x = x + 1;
        meta.scratch = (x ++ 8w0x12)[15:0] |+| (x >> 3) |-| (bit<16>) signed_delta;
        meta.scratch = meta.scratch << 2 & 0xFF00 ^ ~x;
        meta.seen = meta.scratch == 0 || !(x != 0) && true;
        meta.verdict = meta.seen ? Verdict.ALLOW : Verdict.DENY;
        if (hdr.probe.isValid()) {
            hdr.probe.delta = hdr.probe.delta - 3 * 2;
            last_value.read(hdr.probe.value, (bit<32>) hdr.probe.version);
            last_value.write(5, hdr.probe.value + 16w1);
        }
        switch (l2.apply().action_run) {
            set_port: { stats.apply(hdr, meta, sm.egress_spec); }
            drop: { return; }
        }
        if (!acl.apply().hit) {
            learned.apply();
        } else if (acl.apply().miss) {
            swap(hdr.ethernet.src, hdr.ethernet.dst);
        }
        switch (ecmp.apply().action_run) {
            default: { }
        }
        port_meter.execute_meter((bit<32>) sm.ingress_port, meta.color);
        hash(meta.flow_hash, HashAlgorithm.crc16, (bit<16>) 0, { hdr.ethernet.src, hdr.ethernet.dst }, 32w65536);
        random(meta.scratch, 0, 100);
        if (meta.color == 2 && FEATURE_LEVEL > 0) {
            clone_preserving_field_list(CloneType.I2E, 5, 1);
        } else if (sm.parser_error == error.BadVersion) {
            clone(CloneType.I2E, 6);
        }
        log_msg("flow hash {} color {}", { meta.flow_hash, meta.color });
        if (meta.verdict == Verdict.DENY) {
            to_cpu();
        }
    }
}

control FEgress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t sm) {
    apply {
        if (sm.instance_type == 1) {
            hdr.vlan[0].setValid();
            hdr.vlan[0] = { 3w0, 1w0, 12w100, hdr.ethernet.ether_type };
        }
    }
}

control FCompute(inout headers_t hdr, inout metadata_t meta) { apply { } }

control FDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.packet_in);
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.vlan);
        pkt.emit(hdr.probe);
    }
}

V1Switch(FParser(), FVerify(), FIngress(), FEgress(), FCompute(), FDeparser()) main;
