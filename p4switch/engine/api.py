"""The engine's public API: what the P4Runtime server, the CLI and the tests call.

Everything is addressed by the fully qualified P4Info names (table "MyIngress.ipv4_lpm", action
"MyIngress.drop", match field "hdr.ipv4.dst_addr", action parameter "port"); every value is a Python int
(the runtime converts P4Runtime byte strings with the widths from the P4Info).

Thread safety: one ``threading.Lock`` (``Switch.lock``) is held around ``process()`` and around every
write, so a packet never sees a half-applied entry. Callers never need to take it themselves.

Errors are all subclasses of ``EngineError``; a message names the table/entry/object, never raw key
material. Suggested P4Runtime mapping: UnknownName -> NOT_FOUND, EntryExists -> ALREADY_EXISTS,
EntryNotFound -> NOT_FOUND, InvalidEntry -> INVALID_ARGUMENT, ConstDefault -> PERMISSION_DENIED,
TableFull -> RESOURCE_EXHAUSTED, ProgramError -> INVALID_ARGUMENT.

Change policy: this module only grows (new optional parameters, new methods); existing names keep their
meaning. Additions are noted as "(added: ...)" in the docstrings.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from p4switch import ir

# Per-packet trace logging (BMv2's "trace" level), below logging.DEBUG.
TRACE = 5
logging.addLevelName(TRACE, "TRACE")

DROP_PORT = 511
"""BMv2's drop port with 9-bit ports: egress_spec == 511 drops the packet."""

# v1model standard_metadata.instance_type values (as BMv2 simple_switch sets them)
PKT_INSTANCE_NORMAL = 0
PKT_INSTANCE_INGRESS_CLONE = 1
PKT_INSTANCE_EGRESS_CLONE = 2
PKT_INSTANCE_COALESCED = 3
PKT_INSTANCE_RECIRC = 4
PKT_INSTANCE_REPLICATION = 5
PKT_INSTANCE_RESUBMIT = 6

# meter colours (v1model / BMv2)
GREEN, YELLOW, RED = 0, 1, 2


# --------------------------------------------------------------------------------------------- errors


class EngineError(Exception):
    """Base of every error the engine API raises."""


class ProgramError(EngineError):
    """The IR JSON cannot be loaded (malformed, or uses something the engine does not implement)."""


class UnknownName(EngineError):
    """No table/action/counter/meter/register/profile/field/param with that name in the program."""


class EntryExists(EngineError):
    """Insert of an entry (same match key and priority), member, group, mcast group that already exists."""


class EntryNotFound(EngineError):
    """Modify/delete/read of an entry, member or group that does not exist."""


class InvalidEntry(EngineError):
    """The entry is malformed: wrong field set, value too wide, bad prefix length, action not allowed
    in this table, missing/extra action parameter, priority missing where needed, const table, ..."""


class ConstDefault(EngineError):
    """The table's default action is declared ``const`` and cannot be changed."""


class TableFull(EngineError):
    """The table already holds ``size`` entries."""


# --------------------------------------------------------------------------------------- match values


@dataclass(frozen=True)
class Exact:
    value: int


@dataclass(frozen=True)
class Ternary:
    """Matches when ``key & mask == value & mask``."""

    value: int
    mask: int


@dataclass(frozen=True)
class Lpm:
    """Longest-prefix match: the ``prefix_len`` high bits of the field equal those of ``value``."""

    value: int
    prefix_len: int


@dataclass(frozen=True)
class Range:
    """Matches when ``low <= key <= high`` (inclusive, as P4Runtime)."""

    low: int
    high: int


@dataclass(frozen=True)
class Optional_:  # noqa: N801 - trailing underscore avoids shadowing typing.Optional
    """P4Runtime ``optional`` match: an exact value; a field left out of TableEntry.match is a wildcard."""

    value: int


Match = Exact | Ternary | Lpm | Range | Optional_


# ----------------------------------------------------------------------------------- actions, entries


@dataclass(frozen=True)
class ActionCall:
    """An action with its action-data (directionless) parameters, by name."""

    name: str
    params: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class MemberRef:
    """Entry of a table with an action profile/selector: points at one member."""

    member_id: int


@dataclass(frozen=True)
class GroupRef:
    """Entry of a table with an action selector: points at one group."""

    group_id: int


@dataclass(frozen=True)
class MeterConfig:
    """Two-rate three-colour marker (RFC 2698) parameters in the meter's units (packets or bytes):
    cir/pir per second, cburst/pburst in units."""

    cir: int
    cburst: int
    pir: int
    pburst: int


@dataclass(frozen=True)
class TableEntry:
    """One table entry.

    ``match`` maps match field names to match values; for ternary/lpm/range/optional fields a missing
    name is a wildcard ("don't care"), exact fields are mandatory. ``priority`` is required (> 0) for
    tables with ternary/range/optional fields, higher value wins (P4Runtime); 0 otherwise. The entry key
    is (match, priority). ``counter_data`` = (bytes, packets) of the table's direct counter,
    ``meter_config`` its direct meter config; both are ignored on insert/modify when None, and filled in
    by ``table_entries()``. ``is_default`` is True only for entries returned as a table's default.
    ``is_const`` (added: marks entries from ``const entries``/``entries`` in the source) is filled in by
    ``table_entries()``.
    """

    match: dict[str, Match]
    action: ActionCall | MemberRef | GroupRef
    priority: int = 0
    is_default: bool = False
    counter_data: tuple[int, int] | None = None
    meter_config: MeterConfig | None = None
    is_const: bool = False


@dataclass(frozen=True)
class Member:
    member_id: int
    action: ActionCall


@dataclass(frozen=True)
class Group:
    """An action-selector group: ``members`` is a tuple of (member_id, weight)."""

    group_id: int
    members: tuple[tuple[int, int], ...]
    max_size: int = 0


@dataclass(frozen=True)
class Replica:
    """One copy made by the packet replication engine: egress port and egress_rid (instance)."""

    port: int
    rid: int = 0


@dataclass(frozen=True)
class CloneSession:
    session_id: int
    replicas: tuple[Replica, ...]
    class_of_service: int = 0
    packet_length_bytes: int = 0
    """Truncate clones to this many bytes (0 = whole packet), as P4Runtime CloneSessionEntry."""


# ------------------------------------------------------------------------------------------ the switch


DigestSink = Callable[[str, list[tuple[str, int]]], None]
"""Called (under the switch lock, from the packet thread) with the digest name as in the P4Info and the
digest struct's fields in declaration order as (field name, value)."""


class Switch:
    """One v1model switch running one program.

    Attributes:
        digest_sink: called for each ``digest()`` a packet triggers; None drops digests (they are counted
            in ``stats['digest']`` either way).
        drop_port: 511, egress_spec value that drops (as BMv2 with 9-bit ports).
        stats: counters of the pipeline: ``rx``, ``tx``, ``dropped``, ``parser_error:<ErrorName>`` (e.g.
            ``parser_error:PacketTooShort``), ``digest``, ``clone``, ``mcast_copies``; missing key = 0.
            (added:) ``clone_no_session`` (clone to a session that does not exist), ``assert_failed``,
            ``parser_reject`` (the program's own ``transition reject``; the packet goes on to ingress),
            ``internal_error`` (an engine bug caught by process(); the frame is dropped and logged).
        lock: the lock described in the module docstring.
        log: where per-packet TRACE lines and warnings go.
    """

    drop_port: int = DROP_PORT

    def __init__(self) -> None:
        # Use Switch.load(); the constructor only sets up the common attributes.
        self.digest_sink: DigestSink | None = None
        self.stats: dict[str, int] = {}
        self.lock = threading.Lock()
        self.log = logging.getLogger("p4switch.engine")

    # -------------------------------------------------------------------------------------- loading
    @classmethod
    def load(
        cls,
        ir_json: bytes | str | ir.Program,
        *,
        log: logging.Logger | None = None,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
    ) -> Switch:
        """Compile the IR JSON (docs/p4switch-ir.md) into a ready switch. Raises ProgramError.

        The JSON is read once into the typed IR (p4switch.ir); (added:) a ``p4switch.ir.Program``
        is taken as it is. ``clock`` returns seconds (monotonic) for meters and
        ingress_global_timestamp; ``rng`` feeds v1model's ``random()`` (tests pass a seeded one)."""
        from p4switch.engine.switch import load

        return load(ir_json, log=log, clock=clock, rng=rng)

    # ----------------------------------------------------------------------------------- data plane
    def process(self, ingress_port: int, frame: bytes) -> list[tuple[int, bytes]]:
        """Run the whole v1model pipeline for one frame and return every frame that leaves, as
        (egress port, bytes): the unicast/multicast copies and clones, and frames to the CPU port (the
        runtime strips their @controller_header packet_in header). Never raises for any frame: parser
        errors and drops are counted in ``stats``. The CPU port is an ordinary port number here."""
        raise NotImplementedError

    # --------------------------------------------------------------------------------------- tables
    def table_insert(self, table: str, entry: TableEntry) -> None:
        """Add an entry. Raises UnknownName, EntryExists, InvalidEntry, TableFull."""
        raise NotImplementedError

    def table_modify(self, table: str, entry: TableEntry) -> None:
        """Replace the action (and, when given, counter data / meter config) of the entry with the same
        key. Raises UnknownName, EntryNotFound, InvalidEntry."""
        raise NotImplementedError

    def table_delete(self, table: str, entry: TableEntry) -> None:
        """Remove the entry with the same key (match + priority); its action is ignored.
        Raises UnknownName, EntryNotFound."""
        raise NotImplementedError

    def table_entries(self, table: str) -> list[TableEntry]:
        """Every entry (const ones included), in insertion order, with direct counter/meter state."""
        raise NotImplementedError

    def table_set_default(self, table: str, action: ActionCall) -> None:
        """Set the default (miss) action. Raises ConstDefault, UnknownName, InvalidEntry."""
        raise NotImplementedError

    def table_reset_default(self, table: str) -> None:
        """Restore the default action the program declares."""
        raise NotImplementedError

    def table_get_default(self, table: str) -> ActionCall:
        """The current default action."""
        raise NotImplementedError

    def table_clear(self, table: str) -> None:
        """Remove every non-const entry (convenience for the runtime's pipeline reset)."""
        raise NotImplementedError

    # ---------------------------------------------------------------- action profiles and selectors
    def member_insert(self, profile: str, member_id: int, action: ActionCall) -> None:
        """Raises UnknownName, EntryExists, InvalidEntry."""
        raise NotImplementedError

    def member_modify(self, profile: str, member_id: int, action: ActionCall) -> None:
        """Raises UnknownName, EntryNotFound, InvalidEntry."""
        raise NotImplementedError

    def member_delete(self, profile: str, member_id: int) -> None:
        """Raises UnknownName, EntryNotFound, InvalidEntry (member still used by a group or entry)."""
        raise NotImplementedError

    def members(self, profile: str) -> list[Member]:
        raise NotImplementedError

    def group_insert(
        self, profile: str, group_id: int, members: list[tuple[int, int]], max_size: int = 0
    ) -> None:
        """members: (member_id, weight) pairs, weight >= 1. Raises UnknownName, EntryExists,
        InvalidEntry (unknown member, too many members, profile is not a selector)."""
        raise NotImplementedError

    def group_modify(
        self, profile: str, group_id: int, members: list[tuple[int, int]], max_size: int = 0
    ) -> None:
        raise NotImplementedError

    def group_delete(self, profile: str, group_id: int) -> None:
        raise NotImplementedError

    def groups(self, profile: str) -> list[Group]:
        raise NotImplementedError

    # ----------------------------------------------------------------- counters, meters, registers
    def counter_read(self, name: str, index: int) -> tuple[int, int]:
        """(bytes, packets) of one cell of an indirect counter. Raises UnknownName, InvalidEntry
        (index out of range)."""
        raise NotImplementedError

    def counter_write(self, name: str, index: int, byte_count: int, packet_count: int) -> None:
        raise NotImplementedError

    def counter_size(self, name: str) -> int:
        """Number of cells (for wildcard reads)."""
        raise NotImplementedError

    def direct_counter_read(self, table: str, entry: TableEntry) -> tuple[int, int]:
        """(bytes, packets) of the direct counter of the entry with that key. Raises EntryNotFound."""
        raise NotImplementedError

    def direct_counter_write(self, table: str, entry: TableEntry, byte_count: int, packet_count: int) -> None:
        raise NotImplementedError

    def meter_set(self, name: str, index: int, config: MeterConfig | None) -> None:
        """Configure one cell of an indirect meter; None resets it (every packet GREEN)."""
        raise NotImplementedError

    def meter_get(self, name: str, index: int) -> MeterConfig | None:
        raise NotImplementedError

    def meter_size(self, name: str) -> int:
        raise NotImplementedError

    def direct_meter_set(self, table: str, entry: TableEntry, config: MeterConfig | None) -> None:
        raise NotImplementedError

    def direct_meter_get(self, table: str, entry: TableEntry) -> MeterConfig | None:
        raise NotImplementedError

    def register_read(self, name: str, index: int) -> int:
        raise NotImplementedError

    def register_write(self, name: str, index: int, value: int) -> None:
        """Value is truncated to the register's width."""
        raise NotImplementedError

    def register_size(self, name: str) -> int:
        raise NotImplementedError

    # ----------------------------------------------------------------- packet replication engine
    def mcast_group_set(self, group_id: int, replicas: list[tuple[int, int]]) -> None:
        """Create or replace a multicast group: (egress port, egress_rid) pairs."""
        raise NotImplementedError

    def mcast_group_delete(self, group_id: int) -> None:
        """Raises EntryNotFound."""
        raise NotImplementedError

    def mcast_groups(self) -> dict[int, list[tuple[int, int]]]:
        raise NotImplementedError

    def clone_session_set(
        self,
        session_id: int,
        replicas: list[tuple[int, int]],
        class_of_service: int = 0,
        packet_length_bytes: int = 0,
    ) -> None:
        """Create or replace a clone session; packet_length_bytes > 0 truncates clones."""
        raise NotImplementedError

    def clone_session_delete(self, session_id: int) -> None:
        """Raises EntryNotFound."""
        raise NotImplementedError

    def clone_sessions(self) -> list[CloneSession]:
        raise NotImplementedError
