"""Type checker and IR lowering in one pass: parse tree -> the IR of docs/p4switch-ir.md.

Every name is resolved, every expression typed (integer literals take the type of their context), constants
are folded, direct action calls are inlined with copy-in/copy-out, and structs are flattened where the IR
wants field lists. Errors are P4Error at the original file:line:col.
"""

from __future__ import annotations

from p4switch import ir
from p4switch.frontend import p4info
from p4switch.frontend.calls import Calls
from p4switch.frontend.declarations import Declarations
from p4switch.frontend.effects import Effects
from p4switch.frontend.errors import P4Error
from p4switch.frontend.expressions import Expressions
from p4switch.frontend.inlining import Inliner
from p4switch.frontend.parsers import Parsers
from p4switch.frontend.preprocess import SourceMap
from p4switch.frontend.source import PTree, Source, kids, name_of, read_annotations
from p4switch.frontend.statements import Statements
from p4switch.frontend.tables import Tables
from p4switch.frontend.v1model import V1Model

__all__ = ["Elaborator", "P4Error"]


class Elaborator:
    """Lowers one parsed program with its parts (one concern each). Use `run()`: the result is the typed
    IR (p4switch.ir.Program); the annotations P4Info needs stay in side tables of the parts."""

    def __init__(self, tree: PTree, smap: SourceMap, text: str, source: str) -> None:
        self.tree = tree
        self.source = Source(smap, text, source)
        self.parser_blocks: list[ir.Parser] = []
        self.control_blocks: list[ir.Control] = []
        self.decls = Declarations(self)
        self.exprs = Expressions(self)
        self.effects = Effects(self)
        self.calls = Calls(self)
        self.inliner = Inliner(self)
        self.stmts = Statements(self)
        self.parsers = Parsers(self)
        self.tables = Tables(self)
        self.v1 = V1Model(self)

    name = staticmethod(name_of)
    annos = staticmethod(read_annotations)

    def p4info_extras(self) -> p4info.Extras:
        """What the P4Info passes read that the IR does not carry (annotations, actions called directly)."""
        return p4info.Extras(
            self.tables.action_annos,
            self.tables.table_annos,
            self.v1.extern_annos,
            self.decls.header_annos,
            self.tables.key_annos,
            self.tables.param_annos,
            self.tables.action_ref_annos,
            self.tables.called_actions,
        )

    def run(self) -> ir.Program:
        for decl in kids(self.tree):
            self.decls.declare(decl)
        return self.v1.lower_main()
