"""A scripted model behind the OpenAI-compatible Chat Completions wire
(POST /v1/chat/completions) and the Anthropic Messages wire (POST /v1/messages), for
the agent's tests. Python stdlib only; binds 127.0.0.1.

Usage: fake_model.py PORT SCRIPT.json

SCRIPT is a JSON list of turns; the Nth POST /v1/chat/completions gets the Nth turn
(the last one repeats). A turn is one of:
  {"tool_calls": [{"name": "...", "arguments": {...}}, ...]}   the model calls tools
  {"text": "..."}                                                 a final answer
  {"echo_tools": true}        a final answer made of every tool result of the last turn,
                              as "name: content" lines (so a test sees what ran)
  {"status": 429, "error": "..."}                                 an HTTP error answer
  {"raw": [...blocks], "stop_reason": "..."}   (Messages) these content blocks verbatim
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
                REQUESTS.append({"body": body, "authorization": self.headers.get("Authorization"),
                                 "x-api-key": self.headers.get("x-api-key"),
                                 "anthropic-version": self.headers.get("anthropic-version")})
                n = len(REQUESTS) - 1
            turn = script[min(n, len(script) - 1)]
            if self.path.endswith("/messages"):
                self.messages(n, body, turn)
                return
            if not self.path.endswith("/chat/completions"):
                self.reply(404, {"error": {"message": "not found"}})
                return
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

        def messages(self, n: int, body: dict, turn: dict) -> None:
            """The Anthropic Messages wire."""
            if "status" in turn:
                kind = {429: "rate_limit_error", 401: "authentication_error"}.get(turn["status"], "invalid_request_error")
                self.reply(turn["status"], {"type": "error", "error": {"type": kind, "message": turn.get("error", "error")}})
                return
            stop = "end_turn"
            if "raw" in turn:
                content, stop = turn["raw"], turn.get("stop_reason", "end_turn")
            elif "tool_calls" in turn:
                content = [{"type": "tool_use", "id": f"toolu_{n}_{i}", "name": c["name"], "input": c.get("arguments", {})}
                           for i, c in enumerate(turn["tool_calls"])]
                stop = "tool_use"
            elif turn.get("echo_tools"):
                msgs = body.get("messages", [])
                names = {}
                for m in msgs:
                    for b in m.get("content") if isinstance(m.get("content"), list) else []:
                        if b.get("type") == "tool_use":
                            names[b["id"]] = b["name"]
                lines = []
                last = msgs[-1] if msgs else {}
                for b in last.get("content") if isinstance(last.get("content"), list) else []:
                    if b.get("type") == "tool_result":
                        c = b.get("content")
                        if isinstance(c, list):
                            c = "".join(x.get("text", "") for x in c)
                        lines.append(f"{names.get(b.get('tool_use_id'), '?')}: {c}")
                content = [{"type": "text", "text": "\n".join(lines)}]
            else:
                content = [{"type": "text", "text": turn.get("text", "")}]
            self.reply(200, {"id": f"msg_{n}", "type": "message", "role": "assistant", "model": body.get("model"),
                             "content": content, "stop_reason": stop,
                             "usage": {"input_tokens": 1, "output_tokens": 1}})

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    print("READY", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
