"""P4Info as p4c writes it: prefixed ids (p4c's hash or @id), qualified names, every object."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from finsy.proto import p4i
from google.protobuf import text_format

from p4switch.engine import loader
from p4switch.engine.api import ActionCall
from p4switch.frontend.cli import Compiled, compile_file
from p4switch.frontend.p4info import aliases, name_hash
from p4switch.tests.frontend.conftest import PROGRAMS, TEMPLATE


def by_name(items: Any) -> dict[str, Any]:
    return {item.preamble.name: item for item in items}


def test_l2fwd_field_by_field(l2fwd: Compiled) -> None:
    info = l2fwd.p4info
    assert info.pkg_info.arch == "v1model"
    (table,) = info.tables
    assert table.preamble.name == "L2Ingress.dmac"
    assert table.preamble.alias == "dmac"
    assert table.preamble.id >> 24 == 0x02
    (field,) = table.match_fields
    assert (field.id, field.name, field.bitwidth, field.match_type) == (
        1,
        "hdr.ethernet.dst_addr",
        48,
        p4i.MatchField.EXACT,
    )
    actions = by_name(info.actions)
    assert sorted(actions) == ["L2Ingress.drop", "L2Ingress.forward"]
    assert [r.id for r in table.action_refs] == [
        actions["L2Ingress.forward"].preamble.id,
        actions["L2Ingress.drop"].preamble.id,
    ]
    assert all(r.scope == p4i.ActionRef.TABLE_AND_DEFAULT for r in table.action_refs)
    assert table.size == 1024 and not table.const_default_action_id and not table.is_const_table
    (param,) = actions["L2Ingress.forward"].params
    assert (param.id, param.name, param.bitwidth) == (1, "port", 9)
    assert all(a.preamble.id >> 24 == 0x01 for a in info.actions)


def test_committed_l2fwd_outputs_are_current(l2fwd: Compiled) -> None:
    """The checked-in l2fwd.json / .p4info.txtpb (used by the engine and runtime tests) match the compiler."""
    committed = text_format.Parse((PROGRAMS / "l2fwd.p4info.txtpb").read_text(), p4i.P4Info())
    assert committed == l2fwd.p4info
    ir = l2fwd.ir
    assert ir["tables"][0]["p4info_id"] == l2fwd.p4info.tables[0].preamble.id
    assert (PROGRAMS / "l2fwd.json").read_text().replace(
        '"src": "l2fwd.p4', '"src": "X'
    ) == l2fwd.ir_json().replace(f'"src": "{PROGRAMS}/l2fwd.p4', '"src": "X')


def test_ids_match_p4c_for_the_tutorial_names() -> None:
    """p4c's ids of basic.p4 in the p4lang tutorials: the same names must give the same ids."""
    info = compile_file(PROGRAMS / "basic_router.p4").p4info
    assert by_name(info.tables)["MyIngress.ipv4_lpm"].preamble.id == 37375156
    actions = by_name(info.actions)
    assert actions["MyIngress.ipv4_forward"].preamble.id == 28792405  # @name("ipv4_forward") honoured
    assert actions["MyIngress.drop"].preamble.id == 25652968
    assert actions["NoAction"].preamble.id == 21257015


def test_ids_are_stable_across_runs() -> None:
    first = compile_file(PROGRAMS / "features.p4").p4info_text()
    second = compile_file(PROGRAMS / "features.p4").p4info_text()
    assert first == second


def test_every_resource_has_its_prefix(features: Compiled) -> None:
    info = features.p4info
    groups = [
        (info.tables, 0x02),
        (info.actions, 0x01),
        (info.action_profiles, 0x11),
        (info.counters, 0x12),
        (info.direct_counters, 0x13),
        (info.meters, 0x14),
        (info.direct_meters, 0x15),
        (info.registers, 0x16),
        (info.digests, 0x17),
        (info.controller_packet_metadata, 0x04),
    ]
    seen = set()
    for items, prefix in groups:
        for item in items:
            assert item.preamble.id >> 24 == prefix, item.preamble.name
            seen.add(item.preamble.id)
    assert len(seen) == sum(len(items) for items, _ in groups)
    # actions: the 6 the tables use and swap, which apply calls directly (p4c lists it, without params)
    assert [len(items) for items, _ in groups] == [4, 7, 2, 1, 0, 1, 1, 1, 1, 2]
    assert not by_name(info.actions)["FIngress.swap"].params


def test_id_annotation_is_honoured(features: Compiled) -> None:
    info = features.p4info
    assert by_name(info.actions)["FIngress.drop"].preamble.id == 0x01000042
    assert by_name(info.counters)["FIngress.stats.per_port"].preamble.id == 0x12000007  # prefix added


def test_names_are_fully_qualified(features: Compiled) -> None:
    info = features.p4info
    assert sorted(by_name(info.tables)) == [
        "FIngress.acl",
        "FIngress.ecmp",
        "FIngress.l2",
        "FIngress.learned",
    ]
    assert "global_learn" in by_name(info.actions)  # @name(".global_learn"): top level
    assert "FIngress.stats.per_port" in by_name(info.counters)  # sub-control instance path
    assert by_name(info.counters)["FIngress.stats.per_port"].preamble.alias == "per_port"


def test_tables_in_detail(features: Compiled) -> None:
    info = features.p4info
    tables, actions = by_name(info.tables), by_name(info.actions)
    ids = {name: a.preamble.id for name, a in actions.items()}
    profiles = by_name(info.action_profiles)
    acl = tables["FIngress.acl"]
    assert [(f.name, f.bitwidth, f.match_type) for f in acl.match_fields] == [
        ("sm.ingress_port", 9, p4i.MatchField.TERNARY),
        ("hdr.ethernet.ether_type", 16, p4i.MatchField.RANGE),
        ("hdr.ethernet.dst", 48, p4i.MatchField.LPM),
    ]
    scopes = {r.id: (r.scope, list(r.annotations)) for r in acl.action_refs}
    assert scopes[ids["FIngress.to_cpu"]] == (p4i.ActionRef.TABLE_ONLY, ["@tableonly"])
    assert scopes[ids["NoAction"]] == (p4i.ActionRef.DEFAULT_ONLY, ["@defaultonly"])
    assert acl.const_default_action_id == ids["NoAction"]
    assert list(acl.direct_resource_ids) == [by_name(info.direct_meters)["FIngress.acl_meter"].preamble.id]
    assert acl.has_initial_entries and not acl.is_const_table
    ecmp = tables["FIngress.ecmp"]
    assert [f.name for f in ecmp.match_fields] == ["hdr.ethernet.dst"]  # selector keys are not match fields
    assert ecmp.match_fields[0].match_type == p4i.MatchField.OPTIONAL
    selector = profiles["FIngress.ecmp_action_selector"]
    assert ecmp.implementation_id == selector.preamble.id
    assert selector.with_selector and selector.size == 64 and list(selector.table_ids) == [ecmp.preamble.id]
    l2_profile = profiles["FIngress.l2_profile"]
    assert not l2_profile.with_selector and l2_profile.size == 128
    assert tables["FIngress.l2"].implementation_id == l2_profile.preamble.id
    assert tables["FIngress.learned"].idle_timeout_behavior == p4i.Table.NOTIFY_CONTROL


def test_const_entries_make_a_const_table() -> None:
    info = compile_file(PROGRAMS / "basic_router.p4").p4info
    tables = by_name(info.tables)
    assert tables["MyIngress.dscp_class"].is_const_table
    assert [f.name for f in tables["MyIngress.dscp_class"].match_fields] == ["dscp", "hdr.ipv4.protocol"]
    direct = by_name(info.direct_counters)["MyIngress.lpm_hits"]
    assert direct.direct_table_id == tables["MyIngress.ipv4_lpm"].preamble.id
    assert direct.spec.unit == p4i.CounterSpec.PACKETS
    counter = by_name(info.counters)["MyIngress.rx_port_counter"]
    assert (counter.size, counter.spec.unit) == (512, p4i.CounterSpec.BOTH)


def test_externs_digests_and_packet_metadata(features: Compiled) -> None:
    info = features.p4info
    meter = by_name(info.meters)["FIngress.port_meter"]
    assert (meter.size, meter.spec.unit) == (16, p4i.MeterSpec.PACKETS)
    assert by_name(info.direct_meters)["FIngress.acl_meter"].spec.unit == p4i.MeterSpec.BYTES
    register = by_name(info.registers)["FIngress.last_value"]
    assert (register.size, register.type_spec.bitstring.bit.bitwidth) == (64, 16)
    digest = by_name(info.digests)["learn_t"]
    assert digest.type_spec.struct.name == "learn_t"
    members = info.type_info.structs["learn_t"].members
    assert [(m.name, m.type_spec.bitstring.bit.bitwidth) for m in members] == [("src", 48), ("port", 9)]
    cpm = by_name(info.controller_packet_metadata)
    # p4c hashes the header type name: these are the ids p4c gives packet_in_t / packet_out_t
    assert cpm["packet_in"].preamble.id == 80671331
    assert cpm["packet_out"].preamble.id == 75327753
    assert [(m.id, m.name, m.bitwidth) for m in cpm["packet_in"].metadata] == [
        (1, "ingress_port", 9),
        (2, "_pad", 7),
    ]
    assert list(cpm["packet_in"].preamble.annotations) == ['@controller_header("packet_in")']


def test_colliding_ids_are_probed(ingress: Callable[[str], Compiled]) -> None:
    """Two names whose hash collides still get distinct ids (p4c probes upwards)."""
    low = name_hash("I.a") & 0xFFFFFF
    prog = ingress(f"""    @id({low}) action taken() {{ }}
    action a() {{ }}
    table t {{ key = {{ hdr.eth.dst: exact; }} actions = {{ a; taken; }} }}
    apply {{ t.apply(); }}""")
    actions = by_name(prog.p4info.actions)
    assert actions["I.taken"].preamble.id == 0x01000000 | low
    assert actions["I.a"].preamble.id == 0x01000000 | (low + 1)


def test_aliases_are_the_shortest_unique_suffix() -> None:
    names = ["Ingress.drop", "Egress.drop", "Ingress.routing.routes", "NoAction"]
    assert aliases(names) == {
        "Ingress.drop": "Ingress.drop",
        "Egress.drop": "Egress.drop",
        "Ingress.routing.routes": "routes",
        "NoAction": "NoAction",
    }


def test_p4info_text_parses_back(features: Compiled) -> None:
    assert text_format.Parse(features.p4info_text(), p4i.P4Info()) == features.p4info


def test_ngsdn_style_program() -> None:
    """Inline `@name(...) counters = direct_counter(...)` as ngsdn-tutorial has them, selectors, clone3."""
    prog = compile_file(PROGRAMS / "ngsdn_style.p4")
    info = prog.p4info
    tables = by_name(info.tables)
    direct = by_name(info.direct_counters)
    # named by the property's @name alone, as p4c-bm2-ss 1.2.4.8 names them (older p4c put the control first)
    assert sorted(direct) == sorted(
        f"{t}_table_counter" for t in ("l2_exact", "l2_ternary", "ndp_reply", "routing_v6", "acl")
    )
    for name, counter in direct.items():
        table = tables["IngressPipeImpl." + name.removesuffix("_counter")]
        assert counter.direct_table_id == table.preamble.id
        assert list(table.direct_resource_ids) == [counter.preamble.id]
        assert counter.spec.unit == p4i.CounterSpec.BOTH
    routing = tables["IngressPipeImpl.routing_v6_table"]
    assert [(f.name, f.bitwidth, f.match_type) for f in routing.match_fields] == [
        ("hdr.ipv6.dst_addr", 128, p4i.MatchField.LPM)
    ]
    assert (
        routing.implementation_id
        == by_name(info.action_profiles)["IngressPipeImpl.ecmp_selector"].preamble.id
    )
    assert len(tables["IngressPipeImpl.acl_table"].match_fields) == 8
    cpm = by_name(info.controller_packet_metadata)
    assert cpm["packet_in"].preamble.id == 0x04000000 | (name_hash("cpu_in_header_t") & 0xFFFFFF)
    clone = next(
        s for a in prog.ir["actions"] if a["name"] == "IngressPipeImpl.clone_to_cpu" for s in a["body"]
    )
    assert (clone["fn"], clone["clone_type"], clone["args"][0]["value"]) == ("clone", "I2E", 99)


def test_hidden_tables_and_actions_stay_out_of_p4info(ingress: Callable[[str], Compiled]) -> None:
    prog = ingress("""    @hidden action internal() { meta.m8 = 1; }
    action visible() { meta.m8 = 2; }
    @hidden table fixed { actions = { internal; } default_action = internal(); }
    table t { key = { hdr.eth.dst: exact; } actions = { visible; @defaultonly internal; } }
    apply { fixed.apply(); t.apply(); }""")
    assert [t.preamble.name for t in prog.p4info.tables] == ["I.t"]
    assert sorted(by_name(prog.p4info.actions)) == ["I.visible", "NoAction"]
    assert len(prog.p4info.tables[0].action_refs) == 2  # visible and the implicit NoAction default
    assert {t["name"] for t in prog.ir["tables"]} == {"I.fixed", "I.t"}  # the engine still runs it


LISTED_AS_P4C = """
    @brief("counts drops") @my_tag(7) counter(4, CounterType.packets) drops;
    action a(@my_param @name("value") bit<8> v) { hdr.eth.src = (bit<48>) v; }
    action called() { meta.m16 = 1; }
    action only_unapplied() { }
    table t {
        key = {
            hdr.eth.isValid(): exact;
            hdr.eth.dst & 0x0000ffffffff: ternary @my_key;
            hdr.eth.type_[7:0]: exact;
            meta.m8: exact;
        }
        actions = { @my_ref a; }
    }
    @hidden table hidden_t { key = { meta.m16: exact; } actions = { a; } }
    table unapplied { key = { meta.m16: exact; } actions = { only_unapplied; } }
    table folded { key = { meta.m16: exact; } actions = { a; } }
    apply {
        t.apply();
        hidden_t.apply();
        called();
        if (false) { folded.apply(); }
        drops.count(0);
    }
"""


def test_objects_names_and_annotations_as_p4c(compile_text: Callable[..., Compiled]) -> None:
    """What p4c-bm2-ss lists: applied tables, their actions and the ones apply calls (no params); key
    names as its TableKeyNames; annotations copied (not @name/@id), @brief as doc."""
    prog = compile_text(TEMPLATE.replace("{BODY}", LISTED_AS_P4C))
    info = prog.p4info
    assert sorted(by_name(info.tables)) == ["I.t"]
    assert sorted(by_name(info.actions)) == ["I.a", "I.called", "NoAction"]
    assert not by_name(info.actions)["I.called"].params
    (param,) = by_name(info.actions)["I.a"].params
    assert (param.name, list(param.annotations)) == ("value", ["@my_param"])  # its @name, as p4c
    refs = {r.id: list(r.annotations) for r in by_name(info.tables)["I.t"].action_refs}
    assert refs == {
        by_name(info.actions)["I.a"].preamble.id: ["@my_ref"],
        by_name(info.actions)["NoAction"].preamble.id: ["@defaultonly"],
    }
    fields = by_name(info.tables)["I.t"].match_fields
    assert [f.name for f in fields] == [
        "hdr.eth.$valid$",
        "hdr.eth.dst & 0xffffffff",
        "hdr.eth.type_[7:0]",
        "meta.m8",
    ]
    assert [list(f.annotations) for f in fields] == [[], ["@my_key"], [], []]
    counter = by_name(info.counters)["I.drops"]
    assert (
        list(counter.preamble.annotations) == ["@my_tag(7)"] and counter.preamble.doc.brief == "counts drops"
    )
    assert list(by_name(info.actions)["NoAction"].preamble.annotations) == ['@noWarn("unused")']
    assert info.HasField("type_info")
    switch = loader.load(prog.ir_json())  # the engine takes the action data by P4Info's name
    switch.table_set_default("I.t", ActionCall("I.a", {"value": 9}))
    assert switch.process(0, bytes(12) + b"\x08\x00")[0][1][6:12] == bytes(5) + b"\x09"


def test_type_declarations_are_named_in_p4info(compile_text: Callable[..., Compiled]) -> None:
    """A `type` (also through a typedef) names its key, param or metadata (type_name) and is listed in
    type_info.new_types: its bit<W>, or its @p4runtime_translation; a typedef is not a type of its own."""
    types = (
        'typedef bit<16> ethertype_t;\n@p4runtime_translation("example.org/mac", 48) @tag\n'
        "type bit<48> mac_t;\ntype ethertype_t proto_t;\ntypedef proto_t proto_alias_t;\n"
        "header eth_t { mac_t dst; bit<48> src; proto_alias_t type_; }"
    )
    body = """
    action set(mac_t m, proto_t p, bit<8> plain) { hdr.eth.dst = m; hdr.eth.type_ = p; meta.m8 = plain; }
    table t { key = { hdr.eth.dst: exact; hdr.eth.type_: exact; hdr.eth.src: exact; } actions = { set; } }
    apply { t.apply(); }"""
    info = compile_text(
        TEMPLATE.replace("header eth_t { bit<48> dst; bit<48> src; bit<16> type_; }", types).replace(
            "{BODY}", body
        )
    ).p4info
    keys = by_name(info.tables)["I.t"].match_fields
    assert [k.type_name.name for k in keys] == ["mac_t", "proto_t", ""]
    params = by_name(info.actions)["I.set"].params
    assert [p.type_name.name for p in params] == ["mac_t", "proto_t", ""]
    new = info.type_info.new_types
    assert set(new) == {"mac_t", "proto_t"}
    assert (new["mac_t"].translated_type.uri, new["mac_t"].translated_type.sdn_bitwidth) == (
        "example.org/mac",
        48,
    )
    assert list(new["mac_t"].annotations) == ["@tag"]
    assert new["proto_t"].original_type.bitstring.bit.bitwidth == 16


def test_p4info_shows_translated_widths_enums_and_no_instance_of_a_typedef(
    compile_text: Callable[..., Compiled],
) -> None:
    """As p4c writes P4Info: a field of a translated `type` has the translated width (what the controller
    sends); a serializable enum used by a key or param is described in type_info.serializable_enums (no
    type_name); an extern instance declared through a typedef name is not listed, yet the program uses it."""
    types = (
        '@p4runtime_translation("example.org/mac", 32)\ntype bit<48> mac_t;\n'
        "enum bit<16> kind_t { A = 1, B = 0x800 }\ntypedef kind_t kind_alias_t;\n"
        "typedef register<bit<8>> regs_t;\n"
        "header eth_t { mac_t dst; bit<48> src; kind_alias_t type_; }"
    )
    body = """
    regs_t(4) hidden_regs;
    register<bit<8>>(4) regs;
    action set(mac_t m, kind_t k) { hdr.eth.dst = m; hdr.eth.type_ = k; }
    table t { key = { hdr.eth.dst: exact; hdr.eth.type_: exact; } actions = { set; } }
    apply {
        t.apply();
        hidden_regs.write(1, 9);
        hidden_regs.read(meta.m8, 1);
        regs.write(0, meta.m8);
        hdr.eth.src[7:0] = meta.m8;
    }"""
    prog = compile_text(
        TEMPLATE.replace("header eth_t { bit<48> dst; bit<48> src; bit<16> type_; }", types).replace(
            "{BODY}", body
        )
    )
    info = prog.p4info
    keys = by_name(info.tables)["I.t"].match_fields
    assert [(k.bitwidth, k.type_name.name) for k in keys] == [(32, "mac_t"), (16, "")]
    params = by_name(info.actions)["I.set"].params
    assert [(p.bitwidth, p.type_name.name) for p in params] == [(32, "mac_t"), (16, "")]
    assert info.type_info.new_types["mac_t"].translated_type.sdn_bitwidth == 32
    enum = info.type_info.serializable_enums["kind_t"]
    assert enum.underlying_type.bitwidth == 16
    assert [(m.name, m.value) for m in enum.members] == [("A", b"\x00\x01"), ("B", b"\x08\x00")]
    assert sorted(by_name(info.registers)) == ["I.regs"]
    switch = loader.load(prog.ir_json())
    assert switch.process(0, bytes(12) + b"\x08\x00")[0][1][6:12] == bytes(5) + b"\x09"
