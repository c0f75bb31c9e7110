"""OpenSM's own partition-config.txt (../shared/opensm): every example in it parses and means what the
document says (and what OpenSM's parser does with it).

The document is read from beside the project, never copied into it; without it these tests are skipped
and say why. The same grammar is covered by the project's own files in test_partitions.py.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from ibsm.partitions import parse_partitions, pkey_tables
from ibsm.topology import McGroup, Member, Partition, Topology

DOC = Path(__file__).resolve().parents[2].parent / "shared" / "opensm" / "partition-config.txt"

pytestmark = pytest.mark.skipif(not DOC.is_file(), reason=f"OpenSM's partition-config.txt is not at {DOC}")


def _underline(line: str) -> bool:
    return bool(line.strip()) and set(line.strip()) <= set("-=")


def _section(title: str) -> str:
    """The text under a heading of the document (a line, then a line of '-' or '=')."""
    lines = DOC.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == title and _underline(lines[i + 1]))
    end = next((i for i in range(start + 2, len(lines) - 1) if lines[i].strip() and _underline(lines[i + 1])),
               len(lines))
    return "\n".join(lines[start + 2:end])


def _examples() -> list[str]:
    """The paragraphs of the Examples section."""
    return [p for p in re.split(r"\n\s*\n", _section("Examples:")) if p.strip()]


def _parse(text: str) -> list[Partition]:
    warnings: list[str] = []
    parts = parse_partitions(text, "partition-config.txt", warnings.append)
    assert warnings == []  # OpenSM's examples draw no warning
    return parts


def _rule(pattern: str) -> str:
    """The one line of the document matching ``pattern`` (its rules outside the Examples section)."""
    (line,) = [line.strip() for line in DOC.read_text().splitlines() if re.fullmatch(pattern, line.strip())]
    return line


def test_the_document_has_the_examples_we_check() -> None:
    """Five paragraphs of examples: if OpenSM's document changes, these tests must be looked at again."""
    examples = _examples()
    assert len(examples) == 5
    assert all(";" in e for e in examples)


def test_default_partition_examples(fat_tree: Topology) -> None:
    """"Default=0x7fff : ALL, SELF=full ;": every port limited (the default membership), the SM full."""
    first, second = (line for line in _examples()[0].splitlines() if line.strip())
    (default,) = _parse(first)
    assert (default.name, default.pkey) == ("Default", 0x7FFF)
    assert default.members == (Member("ALL", False), Member("SELF", True))
    (default,) = _parse(second)
    assert default.members == (Member("ALL", False), Member("ALL_SWITCHES", True), Member("SELF", True))
    assert all(table == [0x7FFF] for table in pkey_tables(fat_tree, [default]).values())
    (merged,) = _parse(_examples()[0])  # both lines in one file: one partition
    assert merged.members == (Member("ALL", False), Member("SELF", True), *default.members)


def test_new_partition_example() -> None:
    """No P_Key: OpenSM generates the lowest free one; ipoib: the broadcast group with the defaults
    (rate 3, mtu 4, sl 0, scope 2, Q_Key 0x0b1b); "limi" is limited, a GUID without membership limited."""
    default, new = _parse(_examples()[1])
    assert (new.name, new.pkey, new.ipoib) == ("NewPartition", 0x0001, True)
    assert new.members == (Member(0x123456, True), Member(0x3456789034, False), Member(0x2134AF2306, False))
    assert new.groups == (McGroup("ff12:401b:8001::ffff:ffff", 0x8001, 0x0B1B, mtu=4, rate=3, sl=0, scope=2),)
    assert default.members == (Member("ALL", False), Member("SELF", True))  # no rule for Default


def test_repeated_partition_example() -> None:
    """Two definitions of 0x300 are one partition. As OpenSM adds ports in file order, the later
    ALL=limited also covers the SM's port: SELF ends limited too."""
    _, yet = _parse(_examples()[2])
    assert (yet.name, yet.pkey) == ("YetAnotherOne", 0x300)
    assert yet.members == (Member("SELF", True), Member("ALL", False))


def test_shareio_example() -> None:
    """Five definitions of ShareIO merge; defmember gives the membership of GUIDs without one, and the
    document's own comments name the ports that end limited."""
    example = _examples()[3]
    _, share = _parse(example)
    assert (share.name, share.pkey) == ("ShareIO", 0x80)
    membership = {m.guid: m.full for m in share.members}
    assert len(share.members) == len(membership) == 13  # 0x123451 .. 0x12345d, each once
    limited = {int(g, 16) for line in example.splitlines() if "will be limited" in line
               for g in re.findall(r"0x[0-9a-fA-F]+", line)}
    assert limited == {0x123453, 0x123454, 0x123456, 0x123457}
    assert sorted(g for g, full in membership.items() if not full) == sorted(limited | {0x12345C})
    assert all(membership[g] for g in (0x123451, 0x123452, 0x123455, 0x123458, 0x123459, 0x12345A, 0x12345B,
                                       0x12345D))


def test_multicast_groups_example(fat_tree: Topology) -> None:
    """Default with ipoib and mgid lines: IP groups get the P_Key in their MGID and Q_Key 0x0b1b; the
    last group keeps its own Q_Key, MTU and SL; every port a full member."""
    (default,) = _parse(_examples()[4])
    assert default.members == (Member("ALL", True),) and default.ipoib
    assert default.groups == (
        McGroup("ff12:401b:ffff::ffff:ffff", 0xFFFF, 0x0B1B),  # the IPoIB broadcast group
        McGroup("ff12:401b:ffff::707", 0xFFFF, 0x0B1B, sl=1),
        McGroup("ff12:601b:ffff::16", 0xFFFF, 0x0B1B),
        McGroup("ff12:401b:ffff::16", 0xFFFF, 0x0B1B),
        McGroup("ff12:601b:ffff::2", 0xFFFF, 0x0B1B),
        McGroup("ff12::1", 0xFFFF, 0xDEADBEEF, mtu=2, rate=3, sl=1),
    )
    assert all(table == [0xFFFF] for table in pkey_tables(fat_tree, [default]).values())


def test_all_examples_as_one_file() -> None:
    """The Examples section as one partitions.conf: one partition per P_Key."""
    parts = _parse(_section("Examples:"))
    assert [(p.name, p.pkey) for p in parts] == [("Default", 0x7FFF), ("NewPartition", 0x0001),
                                                 ("YetAnotherOne", 0x300), ("ShareIO", 0x80)]
    assert parts[0].members[-1] == Member("ALL", True) and len(parts[0].groups) == 6


def test_rules_the_document_states() -> None:
    """The pre-partition-manager rule of the Note, and the rule OpenSM applies without one for Default."""
    (old,) = _parse(_rule(r"Default=0x7fff,ipoib:ALL=full;"))
    assert old.members == (Member("ALL", True),)
    assert [g.mgid for g in old.groups] == ["ff12:401b:ffff::ffff:ffff"]
    (implied,) = _parse(_rule(r"Default=0x7fff : ALL=limited, SELF=full ;"))
    assert _parse("") == [implied]
    (everyone,) = _parse(_rule(r"Default=0x7fff : ALL=full ;"))
    assert everyone.members == (Member("ALL", True),)
