"""The P4Runtime side of the `p4switch` process: a gRPC server that translates P4Runtime messages (ids,
byte strings) into calls on the engine interface (names, ints), with arbitration, packet I/O and digests.

``server`` is the gRPC servicer, a thin service over one handler per entity kind (``entity`` says what
they share; README.md lists them). Below them: ``errors`` (P4Runtime error codes), ``p4info`` (id ->
name/width index of a P4Info), ``codec`` (byte strings and entities <-> engine values), ``arbitration``
(primary election), ``device`` (one switch: engine + packet routing), ``device_config`` (PI's
``p4.tmp.P4DeviceConfig``). ``bench`` measures a write and a read of one entry as tables grow."""
