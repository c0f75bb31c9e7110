"""partitions.conf in OpenSM's grammar, P_Key tables with the membership bit, valid P_Keys per port."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ibsm.partitions import (
    MANAGEMENT_PKEYS,
    PartitionError,
    check_partitions,
    describe,
    load_partitions,
    members_of,
    parse_partitions,
    pkey_tables,
    valid_pkeys,
)
from ibsm.topology import McGroup, Member, Partition, Topology

from .conftest import DATA

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
    ("a=0x1 : EVERYONE ;", "partitions.conf:1:9: EVERYONE: expected a port GUID, ALL"),
    ("a=0x1, secmode=rot13 : ALL ;", "partitions.conf:1:8: secmode=rot13: expected one of none"),
    # what makes OpenSM refuse the file ("PARSE ERROR" in osm_prtn_config.c)
    ("Default=0x7fff,\n  ipoib : ALL ;", "partitions.conf:1:16: expected ':' after the partition definition"),
    ("a=1 : ALL ;\n;", "partitions.conf:2:1: expected ':'"),  # an empty definition
    ("a=0x1q : ALL ;", "partitions.conf:1:3: P_Key 0x1q: not a number"),
    ("a= : ALL ;", "partitions.conf:1:2: empty P_Key"),
    ("1x : ALL ;", "partitions.conf:1:1: P_Key 1x: not a number"),  # a leading digit: the P_Key
    ("a=1 : 0x5, 0 ;", "partitions.conf:1:12: 0: expected a port GUID"),  # GUID 0
    ("a=1 :\n  0x5 0x6 ;", "partitions.conf:2:3: 0x5 0x6: expected a port GUID"),  # no comma
    ("a=1 : 0x5, 0x12345678901234567 ;", "partitions.conf:1:12: 0x12345678901234567: a port GUID has 64"),
    ("a=1 : ALL : 0x5 ;", "partitions.conf:1:11: syntax error near"),
    # OpenSM's man page writes one ShareIO line with ':' for ',' (OpenSM refuses it: "bad PortGUID")
    ("ShareIO = 0x80 : defmember=limited : 0x123456 ;", "partitions.conf:1:18: defmember: expected a port"),
    ("a=1 : ALL ;\nb=0x2 : 0x5\nc=0x3 : 0x6 ;", "partitions.conf:3:1: c: expected a port GUID"),  # no ';'
    ("a=1, secmode=sth-aead : ALL ;\na=1, secmode=icrc-mac : 0x5 ;",
     "partitions.conf:2:1: partition a (0x0001): secmode differs from the one given on line 1"),
])
def test_errors_name_line_and_column(text: str, expected: str) -> None:
    with pytest.raises(PartitionError) as err:
        parse_partitions(text)
    assert str(err.value).startswith(expected)


def test_members_must_exist(fat_tree: Topology) -> None:
    with pytest.raises(PartitionError, match="no host has port GUID 0x0000000000000042"):
        check_partitions(parse_partitions("x=0x3 : 0x42 ;"), fat_tree)
    twice = [Partition("x", 0x3, (Member("ALL", False),)), Partition("y", 0x3, ())]  # a topology file's
    with pytest.raises(PartitionError, match="P_Key 0x0003 is already x"):
        check_partitions(twice, fat_tree)
    check_partitions(parse_partitions("x=0x3 : 0x000000fffefffffe, 0x000000fffe000003 ;"), fat_tree)  # SM, h4


def test_every_host_keeps_the_default_partition(fat_tree: Topology) -> None:
    """A file without Default still leaves each host a limited member: the SM's MADs use 0xFFFF."""
    tables = pkey_tables(fat_tree, parse_partitions("compute=0x0001 : 0x000000fffe000000=full ;"))
    assert tables["h1"] == [0x7FFF, 0x8001]
    assert tables["h2"] == [0x7FFF]


def _parse(text: str) -> tuple[list[Partition], list[str]]:
    warnings: list[str] = []
    return parse_partitions(text, warn=warnings.append), warnings


@pytest.mark.parametrize(("text", "expected"), [
    # what OpenSM only logs ("PARSE WARN", or an error it skips a group for): read as OpenSM reads it
    ("a=0x1 : 0x5 \n", "partitions.conf:2:1: partition a: no ';' before the end of the file"),
    ("a=0x1, defmember=owner : ALL ;", "partitions.conf:1:18: defmember=owner: not full, limited or both"),
    ("a=0x1, defmember : ALL ;", "partitions.conf:1:8: defmember needs a value"),
    ("a=0x1 : 0x5=root ;", "partitions.conf:1:13: 0x5=root: not full, limited or both - read as limited"),
    ("a=0x1 : 0x5= ;", "partitions.conf:1:13: 0x5=: empty membership, read as full"),
    ("a=0x1, pci=1 : ALL ;", "partitions.conf:1:8: unknown partition flag 'pci' - ignored"),
    ("a=0x1, , ipoib : ALL ;", "partitions.conf:1:6: empty partition flag - ignored"),
    ("a=0x1, mtu=4k : ALL ;", "partitions.conf:1:12: mtu=4k: suspicious value, read as 4"),
    ("a=0x1, mtu=2048 : ALL ;", "partitions.conf:1:12: mtu=2048: needs a value in 1-0x5 - skipped"),
    ("a=0x1, scope=0 : ALL ;", "partitions.conf:1:14: scope=0: needs a value in 1-0xf - skipped"),
    ("a=0x1, sl=3x : ALL ;", "partitions.conf:1:11: sl=3x: needs a value in 0-0xf - skipped"),
    ("a=0x1, Q_Key : ALL ;", "partitions.conf:1:8: Q_Key=: needs a value in 0-0xffffffff - using 0"),
    ("a=0x18001 : ALL ;", "partitions.conf:1:3: P_Key 0x18001 does not fit 16 bits: OpenSM keeps 0x8001"),
    ("a=0x5 : ALL ;\nb=0x5 : 0x6 ;", "partitions.conf:2:1: P_Key 0x0005 is already partition a (line 1): b "
                                      "merged into it"),
    ("a=1, ipoib :\n mgid=fe80::1 \n ALL ;", "partitions.conf:2:2: mgid fe80::1: not a multicast GID"),
    ("a=1 :\n mgid=ff12::1, ALL=full\n ;", "partitions.conf:2:16: unknown multicast group flag 'ALL'"),
    ("a=1 :\n mgid=ff12::1,, sl=1\n ;", "partitions.conf:2:14: empty multicast group flag - ignored"),
    ("a=1 :\n mgid=ff12:401b:1234::1\n ;", "partitions.conf:2:2: mgid ff12:401b:1234::1: P_Key bits 0x1234 "
                                           "are neither 0 nor the partition's 0x8001 - group skipped"),
    ("a=1 :\n mgid=ff12:601b::1, rate=7\n ;", "partitions.conf:2:2: mgid ff12:601b::1: IP group rate 7 "
                                              "differs from the partition's rate 3 - group skipped"),
    ("a=1 : mgid=ff12::1 ;\nb=2 : mgid=ff12::1 ;", "partitions.conf:2:7: mgid ff12::1 is already a group "
                                                    "of partition a - kept there"),
])
def test_warnings_name_line_and_column(text: str, expected: str) -> None:
    _, warnings = _parse(text)
    assert len(warnings) == 1 and warnings[0].startswith(expected), warnings


def test_what_warned_files_mean() -> None:
    """After the warning, the file means what it means to OpenSM."""
    (_, a), _ = _parse("a=0x1, defmember=owner, mtu=2048, Q_Key, ipoib : 0x5=root, 0x6= ;")
    assert a.members == (Member(0x5, False), Member(0x6, True))  # limited: defmember was skipped
    assert a.groups == (McGroup("ff12:401b:8001::ffff:ffff", 0x8001, 0x0B1B),)  # mtu 4 kept, IPoIB Q_Key
    (_, b), _ = _parse("b=0x1, mtu=4k, sl=3x, scope=0 :\n mgid=ff12::1, ALL=full, sl=16\n ALL ;")
    assert b.groups == (McGroup("ff12::1", 0x8001, 0, mtu=4, sl=0),)
    assert b.members == (Member("ALL", False),)
    (_, c), _ = _parse("c=2 :\n mgid=ff12:401b:1234::1\n mgid=fe80::1\n mgid=ff12:401b::5, mtu=5\n ALL ;")
    assert c.groups == () and c.members == (Member("ALL", False),)


GRAMMAR = DATA / "partitions" / "grammar.conf"
H1, H2, H3, H4 = (0x000000FFFE000000 + i for i in range(4))


def test_every_form_of_the_grammar() -> None:
    """controller/tests/data/partitions/grammar.conf, partition by partition, as OpenSM reads it."""
    warnings: list[str] = []
    parts = {p.pkey: p for p in load_partitions(GRAMMAR, warnings.append)}
    assert warnings == [f"{GRAMMAR}:25:1: P_Key 0x0050 is already partition split (line 24): other merged "
                        "into it"]
    assert [p.name for p in parts.values()] == ["Default", "gen_a", "0030", "0002", "short", "split",
                                                "groups", "two", "three", "empty", "routers", "secure"]
    default = parts[0x7FFF]
    assert default.members == (Member("ALL", True), Member("SELF", True)) and default.ipoib
    assert default.groups == tuple(McGroup(f"ff1{s}:401b:ffff::ffff:ffff", 0xFFFF, 0x0B1B, mtu=5, rate=7,
                                           scope=s) for s in (2, 5))
    assert parts[0x0001].members == (Member("ALL_CAS", False),)  # generated: the lowest free P_Key
    assert parts[0x0030].members == (Member(H1, False),)
    assert parts[0x0002].members == (Member(H2, True, both=True),)  # generated after 0x0001
    short = parts[0x0040]
    assert short.members == (Member(H3, False, indx0=True), Member(H4, True, both=True, indx0=True),
                             Member("ALL_SWITCHES", True, indx0=True), Member("SELF", False, indx0=True))
    assert (short.ipoib, short.sl) == (True, 3)
    assert short.groups == (McGroup("ff12:401b:8040::ffff:ffff", 0x8040, 0x1234, mtu=5, rate=7, sl=3,
                                    tclass=8, flow_label=0x12345),)
    assert parts[0x0050].members == (Member(H1, True), Member(H2, True), Member(H2, True), Member(H3, False),
                                     Member(H1, False))
    assert parts[0x0060].groups == (
        McGroup("ff12:401b:8060::ffff:ffff", 0x8060, 0x11, sl=2, tclass=4),  # broadcast: the header's flags
        McGroup("ff12:401b:8060::1", 0x8060, 0x11, sl=2),  # TClass is not inherited
        McGroup("ff12:601b:8060::2", 0x8060, 0x11, sl=5),
        McGroup("ff18:601b:8060::2", 0x8060, 0x11, sl=5, scope=8),
        McGroup("ff12::abcd", 0x8060, 0xDEADBEEF, mtu=2, sl=2, flow_label=7),  # not IP: no P_Key, scope 2
    )
    assert parts[0x0060].members == (Member(H4, True),)
    assert parts[0x0070].members == (Member("ALL", False),)
    assert parts[0x0071].members == (Member("ALL_CAS", True),)
    assert parts[0x0080].members == ()
    assert parts[0x0090].members == (Member("ALL_ROUTERS", True, both=True),)
    assert parts[0x00A0].security == 2 and parts[0x00A0].members == (Member("ALL_CAS", True),)


def test_grammar_file_tables(fat_tree: Topology) -> None:
    """The hosts' tables: the last membership of a port wins, the indx0 partition first, ``both`` is full."""
    tables = pkey_tables(fat_tree, load_partitions(GRAMMAR))
    assert tables["h1"] == [0x0001, 0x0030, 0x0050, 0x0070, 0x8071, 0x80A0, 0xFFFF]
    assert tables["h2"] == [0x0001, 0x0070, 0x8002, 0x8050, 0x8071, 0x80A0, 0xFFFF]
    assert tables["h3"] == [0x0040, 0x0001, 0x0050, 0x0070, 0x8071, 0x80A0, 0xFFFF]
    assert tables["h4"] == [0x8040, 0x0001, 0x0070, 0x8060, 0x8071, 0x80A0, 0xFFFF]


def test_white_space_and_comments_where_the_document_allows_them() -> None:
    tight, _ = _parse("a=0x10,ipoib,defmember=full:0x5,0x6=limited;b=0x11:ALL;")
    loose, _ = _parse("  a \t= 0x10 ,\tipoib , defmember = full :   # members follow\n"
                      "\n   0x5 , # the first\n\t0x6 = limited\n ;   b = 0x11 : ALL ;  # done\n")
    assert tight == loose
    named, _ = _parse("My storage = 0x12 : ALL ;")  # OpenSM trims a name, it may hold spaces
    assert named[1].name == "My storage"


def test_members_separated_by_newlines() -> None:
    """A newline ends a member as a comma does (OpenSM reads the members line by line)."""
    (_, a), _ = _parse("a=0x1 :\n 0x5\n 0x6=full\n ;")
    assert a.members == (Member(0x5, False), Member(0x6, True))


def test_numbers_as_strtoul_reads_them() -> None:
    """Hexadecimal with 0x, octal with a leading 0, decimal otherwise, as C's strtoul(.., 0)."""
    (_, a), _ = _parse("a=010 : 0x10, 010, 10 ;")
    assert a.pkey == 8 and [m.guid for m in a.members] == [16, 8, 10]


def test_repeated_pkeys_merge_under_the_first_name() -> None:
    """Notes: "If PKey is repeated then those partition configurations will be merged and first
    PartitionName will be used"; names need not be unique."""
    parts, _ = _parse("a=0x10 : 0x1=full ;\nb=0x8010, ipoib : 0x2 ;\nc=0x10 : 0x3 ;\na=0x20 : ALL ;")
    assert [(p.name, p.pkey) for p in parts] == [("Default", 0x7FFF), ("a", 0x10), ("a", 0x20)]
    merged = parts[1]
    assert merged.members == (Member(0x1, True), Member(0x2, False), Member(0x3, False))
    assert merged.ipoib and [g.mgid for g in merged.groups] == ["ff12:401b:8010::ffff:ffff"]
    default, _ = _parse("Rename=0x7fff : ALL=full ;")
    assert [p.name for p in default] == ["Default"]  # OpenSM's default partition exists before the file


def test_split_definitions_need_their_pkey() -> None:
    """Notes: split definitions need the P_Key written, "otherwise different PKey values will be
    generated". OpenSM's code (osm_prtn_make_new) first looks a partition up by name, so it is so for
    unnamed definitions; a name without a P_Key finds the partition of that name."""
    parts, _ = _parse(": 0x1 ;\n: 0x2 ;\nx : 0x3 ;\nx : 0x4 ;\nDefault : 0x5=full ;")
    assert [(p.name, p.pkey) for p in parts] == [("Default", 0x7FFF), ("0001", 0x1), ("0002", 0x2),
                                                 ("x", 0x3)]
    assert parts[3].members == (Member(0x3, False), Member(0x4, False))
    assert parts[0].members == (Member(0x5, True),)


def test_generated_pkeys_skip_those_in_use() -> None:
    parts, _ = _parse("a=0x1 : ALL ;\nb : ALL ;\nc=0x3 : ALL ;\nd : ALL ;\ne=0x2 : 0x7 ;")
    assert [(p.name, p.pkey) for p in parts[1:]] == [("a", 1), ("b", 2), ("c", 3), ("d", 4)]
    assert parts[2].members == (Member("ALL", False), Member(0x7, False))  # e's P_Key was b's


def test_prefixes_of_keywords_flags_and_memberships() -> None:
    (_, a), warnings = _parse("a=0x1, ip, i, d=b : A=f, ALL_=l, ALL_S=b, ALL_R, S=li, N, NONE=x ;")
    assert warnings == [] and a.ipoib
    assert a.members == (Member("ALL", True), Member("ALL_CAS", False),
                         Member("ALL_SWITCHES", True, both=True), Member("ALL_ROUTERS", True, both=True),
                         Member("SELF", False))


def test_no_rule_for_the_default_partition() -> None:
    """"In the case of no rule for the Default partition: Default=0x7fff : ALL=limited, SELF=full"."""
    (default, compute), _ = _parse("compute=0x1 : ALL ;")
    assert default == Partition("Default", 0x7FFF, (Member("ALL", False), Member("SELF", True)))
    assert parse_partitions("") == [default]


def test_membership_follows_file_order(fat_tree: Topology) -> None:
    """A port's membership in a partition is the last one given for it, also through ALL."""
    tables = pkey_tables(fat_tree, parse_partitions(
        "a=0x1 : 0x000000fffe000000=full, ALL=limited, 0x000000fffe000001=full ;\n"
        "a=0x1 : 0x000000fffe000002=full ;"))
    assert [tables[h] for h in ("h1", "h2", "h3", "h4")] == [[0x0001, 0x7FFF], [0x7FFF, 0x8001],
                                                          [0x7FFF, 0x8001], [0x0001, 0x7FFF]]


def test_index0_in_file_order(fat_tree: Topology) -> None:
    """indx0: the last definition asking for index 0 gets it; a later definition of that partition
    adding the port without indx0 takes it back (OpenSM's osm_prtn_add_port)."""
    h1 = "0x000000fffe000000=full"
    tables = pkey_tables(fat_tree, parse_partitions(f"a=0x1, indx0 : {h1} ;\nb=0x2, indx0 : {h1} ;\n"
                                                    f"a=0x1, indx0 : {h1} ;"))
    assert tables["h1"] == [0x8001, 0x7FFF, 0x8002]  # the merged partition a first, as in the file
    tables = pkey_tables(fat_tree, parse_partitions(f"b=0x2, indx0 : {h1} ;\na=0x1, indx0 : {h1} ;"))
    assert tables["h1"] == [0x8001, 0x7FFF, 0x8002]
    tables = pkey_tables(fat_tree, parse_partitions(f"a=0x1 : {h1} ;\nb=0x2, indx0 : {h1}, ALL ;"))
    assert tables["h1"] == [0x0002, 0x7FFF, 0x8001] and tables["h2"] == [0x0002, 0x7FFF]
    tables = pkey_tables(fat_tree, parse_partitions(f"b=0x2, indx0 : {h1} ;\nb=0x2 : {h1} ;"))
    assert tables["h1"] == [0x7FFF, 0x8002]  # back in order


def test_describe_for_sm_partitions(fat_tree: Topology) -> None:
    parts = load_partitions(DATA / "partitions" / "cluster.conf")
    rows = {r["name"]: r for r in describe(fat_tree, parts)}
    assert list(rows) == ["Default", "storage_a", "storage_b", "compute"]
    assert rows["compute"]["hosts"] == {"h1": "full", "h2": "limited", "h3": "limited", "h4": "limited"}
    assert rows["compute"]["members"] == ["ALL_CAS=limited", "0x000000fffe000000=full"]
    assert rows["storage_a"]["hosts"] == {"h1": "full", "h3": "full"}
    assert rows["storage_a"]["secmode"] == "sth-aead"
    assert rows["storage_a"]["groups"] == [{"mgid": "ff12:401b:8a01::ffff:ffff", "pkey": "0x8a01",
                                            "qkey": "0x00000b1b", "mtu": 4, "rate": 3, "sl": 0, "scope": 2,
                                            "tclass": 0, "flow_label": "0x00000"}]
    assert [g["mgid"] for g in rows["Default"]["groups"]] == [
        "ff12:401b:ffff::ffff:ffff", "ff12:401b:ffff::1", "ff12:401b:ffff::2", "ff12:601b:ffff::1",
        "ff12:601b:ffff::1:ff00:0", "ff15:601b:ffff::1:ff00:0"]
    assert members_of(fat_tree, parts[2]) == {"h2": "full", "h4": "full"}


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="=,:;# \t\r\n0x1f7ADLSEFmgidpobqrtlunTQK_.-", max_size=120))
def test_any_text_parses_or_is_refused_with_a_position(text: str) -> None:
    """Whatever the file holds, the reader returns partitions or a PartitionError naming line:column,
    never another exception."""
    try:
        parts = parse_partitions(text, warn=lambda _: None)
    except PartitionError as err:
        assert re.match(r"partitions\.conf:\d+:\d+: ", str(err))
    else:
        assert parts[0].pkey == 0x7FFF and len({p.pkey for p in parts}) == len(parts)
