"""A scripted model behind the OpenAI-compatible Chat Completions wire, for the agent's
tests. Python stdlib only; binds 127.0.0.1.

Usage: fake_model.py PORT SCRIPT.json

SCRIPT is a JSON list of turns; the Nth POST /v1/chat/completions gets the Nth turn
(the last one repeats). A turn is one of:
  {"tool_calls": [{"name": "...", "arguments": {...}}, ...]}   the model calls tools
  {"text": "..."}                                                 a final answer
  {"echo_tools": true}        a final answer made of every tool result of the last turn,
                              as "name: content" lines (so a test sees what ran)
  {"status": 429, "error": "..."}                                 an HTTP error answer
GET /_requests returns every request body received, as a JSON list.
Prints READY when listening.
"""

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

REQUESTS = []
LOCK = threading.Lock()


def main() -> None:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    port = int(sys.argv[1])
    with open(sys.argv[2]) as f:
        script = json.load(f)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:
            pass

        def reply(self, status: int, obj) -> None:
            data = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path == "/_requests":
                with LOCK:
                    self.reply(200, REQUESTS)
            else:
                self.reply(404, {"error": {"message": "not found"}})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            with LOCK:
                REQUESTS.append({"body": body, "authorization": self.headers.get("Authorization")})
                n = len(REQUESTS) - 1
            if not self.path.endswith("/chat/completions"):
                self.reply(404, {"error": {"message": "not found"}})
                return
            turn = script[min(n, len(script) - 1)]
            if "status" in turn:
                self.reply(turn["status"], {"error": {"message": turn.get("error", "error"), "code": turn.get("code")}})
                return
            message = {"role": "assistant", "content": None}
            finish = "stop"
            if "tool_calls" in turn:
                message["tool_calls"] = [
                    {"id": f"call_{n}_{i}", "type": "function",
                     "function": {"name": c["name"], "arguments": json.dumps(c.get("arguments", {}))}}
                    for i, c in enumerate(turn["tool_calls"])
                ]
                finish = "tool_calls"
            elif turn.get("echo_tools"):
                messages = body.get("messages", [])
                names = {}
                for m in messages:
                    for c in m.get("tool_calls") or []:
                        names[c["id"]] = c["function"]["name"]
                lines = []
                for m in reversed(messages):
                    if m.get("role") != "tool":
                        break
                    lines.append(f"{names.get(m.get('tool_call_id'), '?')}: {m.get('content')}")
                message["content"] = "\n".join(reversed(lines))
            else:
                message["content"] = turn.get("text", "")
            self.reply(200, {"id": f"chatcmpl-{n}", "object": "chat.completion", "model": body.get("model"),
                             "choices": [{"index": 0, "message": message, "finish_reason": finish}]})

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    print("READY", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
