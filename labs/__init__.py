"""Labs and benchmarks: the fabrics the products are measured and attacked on, kept out of the products.

They sit above the products in the import order (tests/test_import_order.py): a lab wires the SM to the
P4 target's own P4Runtime service (``sm_fabric``), or drives live host agents with the attack tools
(``attack_outcomes``), which no product package may import. Each module runs as ``python -m labs.NAME``:

- ``sm_fabric``: a whole fabric of software switches in this process, for the SM's tests, benchmarks,
  outcomes and fuzzer;
- ``agent_lab``: hosts in network namespaces with agents as subprocesses, for the agent's tests,
  benchmark and fuzzer, the attack outcomes and the evaluation's agent experiments;
- ``sm_bench``: how fast the SM turns a trap into a filter, how many traps it absorbs (``make bench``);
- ``agent_bench``: two agents' latency and throughput per security mode and payload (``make bench``);
- ``transport_bench``: the GCM transport's seal and open cost per packet, without agents (``make bench``);
- ``skc_bench``: the session key cache's hit rates and lookup cost (``make bench``);
- ``sm_outcomes``: the SM's attacks of issue 14, one table of outcomes;
- ``attack_outcomes``: every attack tool against live agents, one table of outcomes.
"""
