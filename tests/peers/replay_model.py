"""Plays recorded answers of real OpenAI-compatible servers back (tests/peers/real-llm/),
for the agent's tests of their wire quirks. Python stdlib only; binds 127.0.0.1.

Usage: replay_model.py PORT SCRIPT.json

SCRIPT is a JSON list; the Nth POST gets the Nth entry (the last one repeats). An entry:
  {"play": "llama-cpp-python/04-tools-forced-stream"}   the recorded status, content type
                              and body of that exchange, the body written as recorded
                              (an event stream event by event, chunked)
  {"play": ..., "then_dead": true}   after answering, the connection is dead: the next
                              request on it is never read — the socket closes with no
                              answer (as llama-cpp-python's after a failed stream); that
                              request is not counted or recorded
GET /_requests returns the bodies of the requests answered, as a JSON list.
Prints READY when listening.
"""

import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "real-llm")
REQUESTS = []
LOCK = threading.Lock()


def recorded(name: str) -> tuple:
    """The status, content type and body of a recorded exchange."""
    status, ctype = 200, "application/json"
    with open(os.path.join(HERE, name + ".response.headers"), encoding="utf-8") as f:
        for i, line in enumerate(f.read().splitlines()):
            if i == 0 and line.startswith("HTTP/"):
                status = int(line.split()[1])
            elif line.lower().startswith("content-type:"):
                ctype = line.split(":", 1)[1].strip()
    with open(os.path.join(HERE, name + ".response.body"), "rb") as f:
        body = f.read()
    return status, ctype, body


def main() -> None:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    port = int(sys.argv[1])
    with open(sys.argv[2], encoding="utf-8") as f:
        script = json.load(f)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        dead = False

        def log_message(self, *args) -> None:
            pass

        def do_GET(self) -> None:
            with LOCK:
                data = json.dumps(REQUESTS).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            if self.dead:
                # The connection is dead: nothing is read, nothing answered.
                self.close_connection = True
                return
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with LOCK:
                REQUESTS.append(json.loads(body or b"{}"))
                n = len(REQUESTS) - 1
            entry = script[min(n, len(script) - 1)]
            status, ctype, payload = recorded(entry["play"])
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            if ctype.startswith("text/event-stream"):
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                events = [e + b"\n\n" for e in payload.replace(b"\r\n", b"\n").split(b"\n\n") if e.strip()]
                for e in events:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(e), e))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            else:
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            if entry.get("then_dead"):
                self.dead = True

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    print("READY", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
