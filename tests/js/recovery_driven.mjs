// Connection state recovery driven line by line (tests/http/events/test_recovery_cluster.py):
// the official socket.io-client, moved between processes the way a load balancer would.
//
//   node recovery_driven.mjs EVENTS_URL TOKEN
//
// Connects to EVENTS_URL (path /ws/events, WebSocket) with auth {token, recovery: true} and
// prints one JSON line per happening: {type: "connect", id, recovered}, {type: "event",
// event, offset, data}, {type: "disconnect", reason}, {type: "connect_error", message}.
// Reads commands on stdin, one per line:
//   drop                 the transport drops (as a network failure would); pid and offset stay
//   connect URL [TOKEN]  reconnect to URL (another process), with TOKEN instead of the first
//   restore              the pid and offset of the drop before the last one (after a connect
//                        that was not recovered and so got a new pid)
//   quit
import { createInterface } from "node:readline";
import { io } from "socket.io-client";

const [url, token] = process.argv.slice(2);
const say = (line) => console.log(JSON.stringify(line));
const socket = io(url, {
  path: "/ws/events",
  transports: ["websocket"],
  auth: { token, recovery: true },
  reconnection: false,
  timeout: 5000,
});
const drops = [];

socket.on("connect", () => say({ type: "connect", id: socket.id, recovered: socket.recovered }));
socket.on("connect_error", (err) => say({ type: "connect_error", message: err.message }));
socket.on("disconnect", (reason) => {
  drops.push({ pid: socket._pid, offset: socket._lastOffset });
  say({ type: "disconnect", reason });
});
socket.on("event", (envelope, offset) => say({ type: "event", event: envelope.event, offset, data: envelope.data }));

createInterface({ input: process.stdin }).on("line", (line) => {
  const [command, target, other] = line.trim().split(/\s+/);
  if (command === "drop") socket.io.engine.close();
  else if (command === "connect") {
    socket.io.uri = target; // the next engine is opened on this URL
    socket.auth = { token: other || token, recovery: true };
    socket.connect();
  } else if (command === "restore") {
    const before = drops[drops.length - 2];
    socket._pid = before.pid;
    socket._lastOffset = before.offset;
  } else if (command === "quit") {
    socket.close();
    process.exit(0);
  }
});
