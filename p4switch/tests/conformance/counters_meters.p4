/* Conformance: indirect and direct counters, a packet meter and a byte direct meter (two-rate
 * three-colour, colours GREEN 0 / YELLOW 1 / RED 2 as BMv2), and a register read-modify-write.
 * The colours and the register value come back in the "c" header. */
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dst;
    bit<48> src;
    bit<16> ether_type;
}

header c_t {
    bit<8>  color;
    bit<8>  dcolor;
    bit<16> reg_value;
}

struct headers_t {
    ethernet_t ethernet;
    c_t c;
}

struct metadata_t {
    bit<8> dcolor;
}

parser CountParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                   inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        packet.extract(hdr.c);
        transition accept;
    }
}

control CountVerify(inout headers_t hdr, inout metadata_t meta) { apply { } }

control CountIngress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    counter(8, CounterType.packets_and_bytes) port_counter;
    direct_counter(CounterType.packets_and_bytes) hits;
    meter(4, MeterType.packets) m;
    direct_meter<bit<8>>(MeterType.bytes) dm;
    register<bit<16>>(4) reg;

    action counted() {
        hits.count();
    }
    table t_count {
        key = { hdr.ethernet.dst: exact; }
        actions = { counted; NoAction; }
        counters = hits;
        default_action = NoAction();
    }

    action metered() {
        dm.read(meta.dcolor);
    }
    table t_meter {
        key = { hdr.ethernet.src: exact; }
        actions = { metered; NoAction; }
        meters = dm;
        default_action = NoAction();
    }

    apply {
        port_counter.count((bit<32>)standard_metadata.ingress_port);
        t_count.apply();
        t_meter.apply();
        m.execute_meter((bit<32>)0, hdr.c.color);
        hdr.c.dcolor = meta.dcolor;
        bit<16> value;
        reg.read(value, 0);
        value = value + 1;
        reg.write(0, value);
        hdr.c.reg_value = value;
        standard_metadata.egress_spec = 1;
    }
}

control CountEgress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    apply { }
}

control CountCompute(inout headers_t hdr, inout metadata_t meta) { apply { } }

control CountDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.c);
    }
}

V1Switch(CountParser(), CountVerify(), CountIngress(), CountEgress(), CountCompute(), CountDeparser()) main;
