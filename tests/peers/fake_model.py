"""A scripted model behind the OpenAI-compatible Chat Completions wire
(POST /v1/chat/completions), the OpenAI Responses wire (POST /v1/responses) and the
Anthropic Messages wire (POST /v1/messages), for the agent's tests. Python stdlib only; binds 127.0.0.1.

Usage: fake_model.py PORT SCRIPT.json

SCRIPT is a JSON list of turns; the Nth POST /v1/chat/completions gets the Nth turn
(the last one repeats). A turn is one of:
  {"tool_calls": [{"name": "...", "arguments": {...}}, ...]}   the model calls tools
  {"text": "..."}                                                 a final answer
  {"echo_tools": true}        a final answer made of every tool result of the last turn,
                              as "name: content" lines (so a test sees what ran)
  {"status": 429, "error": "..."}                                 an HTTP error answer
  {"status": 429, "error": "...", "retry_after": "1"}   with a `Retry-After: 1` header
  {"status": 401, "echo_key": true}   an error quoting the credential it was sent
  {"status": 502, "raw_body": "...{key}...", "escape": "json"|"unicode", "content_type": "..."}
                              this body verbatim (default text/plain), `{key}` replaced by
                              the key it was sent (the bearer token, or x-api-key), as is,
                              JSON-escaped with `\\/` for `/` ("json"), or with every
                              character but letters and digits as `\\u00xx` ("unicode")
  {"trickle": true}           a 200 whose body never ends: one byte every 0.2 s (a
                              provider that stalls mid-answer)
  {"raw": [...blocks], "stop_reason": "..."}   (Messages) these content blocks verbatim
  {"text": "...", "finish": "length"}  an answer cut at the output limit (Chat
                              Completions `finish_reason: length`; Messages
                              `stop_reason: max_tokens`)
  {"text": "...", "reasoning": "SECRET"}   (Responses) the answer comes after a reasoning
                              item whose `encrypted_content` is SECRET (a client must send
                              it back, verbatim, in its next request's `input`)
Responses answers are `response` objects (`output` items: `message` with `output_text`,
`function_call` with `call_id` and `arguments` as a JSON string); streamed, semantic
events (`response.created`, `response.output_item.added`, `response.output_text.delta`,
`response.function_call_arguments.delta`, `response.output_item.done`,
`response.completed` carrying the whole response; no `[DONE]`); `finish: length` is
`status: incomplete` with `incomplete_details.reason: max_output_tokens`; usage
`input_tokens` 100 + N, `output_tokens` 10, 40 cached, 3 reasoning.
A turn may add "after_tools": TURN: a request whose last message is a tool result gets
TURN instead (one turn serves many runs: call a tool, then answer). In a turn's tool-call
arguments, every "{prompt}" in a string is replaced by the request's first user message.
A tool call may give "raw_arguments": "..." instead of "arguments": that text verbatim as
the arguments (Chat Completions; streamed Messages: as the `partial_json` pieces;
non-streamed Messages: `input` is that string).
Every answer reports its usage: Chat Completions `prompt_tokens` 100 + N,
`completion_tokens` 10, 40 cached, 3 reasoning (streamed: in a last chunk, when
`stream_options.include_usage`); Messages `input_tokens` 100 + N, `output_tokens` 10,
`cache_read_input_tokens` 40 (N: the request's number, from 0).
A request with "stream": true gets the same answer as server-sent events, cut into
small deltas exactly as each wire streams them (Chat Completions chunks with
`delta.tool_calls[].function.arguments` fragments and `data: [DONE]`; Messages
`content_block_start`/`content_block_delta` (`text_delta`, `input_json_delta`)/
`content_block_stop`/`message_delta`/`message_stop`).
GET /_requests returns every request received, as a JSON list of {"body", "path",
"headers" (lower-case names), "authorization", "x-api-key", "anthropic-version", "at" (when
it came: seconds since the epoch, a float)}.
Prints READY when listening.

With FAKE_MODEL_FAIL_EVERY=N (N >= 2) in the environment, every Nth POST (the Nth,
2Nth, ...) fails instead, without consuming a turn: by turns a 429 with
`Retry-After: 0`, a 503, a 429 with `Retry-After: 1`, a 503. Unset, nothing fails.
GET /_stats returns {"requests", "failed", "answered"} counts.
"""

import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

REQUESTS = []
LOCK = threading.Lock()
ANSWERED = [0]  # POSTs answered from the script (failures do not consume a turn)
FAILED = [0]


def fail_every() -> int:
    try:
        n = int(os.environ.get("FAKE_MODEL_FAIL_EVERY", "0"))
    except ValueError:
        return 0
    return n if n >= 2 else 0


def first_user_text(body: dict) -> str:
    for m in body.get("messages") or body.get("input") or []:
        if m.get("role") == "user":
            c = m.get("content")
            if isinstance(c, str):
                return c
            if isinstance(c, list):
                return "".join(str(x.get("text", "")) for x in c if isinstance(x, dict))
    return ""


def fill(value, prompt: str):
    """`value` with every "{prompt}" in its strings replaced by `prompt`."""
    if isinstance(value, str):
        return value.replace("{prompt}", prompt)
    if isinstance(value, list):
        return [fill(v, prompt) for v in value]
    if isinstance(value, dict):
        return {k: fill(v, prompt) for k, v in value.items()}
    return value


def after_tools(body: dict) -> bool:
    """Whether the request's last message is a tool result (either wire)."""
    msgs = body.get("messages") or body.get("input") or []
    if not msgs:
        return False
    last = msgs[-1]
    if last.get("role") == "tool" or last.get("type") == "function_call_output":
        return True
    c = last.get("content")
    return isinstance(c, list) and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in c)


def pieces(text: str, n: int = 3) -> list:
    """`text` cut into about `n` pieces (at least one)."""
    if not text:
        return [text]
    size = max(1, -(-len(text) // n))
    return [text[i:i + size] for i in range(0, len(text), size)]


def chat_usage(n: int) -> dict:
    return {"prompt_tokens": 100 + n, "completion_tokens": 10, "total_tokens": 110 + n,
            "prompt_tokens_details": {"cached_tokens": 40},
            "completion_tokens_details": {"reasoning_tokens": 3}}


def messages_usage(n: int) -> dict:
    return {"input_tokens": 100 + n, "output_tokens": 10, "cache_read_input_tokens": 40}


def chat_chunks(n: int, model, message: dict, finish: str, usage: bool = False) -> list:
    """A chat.completion as chat.completion.chunk events."""
    base = {"id": f"chatcmpl-{n}", "object": "chat.completion.chunk", "model": model}

    def chunk(delta: dict, finish_reason=None) -> tuple:
        return (None, {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]})

    events = [chunk({"role": "assistant", "content": ""})]
    for piece in pieces(message.get("content") or ""):
        if piece:
            events.append(chunk({"content": piece}))
    for i, call in enumerate(message.get("tool_calls") or []):
        events.append(chunk({"tool_calls": [{"index": i, "id": call["id"], "type": "function",
                                             "function": {"name": call["function"]["name"], "arguments": ""}}]}))
        for piece in pieces(call["function"]["arguments"]):
            events.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}))
    events.append(chunk({}, finish))
    if usage:
        events.append((None, {**base, "choices": [], "usage": chat_usage(n)}))
    events.append((None, "[DONE]"))
    return events


def message_events(n: int, model, content: list, stop: str) -> list:
    """A Messages answer as its stream of events."""
    events = [("message_start", {"type": "message_start", "message": {
        "id": f"msg_{n}", "type": "message", "role": "assistant", "model": model, "content": [],
        "stop_reason": None, "usage": {**messages_usage(n), "output_tokens": 0}}})]
    for i, block in enumerate(content):
        kind = block.get("type")
        if kind == "text":
            events.append(("content_block_start", {"type": "content_block_start", "index": i,
                                                   "content_block": {"type": "text", "text": ""}}))
            for piece in pieces(block.get("text", "")):
                events.append(("content_block_delta", {"type": "content_block_delta", "index": i,
                                                       "delta": {"type": "text_delta", "text": piece}}))
        elif kind in ("tool_use", "server_tool_use"):
            events.append(("content_block_start", {"type": "content_block_start", "index": i,
                                                   "content_block": {**block, "input": {}}}))
            text = block["input"] if isinstance(block.get("input"), str) else json.dumps(block.get("input", {}))
            for piece in pieces(text):
                events.append(("content_block_delta", {"type": "content_block_delta", "index": i,
                                                       "delta": {"type": "input_json_delta", "partial_json": piece}}))
        else:
            events.append(("content_block_start", {"type": "content_block_start", "index": i, "content_block": block}))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    events.append(("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop},
                                     "usage": {"output_tokens": 10}}))
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def spell(key: str, escape) -> str:
    """`key` as a provider may quote it in JSON."""
    if escape == "json":
        return json.dumps(key)[1:-1].replace("/", "\\/")
    if escape == "unicode":
        return "".join(c if c.isalnum() else "\\u%04x" % ord(c) for c in key)
    return key


def arguments_text(call: dict) -> str:
    """A scripted call's arguments as the JSON text a model sends."""
    if "raw_arguments" in call:
        return call["raw_arguments"]
    return json.dumps(call.get("arguments", {}))


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

        def reply(self, status: int, obj, retry_after=None) -> None:
            data = json.dumps(obj).encode()
            self.send_response(status)
            if retry_after is not None:
                self.send_header("Retry-After", str(retry_after))
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def reply_raw(self, turn: dict, key) -> None:
            """A scripted body verbatim, quoting `key` as the turn says."""
            data = turn["raw_body"].replace("{key}", spell(key or "", turn.get("escape"))).encode()
            self.send_response(turn["status"])
            self.send_header("Content-Type", turn.get("content_type", "text/plain"))
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def stream(self, events: list) -> None:
            """Server-sent events, written a few at a time."""
            parts = []
            for name, data in events:
                head = f"event: {name}\n" if name else ""
                payload = data if isinstance(data, str) else json.dumps(data)
                parts.append(f"{head}data: {payload}\n\n".encode())
            body = b"".join(parts)
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            for p in parts:
                self.wfile.write(p)
                self.wfile.flush()

        def do_GET(self) -> None:
            if self.path == "/_requests":
                with LOCK:
                    self.reply(200, REQUESTS)
            elif self.path == "/_stats":
                with LOCK:
                    self.reply(200, {"requests": len(REQUESTS), "failed": FAILED[0], "answered": ANSWERED[0]})
            else:
                self.reply(404, {"error": {"message": "not found"}})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            with LOCK:
                REQUESTS.append({"body": body, "path": self.path,
                                 "headers": {k.lower(): v for k, v in self.headers.items()},
                                 "authorization": self.headers.get("Authorization"),
                                 "x-api-key": self.headers.get("x-api-key"),
                                 "anthropic-version": self.headers.get("anthropic-version"),
                                 "at": time.time()})
                n = len(REQUESTS) - 1
                every = fail_every()
                failing = every and (n + 1) % every == 0
                if failing:
                    FAILED[0] += 1
                    kind = FAILED[0] % 4
                else:
                    turn = script[min(ANSWERED[0], len(script) - 1)]
                    ANSWERED[0] += 1
            if failing:
                if kind in (1, 3):
                    self.reply(429, {"error": {"message": "rate limited (scripted)", "code": None}},
                               "0" if kind == 1 else "1")
                else:
                    self.reply(503, {"error": {"message": "overloaded (scripted)", "code": None}})
                return
            if "after_tools" in turn and after_tools(body):
                turn = turn["after_tools"]
            if "tool_calls" in turn:
                turn = {**turn, "tool_calls": fill(turn["tool_calls"], first_user_text(body))}
            path = self.path.split("?", 1)[0]
            if path.endswith("/messages"):
                self.messages(n, body, turn)
                return
            if path.endswith("/responses"):
                self.responses_wire(n, body, turn)
                return
            if not path.endswith("/chat/completions"):
                self.reply(404, {"error": {"message": "not found"}})
                return
            if turn.get("trickle"):
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "1000000")
                self.end_headers()
                try:
                    while True:
                        self.wfile.write(b" ")
                        self.wfile.flush()
                        time.sleep(0.2)
                except (BrokenPipeError, ConnectionResetError):
                    return
            if "raw_body" in turn:
                bearer = self.headers.get("Authorization") or ""
                self.reply_raw(turn, bearer.removeprefix("Bearer "))
                return
            if "status" in turn:
                message = turn.get("error", "error")
                if turn.get("echo_key"):
                    # Like a provider that quotes the credential it refused.
                    message = f"Incorrect API key provided: {self.headers.get('Authorization')}"
                self.reply(turn["status"], {"error": {"message": message, "code": turn.get("code")}},
                           turn.get("retry_after"))
                return
            message = {"role": "assistant", "content": None}
            finish = "stop"
            if "tool_calls" in turn:
                message["tool_calls"] = [
                    {"id": f"call_{n}_{i}", "type": "function",
                     "function": {"name": c["name"], "arguments": arguments_text(c)}}
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
                    c = m.get("content")
                    # The user message that carries tool results' images follows them.
                    if (m.get("role") == "user" and isinstance(c, list) and c
                            and str(c[0].get("text", "")).startswith("The images of tool call")):
                        continue
                    if m.get("role") != "tool":
                        break
                    lines.append(f"{names.get(m.get('tool_call_id'), '?')}: {m.get('content')}")
                message["content"] = "\n".join(reversed(lines))
            else:
                message["content"] = turn.get("text", "")
            finish = turn.get("finish", finish)
            if body.get("stream"):
                usage = bool((body.get("stream_options") or {}).get("include_usage"))
                self.stream(chat_chunks(n, body.get("model"), message, finish, usage))
                return
            self.reply(200, {"id": f"chatcmpl-{n}", "object": "chat.completion", "model": body.get("model"),
                             "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                             "usage": chat_usage(n)})

        def responses_wire(self, n: int, body: dict, turn: dict) -> None:
            """The OpenAI Responses wire."""
            if "status" in turn:
                self.reply(turn["status"], {"error": {"message": turn.get("error", "error"),
                                                      "type": "invalid_request_error", "code": turn.get("code")}},
                           turn.get("retry_after"))
                return
            output = []
            if "reasoning" in turn:
                output.append({"type": "reasoning", "id": f"rs_{n}", "summary": [],
                               "encrypted_content": turn["reasoning"]})
            if "tool_calls" in turn:
                for i, c in enumerate(turn["tool_calls"]):
                    output.append({"type": "function_call", "id": f"fc_{n}_{i}", "call_id": f"call_{n}_{i}",
                                   "name": c["name"], "arguments": arguments_text(c), "status": "completed"})
            else:
                if turn.get("echo_tools"):
                    items = body.get("input") or []
                    names = {i.get("call_id"): i.get("name") for i in items if i.get("type") == "function_call"}
                    lines = []
                    for i in reversed(items):
                        if i.get("type") != "function_call_output":
                            if i.get("role") == "user":
                                continue  # the images of the results follow them
                            break
                        lines.append(f"{names.get(i.get('call_id'), '?')}: {i.get('output')}")
                    text = "\n".join(reversed(lines))
                else:
                    text = turn.get("text", "")
                output.append({"type": "message", "id": f"msg_{n}", "role": "assistant", "status": "completed",
                               "content": [{"type": "output_text", "text": text, "annotations": []}]})
            response = {"id": f"resp_{n}", "object": "response", "model": body.get("model"), "status": "completed",
                        "output": output,
                        "usage": {"input_tokens": 100 + n, "output_tokens": 10, "total_tokens": 110 + n,
                                  "input_tokens_details": {"cached_tokens": 40},
                                  "output_tokens_details": {"reasoning_tokens": 3}}}
            if turn.get("finish") == "length":
                response["status"] = "incomplete"
                response["incomplete_details"] = {"reason": "max_output_tokens"}
            if not body.get("stream"):
                self.reply(200, response)
                return
            events = [("response.created", {"type": "response.created",
                                            "response": {"id": f"resp_{n}", "status": "in_progress"}})]
            for item in output:
                added = dict(item)
                if item["type"] == "function_call":
                    added["arguments"] = ""
                if item["type"] == "message":
                    added["content"] = []
                events.append(("response.output_item.added", {"type": "response.output_item.added", "item": added}))
                if item["type"] == "message":
                    for piece in pieces(item["content"][0]["text"]):
                        events.append(("response.output_text.delta",
                                       {"type": "response.output_text.delta", "item_id": item["id"], "delta": piece}))
                if item["type"] == "function_call":
                    for piece in pieces(item["arguments"]):
                        events.append(("response.function_call_arguments.delta",
                                       {"type": "response.function_call_arguments.delta", "item_id": item["id"],
                                        "delta": piece}))
                events.append(("response.output_item.done", {"type": "response.output_item.done", "item": item}))
            last = "response.incomplete" if response["status"] == "incomplete" else "response.completed"
            events.append((last, {"type": last, "response": response}))
            self.stream(events)

        def messages(self, n: int, body: dict, turn: dict) -> None:
            """The Anthropic Messages wire."""
            if "raw_body" in turn:
                self.reply_raw(turn, self.headers.get("x-api-key"))
                return
            if "status" in turn:
                kind = {429: "rate_limit_error", 401: "authentication_error"}.get(turn["status"], "invalid_request_error")
                message = turn.get("error", "error")
                if turn.get("echo_key"):
                    message = f"invalid x-api-key: {self.headers.get('x-api-key')}"
                self.reply(turn["status"], {"type": "error", "error": {"type": kind, "message": message}},
                           turn.get("retry_after"))
                return
            stop = "end_turn"
            if "raw" in turn:
                content, stop = turn["raw"], turn.get("stop_reason", "end_turn")
            elif "tool_calls" in turn:
                content = [{"type": "tool_use", "id": f"toolu_{n}_{i}", "name": c["name"],
                            "input": c["raw_arguments"] if "raw_arguments" in c else c.get("arguments", {})}
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
            if turn.get("finish") == "length":
                stop = "max_tokens"
            if body.get("stream"):
                self.stream(message_events(n, body.get("model"), content, stop))
                return
            self.reply(200, {"id": f"msg_{n}", "type": "message", "role": "assistant", "model": body.get("model"),
                             "content": content, "stop_reason": stop,
                             "usage": messages_usage(n)})

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    print("READY", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
