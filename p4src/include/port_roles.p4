// ibsec-fabric data plane: port roles (DESIGN 6 step 1, DESIGN 2.1 and 2.2).
//
// What the switch does to the marking field because of the port a packet came in on. The arithmetic
// operands are computed by the SM with scapy-tools/ibsec/marking.py, so the P4 program only masks and ORs.

#ifndef IBSEC_PORT_ROLES_P4
#define IBSEC_PORT_ROLES_P4

#include "headers.p4"

control PortRolesControl(inout headers_t hdr,
                         inout local_metadata_t meta,
                         inout standard_metadata_t standard_metadata) {

    // A host-facing port: whatever MF the host wrote is replaced by mf_seed, so an attacker cannot
    // pre-load a mark. Fat tree: the port's digit in the level-0 slot, level 0 (FatTreeLayout.mark(0,
    // 0, digit)). Mesh, torus, hypercube: the host-port index in the low bits, zero distance vector
    // (DdpmLayout.init(host_port)).
    action seed_host_mark(mf_t mf_seed) {
        meta.mf = mf_seed;
    }

    // A fat-tree fabric down-port at level L >= 1: write the port's digit into level L's slot and L into
    // the level field. mark_mask covers the slot and MF[37:35]; mark_value = FatTreeLayout.mark(0, L, digit).
    action mark_down_port(mf_t mark_mask, mf_t mark_value) {
        meta.mf = (meta.mf & ~mark_mask) | mark_value;
    }

    // A fabric port that adds nothing on ingress: fat-tree up-ports, mesh/torus/hypercube links
    // (DDPM marks on egress, in MarkingControl).
    action keep_mark() {
    }

    // Why: the marking schemes need to know which ports face hosts and which digit a down-port has;
    // neither can be derived from port numbers. Filled by the SM's topology manager from the topology
    // file, one entry per port. A port without an entry is treated as host-facing with a zero seed, so a
    // port the SM forgot can never pass a forged MF into the fabric.
    table port_roles_table {
        key = {
            standard_metadata.ingress_port: exact;
        }
        actions = {
            seed_host_mark;
            mark_down_port;
            keep_mark;
        }
        default_action = seed_host_mark(0);
        size = 512;
    }

    apply {
        port_roles_table.apply();
    }
}

#endif  // IBSEC_PORT_ROLES_P4
