/* Every object kind P4Runtime can touch, in one small v1model program, for the runtime tests:
 * tables of each match kind (with priorities), a const table and a const default action, an action
 * profile and an action selector, indexed and direct counters and meters, a register, a digest,
 * multicast, I2E clone, and packet_in / packet_out controller headers on the CPU port (64).
 *
 * Ingress, in order: a packet-out leaves on the port its header names; then
 *   acl       (ternary ether_type, optional ingress port)  may punt to the CPU or drop;
 *   dmac      (exact dst MAC, direct counter + direct meter) forwards, floods (multicast) or punts;
 *   routes    (lpm IPv4 dst) forwards through the action profile `nexthops`;
 *   ecmp      (exact IPv4 dst, selector over the src address) spreads over `ecmp_selector`;
 *   ports     (range on the UDP dst port) marks the flow class in a register;
 *   every frame is counted per ingress port, metered per ingress port (red = drop), its source MAC is
 *   learnt with a digest, and frames from port 3 are cloned to session 5. */
#include <core.p4>
#include <v1model.p4>

const bit<9> CPU_PORT = 64;

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
    bit<48> dst_addr;
    bit<48> src_addr;
    bit<16> ether_type;
}

header ipv4_t {
    bit<4>  version;
    bit<4>  ihl;
    bit<8>  diffserv;
    bit<16> total_len;
    bit<16> identification;
    bit<3>  flags;
    bit<13> frag_offset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> hdr_checksum;
    bit<32> src_addr;
    bit<32> dst_addr;
}

header udp_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> length;
    bit<16> checksum;
}

struct headers_t {
    packet_out_t packet_out;
    packet_in_t  packet_in;
    ethernet_t   ethernet;
    ipv4_t       ipv4;
    udp_t        udp;
}

struct learn_t {
    bit<48> src_addr;
    bit<9>  ingress_port;
}

struct metadata_t {
    bit<2> color;
    bit<2> port_color;
    bit<8> flow_class;
}

parser FeatureParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
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
        transition select(hdr.ethernet.ether_type) {
            0x0800: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition select(hdr.ipv4.protocol) {
            17: parse_udp;
            default: accept;
        }
    }
    state parse_udp {
        packet.extract(hdr.udp);
        transition accept;
    }
}

control FeatureVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control FeatureIngress(inout headers_t hdr, inout metadata_t meta,
                       inout standard_metadata_t standard_metadata) {
    counter(64, CounterType.packets_and_bytes) port_counter;
    meter(64, MeterType.packets) port_meter;
    register<bit<8>>(16) flow_classes;
    direct_counter(CounterType.packets_and_bytes) dmac_counter;
    direct_meter<bit<2>>(MeterType.bytes) dmac_meter;
    action_profile(32w64) nexthops;
    action_selector(HashAlgorithm.crc16, 32w64, 32w8) ecmp_selector;

    action drop() {
        mark_to_drop(standard_metadata);
    }

    action forward(bit<9> port) {
        standard_metadata.egress_spec = port;
    }

    action to_cpu() {
        standard_metadata.egress_spec = CPU_PORT;
    }

    action flood(bit<16> group) {
        standard_metadata.mcast_grp = group;
    }

    action dmac_forward(bit<9> port) {
        standard_metadata.egress_spec = port;
        dmac_meter.read(meta.color);
    }

    action set_class(bit<8> flow_class) {
        meta.flow_class = flow_class;
    }

    table acl {
        key = {
            hdr.ethernet.ether_type: ternary;
            standard_metadata.ingress_port: optional;
        }
        actions = { to_cpu; drop; NoAction; }
        default_action = NoAction();
        size = 64;
    }

    table dmac {
        key = {
            hdr.ethernet.dst_addr: exact;
        }
        actions = { dmac_forward; flood; to_cpu; drop; }
        default_action = drop();
        counters = dmac_counter;
        meters = dmac_meter;
        size = 1024;
    }

    table routes {
        key = {
            hdr.ipv4.dst_addr: lpm;
        }
        actions = { forward; drop; }
        implementation = nexthops;
        size = 256;
    }

    table ecmp {
        key = {
            hdr.ipv4.dst_addr: exact;
            hdr.ipv4.src_addr: selector;
        }
        actions = { forward; }
        implementation = ecmp_selector;
        size = 64;
    }

    table ports {
        key = {
            hdr.udp.dst_port: range;
        }
        actions = { set_class; NoAction; }
        default_action = NoAction();
        size = 32;
    }

    table fixed {
        key = {
            hdr.ethernet.ether_type: exact;
        }
        actions = { drop; NoAction; }
        const default_action = NoAction();
        const entries = {
            0x9999: drop();
        }
    }

    apply {
        if (hdr.packet_out.isValid()) {
            standard_metadata.egress_spec = hdr.packet_out.egress_port;
            hdr.packet_out.setInvalid();
            exit;
        }
        port_counter.count((bit<32>)standard_metadata.ingress_port);
        port_meter.execute_meter((bit<32>)standard_metadata.ingress_port, meta.port_color);
        digest<learn_t>(1, {hdr.ethernet.src_addr, standard_metadata.ingress_port});
        if (standard_metadata.ingress_port == 3) {
            clone(CloneType.I2E, 5);
        }
        fixed.apply();
        if (hdr.ipv4.isValid()) {
            if (hdr.udp.isValid()) {
                ports.apply();
                flow_classes.write((bit<32>)hdr.udp.dst_port[3:0], meta.flow_class);
            }
            if (!ecmp.apply().hit) {
                routes.apply();
            }
        } else {
            dmac.apply();
        }
        acl.apply();
        if (meta.color == 2 || meta.port_color == 2) {
            drop();
        }
    }
}

control FeatureEgress(inout headers_t hdr, inout metadata_t meta,
                      inout standard_metadata_t standard_metadata) {
    apply {
        if (standard_metadata.egress_port == CPU_PORT) {
            hdr.packet_in.setValid();
            hdr.packet_in.ingress_port = standard_metadata.ingress_port;
        }
    }
}

control FeatureComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control FeatureDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.packet_in);
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.udp);
    }
}

V1Switch(FeatureParser(), FeatureVerifyChecksum(), FeatureIngress(), FeatureEgress(),
         FeatureComputeChecksum(), FeatureDeparser()) main;
