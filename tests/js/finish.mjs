// How every client script ends: what it saw, as one JSON line on stdout (the Python test
// reads it), then its exit status; at the latest after `timeoutMs`.
export function finisher(socket, seen, timeoutMs) {
  let finished = false;
  const timer = setTimeout(() => finish(1, "timed out"), timeoutMs);
  function finish(code, error) {
    if (finished) return; // socket.close() below emits `disconnect`
    finished = true;
    clearTimeout(timer);
    if (error) seen.error = String(error);
    console.log(JSON.stringify(seen));
    socket.close();
    process.exit(code);
  }
  return finish;
}
