// The official socket.io-client watching a channel's interactive events (driven by
// tests/http/interactive/test_live_events.py).
//
//   node interactive_client.mjs BASE_URL TOKEN COUNT
//
// Connects with auth.token, prints "ready" once `connected` arrives, then collects the
// envelopes of channel.poll.*, channel.prediction.*, channel.giveaway.*, channel.goal.* and
// channel.timer.* events (the generic `event` message) and the by-name messages of the same;
// after COUNT envelopes it waits a moment for strays and prints one JSON line; exit 0.
import { io } from "socket.io-client";

import { finisher } from "./finish.mjs";

const [base, token, count] = process.argv.slice(2);
const wanted = Number(count);
const socket = io(`${base}/ws/events`, { auth: { token }, reconnection: false, timeout: 5000 });
const seen = { envelopes: [], byName: [] };
const interactive = /^channel\.(poll|prediction|giveaway|goal|timer)\./;

const finish = finisher(socket, seen, 60000);

socket.on("connect_error", (err) => finish(1, `connect_error: ${err.message}`));
socket.on("connected", () => console.log("ready"));
socket.on("event", (envelope) => {
  if (!interactive.test(envelope.event)) return;
  seen.envelopes.push(envelope);
  if (seen.envelopes.length === wanted) setTimeout(() => finish(0), 500);
});
socket.onAny((name, data) => {
  if (interactive.test(name)) seen.byName.push(name);
});
