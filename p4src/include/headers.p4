// ibsec-fabric data plane: header and metadata definitions.
//
// RoCEv2 over IPv6 (DESIGN 2): Ethernet / IPv6 (the GRH) / UDP 4791 / BTH / extension headers /
// [STH] / payload / ICRC. Field names follow the IBA specification in wire order; every header is a
// whole number of bytes.

#ifndef IBSEC_HEADERS_P4
#define IBSEC_HEADERS_P4

#include "defines.p4"

//------------------------------------------------------------------------------
// CONTROLLER HEADERS (P4Runtime PacketIn / PacketOut metadata)
//------------------------------------------------------------------------------

// Prepended to every packet sent to the CPU port; the P4Runtime server turns it into PacketIn
// metadata. The SM needs the port the packet came in on to know which host sent it (a trap's source
// address may be spoofed; the port may not).
@controller_header("packet_in")
header packet_in_t {
    port_t   ingress_port;
    bit<7>   _pad;
}

// Built by the P4Runtime server from PacketOut metadata: the SM names the port the packet leaves on.
@controller_header("packet_out")
header packet_out_t {
    port_t   egress_port;
    bit<7>   _pad;
}

//------------------------------------------------------------------------------
// NETWORK HEADERS
//------------------------------------------------------------------------------

header ethernet_t {
    mac_addr_t dst_addr;
    mac_addr_t src_addr;
    bit<16>    ether_type;
}

// The GRH of RoCEv2. dst_addr = prefix(10) | MF(38) | subnet id(16) | GUID(64).
header ipv6_t {
    bit<4>   version;
    bit<8>   traffic_class;
    bit<20>  flow_label;
    bit<16>  payload_len;
    bit<8>   next_hdr;
    bit<8>   hop_limit;
    gid_t    src_addr;
    gid_t    dst_addr;
}

header udp_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> length;
    bit<16> checksum;
}

//------------------------------------------------------------------------------
// INFINIBAND TRANSPORT HEADERS
//------------------------------------------------------------------------------

// Base Transport Header. Byte 8 is A(1) Resv7(7); the top three Resv7 bits carry the security mode
// (DESIGN 3), the other four stay zero.
header bth_t {
    bit<8>   opcode;
    bit<1>   solicited;
    bit<1>   mig_req;
    bit<2>   pad_count;
    bit<4>   t_ver;
    pkey_t   p_key;
    bit<1>   fecn;
    bit<1>   becn;
    bit<6>   resv6;
    qpn_t    dest_qp;
    bit<1>   ack_req;
    bit<3>   sec_mode;
    bit<4>   resv4;
    bit<24>  psn;
}

// Datagram ETH (UD).
header deth_t {
    bit<32>  q_key;
    bit<8>   resv8;
    qpn_t    src_qp;
}

// RDMA ETH (RDMA WRITE first/only, READ request).
header reth_t {
    bit<64>  virtual_address;
    bit<32>  r_key;
    bit<32>  dma_length;
}

// ACK ETH (acknowledge, read responses).
header aeth_t {
    bit<8>   syndrome;
    bit<24>  msn;
}

// Atomic ETH (compare-and-swap, fetch-and-add).
header atomic_eth_t {
    bit<64>  virtual_address;
    bit<32>  r_key;
    bit<64>  swap_add_data;
    bit<64>  compare_data;
}

// Atomic acknowledge ETH.
header atomic_ack_eth_t {
    bit<64>  original_remote_data;
}

// Immediate data.
header immdt_t {
    bit<32>  immediate_data;
}

// Invalidate ETH (SEND with invalidate).
header ieth_t {
    bit<32>  r_key;
}

// Secure transport header (security modes 2-4): the 128-bit GCM tag or GMAC (DESIGN 3).
header sth_t {
    bit<128> tag;
}

// MAD common header, the first 24 bytes of every 256-byte management datagram on QP1 (DESIGN 4).
header mad_t {
    bit<8>   base_version;
    bit<8>   mgmt_class;
    bit<8>   class_version;
    bit<1>   response;
    bit<7>   method;
    bit<16>  status;
    bit<16>  class_specific;
    bit<64>  transaction_id;
    bit<16>  attribute_id;
    bit<16>  reserved;
    bit<32>  attribute_modifier;
}

struct headers_t {
    packet_out_t      packet_out;
    packet_in_t       packet_in;
    ethernet_t        ethernet;
    ipv6_t            ipv6;
    udp_t             udp;
    bth_t             bth;
    deth_t            deth;
    reth_t            reth;
    atomic_eth_t      atomic_eth;
    aeth_t            aeth;
    atomic_ack_eth_t  atomic_ack_eth;
    immdt_t           immdt;
    ieth_t            ieth;
    sth_t             sth;
    mad_t             mad;
}

//------------------------------------------------------------------------------
// METADATA
//------------------------------------------------------------------------------

struct local_metadata_t {
    // Copies of address fields, so tables and the flow hash read plain fields, not slices.
    bit<10>  dst_prefix;      // dst_addr[127:118]
    dst_id_t dst_id;          // dst_addr[79:0]: subnet id and GUID
    mf_t     mf;              // dst_addr[117:80], updated by port roles and marking, written back last
    bool     markable;        // RoCEv2 to fe80::/10 or fec0::/10: the only packets that are marked
    qpn_t    flow_qp;         // destination QP of a RoCEv2 packet (0 otherwise): part of the flow hash
    bit<32>  spray;           // flow hash input: 0 (per-flow ECMP) or a per-packet sequence number
    route_group_t  route_group;   // the route's group of next hops (forward_to_group)
    route_member_t route_member;  // the flow's member of that group
    bit<2>   partition_mode;  // PARTITION_* of the ingress port
    bool     punt;            // addressed to the SM
    bit<2>   punt_color;      // colour of the SM punt meter
    bit<32>  drop_reason;     // DROP_*: DROP_NONE until a stage decides to drop
}

#endif  // IBSEC_HEADERS_P4
