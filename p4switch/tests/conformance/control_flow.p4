/* Conformance: exit in an action (ends ingress, egress still runs), return in an action and in apply,
 * switch on action_run with merged labels, a local variable with an initialiser, log_msg. */
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dst;
    bit<48> src;
    bit<16> ether_type;
}

header cf_t {
    bit<8> op;
    bit<8> a;
    bit<8> b;
    bit<8> c;
}

struct headers_t {
    ethernet_t ethernet;
    cf_t cf;
}

struct metadata_t { }

parser CfParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        packet.extract(hdr.cf);
        transition accept;
    }
}

control CfVerify(inout headers_t hdr, inout metadata_t meta) { apply { } }

control CfIngress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    action set_b_and_exit(bit<8> v) {
        hdr.cf.b = v;
        exit;
    }
    action set_b(bit<8> v) {
        hdr.cf.b = v;
    }
    action ret_early(bit<8> v) {
        hdr.cf.b = v;
        if (hdr.cf.a == 1) {
            return;
        }
        hdr.cf.b = v + 1;
    }
    table ops {
        key = { hdr.cf.op: exact; }
        actions = { set_b_and_exit; set_b; ret_early; NoAction; }
        default_action = NoAction();
    }

    apply {
        standard_metadata.egress_spec = 1;
        bit<8> base = 10;
        switch (ops.apply().action_run) {
            set_b:
            ret_early: {
                hdr.cf.c = base + 1;
            }
            NoAction: {
                hdr.cf.c = 0x99;
                return;
            }
        }
        hdr.cf.a = hdr.cf.a + 100;
        log_msg("control_flow: a={} b={}", {hdr.cf.a, hdr.cf.b});
    }
}

control CfEgress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    apply {
        hdr.cf.op = hdr.cf.op | 0x80;
    }
}

control CfCompute(inout headers_t hdr, inout metadata_t meta) { apply { } }

control CfDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.cf);
    }
}

V1Switch(CfParser(), CfVerify(), CfIngress(), CfEgress(), CfCompute(), CfDeparser()) main;
