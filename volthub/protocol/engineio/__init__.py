"""Engine.IO v4 as sans-IO protocol code (no sockets, no clock).

- :mod:`.handshake` — validate the HTTP request of an Engine.IO endpoint.
- :mod:`.packets` — Engine.IO packets and polling payloads.
- :mod:`.events` — the base of what a session reports (its kinds are in :mod:`.session`).
- :mod:`.session` — the per-connection state machine (``EngineIOSession``).

Socket.IO builds on it in :mod:`volthub.protocol.socketio`; the Trio adapter that puts
sessions on the wire is :mod:`volthub.http.events.engineio`.
"""
