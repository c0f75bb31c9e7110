/* Conformance: packet-in/packet-out over the CPU port with @controller_header headers, and a digest
 * for source MACs the learning table does not know yet. */
#include <core.p4>
#include <v1model.p4>

const bit<9> CPU_PORT = 255;

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

header ethernet_t {
    bit<48> dst;
    bit<48> src;
    bit<16> ether_type;
}

struct headers_t {
    packet_out_t packet_out;
    packet_in_t packet_in;
    ethernet_t ethernet;
}

struct metadata_t { }

struct learn_t {
    bit<48> src;
    bit<9>  port;
}

parser IoParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        transition select(standard_metadata.ingress_port) {
            CPU_PORT: parse_packet_out;
            default: parse_ethernet;
        }
    }
    state parse_packet_out {
        packet.extract(hdr.packet_out);
        transition parse_ethernet;
    }
    state parse_ethernet {
        packet.extract(hdr.ethernet);
        transition accept;
    }
}

control IoVerify(inout headers_t hdr, inout metadata_t meta) { apply { } }

control IoIngress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    action learn() {
        digest<learn_t>(1, {hdr.ethernet.src, standard_metadata.ingress_port});
    }
    table smac {
        key = { hdr.ethernet.src: exact; }
        actions = { learn; NoAction; }
        default_action = learn();
    }

    apply {
        if (hdr.packet_out.isValid()) {
            standard_metadata.egress_spec = hdr.packet_out.egress_port;
            hdr.packet_out.setInvalid();
            exit;
        }
        smac.apply();
        if (hdr.ethernet.ether_type == 0x88cc) {
            standard_metadata.egress_spec = CPU_PORT;
            hdr.packet_in.setValid();
            hdr.packet_in.ingress_port = standard_metadata.ingress_port;
            hdr.packet_in._pad = 0;
        } else {
            standard_metadata.egress_spec = 1;
        }
    }
}

control IoEgress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    apply { }
}

control IoCompute(inout headers_t hdr, inout metadata_t meta) { apply { } }

control IoDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.packet_in);
        packet.emit(hdr.ethernet);
    }
}

V1Switch(IoParser(), IoVerify(), IoIngress(), IoEgress(), IoCompute(), IoDeparser()) main;
