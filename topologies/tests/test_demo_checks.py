"""`make demo` fails when what it shows does not hold: each of its checks against one summary."""

from __future__ import annotations

from typing import Any

import pytest

from topologies.demo import CHECKS

GOOD: dict[str, Any] = {  # the fields of a passing run's JSON line that the checks read
    "attacker": "h7", "traced_host": "h7", "packets_to_trace": 1,
    "attack_packets_reaching_victim_after_filter": 0, "legit_delivery_ratio": 1.0, "filter_flushed": True,
}


def failed(summary: dict[str, Any]) -> list[str]:
    return [name for name, holds in CHECKS.items() if not holds(summary)]


def test_a_passing_run_passes_every_check() -> None:
    assert failed(GOOD) == []
    assert failed({**GOOD, "legit_delivery_ratio": 0.99}) == []


@pytest.mark.parametrize(("field", "value", "check"), [
    ("traced_host", "h1", "the true attacker traced"),
    ("packets_to_trace", 2, "traced from 1 packet"),
    ("attack_packets_reaching_victim_after_filter", 1,
     "no attack packet reached the victim after the filter"),
    ("legit_delivery_ratio", 0.98, "legitimate delivery ratio at least 0.99"),
    ("filter_flushed", False, "the filter flushed"),
])
def test_each_broken_claim_fails_its_check(field: str, value: Any, check: str) -> None:
    assert failed({**GOOD, field: value}) == [check]
