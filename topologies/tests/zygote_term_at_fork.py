"""Preloaded by a test's zygote: every child it forks is sent SIGTERM at once, inside os.fork(), before
the child has dropped the zygote's handlers (the window a stop request can hit on a loaded machine)."""

from __future__ import annotations

import os
import signal

os.register_at_fork(after_in_child=lambda: os.kill(os.getpid(), signal.SIGTERM))
