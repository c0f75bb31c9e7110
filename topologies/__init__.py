"""Mininet fabrics of P4 switches for ibsec-fabric: the shapes (``fabrics``), the SM's topology file
(``topofile``), the Mininet network of P4 target processes (``network``), one launch with the SM and the
host agents (``run``), the ``ibsec-fabric`` launcher (``launch``) and ``make demo`` (``demo``).

gRPC's fork support is turned off here, before anything imports grpc. A launch talks P4Runtime (gRPC
threads running) while Mininet forks the commands that build the fabric (``ip``, the cluster's remote
shells, with a ``preexec_fn``, so a real fork). With fork support on, gRPC's after-fork handler restarts
its poller in each such child, which then prints "epoll_wait error: Bad file descriptor" and, about one
fork in eight on a loaded machine, dies before it runs its command: a loaded CI run lost a cluster link
that way three times in a row. The launch only forks to exec, which needs no gRPC in the child.
"""

import os

os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
