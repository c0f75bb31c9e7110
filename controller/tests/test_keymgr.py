"""Key distribution bookkeeping with a fake clock: members only, fresh TIDs on retries, give up, ACK match."""

from __future__ import annotations

from pathlib import Path

from ibsec import addressing, keybatch, layers, mad_auth
from ibsec.agent.adapter import Adapter, AgentConfig
from ibsm.keymgr import Delivery, KeyManager, KeyOptions
from ibsm.topology import Topology
from scapy.layers.l2 import Ether

from labs.sm_fabric import ca_keys


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def test_deliveries_retries_and_acks(fat_tree: Topology) -> None:
    store = ca_keys(fat_tree)
    clock = Clock()
    km = KeyManager(fat_tree, list(fat_tree.partitions), store, KeyOptions(timeout=1.0, attempts=2), clock)
    plan = km.plan()
    by_host = {h.name: [d.what for d in plan if d.host == h.name] for h in fat_tree.hosts}
    # one key batch (all of h1's keys fit one MAD), then the P_Key table
    assert by_host["h1"] == [("SM_SK", "P_SK 0x0001", "P_SK 0x7fff", "CA_SK_IJ h1-h2", "CA_SK_IJ h1-h3",
                              "CA_SK_IJ h1-h4"), ("P_Key table",)]
    assert "P_SK 0x0001" not in by_host["h2"][0]  # not a member of compute
    first = plan[0]
    frame = km.frame(first)
    # what the host's agent sees: a vendor Set, authenticated under its CA_SK, the keys wrapped under it too
    h1 = fat_tree.hosts[0]
    ca_sk = store.ca_key(h1.guid)
    mad = bytes(mad_auth.verify_packet(ca_sk.material, Ether(frame)))[: layers.MAD_LEN]
    got = keybatch.open_batch(ca_sk, mad[:24], mad[24:], h1.guid)
    assert got[:3] == [km.sm_sk, km.partition_keys[1], km.partition_keys[0x7FFF]]
    assert got[3:] == sorted((k for o, k in km.pairwise.items() if h1.guid in o), key=lambda k: k.owner)
    assert ca_sk.material not in frame and all(k.material not in frame for k in got)
    clock.now = 0.5
    assert km.due() == ([], [])
    clock.now = 1.1
    assert km.due() == ([first], [])
    km.frame(first)
    assert first.attempts == 2 and len(set(first.tids)) == 2  # a retry never reuses a TransactionID
    clock.now = 2.2
    assert km.due() == ([], [])  # the second attempt waits twice as long (backoff)
    clock.now = 3.2
    assert km.due() == ([], [first])
    # only the addressed host's ACK with a TID of the delivery completes it, once
    other = plan[1]
    km.frame(other)
    tid = other.tids[-1]
    assert km.on_response(fat_tree.hosts[1], tid, 0) is None  # wrong host
    assert km.on_response(h1, tid, 0) == (other, 0)
    assert km.on_response(h1, tid, 0) is None  # answered once
    assert all(k.material.hex() not in repr(km) for k in [km.sm_sk, *km.partition_keys.values()])


def test_window_bounds_the_mads_outstanding(fat_tree: Topology) -> None:
    """At most ``window`` MADs wait for an ACK; each ACK (or give-up) lets the next one go, in plan order."""
    store = ca_keys(fat_tree)
    clock = Clock()
    km = KeyManager(fat_tree, list(fat_tree.partitions), store, KeyOptions(window=3, attempts=1), clock)
    plan = km.plan()
    assert km.sendable() == plan[:3]
    for delivery in km.sendable():
        km.frame(delivery)
    assert km.sendable() == [] and km.outstanding() == len(plan)
    host = next(h for h in fat_tree.hosts if h.name == plan[1].host)
    assert km.on_response(host, plan[1].tids[0], 0) == (plan[1], 0)
    assert km.sendable() == [plan[3]]
    clock.now = 1.1
    assert km.due() == ([], [plan[0], plan[2]])  # out of attempts: no longer in the window
    assert km.sendable() == plan[3:6] and km.outstanding() == len(plan) - 3


def test_backoff_doubles_the_wait_up_to_its_bound() -> None:
    options = KeyOptions(timeout=1.0, backoff=2.0, max_timeout=5.0)
    assert [options.wait(n) for n in range(1, 6)] == [1.0, 2.0, 4.0, 5.0, 5.0]


def test_generated_keys_survive_a_restart(fat_tree: Topology, tmp_path: Path) -> None:
    store = ca_keys(fat_tree)
    saved = tmp_path / "sm-generated.keys"
    first = KeyManager(fat_tree, list(fat_tree.partitions), store, KeyOptions(), saved=saved)
    assert oct(saved.stat().st_mode & 0o777) == "0o600"
    again = KeyManager(fat_tree, list(fat_tree.partitions), store, KeyOptions(), saved=saved)
    assert again.sm_sk == first.sm_sk and again.partition_keys == first.partition_keys
    assert again.pairwise == first.pairwise
    fresh = KeyManager(fat_tree, list(fat_tree.partitions), store, KeyOptions())
    assert fresh.sm_sk != first.sm_sk


def _pkey_table_delivery(km: KeyManager, host: str) -> Delivery:
    return next(d for d in km.plan() if d.host == host and d.what == ("P_Key table",))


def test_pkey_table_mad_carries_each_partition_security_mode(fat_tree: Topology) -> None:
    store = ca_keys(fat_tree)
    km = KeyManager(fat_tree, list(fat_tree.partitions), store, KeyOptions())
    entries = {}
    for host in fat_tree.hosts:
        frame = km.frame(_pkey_table_delivery(km, host.name))
        mad = mad_auth.verify_packet(store.ca_key(host.guid).material, Ether(frame))
        body = mad[layers.PKeyTable]
        entries[host.name] = dict(zip(body.pkeys, body.secmodes, strict=True))
    assert entries["h1"] == entries["h3"] == {0x8001: 2, 0xFFFF: 0}  # compute is sth-aead, Default none
    assert entries["h2"] == entries["h4"] == {0xFFFF: 0}  # not members of compute


def test_agent_takes_the_partition_mode_from_the_sm_table(fat_tree: Topology, tmp_path: Path) -> None:
    """The SM's own frame, fed to a real agent: the partition gets its mode and the ACK completes it."""
    store = ca_keys(fat_tree)
    km = KeyManager(fat_tree, list(fat_tree.partitions), store, KeyOptions())
    h1 = fat_tree.hosts[0]
    store.provision_host(h1.guid, tmp_path / "h1.keys")
    sent: list[bytes] = []
    mac = bytes.fromhex(addressing.guid_to_mac(h1.guid).replace(":", ""))
    agent = Adapter(AgentConfig(name="h1", mac=mac, subnet=1, lid=h1.lid, key_file=tmp_path / "h1.keys",
                                sm_gid=fat_tree.sm_gid), sent.append)
    delivery = _pkey_table_delivery(km, "h1")
    agent.receive(km.frame(delivery))
    compute = agent.own_partition(0x0001)
    assert compute is not None and compute.mode == 2 and compute.full_member
    reply = mad_auth.verify_packet(store.ca_key(h1.guid).material, Ether(sent[-1]))[layers.MAD]
    assert km.on_response(h1, reply.transaction_id, reply.status) == (delivery, layers.MadStatus.OK)


def test_replan_after_an_agent_restart(fat_tree: Topology) -> None:
    """Issue 14, defect 10: a restarted host gets everything again; what was in flight to its earlier
    start is dropped (its late ACK is unexpected), the other hosts' deliveries are left alone."""
    store = ca_keys(fat_tree)
    km = KeyManager(fat_tree, list(fat_tree.partitions), store, KeyOptions(timeout=1.0, attempts=2), Clock())
    plan = km.plan()
    h1_old = [d for d in plan if d.host == "h1"]
    h2 = next(d for d in plan if d.host == "h2")
    assert not km.in_flight("h1")
    km.frame(h1_old[0])
    km.frame(h2)
    assert km.in_flight("h1") and km.in_flight("h2")
    fresh = km.replan("h1")
    assert [d.what for d in fresh] == [d.what for d in h1_old] and not km.in_flight("h1")
    assert all(d.attempts == 0 for d in fresh) and fresh[0] is not h1_old[0]
    assert [d for d in km.deliveries if d.host == "h1"] == fresh  # the earlier ones are forgotten
    assert h2 in km.deliveries and km.in_flight("h2")
    assert km.on_response(fat_tree.hosts[0], h1_old[0].tids[0], 0) is None  # a late ACK
