"""The host agent: a software RoCEv2 channel adapter with the project's security (DESIGN sections 3-5).

One process per host, in the host's network namespace, speaking raw Ethernet frames on one interface:

- :mod:`.adapter`   the channel adapter (P_Key table, QPs, CM, SEND / RDMA WRITE, ACKs, security modes)
- :mod:`.memory`    registered memory regions, R_Key and bounds checks, sRDMA extended memory protection
- :mod:`.traps`     traps 257 / 258 and the security trap, authenticated and rate-limited
- :mod:`.counters`  drops by reason and the other statistics the control socket reports
- :mod:`.control`   the JSON-lines control socket; :mod:`.ctl` its CLI (``ibsec-agentctl``)
- :mod:`.perf`      perftest-like traffic runs (send latency, write bandwidth)
- :mod:`.daemon`    the process: arguments, log file, raw socket, threads, SIGTERM (``ibsec-agent``)
"""
