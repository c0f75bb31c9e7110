"""Traceback (DDPM, seed 000 section 5.4) on the mesh with adaptive routing, the torus and the hypercube:
every host acts as a spoofing attacker and the SM names it from one packet's marking field."""

from __future__ import annotations

import shutil

import pytest
from ibsec import wireshark as ws

from topologies import run

from . import scenario
from .conftest import launched, needs_root

pytestmark = needs_root

GRIDS = {
    # fabric, extra options, the two victims (far apart; agents run only there: attackers use the tools)
    "mesh-4x4-adaptive": ("mesh", {"routing": "adaptive"}, ("h0", "h15")),
    "torus-4x4": ("torus", {}, ("h0", "h10")),
    "hypercube-3": ("hypercube", {}, ("h0", "h7")),
}


@pytest.mark.parametrize("name", list(GRIDS))
def test_traceback_names_every_host_from_one_packet(name: str) -> None:
    kind, extra, victims = GRIDS[name]
    options = run.RunOptions(fabric=kind, agents=victims, **extra)  # type: ignore[arg-type]
    with launched(options) as fabric_run:
        traced = scenario.traceback_of_every_host(fabric_run, victims)
        assert len(traced) == len(fabric_run.hosts)
        for host, event in traced.items():
            info = fabric_run.hosts[host]
            assert (event["traced_host"], event["traced_switch"], event["traced_port"]) == \
                (host, info.switch, info.port), event
            assert event["scheme"] == "ddpm" and event["packets_needed"] == 1
            assert event["claimed_host"] != host
    check_captures_in_wireshark(fabric_run, victims, traced)


def check_captures_in_wireshark(fabric_run: run.FabricRun, victims: tuple[str, ...],
                                traced: dict[str, dict[str, object]]) -> None:
    """The victims' port captures (complete: the run is over), read by tshark with our dissector and the
    run's topology: no malformed frame, and every spoofed flood traced by its DDPM mark to the host the SM
    named (what a user sees opening the receiver's pcap in Wireshark)."""
    if shutil.which("tshark") is None:
        print("tshark is not installed (scripts/setup.sh installs it): captures not read with Wireshark")
        return
    prefs = {"ibsec.topology": str(fabric_run.topology_file), "ibsec.at_receiver": "TRUE"}
    seen = set()
    for victim in victims:
        info = fabric_run.hosts[victim]
        frames = ws.read_fields(fabric_run.run_dir / "pcaps" / f"{info.switch}-{info.port}_out.pcap",
                                ["ibsec.mf.vector", "_ws.malformed", "_ws.expert.message"], prefs)
        assert [f for f in frames if f["_ws.malformed"]] == [], victim
        seen |= scenario.spoofs_seen(frames)
    assert {(str(e["claimed_host"]), str(e["traced_host"])) for e in traced.values()} <= seen
