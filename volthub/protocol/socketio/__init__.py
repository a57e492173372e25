"""Socket.IO v5 as sans-IO protocol code, on top of :mod:`volthub.protocol.engineio`.

- :mod:`.packets` — Socket.IO packets; ``encode_event_frame`` for encode-once fan-out.
- :mod:`.session` — ``SocketIOSession``, what an adapter holds per client.
- :mod:`.binary` — opt-in binary packets (``BinarySocketIOSession``, conformance mode only).
"""
