/* p4switch's own v1model.p4: declarations of the v1model architecture (BMv2 simple_switch semantics). */
// p4c's include guard, which programs test (#ifdef _V1_MODEL_P4_)
#ifndef _V1_MODEL_P4_
#define _V1_MODEL_P4_

#include "core.p4"

#define V1MODEL_VERSION 20200408

match_kind {
    range,
    optional,
    selector
}

/* Per-packet intrinsic metadata of the v1model pipeline. */
@metadata @name("standard_metadata")
struct standard_metadata_t {
    bit<9>  ingress_port;
    bit<9>  egress_spec;
    bit<9>  egress_port;
    bit<32> instance_type;
    bit<32> packet_length;
    bit<32> enq_timestamp;
    bit<19> enq_qdepth;
    bit<32> deq_timedelta;
    bit<19> deq_qdepth;
    bit<48> ingress_global_timestamp;
    bit<48> egress_global_timestamp;
    bit<16> mcast_grp;
    bit<16> egress_rid;
    bit<1>  checksum_error;
    error   parser_error;
    bit<3>  priority;
}

enum CounterType {
    packets,
    bytes,
    packets_and_bytes
}

enum MeterType {
    packets,
    bytes
}

enum HashAlgorithm {
    crc32,
    crc32_custom,
    crc16,
    crc16_custom,
    random,
    identity,
    csum16,
    xor16
}

enum CloneType {
    I2E,
    E2E
}

/* Indexed packet/byte counters. */
extern counter<I> {
    counter(bit<32> size, CounterType kind);
    void count(in I index);
}

/* One counter per entry of the table that names it in `counters = ...`. */
extern direct_counter {
    direct_counter(CounterType kind);
    void count();
}

#define V1MODEL_METER_COLOR_GREEN  0
#define V1MODEL_METER_COLOR_YELLOW 1
#define V1MODEL_METER_COLOR_RED    2

/* Indexed two-rate three-colour meters (result 0 green, 1 yellow, 2 red). */
extern meter<I> {
    meter(bit<32> size, MeterType kind);
    void execute_meter<T>(in I index, out T result);
}

/* One meter per entry of the table that names it in `meters = ...`. */
extern direct_meter<T> {
    direct_meter(MeterType kind);
    void read(out T result);
}

/* An array of size values of type T that keeps its state across packets. */
extern register<T, I> {
    register(bit<32> size);
    void read(out T result, in I index);
    void write(in I index, in T value);
}

/* Table implementations: members, and members plus groups chosen by a hash. */
extern action_profile {
    action_profile(bit<32> size);
}

extern action_selector {
    action_selector(HashAlgorithm algorithm, bit<32> size, bit<32> outputWidth);
}

extern void random<T>(out T result, in T lo, in T hi);
extern void digest<T>(in bit<32> receiver, in T data);
extern void mark_to_drop(inout standard_metadata_t standard_metadata);
extern void hash<O, T, D, M>(out O result, in HashAlgorithm algo, in T base, in D data, in M max);
extern void clone(in CloneType kind, in bit<32> session);
extern void clone_preserving_field_list(in CloneType kind, in bit<32> session, bit<8> index);
@deprecated("Please use clone_preserving_field_list instead")
extern void clone3<T>(in CloneType kind, in bit<32> session, in T data);
extern void resubmit_preserving_field_list(bit<8> index);
extern void recirculate_preserving_field_list(bit<8> index);
extern void truncate(in bit<32> length);
extern void assert(in bool check);
extern void assume(in bool check);
extern void log_msg(string msg);
extern void log_msg<T>(string msg, in T data);

extern void verify_checksum<T, O>(in bool condition, in T data, in O checksum, HashAlgorithm algo);
extern void update_checksum<T, O>(in bool condition, in T data, inout O checksum, HashAlgorithm algo);
extern void verify_checksum_with_payload<T, O>(in bool condition, in T data, in O checksum, HashAlgorithm algo);
extern void update_checksum_with_payload<T, O>(in bool condition, in T data, inout O checksum, HashAlgorithm algo);

/* The six programmable blocks of the v1model pipeline. */
parser Parser<H, M>(packet_in b, out H parsedHdr, inout M meta, inout standard_metadata_t standard_metadata);
control VerifyChecksum<H, M>(inout H hdr, inout M meta);
control Ingress<H, M>(inout H hdr, inout M meta, inout standard_metadata_t standard_metadata);
control Egress<H, M>(inout H hdr, inout M meta, inout standard_metadata_t standard_metadata);
control ComputeChecksum<H, M>(inout H hdr, inout M meta);
control Deparser<H>(packet_out b, in H hdr);

package V1Switch<H, M>(Parser<H, M> p, VerifyChecksum<H, M> vr, Ingress<H, M> ig, Egress<H, M> eg,
                       ComputeChecksum<H, M> ck, Deparser<H> dep);

#endif
