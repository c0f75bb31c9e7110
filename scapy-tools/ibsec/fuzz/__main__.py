"""``python -m ibsec.fuzz COMPONENT [options]``: run one component's hostile-input suite."""

from __future__ import annotations

import importlib
import sys

from . import COMPONENTS


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in COMPONENTS:
        names = "|".join(COMPONENTS)
        print(f"usage: python -m ibsec.fuzz {names} [options]   (--help after the component for its options)",
              file=sys.stderr)
        return 2
    module = importlib.import_module(COMPONENTS[argv[0]])
    status: int = module.main(argv[1:])
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
