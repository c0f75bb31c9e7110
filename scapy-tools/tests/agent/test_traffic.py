"""Two agents on one veth pair: RC and UD traffic in every mode and key scope, ACKs and retransmission,
RDMA WRITE with R_Key and bounds checks, extended memory protection, perftest-like runs, key hygiene."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from ibsec.agent import perf
from ibsec.agent.cm import CM_RETRIES
from ibsec.control import CommandError

from labs.agent_lab import SECURE_PKEY, Agent, AgentLab, Provisioned, provision, rc_pair, start_agents

from .helpers import STOP_MARGIN, wait_for

SCOPES = ("partition", "session", "derived")
MTU = 1024  # small, so that messages of a few KiB travel as FIRST, MIDDLE..., LAST


@dataclass
class Pair:
    fabric: AgentLab
    a: Agent
    b: Agent
    prov: Provisioned


@pytest.fixture(scope="module")
def pair(module_fabric: Callable[[int], AgentLab]) -> Pair:
    fabric = module_fabric(2)
    prov = provision(fabric, fabric.hosts)
    a, b = start_agents(fabric, fabric.hosts, prov, None, "--ack-timeout", "0.05", "--mtu", str(MTU))
    return Pair(fabric, a, b, prov)


def drops(agent: Agent, reason: str) -> int:
    return agent.counters()["drops"][reason]


@pytest.mark.parametrize("scope", SCOPES)
@pytest.mark.parametrize("mode", range(5))
def test_rc_send_round_trips(pair: Pair, mode: int, scope: str) -> None:
    qpn, remote = rc_pair(pair.a, pair.b, mode, scope)
    message = f"rc mode {mode} {scope} keys".encode()
    pair.a.call("send", qpn=qpn, data_hex=message.hex())
    got = pair.b.call("recv", qpn=remote, timeout=5)
    assert bytes.fromhex(got["data_hex"]) == message
    assert pair.a.call("qps") and wait_for(lambda: _qp(pair.a, qpn)["unacked"] == 0)
    # and back, on the same connection
    pair.b.call("send", qpn=remote, data="reply")
    assert bytes.fromhex(pair.a.call("recv", qpn=qpn, timeout=5)["data_hex"]) == b"reply"


@pytest.mark.parametrize("scope", SCOPES)
@pytest.mark.parametrize("mode", range(5))
def test_ud_send_round_trips(pair: Pair, mode: int, scope: str) -> None:
    qp = pair.a.call(
        "connect", remote_gid=pair.b.host.gid, service="UD", pkey=SECURE_PKEY, mode=mode, scope=scope
    )
    peer = qp["peers"][0]
    message = bytes(range(256)) * 3
    pair.a.call("send", qpn=qp["qpn"], data_hex=message.hex(), dest_gid=peer["gid"], dest_qpn=peer["qpn"])
    got = pair.b.call("recv", qpn=peer["qpn"], timeout=5)
    assert bytes.fromhex(got["data_hex"]) == message
    assert (got["src_gid"], got["src_qp"]) == (pair.a.host.gid, qp["qpn"])


def test_secure_partition_refuses_a_downgrade_and_session_keys_go_through_the_cache(
    module_fabric: Callable[[int], AgentLab],
) -> None:
    fabric = module_fabric(2)
    prov = provision(fabric, fabric.hosts, partition_mode=2)
    a, b = start_agents(fabric, fabric.hosts, prov, None)
    with pytest.raises(CommandError, match="refused"):
        rc_pair(a, b, mode=0)
    # the REQ and any retry of it, each refused; b counts a refusal when its handler returns, after the REJ
    # left, so the count can trail the REJ that made rc_pair raise
    assert wait_for(lambda: b.counters()["drops"].get("cm_refused", 0) >= 1)
    assert b.counters()["drops"]["cm_refused"] <= CM_RETRIES
    assert b.call("qps") == []  # and nothing kept
    qpn, remote = rc_pair(a, b, mode=2, scope="session")
    before = b.counters()["skc"]
    for i in range(3):
        a.call("send", qpn=qpn, data=f"ok {i}")
        assert b.call("recv", qpn=remote, timeout=5)["data_hex"] == f"ok {i}".encode().hex()
    after = b.counters()["skc"]
    assert after["hits"] - before["hits"] >= 3  # every packet fetched its key from the cache


def test_retransmission_recovers_a_dropped_frame(pair: Pair) -> None:
    qpn, remote = rc_pair(pair.a, pair.b, 2, "session")
    before = pair.a.counters()["stats"].get("retransmissions", 0)
    pair.b.call("fault", drop_rx=1)
    pair.a.call("send", qpn=qpn, data="lost once")
    got = pair.b.call("recv", qpn=remote, timeout=5)
    assert bytes.fromhex(got["data_hex"]) == b"lost once"
    assert pair.a.counters()["stats"]["retransmissions"] > before
    assert drops(pair.b, "injected") >= 1
    assert pair.b.call("recv", qpn=remote, timeout=0.3) is None  # delivered exactly once


@pytest.mark.parametrize("mode", [0, 2])
def test_rdma_write_lands_only_inside_the_region_and_only_with_its_rkey(pair: Pair, mode: int) -> None:
    region = pair.b.call("reg_mr", length=256, pkey=SECURE_PKEY)
    qpn, _ = rc_pair(pair.a, pair.b, mode)
    assert pair.a.call("write", qpn=qpn, va=region["addr"] + 16, rkey=region["rkey"], data="inside")["acked"]
    content = bytes.fromhex(pair.b.call("read_mr", rkey=region["rkey"])["data_hex"])
    assert content[16:22] == b"inside" and content.count(0) == 256 - 6

    bounds, rkeys = drops(pair.b, "out_of_bounds"), drops(pair.b, "bad_rkey")
    qpn, _ = rc_pair(pair.a, pair.b, mode)
    result = pair.a.call(
        "write", qpn=qpn, va=region["addr"] + 250, rkey=region["rkey"], data="overflow", timeout=0.5
    )
    assert not result["acked"]
    qpn, _ = rc_pair(pair.a, pair.b, mode)
    result = pair.a.call(
        "write", qpn=qpn, va=region["addr"], rkey=region["rkey"] ^ 1, data="no key", timeout=0.5
    )
    assert not result["acked"]
    assert wait_for(lambda: drops(pair.b, "out_of_bounds") > bounds and drops(pair.b, "bad_rkey") > rkeys)
    assert bytes.fromhex(pair.b.call("read_mr", rkey=region["rkey"])["data_hex"]) == content


def test_extended_memory_protection_delegates_a_sub_region_and_nothing_else(pair: Pair) -> None:
    region = pair.b.call("reg_mr", length=4096, ext_depth=3, pkey=SECURE_PKEY)
    base, rkey = region["addr"], region["rkey"]
    sub = pair.b.call("mr_key", rkey=rkey, start=base + 1024, length=512)  # a depth-3 node
    qpn, _ = rc_pair(pair.a, pair.b, 2, "session")
    write = pair.a.call(
        "write",
        qpn=qpn,
        va=base + 1024 + 504,
        rkey=rkey,
        data="delegated",
        timeout=0.5,
        memory_key_hex=sub["key_hex"],
    )
    assert not write["acked"]  # 1024+504+9 crosses the sub-region's end: one byte outside is refused
    assert wait_for(lambda: drops(pair.b, "memory_key") >= 1)

    qpn, _ = rc_pair(pair.a, pair.b, 2, "session")
    assert pair.a.call(
        "write", qpn=qpn, va=base + 1024 + 503, rkey=rkey, data="delegated", memory_key_hex=sub["key_hex"]
    )["acked"]
    before = drops(pair.b, "memory_key")
    qpn, _ = rc_pair(pair.a, pair.b, 2, "session")
    assert not pair.a.call("write", qpn=qpn, va=base, rkey=rkey, data="rkey only", timeout=0.5)["acked"]
    assert wait_for(lambda: drops(pair.b, "memory_key") > before)
    whole = pair.b.call("mr_key", rkey=rkey)
    qpn, _ = rc_pair(pair.a, pair.b, 2, "derived")
    assert pair.a.call("write", qpn=qpn, va=base, rkey=rkey, data="owner", memory_key_hex=whole["key_hex"])[
        "acked"
    ]
    content = bytes.fromhex(pair.b.call("read_mr", rkey=rkey)["data_hex"])
    assert content[:5] == b"owner" and content[1024 + 503 : 1024 + 512] == b"delegated"
    assert content.count(0) == 4096 - 5 - 9


def test_perf_runs_report_latency_percentiles_throughput_and_progress(pair: Pair) -> None:
    qpn, remote = rc_pair(pair.a, pair.b, 1)
    pair.b.call("serve", qpn=remote)
    with pair.a.client() as client:
        # bounded by its count: the duration only caps a run that stalls, however slow the machine
        lines = list(client.stream("perf", test="send_lat", qpn=qpn, size=64, iterations=300, duration=120))
    result = lines[-1]["result"]
    assert result["iterations"] == 300 and 0 < result["median_us"] <= result["p99_us"] <= result["max_us"]
    region = pair.b.call("reg_mr", length=4096, pkey=SECURE_PKEY)
    qpn, _ = rc_pair(pair.a, pair.b, 2)
    duration, size = 3.0, 1024
    with pair.a.client() as client:
        lines = list(
            client.stream(
                "perf",
                test="write_bw",
                qpn=qpn,
                size=size,
                iterations=1_000_000,
                duration=duration,
                va=region["addr"],
                rkey=region["rkey"],
            )
        )
    result = lines[-1]["result"]
    assert any("progress" in line for line in lines)  # a run over a second reports as it goes
    assert result["iterations"] > 0
    assert result["mbit_s"] == pytest.approx(result["iterations"] * size * 8 / result["seconds"] / 1e6)
    # bounded by its duration, not its count; past it only by its waits for acknowledgements (test_units
    # checks both bounds exactly, with a clock of its own)
    assert duration <= result["seconds"] <= duration + 2 * perf.ACK_WAIT + STOP_MARGIN


def test_logs_and_replies_never_carry_key_bytes(pair: Pair) -> None:
    rc_pair(pair.a, pair.b, 2, "session")
    secrets = [pair.prov.p_sk.material.hex(), *(k.material.hex() for k in pair.prov.ca_keys.values())]
    text = pair.a.log_path.read_text() + pair.b.log_path.read_text() + str(pair.a.call("info"))
    text += str(pair.b.call("qps")) + str(pair.b.counters())
    assert not [s for s in secrets if s in text]
    assert pair.a.call("info")["keys"]["partitions"] == ["0x0001"]  # held, and reported by scope only


def _qp(agent: Agent, qpn: int) -> dict[str, int]:
    return next(q for q in agent.call("qps") if q["qpn"] == qpn)


def test_disconnect_tears_down_both_ends_and_forgets_the_session_key(pair: Pair) -> None:
    qpn, remote = rc_pair(pair.a, pair.b, 2, "session")
    pair.a.call("send", qpn=qpn, data="bye")
    assert pair.b.call("recv", qpn=remote, timeout=5)["data_hex"] == b"bye".hex()
    stored = pair.a.counters()["skc"]["stored"], pair.b.counters()["skc"]["stored"]
    assert pair.a.call("disconnect", qpn=qpn)["confirmed"]
    assert qpn not in {q["qpn"] for q in pair.a.call("qps")}
    assert wait_for(lambda: remote not in {q["qpn"] for q in pair.b.call("qps")})
    assert (pair.a.counters()["skc"]["stored"], pair.b.counters()["skc"]["stored"]) == (
        stored[0] - 1,
        stored[1] - 1,
    )
    with pytest.raises(CommandError, match="no QP"):
        pair.a.call("send", qpn=qpn, data="too late")


@pytest.mark.parametrize("mode", [0, 2, 4])
def test_messages_longer_than_the_path_mtu_travel_as_several_packets(pair: Pair, mode: int) -> None:
    assert pair.a.call("info")["mtu"] == MTU
    message = os.urandom(5 * MTU + 123)
    qpn, remote = rc_pair(pair.a, pair.b, mode, "session")
    psn = _qp(pair.a, qpn)["next_psn"]
    pair.a.call("send", qpn=qpn, data_hex=message.hex())
    assert bytes.fromhex(pair.b.call("recv", qpn=remote, timeout=5)["data_hex"]) == message
    assert _qp(pair.a, qpn)["next_psn"] - psn >= 6  # at most an MTU of payload per packet
    region = pair.b.call("reg_mr", length=8 * MTU, pkey=SECURE_PKEY)
    assert pair.a.call("write", qpn=qpn, va=region["addr"] + 100, rkey=region["rkey"],
                       data_hex=message.hex())["acked"]
    content = bytes.fromhex(pair.b.call("read_mr", rkey=region["rkey"])["data_hex"])
    assert content[100:100 + len(message)] == message and not any(content[100 + len(message):])
    # packets a message took are the PSNs it used: a retransmission (an ACK late on a loaded machine)
    # repeats a PSN, so frames on the wire would count it twice
    psn = _qp(pair.a, qpn)["next_psn"]
    pair.a.call("send", qpn=qpn, data="short")
    assert pair.b.call("recv", qpn=remote, timeout=5)["data_hex"] == b"short".hex()
    assert _qp(pair.a, qpn)["next_psn"] == psn + 1
    assert pair.b.call("recv", qpn=remote, timeout=0.3) is None  # delivered once, retransmitted or not


def test_a_multi_packet_write_proves_the_sub_region_key_in_every_packet(pair: Pair) -> None:
    region = pair.b.call("reg_mr", length=16 * MTU, ext_depth=2, pkey=SECURE_PKEY)
    base, rkey = region["addr"], region["rkey"]
    quarter = 4 * MTU
    sub = pair.b.call("mr_key", rkey=rkey, start=base + quarter, length=quarter)
    data = os.urandom(3 * MTU + 7)
    qpn, _ = rc_pair(pair.a, pair.b, 2, "session")
    assert pair.a.call("write", qpn=qpn, va=base + quarter + 5, rkey=rkey, data_hex=data.hex(),
                       memory_key_hex=sub["key_hex"])["acked"]
    refused = drops(pair.b, "memory_key")
    qpn, _ = rc_pair(pair.a, pair.b, 2, "session")
    assert not pair.a.call("write", qpn=qpn, va=base + 2 * quarter - 3 * MTU, rkey=rkey,
                           data_hex=os.urandom(3 * MTU + 1).hex(), memory_key_hex=sub["key_hex"],
                           timeout=0.5)["acked"]  # its last byte is one past the sub-region
    assert wait_for(lambda: drops(pair.b, "memory_key") > refused)
    content = bytes.fromhex(pair.b.call("read_mr", rkey=rkey)["data_hex"])
    assert content[quarter + 5:quarter + 5 + len(data)] == data
    assert not any(content[:quarter]) and not any(content[2 * quarter:])
