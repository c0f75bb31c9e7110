// ibsec-fabric: the P4 data plane of an InfiniBand/RoCEv2 fabric switch (v1model).
//
// DESIGN.md sections 2 and 6; docs/p4-pipeline.md draws the pipeline and lists every table, counter,
// meter and register with who writes and reads it. Standard P4_16 + v1model only: it compiles with the
// project's p4switch-cc and with p4c-bm2-ss.
//
// Ingress, in order:
//   0. parser errors: a truncated frame is counted by error and dropped, never forwarded half-parsed;
//      a PacketOut from the SM leaves on the port it names.
//   1. port roles: host-facing ports clear and seed the MF; fat-tree down-ports write their digit.
//   2. partition enforcement: off / invalid-list / valid-list per port, violations counted per port.
//   3. SM punt (metered), then routing on the destination's subnet id and GUID.
//   4. marking: DDPM adds the egress link's delta; the MF is written back.

#include <core.p4>
#include <v1model.p4>

//------------------------------------------------------------------------------
// DEFINES, HEADERS, PARSER
//------------------------------------------------------------------------------

#include "include/defines.p4"
#include "include/headers.p4"
#include "include/parser.p4"

//------------------------------------------------------------------------------
// INGRESS STAGES
//------------------------------------------------------------------------------

#include "include/packet_io.p4"
#include "include/port_roles.p4"
#include "include/partition.p4"
#include "include/routing.p4"
#include "include/marking.p4"

//------------------------------------------------------------------------------
// CHECKSUMS (none: IPv6 has no header checksum, RoCEv2's UDP checksum is zero, the ICRC is end to end)
//------------------------------------------------------------------------------

control IbsecVerifyChecksum(inout headers_t hdr, inout local_metadata_t meta) {
    apply { }
}

control IbsecComputeChecksum(inout headers_t hdr, inout local_metadata_t meta) {
    apply { }
}

//------------------------------------------------------------------------------
// INGRESS PIPELINE
//------------------------------------------------------------------------------

control IbsecIngress(inout headers_t hdr,
                     inout local_metadata_t meta,
                     inout standard_metadata_t standard_metadata) {

    // Packets dropped, by reason (DROP_* in defines.p4). Read by tests, benchmarks and the SM's status.
    counter(DROP_REASONS, CounterType.packets_and_bytes) drops;

    // Frames the parser could not finish, by error (PARSER_ERROR_* in defines.p4). Read by tests and the SM.
    counter(PARSER_ERRORS, CounterType.packets) parser_errors;

    PacketOutControl() sm_packet_out;
    PortRolesControl() port_roles;
    PartitionControl() partition;
    SmPuntControl() sm_punt;
    RoutingControl() routing;
    MarkingControl() marking;

    apply {
        meta.drop_reason = DROP_NONE;
        meta.punt = false;
        meta.spray = 0;
        meta.partition_mode = PARTITION_OFF;
        meta.markable = hdr.bth.isValid()
            && (meta.dst_prefix == GID_PREFIX_LINK_LOCAL || meta.dst_prefix == GID_PREFIX_SITE_LOCAL);

        if (standard_metadata.parser_error != error.NoError) {
            parser_errors.count(standard_metadata.parser_error == error.PacketTooShort
                                ? PARSER_ERROR_PACKET_TOO_SHORT : PARSER_ERROR_OTHER);
            meta.drop_reason = DROP_PARSER_ERROR;
        } else if (hdr.packet_out.isValid()) {
            sm_packet_out.apply(hdr, meta, standard_metadata);
        } else {
            port_roles.apply(hdr, meta, standard_metadata);
            if (hdr.bth.isValid()) {
                partition.apply(hdr, meta, standard_metadata);
            }
            if (meta.drop_reason == DROP_NONE && hdr.ipv6.isValid()) {
                sm_punt.apply(hdr, meta, standard_metadata);
            }
            if (meta.drop_reason == DROP_NONE && !meta.punt) {
                routing.apply(hdr, meta, standard_metadata);
                if (meta.drop_reason == DROP_NONE && meta.markable) {
                    marking.apply(hdr, meta, standard_metadata);
                }
            }
        }

        if (meta.drop_reason != DROP_NONE) {
            drops.count(meta.drop_reason);
            mark_to_drop(standard_metadata);
        }
    }
}

//------------------------------------------------------------------------------
// EGRESS PIPELINE (nothing: every decision is made in ingress)
//------------------------------------------------------------------------------

control IbsecEgress(inout headers_t hdr,
                    inout local_metadata_t meta,
                    inout standard_metadata_t standard_metadata) {
    apply { }
}

//------------------------------------------------------------------------------
// DEPARSER AND SWITCH
//------------------------------------------------------------------------------

#include "include/deparser.p4"

V1Switch(IbsecParser(),
         IbsecVerifyChecksum(),
         IbsecIngress(),
         IbsecEgress(),
         IbsecComputeChecksum(),
         IbsecDeparser()) main;
