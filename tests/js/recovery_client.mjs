// Connection state recovery with the official socket.io-client (driven by
// tests/http/events/test_recovery.py).
//
//   node recovery_client.mjs BASE_URL TOKEN CHANNEL_ID TRANSPORTS TARGET [EVENTS_URL]
//
// EVENTS_URL: where the Socket.IO paths are served (the gateway's port); default BASE_URL.
//
// Connects with auth {token, recovery: true}, gets one sandbox event (so it has an offset),
// drops its transport (socket.io.engine.close(), as a network failure would), publishes
// three sandbox events through the REST API while disconnected, reconnects, and prints one
// JSON line: the envelopes' event ids before and after the drop, socket ids and `recovered`.
import { io } from "socket.io-client";

import { finisher } from "./finish.mjs";

const [base, token, channelId, transports, target, eventsUrl] = process.argv.slice(2);
const events = eventsUrl || base;
const options = { auth: { token, recovery: true }, reconnection: false, timeout: 5000 };
if (transports === "websocket") options.transports = ["websocket"];
if (target === "path") options.path = "/ws/events";
const socket = io(target === "path" ? events : `${events}/ws/events`, options);

const seen = { before: [], after: [], published: [], connects: 0, ids: [], recovered: [] };
let phase = "before";

const finish = finisher(socket, seen, 20000);

async function sandbox(eventType) {
  const response = await fetch(`${base}/api/integrations/oauth/test/events`, {
    method: "POST",
    headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
    body: JSON.stringify({ eventType, channelId }),
  });
  if (response.status !== 200) finish(1, `sandbox answered ${response.status}`);
  return (await response.json()).eventId;
}

socket.on("connect_error", (err) => finish(1, `connect_error: ${err.message}`));
socket.on("connect", () => {
  seen.connects += 1;
  seen.ids.push(socket.id);
  seen.recovered.push(socket.recovered);
});
socket.on("connected", async () => {
  if (seen.connects === 1) {
    seen.first = await sandbox("follow");
  } else {
    // Anything still to come arrives within a moment; then report.
    setTimeout(() => finish(seen.after.length === 3 ? 0 : 1), 1000);
  }
});
socket.on("event", async (envelope, offset) => {
  seen[phase].push({ event: envelope.event, offset });
  if (phase === "before" && seen.before.length === 1) {
    phase = "gap";
    seen.gap = [];
    socket.io.engine.close(); // the transport drops; the client keeps its pid and offset
  }
});
socket.on("disconnect", async (reason) => {
  seen.disconnectReason = reason;
  if (phase !== "gap") return;
  for (const kind of ["raid", "volt_tip", "subscription"]) seen.published.push(await sandbox(kind));
  phase = "after";
  socket.connect();
});
