"""Stateful ingress filtering (seed 000 sec. 5.3, DESIGN 6 step 2 and 7): a pure state machine.

The SIF engine never talks to a switch: each input (a traced bad-P_Key trap, a poll of a port's Ingress
P_Key Violation Counter) returns the list of :class:`Action` the core must write, in order. Time comes
from an injectable clock, so tests drive the quiet period with a fake one.

Per port: off (no entry) -> invalid-list on the first trap traced to it -> valid-list once the invalid
list would outgrow the port's valid P_Keys -> off again, entries flushed and counter reset, after the
counter has not moved for ``quiet_period`` seconds. A trap for a P_Key already filtered on that port
changes nothing (deduplicated).
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from dataclasses import dataclass, field

PortId = tuple[str, int]  # (switch name, port number)

OFF, INVALID_LIST, VALID_LIST = "off", "invalid-list", "valid-list"


@dataclass(frozen=True)
class SifOptions:
    """How SIF behaves: seconds without new violations before a port's filter goes, how often the
    counters are polled, and the most invalid P_Keys a port may list before valid-list takes over
    (None: the size of the port's valid list, as the seed says)."""

    quiet_period: float = 5.0
    poll_interval: float = 0.5
    max_invalid: int | None = None


class ActionKind(enum.StrEnum):
    """What one SIF action does to a port (its value is the name events and logs use)."""

    INSTALL_INVALID = "install-invalid"
    REMOVE_INVALID = "remove-invalid"
    INSTALL_VALID = "install-valid"
    REMOVE_VALID = "remove-valid"
    SET_MODE = "set-mode"
    RESET_COUNTER = "reset-counter"
    DEDUPLICATED = "deduplicated"
    """a trap that needed nothing: reported, never written"""


@dataclass(frozen=True)
class Action:
    """One step for the core, in order; which P4Runtime writes it takes is ibsm.entries' decision
    (:func:`ibsm.entries.sif_writes`)."""

    kind: ActionKind
    port: PortId
    pkeys: tuple[int, ...] = ()
    mode: str = OFF


@dataclass
class PortFilter:
    """What SIF has installed on one port and how its violation counter moved."""

    mode: str
    invalid: set[int] = field(default_factory=set)
    valid: frozenset[int] = frozenset()
    count: int = 0
    last_change: float = 0.0
    since: float = 0.0


class Sif:
    """The SIF state of every port; ``valid_of`` gives a port's valid P_Keys (partitions module)."""

    def __init__(self, options: SifOptions, valid_of: Callable[[PortId], frozenset[int]],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.options = options
        self.valid_of = valid_of
        self.clock = clock
        self.ports: dict[PortId, PortFilter] = {}

    def watched(self) -> list[PortId]:
        """Ports with a filter: the ones whose counter must be polled."""
        return sorted(self.ports)

    def on_trap(self, port: PortId, pkey: int) -> list[Action]:
        """A bad-P_Key trap traced to ``port``: install, extend, switch to valid-list, or deduplicate."""
        now = self.clock()
        state = self.ports.get(port)
        if state is None:
            self.ports[port] = PortFilter(INVALID_LIST, {pkey}, last_change=now, since=now)
            return [Action(ActionKind.INSTALL_INVALID, port, (pkey,)),
                    Action(ActionKind.SET_MODE, port, mode=INVALID_LIST)]
        if state.mode == VALID_LIST or pkey in state.invalid:
            return [Action(ActionKind.DEDUPLICATED, port, (pkey,), state.mode)]
        state.last_change = now
        limit = self.options.max_invalid
        valid = self.valid_of(port)
        if len(state.invalid) + 1 > (len(valid) if limit is None else limit):
            dropped = tuple(sorted(state.invalid))
            state.mode, state.invalid, state.valid = VALID_LIST, set(), valid
            return [Action(ActionKind.INSTALL_VALID, port, tuple(sorted(valid))),
                    Action(ActionKind.SET_MODE, port, mode=VALID_LIST),
                    Action(ActionKind.REMOVE_INVALID, port, dropped)]
        state.invalid.add(pkey)
        return [Action(ActionKind.INSTALL_INVALID, port, (pkey,))]

    def on_counter(self, port: PortId, count: int) -> list[Action]:
        """A poll of ``port``'s violation counter; flushes the port once it has been quiet long enough."""
        state = self.ports.get(port)
        if state is None:
            return []
        now = self.clock()
        if count != state.count:
            state.count, state.last_change = count, now
            return []
        if now - state.last_change < self.options.quiet_period:
            return []
        del self.ports[port]
        actions = [Action(ActionKind.SET_MODE, port, mode=OFF)]
        if state.invalid:
            actions.append(Action(ActionKind.REMOVE_INVALID, port, tuple(sorted(state.invalid))))
        if state.mode == VALID_LIST:
            actions.append(Action(ActionKind.REMOVE_VALID, port, tuple(sorted(state.valid))))
        return actions + [Action(ActionKind.RESET_COUNTER, port)]

    def adopt(self, port: PortId, mode: str, invalid: set[int], count: int) -> None:
        """Take over a filter found on a switch (SM restart): watch it as if SIF had installed it now."""
        now = self.clock()
        self.ports[port] = PortFilter(mode, set(invalid), self.valid_of(port) if mode == VALID_LIST else
                                      frozenset(), count, now, now)
