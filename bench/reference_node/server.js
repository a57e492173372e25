// Reference broadcast server for `make bench` (socket.io on Node).
//
// It does the job volthub's hub does for chat, in the same wire shape and nothing more:
// a client joins the room named by `auth.token` (or `?token=`; no check, no database),
// gets `connected`, and every message POSTed to /publish is sent to each client of its
// room twice, as `event` {event, data, timestamp} and by name (`chat.message` with data).
//
//   node server.js --host 127.0.0.1 --port 9002
//   curl -X POST localhost:9002/publish -d '{"channel":"c1","message":"hi"}'

"use strict";

const http = require("http");
const crypto = require("crypto");
const { Server } = require("socket.io");

function option(name, fallback) {
  const index = process.argv.indexOf(`--${name}`);
  return index >= 0 && index + 1 < process.argv.length ? process.argv[index + 1] : fallback;
}

const host = option("host", "127.0.0.1");
const port = Number(option("port", "9002"));

// The chat.message payload volthub sends (spec §2.6), so frames are the same size.
function chatMessage(channel, text) {
  return {
    messageId: crypto.randomUUID(),
    userId: channel,
    username: "bench_sender",
    displayName: "bench_sender",
    message: text,
    badges: [],
    isMod: false,
    isVip: false,
    isSubscriber: false,
  };
}

function reply(res, status, body) {
  const raw = JSON.stringify(body);
  res.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(raw) });
  res.end(raw);
}

// socket.io answers its own path; everything else reaches this handler.
const httpServer = http.createServer((req, res) => {
  if (req.method === "GET" && req.url === "/healthz") return reply(res, 200, { status: "ok" });
  if (req.method !== "POST" || req.url !== "/publish") return reply(res, 404, { error: "not_found" });
  const chunks = [];
  req.on("data", (chunk) => chunks.push(chunk));
  req.on("end", () => {
    let body;
    try {
      body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    } catch (err) {
      return reply(res, 400, { error: "invalid_json" });
    }
    if (typeof body.channel !== "string" || typeof body.message !== "string") {
      return reply(res, 400, { error: "validation_error" });
    }
    const data = chatMessage(body.channel, body.message);
    const room = io.to(body.channel);
    room.emit("event", { event: "chat.message", data, timestamp: new Date().toISOString() });
    room.emit("chat.message", data);
    reply(res, 200, { success: true, messageId: data.messageId });
  });
});

const io = new Server(httpServer, {
  path: "/ws/events",
  transports: ["websocket", "polling"],
  serveClient: false,
  cors: { origin: "*" },
});

io.on("connection", (socket) => {
  const room = String((socket.handshake.auth && socket.handshake.auth.token) || socket.handshake.query.token || "");
  if (room) socket.join(room);
  socket.emit("connected", { channelUsername: room || null, authenticated: false, autoSubscribed: Boolean(room) });
});

httpServer.listen(port, host, 1024, () => {
  console.log(`reference node socket.io listening on http://${host}:${port}`);
});

for (const signal of ["SIGINT", "SIGTERM"]) {
  process.on(signal, () => {
    io.close();
    process.exit(0);
  });
}
