"""The front end's parts, one concern each, and what they share; the passes (frontend/passes.py) call them.

Each part is a small class (see scope.Part) that reaches the others through the `FrontEnd` that holds them
all: declarations (the symbol table), expressions (typing and constant folding), side effects (P4's order
of evaluation), calls, inlining, statements, parsers, tables and v1model. Lowering a block is one walk of
its parse tree in which the parts call each other (a statement lowers its expressions; a call inlines an
action's statements).
"""

from __future__ import annotations

from p4switch import ir
from p4switch.frontend.calls import Calls
from p4switch.frontend.declarations import Declarations
from p4switch.frontend.effects import Effects
from p4switch.frontend.expressions import Expressions
from p4switch.frontend.inlining import Inliner
from p4switch.frontend.p4info import Extras
from p4switch.frontend.parsers import Parsers
from p4switch.frontend.source import Source
from p4switch.frontend.statements import Statements
from p4switch.frontend.tables import Tables
from p4switch.frontend.v1model import V1Model, V1Switch


class FrontEnd:
    """The parts lowering one program, and the source they read."""

    def __init__(self, source: Source) -> None:
        self.source = source
        self.decls = Declarations(self)
        self.exprs = Expressions(self)
        self.effects = Effects(self)
        self.calls = Calls(self)
        self.inliner = Inliner(self)
        self.stmts = Statements(self)
        self.parsers = Parsers(self)
        self.tables = Tables(self)
        self.v1 = V1Model(self)

    def program(self, v1switch: V1Switch, parsers: list[ir.Parser], controls: list[ir.Control]) -> ir.Program:
        """The typed IR of the whole program, from the lowered blocks and what the parts collected."""
        return ir.Program(
            source=self.source.file,
            errors=tuple(self.decls.errors),
            enums=self.decls.enums,
            headers=self.decls.headers,
            structs=self.decls.structs,
            externs=tuple(self.v1.extern_by_name.values()),
            actions=tuple(a for a in self.tables.actions.values() if a is not None),
            tables=tuple(self.tables.tables),
            parsers=tuple(parsers),
            controls=tuple(controls),
            digests=tuple(self.v1.digests.values()),
            pipeline=v1switch.pipeline,
        )

    def p4info_extras(self) -> Extras:
        """What the P4Info passes read that the IR does not carry (annotations, actions called directly)."""
        t = self.tables
        return Extras(
            t.action_annos,
            t.table_annos,
            self.v1.extern_annos,
            self.decls.header_annos,
            t.key_annos,
            t.param_annos,
            t.action_ref_annos,
            t.called_actions,
            self.v1.value_set_fields,
            {**t.type_names, **self.decls.field_type_names},
            self.decls.new_types,
            self.decls.ser_enums,
            self.v1.unlisted,
        )
