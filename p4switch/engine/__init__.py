"""The p4switch execution engine: loads the IR JSON, compiles it to Python and runs the v1model pipeline.

Public API: p4switch.engine.api (re-exported here)."""

from p4switch.engine.api import (
    DROP_PORT,
    TRACE,
    ActionCall,
    CloneSession,
    ConstDefault,
    EngineError,
    EntryExists,
    EntryNotFound,
    Exact,
    Group,
    GroupRef,
    InvalidEntry,
    Lpm,
    Match,
    Member,
    MemberRef,
    MeterConfig,
    Optional_,
    ProgramError,
    Range,
    Replica,
    Switch,
    TableEntry,
    TableFull,
    Ternary,
    UnknownName,
)

__all__ = [
    "DROP_PORT", "TRACE", "ActionCall", "CloneSession", "ConstDefault", "EngineError", "EntryExists",
    "EntryNotFound", "Exact", "Group", "GroupRef", "InvalidEntry", "Lpm", "Match", "Member", "MemberRef",
    "MeterConfig", "Optional_", "ProgramError", "Range", "Replica", "Switch", "TableEntry", "TableFull",
    "Ternary", "UnknownName",
]
