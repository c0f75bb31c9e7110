"""In-process labs and benchmarks: fabrics built in one process to measure or attack the products.

They sit above the products in the import order (tests/test_import_order.py): a lab wires the SM to the
P4 target's own P4Runtime service (``sm_fabric``), or drives live host agents with the attack tools
(``attack_outcomes``), which no product package may import. Each module runs as ``python -m labs.NAME``:

- ``sm_fabric``: a whole fabric of software switches in this process, for the SM's tests, benchmarks,
  outcomes and fuzzer;
- ``sm_bench``: how fast the SM turns a trap into a filter, how many traps it absorbs (``make bench``);
- ``sm_outcomes``: the SM's attacks of issue 14, one table of outcomes;
- ``attack_outcomes``: every attack tool against live agents, one table of outcomes.
"""
