"""The P4Runtime side of the `p4switch` process: a gRPC server that translates P4Runtime messages (ids,
byte strings) into calls on the engine API (names, ints), with arbitration, packet I/O and digests.

Modules: ``errors`` (P4Runtime error codes), ``p4info`` (id -> name/width index of a P4Info),
``codec`` (byte strings and entities <-> engine values), ``arbitration`` (primary election),
``digests`` (DigestList buffering and acks), ``device`` (one switch: engine + packet routing),
``server`` (the gRPC servicer)."""
