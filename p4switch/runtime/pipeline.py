"""The forwarding pipeline config of one device (SetForwardingPipelineConfig, GetForwardingPipelineConfig):
verify a config (the program loads and its P4Info names what the program has), save it, commit it (the
engine switch replaces the running one and every entity handler starts afresh), and give it back."""

from __future__ import annotations

import logging
from collections.abc import Callable

import grpc
from finsy.proto import p4r

from p4switch.engine import api as engine
from p4switch.runtime import device_config
from p4switch.runtime.device import Device
from p4switch.runtime.entity import Pipeline
from p4switch.runtime.errors import P4RuntimeError, invalid, not_found, unimplemented
from p4switch.runtime.p4info import P4InfoIndex

Action = p4r.SetForwardingPipelineConfigRequest.Action
ResponseType = p4r.GetForwardingPipelineConfigRequest.ResponseType


class PipelineConfigs:
    """The committed pipeline (``current``) and the one VERIFY_AND_SAVE keeps for COMMIT."""

    def __init__(self, device: Device, log: logging.Logger, on_commit: Callable[[Pipeline], None]) -> None:
        self.device = device
        self.log = log
        self.on_commit = on_commit
        """called with a pipeline about to run: the handlers drop the old pipeline's state"""
        self.current: Pipeline | None = None
        self._saved: Pipeline | None = None

    def set(self, request: p4r.SetForwardingPipelineConfigRequest) -> None:
        """Apply a SetForwardingPipelineConfig request (the primary client was checked)."""
        if request.action == Action.COMMIT:
            self._commit_saved(request)
        elif request.action in (Action.VERIFY, Action.VERIFY_AND_SAVE, Action.VERIFY_AND_COMMIT):
            prepared = self._prepare(request)
            if request.action == Action.VERIFY_AND_SAVE:
                self._saved = prepared
            elif request.action == Action.VERIFY_AND_COMMIT:
                self._commit(prepared)
        elif request.action == Action.RECONCILE_AND_COMMIT:
            raise unimplemented("RECONCILE_AND_COMMIT is not supported by p4switch")
        else:
            raise invalid("SetForwardingPipelineConfig needs an action")

    def _prepare(self, request: p4r.SetForwardingPipelineConfigRequest) -> Pipeline:
        if not request.HasField("config") or not request.config.HasField("p4info"):
            raise invalid("the config with its P4Info is required")
        config = p4r.ForwardingPipelineConfig()
        config.CopyFrom(request.config)
        if not config.p4_device_config:  # keep the running program (e.g. one given on the command line)
            config.p4_device_config = self.device.device_config
        if not config.p4_device_config:
            raise invalid("p4_device_config is empty: give the program JSON from p4switch-cc")
        program = device_config.unwrap(config.p4_device_config)
        if program.wrapped:
            self.log.info("p4_device_config is a %s (reassign %s, extras %s): loading its device_data",
                          device_config.MESSAGE_NAME, program.reassign, program.extras or "none")
        try:
            switch = self.device.load(program.program)
        except engine.EngineError as err:
            raise invalid(f"the device config cannot be loaded: {err}") from None
        index = P4InfoIndex.build(config.p4info)
        _check_names(switch, index)
        return Pipeline(config, index, switch)

    def _commit(self, pipe: Pipeline) -> None:
        self.on_commit(pipe)
        self.device.install(pipe.switch, device_config.unwrap(pipe.config.p4_device_config).program)
        self.current = pipe
        self.log.info("pipeline committed: %s (%d tables)", pipe.config.p4info.pkg_info.name or "program",
                      len(pipe.index.tables))

    def _commit_saved(self, request: p4r.SetForwardingPipelineConfigRequest) -> None:
        if request.HasField("config"):
            raise invalid("COMMIT takes no config: it commits the one saved by VERIFY_AND_SAVE")
        if self._saved is None:
            raise not_found("no saved config to commit (VERIFY_AND_SAVE first)")
        self._commit(self._saved)
        self._saved = None

    def get(self, request: p4r.GetForwardingPipelineConfigRequest) -> p4r.GetForwardingPipelineConfigResponse:
        """The committed config, the parts ``request.response_type`` asks for (empty before a commit)."""
        response = p4r.GetForwardingPipelineConfigResponse()
        pipe = self.current
        if pipe is None:
            return response
        config = response.config
        if pipe.config.HasField("cookie"):
            config.cookie.CopyFrom(pipe.config.cookie)
        if request.response_type in (ResponseType.ALL, ResponseType.P4INFO_AND_COOKIE):
            config.p4info.CopyFrom(pipe.config.p4info)
        if request.response_type in (ResponseType.ALL, ResponseType.DEVICE_CONFIG_AND_COOKIE):
            config.p4_device_config = pipe.config.p4_device_config
        response.config.SetInParent()
        return response

    def require(self) -> Pipeline:
        """The running pipeline; FAILED_PRECONDITION before the first commit."""
        if self.current is None or self.device.switch is None:
            raise P4RuntimeError(grpc.StatusCode.FAILED_PRECONDITION,
                                 "No forwarding pipeline config set for this device")
        return self.current


def _check_names(switch: engine.Switch, index: P4InfoIndex) -> None:
    """Refuse a P4Info that names objects the program does not have (P4Info of another program)."""
    try:
        for table in index.tables.values():
            switch.table_get_default(table.name)
        for counter in index.counters.values():
            switch.counter_size(counter.name)
        for meter in index.meters.values():
            switch.meter_size(meter.name)
        for register in index.registers.values():
            switch.register_size(register.name)
        for profile in index.profiles.values():
            switch.members(profile.name)
        for value_set in index.value_sets.values():
            switch.value_set_get(value_set.name)
    except engine.EngineError as err:
        raise invalid(f"the P4Info does not match the device config: {err}") from None
