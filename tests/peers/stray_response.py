"""A Streamable HTTP server (2025-11-25 session) that answers `tools/call` on the
standalone GET stream: its reply stream sends only a priming event and closes, and
the response goes out on the GET stream the client opened between requests — as the
conformance suite's sse-retry server does when the client's GET comes first. A
resumed GET (Last-Event-ID) gets nothing. For the test that such a response still
reaches its caller. Python stdlib only; binds 127.0.0.1.

Usage: stray_response.py PORT     (prints READY when listening)
"""

import json
import queue
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

STANDALONE = queue.Queue()  # messages for the standalone GET stream
OPENED = threading.Event()  # the standalone GET stream is open


def main() -> None:
    port = int(sys.argv[1])

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:
            pass

        def json_reply(self, obj, session=False) -> None:
            data = json.dumps(obj).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            if session:
                self.send_header("Mcp-Session-Id", "s1")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_DELETE(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            resumed = self.headers.get("Last-Event-ID") is not None
            self.wfile.write(b"id: g1\nretry: 100\ndata: \n\n")
            self.wfile.flush()
            if resumed:
                # A resumption of the call's stream: nothing more comes here.
                threading.Event().wait(60)
                return
            OPENED.set()
            try:
                while True:
                    msg = STANDALONE.get()
                    self.wfile.write(b"id: g2\ndata: " + json.dumps(msg).encode() + b"\n\n")
                    self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                return

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            method = body.get("method")
            if "id" not in body:
                self.send_response(202)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            rid = body["id"]
            if method == "initialize":
                self.json_reply({"jsonrpc": "2.0", "id": rid, "result": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "stray-response", "version": "1.0.0"}}}, session=True)
            elif method == "tools/list":
                self.json_reply({"jsonrpc": "2.0", "id": rid, "result": {"tools": [
                    {"name": "echo", "inputSchema": {"type": "object"}}]}})
            elif method == "tools/call":
                # The reply stream: a priming event, then closed; the answer goes on
                # the standalone stream once that is open.
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                priming = b"id: c1\nretry: 100\ndata: \n\n"
                self.send_header("Content-Length", str(len(priming)))
                self.end_headers()
                self.wfile.write(priming)
                self.wfile.flush()
                OPENED.wait(60)
                STANDALONE.put({"jsonrpc": "2.0", "id": rid, "result": {
                    "content": [{"type": "text", "text": "answered on the GET stream"}]}})
            else:
                self.json_reply({"jsonrpc": "2.0", "id": rid,
                                 "error": {"code": -32601, "message": "Method not found"}})

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    print("READY", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
