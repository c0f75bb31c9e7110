// ibsec-fabric data plane: partition enforcement (DESIGN 6 step 2; seed 000 sec. 5.3).
//
// Per ingress port, one of three modes the SM's filter policy sets:
//   off           no table lookup at all (every port under SIF while no attack is seen),
//   invalid-list  drop packets whose (port, P_Key) is in invalid_pkeys (SIF's Invalid_P_Key_Table),
//   valid-list    drop packets whose (port, P_Key) is not in valid_pkeys (DT, IF, and SIF once the
//                 invalid list would outgrow the valid one).
// Drops in either list mode are counted per port in pkey_violations, the Ingress P_Key Violation
// Counter the SM polls to decide when an attack is over.

#ifndef IBSEC_PARTITION_P4
#define IBSEC_PARTITION_P4

#include "headers.p4"

control PartitionControl(inout headers_t hdr,
                         inout local_metadata_t meta,
                         inout standard_metadata_t standard_metadata) {

    // Ingress P_Key Violation Counter, indexed by ingress port. Read by the SM's SIF engine, which
    // resets it when it flushes the port's invalid_pkeys entries.
    counter(PORT_COUNT, CounterType.packets) pkey_violations;

    // Partition-table lookups, indexed by ingress port: what a filter policy costs (seed 000 Table 1).
    // Read by benchmarks and tests; a port in mode off never counts here.
    counter(PORT_COUNT, CounterType.packets) partition_lookups;

    action filter_invalid_list() {
        meta.partition_mode = PARTITION_INVALID_LIST;
    }

    action filter_valid_list() {
        meta.partition_mode = PARTITION_VALID_LIST;
    }

    action filter_off() {
        meta.partition_mode = PARTITION_OFF;
    }

    action reject_pkey() {
        meta.drop_reason = DROP_PKEY_VIOLATION;
        pkey_violations.count((bit<32>)standard_metadata.ingress_port);
    }

    // Why: the filter policy is per port and changes at run time (SIF switches a port on while an attack
    // lasts). Filled by the SM's partition manager: DT puts every port in valid-list, IF every
    // host-facing port, SIF one entry per attacked port. No entry = off.
    table partition_mode_table {
        key = {
            standard_metadata.ingress_port: exact;
        }
        actions = {
            filter_invalid_list;
            filter_valid_list;
            @defaultonly filter_off;
        }
        const default_action = filter_off;
        size = 512;
    }

    // Why: SIF's Invalid_P_Key_Table. Filled by the SM's SIF engine with the P_Keys named in bad-P_Key
    // traps, on the port the traceback found; flushed when the port's violation counter stops moving.
    table invalid_pkeys {
        key = {
            standard_metadata.ingress_port: exact;
            hdr.bth.p_key: exact;
        }
        actions = {
            reject_pkey;
            @defaultonly NoAction;
        }
        const default_action = NoAction;
        size = 4096;
    }

    // Why: the partition table of IBA switch ports (the P_Keys a port may carry, full 16 bits with the
    // membership bit). Filled by the SM's partition manager from the topology's partitions for every port
    // in valid-list mode.
    table valid_pkeys {
        key = {
            standard_metadata.ingress_port: exact;
            hdr.bth.p_key: exact;
        }
        actions = {
            NoAction;
        }
        const default_action = NoAction;
        size = 4096;
    }

    apply {
        partition_mode_table.apply();
        if (meta.partition_mode == PARTITION_INVALID_LIST) {
            partition_lookups.count((bit<32>)standard_metadata.ingress_port);
            invalid_pkeys.apply();
        } else if (meta.partition_mode == PARTITION_VALID_LIST) {
            partition_lookups.count((bit<32>)standard_metadata.ingress_port);
            if (!valid_pkeys.apply().hit) {
                reject_pkey();
            }
        }
    }
}

#endif  // IBSEC_PARTITION_P4
