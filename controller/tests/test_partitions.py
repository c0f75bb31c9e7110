"""partitions.conf in OpenSM's grammar, P_Key tables with the membership bit, valid P_Keys per port."""

from __future__ import annotations

import pytest
from ibsm.partitions import (
    MANAGEMENT_PKEYS,
    PartitionError,
    check_partitions,
    parse_partitions,
    pkey_tables,
    valid_pkeys,
)
from ibsm.topology import Member, Topology

CONF = """\
# an OpenSM file, with flags we ignore
Default=0x7fff, ipoib, defmember=full : ALL, SELF ;
storage=0x8002, mtu=4, rate=7 : 0x000000fffe000000=full,
    0x000000fffe000001 ;   # limited by default, as OpenSM
compute=0x0001, defmember=full, secmode=sth-aead : 0x000000fffe000000, 0x000000fffe000002=limited ;
empty=0x0010 : ;
"""


def test_grammar() -> None:
    default, storage, compute, empty = parse_partitions(CONF)
    assert (default.name, default.pkey, default.members) == ("Default", 0x7FFF,
                                                             (Member("ALL", True), Member("SELF", True)))
    assert storage.pkey == 0x0002  # the membership bit of the written P_Key is not part of the base
    assert storage.members == (Member(0xFFFE000000, True), Member(0xFFFE000001, False))
    assert compute.security == 2 and compute.members[1] == Member(0xFFFE000002, False)
    assert empty.members == ()


def test_tables_carry_membership_in_the_top_bit(fat_tree: Topology) -> None:
    tables = pkey_tables(fat_tree, parse_partitions(CONF))
    assert tables["h1"] == [0x8001, 0x8002, 0xFFFF]
    assert tables["h2"] == [0x0002, 0xFFFF]
    assert tables["h3"] == [0x0001, 0xFFFF]
    assert tables["h4"] == [0xFFFF]


def test_valid_pkeys_per_port(fat_tree: Topology) -> None:
    valid = valid_pkeys(fat_tree, pkey_tables(fat_tree, parse_partitions(CONF)))
    assert valid[("s1", 2)] == frozenset({0x0002, *MANAGEMENT_PKEYS})  # h2's port
    assert valid[("s3", 1)] == frozenset({0x8001, 0x8002, 0x0002, 0x0001, *MANAGEMENT_PKEYS})  # fabric


@pytest.mark.parametrize(("text", "expected"), [
    ("a=0x1 : 0x5 \n", "partitions.conf:1:9: syntax error near"),
    ("a=0x1, defmember=owner : ALL ;", "partitions.conf:1:1: defmember=owner: expected full, limited"),
    ("a=0x1 : 0x5=root ;", "partitions.conf:1:9: 0x5=root: expected full, limited or both"),
    ("a=0x1 : EVERYONE ;", "partitions.conf:1:9: EVERYONE: expected a port GUID, ALL"),
    ("a=0x1, secmode=rot13 : ALL ;", "partitions.conf:1:1: secmode=rot13: expected one of none"),
    ("a=0x1 : ALL ;\nb : ALL ;", "partitions.conf:2:3: syntax error"),
])
def test_errors_name_line_and_column(text: str, expected: str) -> None:
    with pytest.raises(PartitionError) as err:
        parse_partitions(text)
    assert str(err.value).startswith(expected)


def test_members_must_exist(fat_tree: Topology) -> None:
    with pytest.raises(PartitionError, match="no host has port GUID 0x0000000000000042"):
        check_partitions(parse_partitions("x=0x3 : 0x42 ;"), fat_tree)
    with pytest.raises(PartitionError, match="P_Key 0x0003 is already x"):
        check_partitions(parse_partitions("x=0x3 : ALL ;\ny=0x8003 : ALL ;"), fat_tree)


def test_every_host_keeps_the_default_partition(fat_tree: Topology) -> None:
    """A file without Default still leaves each host a limited member: the SM's MADs use 0xFFFF."""
    tables = pkey_tables(fat_tree, parse_partitions("compute=0x0001 : 0x000000fffe000000=full ;"))
    assert tables["h1"] == [0x7FFF, 0x8001]
    assert tables["h2"] == [0x7FFF]
