"""The hostile-input suite: structure-aware fuzzing of a live component, then its counters and logs checked.

``python -m ibsec.fuzz COMPONENT [options]`` (``make fuzz`` runs every component in ``FUZZ_TARGETS``). One
module per component, found through :data:`COMPONENTS`, each with ``main(argv) -> int`` (0: every check
held); what they share:

- :mod:`.mutate`: structure-aware mutation of RoCEv2 frames (BTH opcodes and fields, extension headers,
  STH, lengths, MAD header, CM and vendor MAD fields, authentication trailers), with fix-ups (lengths,
  ICRC, a trailer sealed again under a key the fuzzer holds) so mutations reach past the outer checks;
- :mod:`.report`: the summary every component prints (frames, internal errors, tracebacks, drops by
  reason) as text and as one JSON line, and the exit status.

Components: ``agent`` (:mod:`.agent`) and ``sm`` (:mod:`.sm`: ``sm run`` against software switches,
with its own summary of where each frame went). Another component plugs in by adding its module here.
"""

from __future__ import annotations

COMPONENTS: dict[str, str] = {
    "agent": "ibsec.fuzz.agent",
    "sm": "ibsec.fuzz.sm",
}
"""Component name -> module with ``main(argv: list[str] | None) -> int``."""
