"""ReDMArk's attacks (Rothenberger et al., USENIX Security 2021) against our agents, in-process: each tool of
ibsec.attacks on the frames the agents really exchanged, with the same agents made predictable (the
allocators ReDMArk found on RNICs, and ours before issue 14) as the baseline that shows the tool works."""

from __future__ import annotations

import argparse
import itertools
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from ibsec.agent.adapter import FIRST_QPN, MAX_QPS, Adapter, AdapterError
from ibsec.agent.admission import Limits
from ibsec.agent.counters import Drop
from ibsec.agent.memory import ADDRESS_SPACE, PAGE, Access
from ibsec.agent.qp import QueuePair, Scope, Service, State
from ibsec.attacks import predict, qp_error, req_flood, rkey_guess
from ibsec.builder import Builder, gid_bytes
from ibsec.rocev2 import parse
from scapy.layers.l2 import Ether
from scapy.utils import wrpcap

from .loopback import SECURE_PKEY, Loopback

WAIT = 30.0  # seconds an expected effect may take on a loaded machine (it comes in milliseconds)
CONNECTIONS = 40
WINDOW = 16


@pytest.fixture
def loop(tmp_path: Path) -> Iterator[Loopback]:
    link = Loopback(tmp_path)
    yield link
    link.close()


def make_predictable(loop: Loopback) -> None:
    """The victim's allocators as ReDMArk found them: QPNs in sequence, regions at a fixed base plus a
    slot, R_Keys with a fixed stride (a key index above an 8-bit key, as on ConnectX). Starting PSNs stay
    random, as they were in our agent before issue 14."""
    victim = loop.adapters[1]
    qpns = itertools.count(FIRST_QPN)
    slots = itertools.count()
    rkeys = itertools.count(0x1000, 0x100)
    victim._fresh_qpn = lambda: next(qpns)  # type: ignore[method-assign]
    victim.memory._fresh_address = lambda length: ADDRESS_SPACE[0] + next(slots) * PAGE  # type: ignore[method-assign]
    victim.memory._fresh_rkey = lambda: next(rkeys)  # type: ignore[method-assign]


def observed_connections(loop: Loopback, tmp_path: Path) -> Path:
    """CONNECTIONS connections of adapter 0 to adapter 1, one region and one RDMA WRITE each, as a pcap."""
    a, b = loop.adapters
    for i in range(CONNECTIONS):
        qp = a.cm.connect(b.gid, Service.RC, SECURE_PKEY, 0, Scope.PARTITION, WAIT)
        region = b.reg_mr(64, SECURE_PKEY)
        a.post_write(qp.qpn, region.addr, region.r_key, f"write {i}".encode())
        assert a.wait_outstanding(qp.qpn, 0, WAIT)
    pcap = tmp_path / "observed.pcap"
    wrpcap(str(pcap), [Ether(frame) for frame in loop.frames])
    return pcap


def predicted(pcap: Path, victim_gid: str, capsys: pytest.CaptureFixture[str]) -> dict[str, dict[str, float]]:
    """The predict tool's verdict on the capture, per field."""
    assert predict.main(["--pcap", str(pcap), "--dst-gid", victim_gid, "--window", str(WINDOW)]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(lines) == 1 and lines[0]["target"] == victim_gid
    return {name: lines[0][name] for name in predict.BITS}


@pytest.mark.parametrize("predictable", [False, True], ids=["our-agent", "sequential-baseline"])
def test_qpn_rkey_psn_and_address_prediction(loop: Loopback, tmp_path: Path, predictable: bool,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    if predictable:
        make_predictable(loop)
    fields = predicted(observed_connections(loop, tmp_path), loop.adapters[1].gid, capsys)
    for name in ("qpn", "psn", "rkey", "va"):
        assert fields[name]["observed"] == CONNECTIONS and fields[name]["tries"] == CONNECTIONS - 2
    # random draws: a hit has chance about WINDOW / 2^24 per try (at most 16 * 38 / 2^24 ~ 4e-5 a field)
    assert fields["psn"]["hits"] == 0
    if predictable:
        assert all(fields[name]["hits"] == CONNECTIONS - 2 for name in ("qpn", "rkey", "va"))
    else:
        assert all(fields[name]["hits"] == 0 for name in ("qpn", "rkey", "va"))


def total_drops(adapter: Adapter) -> int:
    return sum(adapter.counters.snapshot()["drops"].values())


@pytest.mark.parametrize("mode", [0, 2])
@pytest.mark.parametrize("victim", [0, 1], ids=["requester", "responder"])
def test_forged_packets_do_not_move_the_victim_qp_to_error(loop: Loopback, mode: int, victim: int) -> None:
    """Every kind of qp_error packet, one at a time, into a live connection with the victim's QPN and next
    request PSN as a sniffer learns them. Mode 2: each is dropped and counted before any QP state changes,
    and the connection carries traffic both ways after. Mode 0: the forged packets are valid RoCE; none
    errors the QP (the agent takes no fatal NAK), but the out-of-sequence one at the expected PSN takes
    that PSN, so the peer's next real message is refused as a replay: the DoS works with security off."""
    a, b = loop.adapters
    qp = a.cm.connect(b.gid, Service.RC, SECURE_PKEY, mode, Scope.SESSION if mode else Scope.PARTITION, WAIT)
    ends = (a.qp(qp.qpn), b.qp(qp.remote_qpn or 0))
    exchange(loop, ends, b"before")
    target, peer = loop.adapters[victim], loop.adapters[1 - victim]
    requests = [v for v in map(parse, loop.frames)
                if v is not None and v.dqpn == ends[victim].qpn and v.opcode_name == "RC_SEND_ONLY"]
    args = argparse.Namespace(dst_gid=target.gid, pkey=SECURE_PKEY, qpn=ends[victim].qpn, mode=mode,
                              psn=requests[-1].psn + 1)
    forger = Builder(bytes(6), gid_bytes(peer.gid))
    for kind in qp_error.KINDS:  # one at a time: each is judged before the next arrives
        dropped = total_drops(target)
        loop.inject(victim, qp_error.packet(forger, args, kind))
        assert loop.idle(victim)
        assert target.qp(ends[victim].qpn).state is State.RTS, kind
        assert total_drops(target) == dropped + 1, kind
    assert peer.qp(ends[1 - victim].qpn).state is State.RTS
    if mode:
        exchange(loop, ends, b"after")
        return
    replays = target.counters.dropped(Drop.REPLAY)
    peer.post_send(ends[1 - victim].qpn, b"after")
    assert loop.idle(victim) and target.counters.dropped(Drop.REPLAY) == replays + 1
    assert target.wait_recv(ends[victim].qpn, 0.5) is None


def exchange(loop: Loopback, ends: tuple[QueuePair, QueuePair], text: bytes) -> None:
    """A message each way on the connection, each delivered and acknowledged."""
    for sender, receiver in ((0, 1), (1, 0)):
        loop.adapters[sender].post_send(ends[sender].qpn, text)
        assert loop.adapters[receiver].wait_recv(ends[receiver].qpn, WAIT) == text
        assert loop.adapters[sender].wait_outstanding(ends[sender].qpn, 0, WAIT)


GUESSES = 64


@pytest.fixture
def trio(tmp_path: Path) -> Iterator[Loopback]:
    link = Loopback(tmp_path, n=3)
    yield link
    link.close()


def attacker_connection(loop: Loopback, mode: int) -> argparse.Namespace:
    """The attacker's (adapter 2) own connection to the victim (adapter 1), as rkey_guess arguments: the
    victim's QPN and next PSN, which the attacker's agent knows."""
    c, b = loop.adapters[2], loop.adapters[1]
    qp = c.cm.connect(b.gid, Service.RC, SECURE_PKEY, mode, Scope.SESSION if mode else Scope.PARTITION, WAIT)
    c.post_send(qp.qpn, b"hello")
    assert b.wait_recv(qp.remote_qpn or 0, WAIT) == b"hello"
    requests = [v for v in map(parse, loop.frames) if v is not None and v.dqpn == qp.remote_qpn]
    return argparse.Namespace(dst_gid=b.gid, pkey=SECURE_PKEY, qpn=qp.remote_qpn, psn=requests[-1].psn + 1,
                              mode=mode, data="GUESSED", rkey_stride=0, va_stride=0)


def guessing(loop: Loopback, args: argparse.Namespace, count: int) -> dict[str, int]:
    """Send ``count`` of rkey_guess's writes into the victim; what its drop counters gained."""
    victim = loop.adapters[1]
    before = victim.counters.snapshot()["drops"]
    forger = Builder(loop.adapters[2].config.mac, gid_bytes(loop.adapters[2].gid))
    for i in range(count):
        loop.inject(1, rkey_guess.write(forger, args, i))
    assert loop.idle(1)
    after = victim.counters.snapshot()["drops"]
    return {reason: after[reason] - before[reason] for reason in after if after[reason] != before[reason]}


@pytest.mark.parametrize("predictable", [False, True], ids=["our-agent", "sequential-baseline"])
def test_guessed_r_keys_reach_no_region_of_another_client(trio: Loopback, predictable: bool) -> None:
    """ReDMArk's guess from the attacker's own region: its R_Key and address plus 1, 2, ... strides (the
    strides ``predict`` finds on the sequential baseline). The victim registers the attacker's region, then
    another client's, in mode 0 with access ``any``: the baseline loses the other client's region to the
    first guess; our agent's random keys leave every guess a bad R_Key."""
    if predictable:
        make_predictable(trio)
    victim = trio.adapters[1]
    own = victim.reg_mr(64, SECURE_PKEY)
    other = victim.reg_mr(64, SECURE_PKEY)
    args = attacker_connection(trio, 0)
    args.rkey, args.va = own.r_key + 0x100, own.addr + PAGE
    args.rkey_stride, args.va_stride = 0x100, PAGE
    drops = guessing(trio, args, GUESSES)
    if predictable:
        assert other.read(other.addr, 7) == b"GUESSED"
        assert drops == {"bad_rkey": GUESSES - 1}  # the first guess landed; the rest name no region
    else:
        assert other.read(other.addr, 64) == bytes(64)
        assert drops == {"bad_rkey": GUESSES}


@pytest.mark.parametrize(
    ("access", "mode", "app_pd", "refused_as"),
    [("any", 0, False, None), ("authenticated", 0, False, "unauthenticated_write"),
     ("authenticated", 2, False, "mac_failure"), ("any", 0, True, "wrong_pd")],
    ids=["security-off", "authenticated-region", "forged-mac", "application-pd"])
def test_a_stolen_r_key_writes_only_with_security_off(trio: Loopback, access: str, mode: int, app_pd: bool,
                                                      refused_as: str | None) -> None:
    """A client's R_Key and address, sniffed, used on the attacker's own connection (a forged MAC in mode 2):
    lands only where security is off (mode 0, access ``any``, the partition's PD)."""
    victim = trio.adapters[1]
    pd = victim.alloc_pd() if app_pd else None
    region = victim.reg_mr(64, None if app_pd else SECURE_PKEY, pd=pd, access=Access(access))
    args = attacker_connection(trio, mode)
    args.rkey, args.va = region.r_key, region.addr
    drops = guessing(trio, args, 1)
    if refused_as is None:
        assert region.read(region.addr, 7) == b"GUESSED" and not drops
    else:
        assert region.read(region.addr, 64) == bytes(64) and drops == {refused_as: 1}


FLOOD = MAX_QPS + 200
UNLIMITED = Limits(half_open_timeout=3600.0, half_open_per_source=MAX_QPS, half_open_per_partition=MAX_QPS,
                   keyless=MAX_QPS)


@pytest.mark.parametrize("limited", [True, False], ids=["our-admission", "no-limits-baseline"])
def test_a_member_connects_during_req_flood(tmp_path: Path, limited: bool) -> None:
    """req_flood's spoofed keyless REQs, more than the victim has QPs, then a member's sealed mode-2 REQ
    in the middle of the flood: with our admission limits it gets a QP and carries traffic; without them
    (the baseline ReDMArk met) the flood holds every QP and the member is refused."""
    loop = Loopback(tmp_path, **({} if limited else {"limits": UNLIMITED}))
    try:
        a, b = loop.adapters
        args = argparse.Namespace(dst_gid=b.gid, pkey=0xFFFF, src_gid=None)
        flooder = Builder(bytes.fromhex("02aaaaaaaaaa"), gid_bytes(b.gid))
        for _ in range(FLOOD if not limited else FLOOD // 2):
            loop.inject(1, req_flood.request(flooder, args))
        assert loop.idle(1)
        if not limited:
            assert len(b.list_qps()) == MAX_QPS
            with pytest.raises(AdapterError, match="refused"):
                a.cm.connect(b.gid, Service.RC, SECURE_PKEY, 2, Scope.SESSION, WAIT)
            return
        qp = a.cm.connect(b.gid, Service.RC, SECURE_PKEY, 2, Scope.SESSION, WAIT)
        for _ in range(FLOOD - FLOOD // 2):
            loop.inject(1, req_flood.request(flooder, args))
        assert loop.idle(1)
        a.post_send(qp.qpn, b"through the flood")
        assert b.wait_recv(qp.remote_qpn or 0, WAIT) == b"through the flood"
        counters = b.counters.snapshot()
        assert counters["drops"]["cm_limit"] >= FLOOD - Limits().half_open_per_partition
        assert len(b.list_qps()) <= 1 + Limits().half_open_per_partition
    finally:
        loop.close()


@pytest.mark.parametrize("bounds", [["--window", "0"], ["--window", "70000"], ["--count", "0"],
                                    ["--duration", "4000"]])
def test_predict_refuses_unbounded_runs(bounds: list[str], tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        predict.main(["--pcap", str(tmp_path / "none.pcap"), *bounds])


def test_predict_strides_wrap_around_the_field() -> None:
    """Sequential QPNs that wrap at 2^24 and R_Keys with a stride of 0x100 are still predicted."""
    assert predict.guesses([0xFFFFFE, 0xFFFFFF], 2, 24) == [0, 1]
    assert predict.score([0x1000 + 0x100 * i for i in range(10)], 1, 32) == (8, 8)
    assert predict.score([0x1000, 0x1100, 0x5000], 16, 32) == (0, 1)
