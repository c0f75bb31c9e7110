// ibsec-fabric data plane: routing (DESIGN 6 step 3).
//
// Routes match the destination's subnet id and GUID (dst_addr[79:0]), never the MF bits, so marking
// cannot change a packet's path. A route leads to one port or to a group of equal next hops (fat-tree
// ECMP up-links, the minimal next hops of adaptive mesh/torus/hypercube routing): the flow's hash picks
// one member of the group, as an action selector would. When the SM turns on per-packet spreading a
// packet sequence number joins the hash, so consecutive packets of one flow spread too.
//
// Why not an action selector: p4c's front end gives every table a default action (NoAction when the
// program names none) and its BMv2 back end warns that it cannot keep one for any table with an action
// profile or selector (p4lang/p4c#678, #5101), so p4c would warn on this program whatever it says. The
// program makes the selector's choice itself instead: crc16 over the same fields, modulo the group's
// size, then an exact match on (group, member).

#ifndef IBSEC_ROUTING_P4
#define IBSEC_ROUTING_P4

#include "headers.p4"

control RoutingControl(inout headers_t hdr,
                       inout local_metadata_t meta,
                       inout standard_metadata_t standard_metadata) {

    // Per-packet sequence number for adaptive spreading (one cell: the switch's packet count).
    register<bit<32>>(1) spray_sequence;

    action forward(port_t port) {
        standard_metadata.egress_spec = port;
    }

    // The flow's member of ``group`` (members 0 .. members - 1) picks the port (route_groups_table).
    action forward_to_group(route_group_t group, route_member_t members) {
        meta.route_group = group;
        hash(meta.route_member, HashAlgorithm.crc16, (route_member_t)0,
             {hdr.ipv6.src_addr, meta.dst_id, hdr.ipv6.flow_label, meta.flow_qp, meta.spray}, members);
    }

    action drop_non_ipv6() {
        meta.drop_reason = DROP_NON_IPV6;
    }

    action spread_per_flow() {
        meta.spray = 0;
    }

    action spread_per_packet() {
        spray_sequence.read(meta.spray, 0);
        spray_sequence.write(0, meta.spray + 1);
    }

    // Why: adaptive routing spreads each packet over the minimal next hops; ECMP on fat trees keeps a
    // flow on one path (in-order delivery for RC). Set by the SM's routing manager per switch by
    // modifying the default action: spread_per_packet on meshes, tori and hypercubes when the topology
    // asks for adaptive routing.
    table spread_mode_table {
        key = {}
        actions = {
            spread_per_flow;
            spread_per_packet;
        }
        default_action = spread_per_flow();
        size = 1;
    }

    // Why: forwarding inside the site. Filled by the SM's routing manager: a /80 entry per destination
    // host (exact route) or a shorter prefix for a whole subnet or everything (a fat tree's default up),
    // to one next hop (forward) or a group of them (ECMP or adaptive minimal next hops).
    table routes_table {
        key = {
            meta.dst_id: lpm;
        }
        actions = {
            forward;
            forward_to_group;
        }
        size = 4096;
    }

    // Why: the ports of each group of routes_table, one entry per member. Filled by the SM's routing
    // manager with the routes that use them.
    table route_groups_table {
        key = {
            meta.route_group: exact;
            meta.route_member: exact;
        }
        actions = {
            forward;
        }
        size = 1024;
    }

    // Why: destinations outside the site (neither fe80::/10 nor fec0::/10) are routed on the whole
    // address toward the site's gateway. Filled by the SM's routing manager; usually one default route.
    table offsite_routes_table {
        key = {
            hdr.ipv6.dst_addr: lpm;
        }
        actions = {
            forward;
        }
        size = 256;
    }

    // Why: the fabric carries RoCEv2 and IPv6; any other EtherType is dropped unless the SM lets it
    // through to a port (e.g. for a management network). Filled by the SM's routing manager.
    table non_ipv6_table {
        key = {
            hdr.ethernet.ether_type: exact;
        }
        actions = {
            forward;
            @defaultonly drop_non_ipv6;
        }
        const default_action = drop_non_ipv6;
        size = 16;
    }

    apply {
        if (!hdr.ipv6.isValid()) {
            non_ipv6_table.apply();
        } else if (meta.dst_prefix == GID_PREFIX_LINK_LOCAL || meta.dst_prefix == GID_PREFIX_SITE_LOCAL) {
            spread_mode_table.apply();
            switch (routes_table.apply().action_run) {
                forward: {}
                forward_to_group: {
                    if (!route_groups_table.apply().hit) {
                        meta.drop_reason = DROP_NO_ROUTE;
                    }
                }
                default: {  // a miss (NoAction)
                    meta.drop_reason = DROP_NO_ROUTE;
                }
            }
        } else if (!offsite_routes_table.apply().hit) {
            meta.drop_reason = DROP_NO_ROUTE;
        }
    }
}

#endif  // IBSEC_ROUTING_P4
