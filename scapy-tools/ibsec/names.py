"""Names and values every part of the project must agree on, each written once.

The filter policies, the security modes and the numbers of the P4 program are spoken by the SM, the
agent, the topologies, the evaluation and the tests alike; a second copy of any of them drifts silently
(a policy the launcher offers that the SM refuses, a mode name the partition file reads differently from
the topology file). They live here, in the wire library, because it is the one package everything else may
import (the import order: p4switch and ibsec depend on nothing of ours; the agent, the attacks and the SM on
ibsec; the topologies on those; the evaluation and the tests on top).

The P4 program's numbers (the CPU port, drop reasons, parser errors, opcodes) are not re-typed here: they are
the ``const`` lines of p4src/include/defines.p4, read by name (the P4Info carries ids and widths, not
constants). The names of the P4 objects the SM writes and everyone reads (tables, actions, match fields,
counters, meters) are the P4Info's; a test checks each against the committed P4Info, so a renamed table fails
there and not at a switch.
"""

from __future__ import annotations

import enum
import re
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEFINES = REPO / "p4src" / "include" / "defines.p4"
P4INFO = REPO / "p4src" / "main.p4info.txtpb"
"""The committed P4Info of p4src/main.p4 (the contract between data plane and controller)."""

_CONST = re.compile(r"^\s*const\s+\w+(?:<\d+>)?\s+(\w+)\s*=\s*(0x[0-9a-fA-F_]+|\d+)\s*;", re.MULTILINE)


# ---- the P4 program's constants ----------------------------------------------------------------------------


@cache
def p4_constants(path: Path = DEFINES) -> dict[str, int]:
    """Every integer ``const`` of defines.p4, by name."""
    return {name: int(value.replace("_", ""), 0) for name, value in _CONST.findall(path.read_text())}


def p4_const(name: str) -> int:
    """One constant of defines.p4; KeyError names it if the P4 source has no such constant."""
    return p4_constants()[name]


CPU_PORT = p4_const("CPU_PORT")
"""The switches' CPU port: PacketOut enters and PacketIn leaves there (every switch is started with it)."""


# ---- P4 object names (P4Info names; finsy turns them into ids with the P4Info a client loaded) --------

PORT_ROLES = "IbsecIngress.port_roles.port_roles_table"
PARTITION_MODE = "IbsecIngress.partition.partition_mode_table"
INVALID_PKEYS = "IbsecIngress.partition.invalid_pkeys"
VALID_PKEYS = "IbsecIngress.partition.valid_pkeys"
SM_PUNT = "IbsecIngress.sm_punt.sm_punt_table"
SPREAD_MODE = "IbsecIngress.routing.spread_mode_table"
ROUTES = "IbsecIngress.routing.routes_table"
ROUTE_GROUPS = "IbsecIngress.routing.route_groups_table"
DDPM_DELTAS = "IbsecIngress.marking.ddpm_delta_table"
PKEY_VIOLATIONS = "IbsecIngress.partition.pkey_violations"
PARTITION_LOOKUPS = "IbsecIngress.partition.partition_lookups"
DROPS = "IbsecIngress.drops"
PUNT_METER = "IbsecIngress.sm_punt.sm_punt_meter"

FORWARD = "IbsecIngress.routing.forward"
FORWARD_TO_GROUP = "IbsecIngress.routing.forward_to_group"
SPREAD_PER_PACKET = "IbsecIngress.routing.spread_per_packet"
SPREAD_PER_FLOW = "IbsecIngress.routing.spread_per_flow"
SEED_HOST_MARK = "IbsecIngress.port_roles.seed_host_mark"
MARK_DOWN_PORT = "IbsecIngress.port_roles.mark_down_port"
KEEP_MARK = "IbsecIngress.port_roles.keep_mark"
ADD_DISTANCE = "IbsecIngress.marking.add_distance"
FLIP_DISTANCE = "IbsecIngress.marking.flip_distance"
PUNT_TO_SM = "IbsecIngress.sm_punt.punt_to_sm"
FILTER_VALID_LIST = "IbsecIngress.partition.filter_valid_list"
FILTER_INVALID_LIST = "IbsecIngress.partition.filter_invalid_list"
REJECT_PKEY = "IbsecIngress.partition.reject_pkey"
NO_ACTION = "NoAction"

INGRESS_PORT = "standard_metadata.ingress_port"
EGRESS_SPEC = "standard_metadata.egress_spec"
DST_ID = "meta.dst_id"
ROUTE_GROUP = "meta.route_group"
ROUTE_MEMBER = "meta.route_member"
P_KEY = "hdr.bth.p_key"
DST_ID_BITS = 80
"""The width of meta.dst_id (dst_id_t in defines.p4): a route's prefix length when it names one host."""


# ---- filter policies (DESIGN 6, seed 000 sec. 5.2) ---------------------------------------------------------


class Policy(enum.StrEnum):
    """How the SM keeps invalid P_Keys out: no filter, destination-side table (DT, valid-list on every
    port), ingress filtering (IF, valid-list on host-facing ports) or selective ingress filtering (SIF,
    filters installed on the traced ports while an attack lasts)."""

    NONE = "none"
    DT = "dt"
    IF = "if"
    SIF = "sif"


POLICIES: tuple[str, ...] = tuple(p.value for p in Policy)
"""The policy names, in the order the evaluation reports them (argparse choices, error messages)."""


# ---- security modes (DESIGN 3) -----------------------------------------------------------------------------


class Mode(enum.IntEnum):
    """Security modes (BTH byte 8, Resv7's top three bits); 5-7 are reserved."""

    NONE = 0
    ICRC_MAC = 1
    STH_AEAD = 2
    STH_AUTH = 3
    STH_HDR = 4

    @property
    def has_sth(self) -> bool:
        """Modes 2-4 put a 16-byte secure transport header after H."""
        return self >= Mode.STH_AEAD

    @property
    def encrypts(self) -> bool:
        """Modes 1 and 2 carry the payload as GCM ciphertext; the others carry it in the clear."""
        return self in (Mode.ICRC_MAC, Mode.STH_AEAD)

    @property
    def authenticates_payload(self) -> bool:
        """Modes 1-3: the MAC covers the headers and the payload (mode 4 covers the headers only)."""
        return Mode.ICRC_MAC <= self <= Mode.STH_AUTH

    @property
    def label(self) -> str:
        """The mode's name in topology and partition files, on command lines and in reports."""
        return self.name.lower().replace("_", "-")


SECURITY_MODES: tuple[str, ...] = tuple(m.label for m in Mode)
"""The mode names indexed by mode number: ``SECURITY_MODES.index(name)`` is the number on the wire."""
