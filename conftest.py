"""The test process: gRPC's fork support is off before any test module imports grpc (topologies/__init__.py
says why; the launcher and the demo, which this process runs in-process, need it off)."""

import os

os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
