"""BMv2 JSON (what p4c-bm2-ss writes, BMv2's docs/JSON_format.md) loaded into p4switch's typed IR.

    program = p4switch.bmv2json.load(json.loads(text))     # an ir.Program the engine runs

Whatever the engine cannot run faithfully is refused with :class:`Unsupported`, naming the construct
and where it is (the P4 source position p4c recorded, else the JSON path)."""

from p4switch.bmv2json.errors import BMv2JsonError, Unsupported
from p4switch.bmv2json.loader import NEWEST_VERSION, load

__all__ = ["NEWEST_VERSION", "BMv2JsonError", "Unsupported", "load"]
