"""The host agent: a software RoCEv2 channel adapter with the project's security (DESIGN sections 3-5).

One process per host, in the host's network namespace, speaking raw Ethernet frames on one interface:

- :mod:`.adapter`   the channel adapter (P_Key table, QPs, SEND / RDMA WRITE, ACKs, retransmission, modes)
- :mod:`.receive`   its receive path: a frame's checks in a real CA's order, delivery, ACKs, RNR NAKs
- :mod:`.send`      its send path: messages as sealed path-MTU packets, the send window, retransmission
- :mod:`.qp`        queue pairs, partitions and the per-connection security state
- :mod:`.frames`    the fast path: header view of received frames, Scapy templates patched per packet
- :mod:`.cm`        connection management on QP1 (REQ/REP/RTU/REJ, SIDR, DREQ/DREP) with wrapped keys
- :mod:`.mads`      the SM's vendor MADs in, traps 257 / 258 and the security trap out
- :mod:`.keyring`   the keys this CA holds; :mod:`.memory` regions and extended memory protection
- :mod:`.traps`     rate limiting of traps and consecutive-MAC-failure streaks
- :mod:`.counters`  drops by reason and statistics
- :mod:`.commands` the control socket's commands (:mod:`ibsec.control`); :mod:`.ctl` the CLI
- :mod:`.perf`      perftest-like runs (send latency, write bandwidth)
- :mod:`.daemon`    the process (``ibsec-agent``) on its port (:mod:`ibsec.rawport`)

Its test fabric (namespaces, veths, provisioning, agents as processes) and its benchmark are
``labs.agent_lab`` and ``labs.agent_bench``, outside the product.
"""
