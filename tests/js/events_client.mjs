// The official socket.io-client against a live volthub (driven by tests/http/test_events_api.py).
//
//   node events_client.mjs BASE_URL TOKEN CHANNEL_ID TRANSPORTS TARGET [EVENTS_URL]
//
// EVENTS_URL: where the Socket.IO paths are served (the gateway's port); default BASE_URL.
//
// TRANSPORTS: "default" (polling, then upgrade to WebSocket) or "websocket" (WebSocket only).
// TARGET: "namespace" connects io(BASE_URL + "/ws/events") (default path /socket.io, namespace
// /ws/events, as the spec writes it); "path" connects with path "/ws/events", namespace "/".
//
// It connects with auth.token, waits for `connected`, sends a sandbox follow through the REST
// API, asks for channel:getRewards, and prints one JSON line with what it saw; exit 0 when it
// saw everything (the envelope as `event`, the data by name and through onAny, the rewards and,
// with default transports, the upgrade), 1 otherwise.
import { io } from "socket.io-client";

import { finisher } from "./finish.mjs";

const [base, token, channelId, transports, target, eventsUrl] = process.argv.slice(2);
const events = eventsUrl || base;
const options = { auth: { token }, reconnection: false, timeout: 5000 };
if (transports === "websocket") options.transports = ["websocket"];
if (target === "path") options.path = "/ws/events";
const socket = io(target === "path" ? events : `${events}/ws/events`, options);

const seen = { transports: [], sandboxStatus: null };

const finish = finisher(socket, seen, 15000);

function maybeDone() {
  const upgraded = transports === "websocket" || seen.transports.includes("websocket");
  if (seen.envelope && seen.byName && seen.catchAll && seen.rewards && upgraded) finish(0);
}

socket.io.on("open", () => {
  const engine = socket.io.engine;
  seen.transports.push(engine.transport.name);
  engine.on("upgrade", (transport) => {
    seen.transports.push(transport.name);
    maybeDone();
  });
});
socket.on("connect_error", (err) => finish(1, `connect_error: ${err.message}`));
socket.on("connected", async (data) => {
  seen.connected = data;
  seen.connectedBeforeAnyEvent = !seen.envelope;
  const response = await fetch(`${base}/api/integrations/oauth/test/events`, {
    method: "POST",
    headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
    body: JSON.stringify({ eventType: "follow", channelId }),
  });
  seen.sandboxStatus = response.status;
  socket.emit("channel:getRewards", { channelId });
});
socket.on("event", (envelope) => {
  if (envelope.event === "channel.follow") seen.envelope = envelope;
  maybeDone();
});
socket.on("channel.follow", (data) => {
  seen.byName = data;
  maybeDone();
});
socket.onAny((name, ...args) => {
  if (name === "channel.follow") seen.catchAll = args[0];
});
socket.on("channel:rewards", (payload) => {
  seen.rewards = payload;
  maybeDone();
});
socket.on("error", (payload) => finish(1, `error event: ${JSON.stringify(payload)}`));
