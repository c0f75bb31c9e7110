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
meaning. Additions are noted as "(added: ...)" in the docstrings. (moved:) ``Switch.load`` is
``p4switch.engine.loader.load``: the interface no longer imports its implementation. (removed:)
``Switch.table_clear``, which nothing called.
"""

from __future__ import annotations

import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field

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
MAX_PASSES = 16
"""resubmits and recirculations of one received frame, on both back ends: a program that always asks for
another pass has the frame dropped (counted) instead of looping forever as BMv2 would"""

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


class Switch(ABC):
    """One v1model switch running one program: the interface every engine back end implements.

    This class is the whole contract between the engine and its callers (the P4Runtime server, the CLI,
    the STF driver, the tests): the data plane (``process``) and the control plane (tables, action
    profiles and selectors, counters, meters, registers, the packet replication engine), all by P4Info
    name. A back end subclasses it and implements every abstract method; p4switch.engine.loader.load is
    the one place that picks a back end for a program. Nothing here knows an implementation.

    Cost: the calls that name one entry by its key (``table_insert``, ``table_modify``,
    ``table_delete``, ``table_entry``, the direct counter/meter calls, ``member``/``group`` and their
    writes) must not scan the table: the P4Runtime server's writes and reads of one entry are these calls,
    and a controller may hold tens of thousands of entries. Listing calls (``table_entries``,
    ``members``, ``groups``) are for wildcard reads.

    Attributes:
        digest_sink: called for each ``digest()`` a packet triggers; None drops digests (they are counted
            in ``stats['digest']`` either way).
        drop_port: 511, egress_spec value that drops (as BMv2 with 9-bit ports).
        stats: counters of the pipeline: ``rx``, ``tx``, ``dropped``, ``parser_error:<ErrorName>`` (e.g.
            ``parser_error:PacketTooShort``), ``digest``, ``clone``, ``mcast_copies``; missing key = 0.
            (added:) ``clone_no_session`` (clone to a session that does not exist), ``assert_failed``,
            ``parser_reject`` (the program's own ``transition reject``; the packet goes on to ingress),
            ``internal_error`` (an engine bug caught by process(); the frame is dropped and logged),
            ``resubmit`` and ``recirculate`` (passes run), ``resubmit_limit`` and ``recirculate_limit``
            (frames dropped after MAX_PASSES passes).
        lock: the lock described in the module docstring.
        log: where per-packet TRACE lines and warnings go.
    """

    drop_port: int = DROP_PORT
    engine: str = "python"
    """(added:) the back end running the program: "python" or "native"."""
    engine_note: str | None = None
    """(added:) why the program runs on the Python engine when the native one was asked for."""

    def __init__(self) -> None:
        # Back ends are made by p4switch.engine.loader.load(); this sets up the common attributes.
        self.digest_sink: DigestSink | None = None
        self.stats: dict[str, int] = {}
        self.lock = threading.Lock()
        self.log = logging.getLogger("p4switch.engine")

    # ----------------------------------------------------------------------------------- data plane
    @abstractmethod
    def process(self, ingress_port: int, frame: bytes) -> list[tuple[int, bytes]]:
        """Run the whole v1model pipeline for one frame and return every frame that leaves, as
        (egress port, bytes): the unicast/multicast copies and clones, and frames to the CPU port (the
        runtime strips their @controller_header packet_in header). Never raises for any frame: parser
        errors and drops are counted in ``stats``. The CPU port is an ordinary port number here."""

    # --------------------------------------------------------------------------------------- tables
    @abstractmethod
    def table_insert(self, table: str, entry: TableEntry) -> None:
        """Add an entry. Raises UnknownName, EntryExists, InvalidEntry, TableFull."""

    @abstractmethod
    def table_modify(self, table: str, entry: TableEntry) -> None:
        """Replace the action (and, when given, counter data / meter config) of the entry with the same
        key. Raises UnknownName, EntryNotFound, InvalidEntry."""

    @abstractmethod
    def table_delete(self, table: str, entry: TableEntry) -> None:
        """Remove the entry with the same key (match + priority); its action is ignored.
        Raises UnknownName, EntryNotFound."""

    @abstractmethod
    def table_entry(self, table: str, entry: TableEntry) -> TableEntry:
        """(added:) The installed entry with the key of ``entry`` (match + priority; its action is
        ignored), with direct counter/meter state, as ``table_entries()`` shows it. Raises UnknownName,
        EntryNotFound, InvalidEntry (malformed key)."""

    @abstractmethod
    def table_entries(self, table: str) -> list[TableEntry]:
        """Every entry (const ones included), in insertion order, with direct counter/meter state."""

    @abstractmethod
    def table_set_default(self, table: str, action: ActionCall) -> None:
        """Set the default (miss) action. Raises ConstDefault, UnknownName, InvalidEntry."""

    @abstractmethod
    def table_reset_default(self, table: str) -> None:
        """Restore the default action the program declares."""

    @abstractmethod
    def table_get_default(self, table: str) -> ActionCall:
        """The current default action."""

    # ---------------------------------------------------------------- action profiles and selectors
    @abstractmethod
    def member_insert(self, profile: str, member_id: int, action: ActionCall) -> None:
        """Raises UnknownName, EntryExists, InvalidEntry."""

    @abstractmethod
    def member_modify(self, profile: str, member_id: int, action: ActionCall) -> None:
        """Raises UnknownName, EntryNotFound, InvalidEntry."""

    @abstractmethod
    def member_delete(self, profile: str, member_id: int) -> None:
        """Raises UnknownName, EntryNotFound, InvalidEntry (member still used by a group or entry)."""

    @abstractmethod
    def member(self, profile: str, member_id: int) -> Member:
        """(added:) One member. Raises UnknownName, EntryNotFound."""

    @abstractmethod
    def members(self, profile: str) -> list[Member]:
        """Every member of the profile."""

    @abstractmethod
    def group_insert(
        self, profile: str, group_id: int, members: list[tuple[int, int]], max_size: int = 0
    ) -> None:
        """members: (member_id, weight) pairs, weight >= 1. Raises UnknownName, EntryExists,
        InvalidEntry (unknown member, too many members, profile is not a selector)."""

    @abstractmethod
    def group_modify(
        self, profile: str, group_id: int, members: list[tuple[int, int]], max_size: int = 0
    ) -> None:
        """Replace a group's members. Raises UnknownName, EntryNotFound, InvalidEntry."""

    @abstractmethod
    def group_delete(self, profile: str, group_id: int) -> None:
        """Raises UnknownName, EntryNotFound, InvalidEntry (group still used by an entry)."""

    @abstractmethod
    def group(self, profile: str, group_id: int) -> Group:
        """(added:) One group. Raises UnknownName, EntryNotFound."""

    @abstractmethod
    def groups(self, profile: str) -> list[Group]:
        """Every group of the selector."""

    # ----------------------------------------------------------------- counters, meters, registers
    @abstractmethod
    def counter_read(self, name: str, index: int) -> tuple[int, int]:
        """(bytes, packets) of one cell of an indirect counter. Raises UnknownName, InvalidEntry
        (index out of range)."""

    @abstractmethod
    def counter_write(self, name: str, index: int, byte_count: int, packet_count: int) -> None:
        """Set one cell of an indirect counter."""

    @abstractmethod
    def counter_size(self, name: str) -> int:
        """Number of cells (for wildcard reads)."""

    @abstractmethod
    def direct_counter_read(self, table: str, entry: TableEntry) -> tuple[int, int]:
        """(bytes, packets) of the direct counter of the entry with that key. Raises EntryNotFound."""

    @abstractmethod
    def direct_counter_write(self, table: str, entry: TableEntry, byte_count: int, packet_count: int) -> None:
        """Set the direct counter of the entry with that key. Raises EntryNotFound."""

    @abstractmethod
    def meter_set(self, name: str, index: int, config: MeterConfig | None) -> None:
        """Configure one cell of an indirect meter; None resets it (every packet GREEN)."""

    @abstractmethod
    def meter_get(self, name: str, index: int) -> MeterConfig | None:
        """The configuration of one cell (None: unconfigured)."""

    @abstractmethod
    def meter_size(self, name: str) -> int:
        """Number of cells (for wildcard reads)."""

    @abstractmethod
    def direct_meter_set(self, table: str, entry: TableEntry, config: MeterConfig | None) -> None:
        """Configure the direct meter of the entry with that key. Raises EntryNotFound, InvalidEntry."""

    @abstractmethod
    def direct_meter_get(self, table: str, entry: TableEntry) -> MeterConfig | None:
        """The direct meter configuration of the entry with that key. Raises EntryNotFound."""

    @abstractmethod
    def register_read(self, name: str, index: int) -> int:
        """One cell. Raises UnknownName, InvalidEntry (index out of range)."""

    @abstractmethod
    def register_write(self, name: str, index: int, value: int) -> None:
        """Value is truncated to the register's width."""

    @abstractmethod
    def register_size(self, name: str) -> int:
        """Number of cells (for wildcard reads)."""

    @abstractmethod
    def value_set_set(self, name: str, members: list[tuple[int, ...]]) -> None:
        """Replace the members of a parser value set (a tuple of one value per field of its type, one
        for bit<W>). Raises UnknownName, InvalidEntry (too many members, a value too wide)."""

    @abstractmethod
    def value_set_get(self, name: str) -> list[tuple[int, ...]]:
        """The members of a parser value set."""

    # ----------------------------------------------------------------- packet replication engine
    @abstractmethod
    def mcast_group_set(self, group_id: int, replicas: list[tuple[int, int]]) -> None:
        """Create or replace a multicast group: (egress port, egress_rid) pairs."""

    @abstractmethod
    def mcast_group_delete(self, group_id: int) -> None:
        """Raises EntryNotFound."""

    @abstractmethod
    def mcast_groups(self) -> dict[int, list[tuple[int, int]]]:
        """Every multicast group and its replicas."""

    @abstractmethod
    def clone_session_set(
        self,
        session_id: int,
        replicas: list[tuple[int, int]],
        class_of_service: int = 0,
        packet_length_bytes: int = 0,
    ) -> None:
        """Create or replace a clone session; packet_length_bytes > 0 truncates clones."""

    @abstractmethod
    def clone_session_delete(self, session_id: int) -> None:
        """Raises EntryNotFound."""

    @abstractmethod
    def clone_sessions(self) -> list[CloneSession]:
        """Every clone session."""
