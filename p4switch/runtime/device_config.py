"""``p4_device_config`` as BMv2's P4Runtime server (p4lang/PI) reads it: either the program JSON itself, or
PI's legacy ``p4.tmp.P4DeviceConfig`` message that wraps it, which p4lang/tutorials' client
(utils/p4runtime_lib) and many older controllers send::

    message P4DeviceConfig {           // package p4.tmp
      bool reassign = 1;               // re-create the device (p4switch always swaps the whole pipeline)
      message Extras { map<string, string> kv = 1; }
      Extras extras = 2;               // target options (PI passes them to the device; p4switch logs them)
      bytes device_data = 3;           // the program JSON
    }

The message class is built here from a descriptor (in a private pool, so a client library that defines
``p4.tmp`` in the same process does not clash)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message, message_factory

from p4switch.runtime.errors import invalid

MESSAGE_NAME = "p4.tmp.P4DeviceConfig"
_F = descriptor_pb2.FieldDescriptorProto


def _file_descriptor() -> descriptor_pb2.FileDescriptorProto:
    proto = descriptor_pb2.FileDescriptorProto(name="p4switch/p4_tmp_device_config.proto", package="p4.tmp",
                                               syntax="proto3")
    config = proto.message_type.add(name="P4DeviceConfig")
    extras = config.nested_type.add(name="Extras")
    entry = extras.nested_type.add(name="KvEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=_F.TYPE_STRING, label=_F.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=_F.TYPE_STRING, label=_F.LABEL_OPTIONAL)
    extras.field.add(name="kv", number=1, type=_F.TYPE_MESSAGE, label=_F.LABEL_REPEATED,
                     type_name=".p4.tmp.P4DeviceConfig.Extras.KvEntry")
    config.field.add(name="reassign", number=1, type=_F.TYPE_BOOL, label=_F.LABEL_OPTIONAL)
    config.field.add(name="extras", number=2, type=_F.TYPE_MESSAGE, label=_F.LABEL_OPTIONAL,
                     type_name=".p4.tmp.P4DeviceConfig.Extras")
    config.field.add(name="device_data", number=3, type=_F.TYPE_BYTES, label=_F.LABEL_OPTIONAL)
    return proto


def _message_class() -> Any:
    pool = descriptor_pool.DescriptorPool()
    pool.Add(_file_descriptor())
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(MESSAGE_NAME))


P4DeviceConfig = _message_class()
"""The ``p4.tmp.P4DeviceConfig`` message class (fields reassign, extras.kv, device_data)."""


@dataclass(frozen=True)
class DeviceConfig:
    """What a p4_device_config carried: the program JSON and, when it came wrapped, the wrapper's fields."""

    program: bytes
    wrapped: bool = False
    reassign: bool = False
    extras: dict[str, str] = field(default_factory=dict)


def wrap(program: bytes, reassign: bool = True, extras: dict[str, str] | None = None) -> bytes:
    """``program`` inside a serialized P4DeviceConfig, as the tutorials' client sends it."""
    config = P4DeviceConfig(reassign=reassign, device_data=program)
    config.extras.kv.update(extras or {})
    return bytes(config.SerializeToString())


def unwrap(data: bytes) -> DeviceConfig:
    """The program in a non-empty p4_device_config. JSON (its first non-blank byte is ``{``) is the
    program itself, anything else must be a P4DeviceConfig with device_data. Raises P4RuntimeError
    (INVALID_ARGUMENT)."""
    if data.lstrip()[:1] == b"{":
        return DeviceConfig(data)
    config = P4DeviceConfig()
    try:
        config.ParseFromString(data)
    except message.DecodeError:
        raise invalid("p4_device_config is neither program JSON nor a p4.tmp.P4DeviceConfig") from None
    if not config.device_data:
        raise invalid("p4_device_config is a p4.tmp.P4DeviceConfig without device_data (the program JSON)")
    return DeviceConfig(bytes(config.device_data), True, bool(config.reassign), dict(config.extras.kv))
