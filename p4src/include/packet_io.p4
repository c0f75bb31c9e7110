// ibsec-fabric data plane: packet I/O with the subnet manager (DESIGN 4, DESIGN 6 step 3).

#ifndef IBSEC_PACKET_IO_P4
#define IBSEC_PACKET_IO_P4

#include "headers.p4"

// A PacketOut from the SM leaves on the port its packet_out header names, untouched by filtering,
// routing or marking: the SM answers a host through the switch that serves it.
control PacketOutControl(inout headers_t hdr,
                         inout local_metadata_t meta,
                         inout standard_metadata_t standard_metadata) {
    apply {
        standard_metadata.egress_spec = hdr.packet_out.egress_port;
        hdr.packet_out.setInvalid();
    }
}

// Packets addressed to the SM's well-known GID go to the CPU port with a packet_in header, through a
// per-ingress-port meter so that a trap flood from one port cannot swamp the SM or starve the others.
control SmPuntControl(inout headers_t hdr,
                      inout local_metadata_t meta,
                      inout standard_metadata_t standard_metadata) {

    // Indexed by ingress port; the SM configures the rate (packets/s) of every host-facing port.
    // An unconfigured meter is always green.
    meter(PORT_COUNT, MeterType.packets) sm_punt_meter;

    action punt_to_sm() {
        meta.punt = true;
    }

    // Why: only the SM knows its GID and it may move (SM failover). Filled by the SM's topology manager
    // with one entry: the SM's subnet id and GUID (the MF bits are not part of the key).
    table sm_punt_table {
        key = {
            meta.dst_id: exact;
        }
        actions = {
            punt_to_sm;
            @defaultonly NoAction;
        }
        const default_action = NoAction;
        size = 4;
    }

    apply {
        sm_punt_table.apply();
        if (meta.punt) {
            sm_punt_meter.execute_meter((bit<32>)standard_metadata.ingress_port, meta.punt_color);
            if (meta.punt_color == METER_RED) {
                meta.drop_reason = DROP_PUNT_METER;
            } else {
                standard_metadata.egress_spec = CPU_PORT;
                hdr.packet_in.setValid();
                hdr.packet_in.ingress_port = standard_metadata.ingress_port;
                hdr.packet_in._pad = 0;
            }
        }
    }
}

#endif  // IBSEC_PACKET_IO_P4
