"""The shared names agree with what they name: the P4 object names with the committed P4Info, the
constants with defines.p4, the mode names with the wire values. A renamed table or a re-numbered constant
fails here, not at a running switch."""

from __future__ import annotations

from pathlib import Path

import finsy as fy
import pytest
from ibsec import layers, names
from ibsec.names import Mode, Policy


def p4info_names() -> set[str]:
    """Every table, action, counter, meter and match field name of the committed P4Info."""
    schema = fy.P4Schema(names.P4INFO)
    found: set[str] = set()
    for table in schema.tables:
        found.add(table.name)
        found.update(field.name for field in table.match_fields)
    found.update(action.name for action in schema.actions)
    found.update(counter.name for counter in schema.counters)
    found.update(meter.name for meter in schema.meters)
    return found


P4_NAMES = sorted(name for name, value in vars(names).items()
                  if name.isupper() and isinstance(value, str) and ("." in value or value == "NoAction"))


def test_the_module_names_the_p4_objects_the_sm_writes() -> None:
    assert {"PORT_ROLES", "DROPS", "PUNT_METER", "FILTER_VALID_LIST", "P_KEY", "NO_ACTION"} <= set(P4_NAMES)


@pytest.mark.parametrize("constant", P4_NAMES)
def test_every_p4_object_name_is_in_the_committed_p4info(constant: str) -> None:
    assert getattr(names, constant) in p4info_names()


def test_constants_are_read_from_defines_p4_by_name(tmp_path: Path) -> None:
    defines = tmp_path / "defines.p4"
    defines.write_text("const port_t CPU_PORT = 255;\n  const bit<32> DROP_REASONS = 0x0_8;\n"
                       "// const x Y = 1;\n")
    assert names.p4_constants(defines) == {"CPU_PORT": 255, "DROP_REASONS": 8}
    assert names.CPU_PORT == names.p4_const("CPU_PORT") == 255
    with pytest.raises(KeyError, match="NO_SUCH_CONSTANT"):
        names.p4_const("NO_SUCH_CONSTANT")


def test_mode_names_are_indexed_by_their_wire_value() -> None:
    assert names.SECURITY_MODES == ("none", "icrc-mac", "sth-aead", "sth-auth", "sth-hdr")
    assert [names.SECURITY_MODES.index(m.label) for m in Mode] == [0, 1, 2, 3, 4]
    assert [m for m in Mode if m.has_sth] == [Mode.STH_AEAD, Mode.STH_AUTH, Mode.STH_HDR]
    assert [m for m in Mode if m.encrypts] == [Mode.ICRC_MAC, Mode.STH_AEAD]
    assert [m for m in Mode if m.authenticates_payload] == [Mode.ICRC_MAC, Mode.STH_AEAD, Mode.STH_AUTH]
    assert layers.BTH(secmode=2).sprintf("%secmode%") == "sth-aead"  # the dissector speaks the same names


def test_policy_names() -> None:
    assert names.POLICIES == ("none", "dt", "if", "sif")
    assert Policy("sif") is Policy.SIF and Policy.SIF == "sif"
