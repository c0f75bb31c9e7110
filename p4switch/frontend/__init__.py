"""The p4switch front end: P4_16 for v1model -> the typed IR (p4switch.ir) and the P4Info.

    from p4switch.frontend import compile_file
    compiled = compile_file(Path("main.p4"))   # raises P4Error (file:line:col) for bad input
    compiled.program, compiled.p4info, compiled.ir_json()

The passes, in the order they run, are PASSES in frontend/passes.py; `p4switch-cc` is frontend/cli.py.
"""

from p4switch.frontend.errors import P4Error
from p4switch.frontend.passes import PASSES, Compilation, Compiled, compile_file

__all__ = ["PASSES", "Compilation", "Compiled", "P4Error", "compile_file"]
