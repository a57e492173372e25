"""Reference broadcast server for `make bench`: python-socketio (ASGI) under uvicorn.

It does the job volthub's hub does for chat, in the same wire shape and nothing more: a
client joins the room named by `auth.token` (or `?token=`; no check, no database), gets
`connected`, and every message POSTed to /publish is sent to each client of its room
twice, as `event` {event, data, timestamp} and by name (`chat.message` with data).

    python bench/reference_python.py --host 127.0.0.1 --port 9001

uvicorn runs as it is usually deployed: uvloop, httptools and the websockets library when
installed (the `bench` extra installs uvicorn[standard]), one worker, no access log.
"""

from __future__ import annotations

import argparse
import uuid
from datetime import datetime, timezone
from typing import Any
from urllib.parse import parse_qs

import orjson
import socketio
import uvicorn

sio = socketio.AsyncServer(async_mode="asgi", cors_allowed_origins="*", transports=["websocket", "polling"])


def chat_message(channel: str, text: str) -> dict[str, Any]:
    """The chat.message payload volthub sends (spec §2.6), so frames are the same size."""
    return {
        "messageId": str(uuid.uuid4()),
        "userId": channel,
        "username": "bench_sender",
        "displayName": "bench_sender",
        "message": text,
        "badges": [],
        "isMod": False,
        "isVip": False,
        "isSubscriber": False,
    }


@sio.event
async def connect(sid: str, environ: dict[str, Any], auth: Any = None) -> None:
    room = (auth or {}).get("token") if isinstance(auth, dict) else None
    if not room:
        room = (parse_qs(environ.get("QUERY_STRING", "")).get("token") or [""])[0]
    if room:
        await sio.enter_room(sid, room)
    await sio.emit("connected", {"channelUsername": room or None, "authenticated": False,
                                 "autoSubscribed": bool(room)}, to=sid)


async def http_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Everything that is not Socket.IO: /healthz and POST /publish."""
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] != "http":
        return
    if scope["method"] == "GET" and scope["path"] == "/healthz":
        return await _reply(send, 200, {"status": "ok"})
    if scope["method"] != "POST" or scope["path"] != "/publish":
        return await _reply(send, 404, {"error": "not_found"})
    body, more = b"", True
    while more:
        message = await receive()
        body += message.get("body", b"")
        more = message.get("more_body", False)
    try:
        request = orjson.loads(body)
        channel, text = request["channel"], request["message"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return await _reply(send, 400, {"error": "validation_error"})
    data = chat_message(channel, text)
    envelope = {"event": "chat.message", "data": data, "timestamp": datetime.now(timezone.utc).isoformat()}
    await sio.emit("event", envelope, room=channel)
    await sio.emit("chat.message", data, room=channel)
    await _reply(send, 200, {"success": True, "messageId": data["messageId"]})


async def _reply(send: Any, status: int, body: dict[str, Any]) -> None:
    raw = orjson.dumps(body)
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode())]})
    await send({"type": "http.response.body", "body": raw})


app = socketio.ASGIApp(sio, other_asgi_app=http_app, socketio_path="ws/events")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9001)
    args = parser.parse_args()
    uvicorn.run(app, host=args.host, port=args.port, access_log=False, log_level="warning", backlog=1024)


if __name__ == "__main__":
    main()
