// The official socket.io-client as a channel member whose roles change (driven by
// tests/http/events/test_badges.py).
//
//   node badges_client.mjs BASE_URL TOKEN CHANNEL_ID COUNT
//
// Connects with auth.token and default transports (polling, then the WebSocket upgrade),
// subscribes to CHANNEL_ID and prints "ready" once `subscribed` arrives. Then it records
// every `channel:badges` message and every chat.message of that channel. After COUNT chat
// messages it waits a moment for strays and prints one JSON line with what it saw and how
// many times it connected (a reconnect would show as a second connect); exit 0.
import { io } from "socket.io-client";

import { finisher } from "./finish.mjs";

const [base, token, channelId, count] = process.argv.slice(2);
const wanted = Number(count);
const socket = io(`${base}/ws/events`, { auth: { token }, reconnection: false, timeout: 5000 });
const seen = { badges: [], messages: [], connects: 0, socketIds: [] };

const finish = finisher(socket, seen, 60000);

socket.on("connect", () => {
  seen.connects += 1;
  seen.socketIds.push(socket.id);
});
socket.on("connect_error", (err) => finish(1, `connect_error: ${err.message}`));
socket.on("disconnect", (reason) => finish(1, `disconnected: ${reason}`));
socket.on("connected", () => socket.emit("subscribe", { channelId }));
socket.on("subscribed", (data) => {
  if (data.channelId === channelId) console.log("ready");
});
socket.on("channel:badges", (data) => seen.badges.push(data));
socket.on("chat.message", (data) => {
  if (data.channelId !== channelId) return;
  seen.messages.push(data);
  if (seen.messages.length === wanted) setTimeout(() => finish(0), 300);
});
