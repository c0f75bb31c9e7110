// ibsec-fabric data plane: marking (DESIGN 2, DESIGN 6 step 4).
//
// Runs after routing, once the egress port is known. Port marking (fat trees) already happened in
// PortRolesControl (it depends on the ingress port only); here DDPM adds the delta of the egress link,
// then the MF is written back into the destination GID. Only RoCEv2 packets to fe80::/10 or fec0::/10 are
// marked: a packet leaving the site keeps every address bit. The arithmetic is per field and wraps modulo
// 2^w, exactly scapy-tools/ibsec/marking.py's DdpmLayout.apply.

#ifndef IBSEC_MARKING_P4
#define IBSEC_MARKING_P4

#include "headers.p4"

control MarkingControl(inout headers_t hdr,
                       inout local_metadata_t meta,
                       inout standard_metadata_t standard_metadata) {

    // Mesh and torus: add a signed unit step to one dimension's field. addend = (+-1 mod 2^w) << shift,
    // field_mask = the field's bits (DdpmLayout.port_entry).
    action add_distance(mf_t addend, mf_t field_mask) {
        meta.mf = (meta.mf & ~field_mask) | ((meta.mf + addend) & field_mask);
    }

    // Hypercube: flip the bit of the dimension the egress link crosses.
    action flip_distance(mf_t dimension_bit) {
        meta.mf = meta.mf ^ dimension_bit;
    }

    // Why: DDPM's Y - X for the neighbour behind each egress port. Filled by the SM's topology manager from
    // the switch coordinates (DdpmLayout.delta/port_entry). Host-facing and fat-tree ports have no entry.
    table ddpm_delta_table {
        key = {
            standard_metadata.egress_spec: exact;
        }
        actions = {
            add_distance;
            flip_distance;
            @defaultonly NoAction;
        }
        const default_action = NoAction;
        size = 512;
    }

    apply {
        ddpm_delta_table.apply();
        if (hdr.ipv6.dst_addr[117:80] != meta.mf) {
            hdr.ipv6.dst_addr[117:80] = meta.mf;
            // The UDP checksum covers the destination address; RoCEv2 leaves it zero (the ICRC, which sees
            // MF bits as zeros, protects the packet), so a marked packet never carries a stale one.
            hdr.udp.checksum = 0;
        }
    }
}

#endif  // IBSEC_MARKING_P4
