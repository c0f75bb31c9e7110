// ibsec-fabric data plane: constants and type definitions.
//
// The PTF tests and the SM read the `const` lines of this file by name (scapy-tools/ibsec/names.py),
// so every number the control plane must agree on is written exactly once, here.

#ifndef IBSEC_DEFINES_P4
#define IBSEC_DEFINES_P4

//------------------------------------------------------------------------------
// TYPEDEFS
//------------------------------------------------------------------------------

typedef bit<9>   port_t;
typedef bit<48>  mac_addr_t;
typedef bit<128> gid_t;        // a GID is an IPv6 address (DESIGN 2)
typedef bit<80>  dst_id_t;     // subnet id (16) and GUID (64): dst_addr[79:0], what routing matches
typedef bit<38>  mf_t;         // the marking field: dst_addr[117:80]
typedef bit<16>  pkey_t;
typedef bit<24>  qpn_t;
typedef bit<16>  route_group_t;   // a group of equal next hops (routes_table, route_groups_table)
typedef bit<16>  route_member_t;  // a member of one, 0 .. its size - 1

//------------------------------------------------------------------------------
// CONSTANTS
//------------------------------------------------------------------------------

// The CPU port: PacketOut enters here, PacketIn leaves here. Start the target with `--cpu-port 255`.
const port_t CPU_PORT = 255;

const bit<16> ETHERTYPE_IPV6 = 0x86dd;
const bit<8>  IP_PROTO_UDP   = 17;
const bit<16> ROCEV2_UDP_PORT = 4791;

// 10-bit GID prefixes that mark a destination inside the site (DESIGN 2): only these are marked.
const bit<10> GID_PREFIX_LINK_LOCAL = 0x3fa;   // fe80::/10
const bit<10> GID_PREFIX_SITE_LOCAL = 0x3fb;   // fec0::/10

// BTH opcodes that carry extension headers (IBA vol. 1, 9.2 / 9.3; scapy-tools/ibsec/opcodes.py).
const bit<8> OP_RC_SEND_FIRST            = 0x00;
const bit<8> OP_RC_SEND_MIDDLE           = 0x01;
const bit<8> OP_RC_SEND_LAST             = 0x02;
const bit<8> OP_RC_SEND_LAST_IMM         = 0x03;
const bit<8> OP_RC_SEND_ONLY             = 0x04;
const bit<8> OP_RC_SEND_ONLY_IMM         = 0x05;
const bit<8> OP_RC_WRITE_FIRST           = 0x06;
const bit<8> OP_RC_WRITE_MIDDLE          = 0x07;
const bit<8> OP_RC_WRITE_LAST            = 0x08;
const bit<8> OP_RC_WRITE_LAST_IMM        = 0x09;
const bit<8> OP_RC_WRITE_ONLY            = 0x0a;
const bit<8> OP_RC_WRITE_ONLY_IMM        = 0x0b;
const bit<8> OP_RC_READ_REQUEST          = 0x0c;
const bit<8> OP_RC_READ_RESPONSE_FIRST   = 0x0d;
const bit<8> OP_RC_READ_RESPONSE_MIDDLE  = 0x0e;
const bit<8> OP_RC_READ_RESPONSE_LAST    = 0x0f;
const bit<8> OP_RC_READ_RESPONSE_ONLY    = 0x10;
const bit<8> OP_RC_ACKNOWLEDGE           = 0x11;
const bit<8> OP_RC_ATOMIC_ACKNOWLEDGE    = 0x12;
const bit<8> OP_RC_COMPARE_SWAP          = 0x13;
const bit<8> OP_RC_FETCH_ADD             = 0x14;
const bit<8> OP_RC_SEND_LAST_INVALIDATE  = 0x16;
const bit<8> OP_RC_SEND_ONLY_INVALIDATE  = 0x17;
const bit<8> OP_UC_SEND_FIRST            = 0x20;
const bit<8> OP_UC_SEND_MIDDLE           = 0x21;
const bit<8> OP_UC_SEND_LAST             = 0x22;
const bit<8> OP_UC_SEND_LAST_IMM         = 0x23;
const bit<8> OP_UC_SEND_ONLY             = 0x24;
const bit<8> OP_UC_SEND_ONLY_IMM         = 0x25;
const bit<8> OP_UC_WRITE_FIRST           = 0x26;
const bit<8> OP_UC_WRITE_MIDDLE          = 0x27;
const bit<8> OP_UC_WRITE_LAST            = 0x28;
const bit<8> OP_UC_WRITE_LAST_IMM        = 0x29;
const bit<8> OP_UC_WRITE_ONLY            = 0x2a;
const bit<8> OP_UC_WRITE_ONLY_IMM        = 0x2b;
const bit<8> OP_UD_SEND_ONLY             = 0x64;
const bit<8> OP_UD_SEND_ONLY_IMM         = 0x65;

// BTH security modes that put a secure transport header after the extension headers (DESIGN 3).
const bit<3> SEC_MODE_STH_AEAD = 2;
const bit<3> SEC_MODE_STH_AUTH = 3;
const bit<3> SEC_MODE_STH_HDR  = 4;

// Management datagrams travel on the general services QP (DESIGN 4).
const qpn_t GSI_QP = 1;

// Partition enforcement modes of a port (DESIGN 6, step 2).
const bit<2> PARTITION_OFF          = 0;
const bit<2> PARTITION_INVALID_LIST = 1;
const bit<2> PARTITION_VALID_LIST   = 2;

// Indexes of IbsecIngress.drops: why a packet was dropped.
const bit<32> DROP_NONE            = 0;
const bit<32> DROP_PARSER_ERROR    = 1;
const bit<32> DROP_PKEY_VIOLATION  = 2;
const bit<32> DROP_PUNT_METER      = 3;
const bit<32> DROP_NO_ROUTE        = 4;
const bit<32> DROP_NON_IPV6        = 5;
const bit<32> DROP_REASONS         = 8;

// Indexes of IbsecIngress.parser_errors. Every select of IbsecParser has a default and no header is
// variable-sized, so PacketTooShort (a truncated frame) is the error the parser can raise; anything else a
// target reports is counted as OTHER.
const bit<32> PARSER_ERROR_OTHER            = 0;
const bit<32> PARSER_ERROR_PACKET_TOO_SHORT = 1;
const bit<32> PARSER_ERRORS                 = 2;

// Size of the per-port counters and meters, indexed by port number (9-bit ports).
const bit<32> PORT_COUNT = 512;

// v1model meter colours (as BMv2 computes them).
const bit<2> METER_GREEN  = 0;
const bit<2> METER_YELLOW = 1;
const bit<2> METER_RED    = 2;

#endif  // IBSEC_DEFINES_P4
