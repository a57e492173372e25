"""A webhook receiver for trying deliveries on one machine: HTTPS on loopback, signatures checked.

    WEBHOOK_SECRET=whsec_... python docs/examples/webhook_receiver.py \\
        --cert receiver.pem --key receiver.key [--port 8443] [--save DIR]

Answers `POST` (any path) with 204 after `volthub.protocol.webhooks.verify` accepted the
signature and timestamp, 401 otherwise; prints one line per accepted delivery (event name
and JSON body) and drops repeats of an id, since delivery is at least once. `GET` answers
200 `ok`, so a script can wait until the receiver listens. With `--save DIR` it also
writes each accepted delivery's raw body, `X-Service-Timestamp` and `X-Service-Signature`
to `DIR/<id>.body|.timestamp|.signature`, to check a signature by hand.

volthub refuses loopback targets unless `[webhooks] allow_private_targets = true`, and
trusts the certificate only with its CA in `[webhooks] ca_file`; the webhooks guide
(docs/guides/webhooks.md) sets up both. Standard library plus volthub only; SIGTERM or Ctrl-C stops it.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import ssl
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from volthub.protocol.webhooks import WebhookVerificationError, verify


class Receiver(BaseHTTPRequestHandler):
    secret: str = ""
    save_dir: Path | None = None
    seen: set[str] = set()  # a database table in production: ids repeat across retries
    seen_lock = threading.Lock()

    def do_GET(self) -> None:
        self.answer(200, b"ok")

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        try:
            delivery = verify(self.secret, self.headers.items(), raw)  # raw bytes, as received
        except WebhookVerificationError as problem:
            print(f"refused: {problem}", file=sys.stderr, flush=True)
            self.answer(401, str(problem).encode())
            return
        with self.seen_lock:
            first_time = delivery["id"] not in self.seen
            self.seen.add(delivery["id"])
        if first_time:
            self.keep(delivery["id"], raw)
            print(delivery["event"], json.dumps(delivery, sort_keys=True), flush=True)
        self.answer(204, b"")

    def keep(self, delivery_id: str, raw: bytes) -> None:
        if self.save_dir is None:
            return
        stem = self.save_dir / "".join(c for c in delivery_id if c.isalnum() or c == "-")
        stem.with_suffix(".body").write_bytes(raw)
        stem.with_suffix(".timestamp").write_text(self.headers.get("X-Service-Timestamp", ""))
        stem.with_suffix(".signature").write_text(self.headers.get("X-Service-Signature", ""))

    def answer(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the deliveries printed above are the log


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8443)
    parser.add_argument("--cert", required=True, help="PEM certificate (chain) of this receiver")
    parser.add_argument("--key", required=True, help="PEM private key of the certificate")
    parser.add_argument("--save", metavar="DIR", help="also keep each delivery's raw body and signature headers")
    args = parser.parse_args()

    Receiver.secret = os.environ["WEBHOOK_SECRET"]  # the whsec_... string of the create response
    if args.save:
        Receiver.save_dir = Path(args.save)
        Receiver.save_dir.mkdir(parents=True, exist_ok=True)
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(args.cert, args.key)
    server = ThreadingHTTPServer((args.host, args.port), Receiver)
    server.socket = tls.wrap_socket(server.socket, server_side=True)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    print(f"listening on https://{args.host}:{args.port}/", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
