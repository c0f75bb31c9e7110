"""pytest runs only the wrappers here; lib/ and tests/ are PTF code that test_ptf.py runs through `ptf`
(base_test.py and ibsec_test.py would otherwise match pytest's *_test.py pattern)."""

collect_ignore_glob = ["lib/*", "tests/*", "bench_policies.py"]
