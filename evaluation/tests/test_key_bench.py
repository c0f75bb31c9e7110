"""The key distribution bench on a few CAs: every pair keyed, every batch ACKed by a real agent."""

from __future__ import annotations

from evaluation import key_bench


def test_every_pairwise_key_reaches_both_cas_and_every_batch_is_acked() -> None:
    bench = key_bench.run(9)
    # per CA: SM_SK, the partition's P_SK and 8 CA_SK_ij = 10 keys in two batches (7 + 3), its P_Key table
    assert bench.keys == 9 * 10 and bench.mads == 9 * 3 and bench.acked == bench.mads
    assert [name for name, _ in bench.rows()] == ["generate", "SM send", "SM: generate + send",
                                                  "CAs unwrap + ACK", "SM ACKs", "end to end"]
    assert bench.total == bench.sm + bench.receive + bench.acks
