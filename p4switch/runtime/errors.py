"""P4Runtime errors: a canonical gRPC code plus a message, raised anywhere below the servicer and turned
into a p4.v1.Error (per update) or an RPC status by the server."""

from __future__ import annotations

import grpc

from p4switch.engine import api as engine

# The engine's exceptions mapped onto the canonical codes (the mapping api.py suggests).
_ENGINE_CODES: dict[type[engine.EngineError], grpc.StatusCode] = {
    engine.UnknownName: grpc.StatusCode.NOT_FOUND,
    engine.EntryExists: grpc.StatusCode.ALREADY_EXISTS,
    engine.EntryNotFound: grpc.StatusCode.NOT_FOUND,
    engine.InvalidEntry: grpc.StatusCode.INVALID_ARGUMENT,
    engine.ConstDefault: grpc.StatusCode.PERMISSION_DENIED,
    engine.TableFull: grpc.StatusCode.RESOURCE_EXHAUSTED,
    engine.ProgramError: grpc.StatusCode.INVALID_ARGUMENT,
}


class P4RuntimeError(Exception):
    """An error with the canonical code the P4Runtime specification prescribes for it."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    @classmethod
    def from_engine(cls, error: engine.EngineError) -> P4RuntimeError:
        for kind, code in _ENGINE_CODES.items():
            if isinstance(error, kind):
                return cls(code, str(error))
        return cls(grpc.StatusCode.INTERNAL, str(error))


def invalid(message: str) -> P4RuntimeError:
    return P4RuntimeError(grpc.StatusCode.INVALID_ARGUMENT, message)


def already_exists(message: str) -> P4RuntimeError:
    return P4RuntimeError(grpc.StatusCode.ALREADY_EXISTS, message)


def not_found(message: str) -> P4RuntimeError:
    return P4RuntimeError(grpc.StatusCode.NOT_FOUND, message)


def unimplemented(message: str) -> P4RuntimeError:
    return P4RuntimeError(grpc.StatusCode.UNIMPLEMENTED, message)
