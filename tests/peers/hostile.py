"""Deliberately misbehaving MCP servers, for the client's robustness tests.

Python stdlib only (runs on python 3.11; no mcp import). Usage:
    python tests/peers/hostile.py stdio MODE [ARG]
    python tests/peers/hostile.py http PORT MODE [ARG]   (127.0.0.1:PORT, endpoint /mcp)
MB is a size in MiB (default 300). To "flood" is to write MB of b'x' in 64 KiB
chunks as fast as the reader takes them, then hold the stream open ~60 s. A
reader that goes away (EPIPE / reset) ends a flood quietly.

stdio modes (legacy servers: server/discover -> -32601, then initialize; tool `echo`):
  flood-stdout [MB]     tools/call `flood` -> a result line's prefix, then MB of 'x', no newline
  flood-stderr [MB]     after initialize, a background thread writes MB of 'x' + one newline to stderr
                        while requests keep being served; a failed stderr write exits with code 3
  bad-utf8-stderr       every request first writes invalid UTF-8 lines (one short, one 100 KB) to
                        stderr; a failed stderr write (EPIPE) exits with code 3
  ignore-eof PIDFILE    writes its pid to PIDFILE, ignores SIGTERM/SIGHUP/SIGINT, tool `slow` never
                        answers, and on stdin EOF sleeps forever instead of exiting (SIGKILL it)
  silent-discover       never answers server/discover at all; initialize works
  mute                  reads every line and answers nothing at all
  html-text             a tool `render` whose description holds HTML that runs script when a page
                        renders it as HTML (`<img src=x onerror=...>`, `<script>`), for pages that
                        must show server text as text
  schemas               tools with schemas to check a client's checks: `sum_ok` (outputSchema
                        {sum: number}, structuredContent {sum: 3}), `sum_bad` (the same schema,
                        {sum: "three"}), `sum_none` (the same schema, no structuredContent), `strict`
                        (inputSchema: `path` a non-empty string, required, `count` an integer >= 1, no
                        other properties; answers `strict call #N: <arguments>`, N counting every call
                        of it that arrived), `bomb` (an inputSchema whose $defs refer twice per level,
                        40 levels: a client that follows them hangs) and `far` (an inputSchema with an
                        external $ref to 127.0.0.1:9); `bomb` and `far` answer like `strict`
  evil-names            a tool whose name and description hold terminal escape sequences and a
                        bidi override (for clients that print server text)
  big-stdout [MB]       tools/call `big` -> a whole result line of about MB: one text of BIG_UNIT
                        repeated, every character escaped that can be (\u00e9, surrogate pairs, ...),
                        written in 64 KiB pieces
http modes:
  flood-json [MB]           modern; tools/call -> 200 application/json, chunked (no Content-Length),
                            a result's prefix then the flood; tools/list offers `flood`
  flood-json-declared [MB]  as flood-json, but with a Content-Length covering the whole flood
  big-json [MB]             modern; tools/call -> 200 application/json, chunked: the whole result of
                            big-stdout, in 64 KiB pieces; tools/list offers `big`
  flood-sse [MB]            modern; tools/call -> text/event-stream `data: ` + the flood (one endless event)
  endless-sse               modern; tools/call -> text/event-stream of notifications/message every 1 ms,
                            never the answer; the stream ends after 120 s
  flood-get [MB]            legacy Streamable HTTP (Mcp-Session-Id); GET /mcp -> one event `data: ` + flood;
                            GET /count -> how many GET /mcp requests arrived (plain text)
  retry-zero                legacy Streamable HTTP; GET /mcp -> `retry: 0\\nid: <n>\\n\\n`, then the response
                            ends at once; GET /count as in flood-get
  no-get-stream             legacy Streamable HTTP, tool `echo`; GET /mcp -> 405
  restart-400               legacy Streamable HTTP, tool `echo`, answering as the TypeScript SDK does (a
                            JSON-RPC error -32000 with `"id": null`): an unknown session -> 400 "Bad
                            Request: No valid session ID provided", no session -> 400 "Bad Request:
                            Server not initialized". After the first tools/call it "restarts" (forgets
                            every session) and refuses the next initialize with 503 (still down);
                            GET /stats -> JSON counts: initialize, sessionless (requests with no
                            session, initialize and the era probe aside), unknown (requests with a
                            session it forgot)
  ran-400 SHAPE             legacy Streamable HTTP, tool `echo`: a tools/call in a session it knows is run
                            (counted) and then answered 400 naming the session, a request in a session it
                            does not know is answered the same way, unrun. SHAPE `id`: a JSON-RPC error
                            -32000 "Bad Request: Session expired" with the request's id; `text`: the plain
                            text "Invalid or expired session"; `result`: a JSON-RPC *result* with the
                            request's id, the text "session expired". GET /forget -> forgets every session;
                            GET /stats -> JSON counts: initialize, executed (tool calls run), unknown
                            (requests with a session it does not know)
  ran-400-modern SHAPE      as ran-400, for the stateless 2026-07-28 wire (no sessions): every tools/call is
                            run and answered 400 naming the session; GET /stats
  ran-400-2024              2024-11-05 HTTP+SSE as flood-2024, tool `echo`: a tools/call POSTed to the
                            endpoint is run and answered 400 "Could not find session" (plain text; nothing
                            on the stream); GET /stats
  flood-2024 [MB]           2024-11-05 HTTP+SSE: POST /mcp -> 405; GET /mcp -> endpoint event
                            (/messages?session=s1); answers go on the GET stream; tools/call -> the
                            event `event: message\\ndata: ` + the flood
"""

from __future__ import annotations

import json
import os
import queue
import signal
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

LEGACY_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
MODERN = "2026-07-28"
SERVER_INFO = {"name": "hostile", "version": "0"}
TOOLS = {
    "echo": "Echo arguments.message back as 'echo: <message>'.",
    "flood": "Answers with an endless flood of bytes.",
    "big": "Answers with one long text (BIG_UNIT repeated, escaped).",
    "slow": "Never answers.",
    # evil-names: what a terminal would act on, in a name and a description.
    "\x1b[31mred\x1b[0m": "\x1b]0;pwned\x07Sets the title, \u202edesrever\x1b[2J clears the screen.",
}
EVIL_TOOL = "\x1b[31mred\x1b[0m"
# html-text: what a browser would run if a page rendered the description as HTML.
TOOLS["render"] = ('<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'
                   'Renders <b>bold</b> text.')
SUM_SCHEMA = {"type": "object", "properties": {"sum": {"type": "number"}}, "required": ["sum"]}
STRICT_SCHEMA = {"type": "object", "properties": {"path": {"type": "string", "minLength": 1},
                                                   "count": {"type": "integer", "minimum": 1}},
                 "required": ["path"], "additionalProperties": False}
BOMB_DEFS = {f"d{i}": {"anyOf": [{"$ref": f"#/$defs/d{i + 1}"}, {"$ref": f"#/$defs/d{i + 1}"}]} for i in range(40)}
BOMB_DEFS["d40"] = {"type": "string"}
# schemas: name -> (description, inputSchema, outputSchema or None)
SCHEMA_TOOLS = {
    "sum_ok": ("Adds; structured result {sum}.", {"type": "object"}, SUM_SCHEMA),
    "sum_bad": ("Adds; structured result {sum} (it sends a string).", {"type": "object"}, SUM_SCHEMA),
    "sum_none": ("Adds; structured result {sum} (it sends none).", {"type": "object"}, SUM_SCHEMA),
    "strict": ("Counts files under a path.", STRICT_SCHEMA, None),
    "bomb": ("A schema that takes exponential time to follow.", {"type": "object", "properties": {
        "x": {"$ref": "#/$defs/d0"}}, "$defs": BOMB_DEFS}, None),
    "far": ("A schema that refers outside itself.", {"type": "object", "properties": {
        "x": {"$ref": "http://127.0.0.1:9/schema.json"}}}, None),
}
SCHEMA_CALLS = [0]
STDIO_MODES = {"schemas": None, "big-stdout": "MB", "flood-stdout": "MB", "flood-stderr": "MB", "bad-utf8-stderr": None, "ignore-eof": "PIDFILE",
               "silent-discover": None, "mute": None, "evil-names": None, "html-text": None}
HTTP_MODES = {"big-json": "MB", "flood-json": "MB", "flood-json-declared": "MB", "flood-sse": "MB", "endless-sse": None,
              "flood-get": "MB", "retry-zero": None, "no-get-stream": None, "flood-2024": "MB",
              "restart-400": None, "ran-400": "SHAPE", "ran-400-modern": "SHAPE", "ran-400-2024": None}
MODERN_HTTP = {"big-json", "flood-json", "flood-json-declared", "flood-sse", "endless-sse", "ran-400-modern"}
LEGACY_HTTP = {"flood-get", "retry-zero", "no-get-stream", "restart-400", "ran-400"}
SHAPES = ("id", "text", "result")
RESULT_PREFIX = '{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"'
CHUNK = b"x" * 65536
# The text of a `big` result: BIG_UNIT repeated (escaped, it is 41 bytes; decoded, 26).
BIG_UNIT = 'é"\\\n😀 0123456789abcdef'
HOLD_SECONDS = 60
GONE = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)

USAGE = ("usage: hostile.py stdio MODE [ARG] | hostile.py http PORT MODE [ARG]\n"
         f"  stdio modes: {' '.join(STDIO_MODES)}\n  http modes: {' '.join(HTTP_MODES)}\n"
         "  ARG: MB (flood sizes, default 300), PIDFILE (ignore-eof, required) or SHAPE (ran-400*: id, text or result)")


def flood(write, nbytes: int) -> None:
    """Write nbytes of b'x' through `write` in 64 KiB pieces (raises on a gone reader)."""
    while nbytes > 0:
        n = min(nbytes, len(CHUNK))
        write(CHUNK if n == len(CHUNK) else CHUNK[:n])
        nbytes -= n


def big_result(rid, nbytes: int) -> bytes:
    """A whole JSON-RPC result line of about nbytes: one text, BIG_UNIT repeated."""
    unit = json.dumps(BIG_UNIT)[1:-1]
    text = unit * max(1, nbytes // len(unit))
    return (RESULT_PREFIX % json.dumps(rid)).encode() + text.encode() + b'"}]}}\n'


def pieces(write, data: bytes) -> None:
    for i in range(0, len(data), len(CHUNK)):
        write(data[i:i + len(CHUNK)])


def fd_writer(fd: int):
    def write(data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    return write


def jsonrpc_answer(msg: dict, era: str, tools: list[str], caps: dict, version: str | None = None) -> dict:
    """The ordinary answer to request `msg` for a well-behaved server of `era` ("legacy" or "modern")."""
    method, params, rid = msg.get("method"), msg.get("params") or {}, msg.get("id")
    done = {"resultType": "complete"} if era == "modern" else {}

    def ok(result: dict) -> dict:
        return {"jsonrpc": "2.0", "id": rid, "result": {**result, **done}}

    def err(code: int, message: str, data=None) -> dict:
        error = {"code": code, "message": message, **({"data": data} if data is not None else {})}
        return {"jsonrpc": "2.0", "id": rid, "error": error}

    if method == "ping":
        return ok({})
    if method == "tools/list" and any(t in SCHEMA_TOOLS for t in tools):
        return ok({"tools": [{"name": t, "description": SCHEMA_TOOLS[t][0], "inputSchema": SCHEMA_TOOLS[t][1],
                              **({"outputSchema": SCHEMA_TOOLS[t][2]} if SCHEMA_TOOLS[t][2] else {})}
                             if t in SCHEMA_TOOLS else {"name": t, "description": TOOLS[t], "inputSchema": {"type": "object"}}
                             for t in tools]})
    if method == "tools/call" and params.get("name") in SCHEMA_TOOLS:
        name, args = params["name"], params.get("arguments") or {}
        if name == "sum_ok":
            return ok({"content": [{"type": "text", "text": '{"sum": 3}'}], "structuredContent": {"sum": 3}})
        if name == "sum_bad":
            return ok({"content": [{"type": "text", "text": '{"sum": "three"}'}], "structuredContent": {"sum": "three"}})
        if name == "sum_none":
            return ok({"content": [{"type": "text", "text": "3"}]})
        SCHEMA_CALLS[0] += 1
        text = f"{name} call #{SCHEMA_CALLS[0]}: {json.dumps(args, sort_keys=True)}"
        return ok({"content": [{"type": "text", "text": text}]})
    if method == "tools/list":
        return ok({"tools": [{"name": t, "description": TOOLS[t], "inputSchema": {"type": "object", "properties": {}}}
                             for t in tools]})
    if method == "tools/call":
        args = params.get("arguments") or {}
        if params.get("name") == "echo":
            return ok({"content": [{"type": "text", "text": f"echo: {args.get('message', '')}"}]})
        return ok({"content": [{"type": "text", "text": f"Unknown tool: {params.get('name')}"}], "isError": True})
    if era == "modern":
        if method == "server/discover":
            return ok({"supportedVersions": [MODERN], "capabilities": caps, "serverInfo": SERVER_INFO})
        if method == "initialize":
            return err(-32022, "Unsupported protocol version", {"supported": [MODERN]})
    elif method == "initialize":
        requested = params.get("protocolVersion")
        negotiated = version or (requested if requested in LEGACY_VERSIONS else LEGACY_VERSIONS[-1])
        return ok({"protocolVersion": negotiated, "capabilities": caps, "serverInfo": SERVER_INFO})
    return err(-32601, "Method not found")


# ----------------------------------------------------------------------------- stdio

BAD_SHORT = b"\xff\xfe\xc3(invalid utf-8)\x80\n"
BAD_LONG = (b"y" * 1021 + b"\xff\xc3(\x80") * 100 + b"\n"  # 102 501 bytes, invalid bytes every 1 KB


def stderr_or_die(data: bytes) -> None:
    try:
        fd_writer(2)(data)
    except OSError:
        os._exit(3)


def stdio_main(mode: str, arg: str | None, mb: int) -> None:
    if mode == "ignore-eof":
        with open(arg + ".tmp", "w") as f:
            f.write(f"{os.getpid()}\n")
        os.replace(arg + ".tmp", arg)
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(sig, signal.SIG_IGN)
    tools = ["echo"] + {"big-stdout": ["big"], "flood-stdout": ["flood"], "ignore-eof": ["slow"], "evil-names": [EVIL_TOOL], "html-text": ["render"],
                         "schemas": list(SCHEMA_TOOLS)}.get(mode, [])
    out = fd_writer(1)
    stderr_flood = threading.Thread(target=lambda: (flood(stderr_or_die, mb), stderr_or_die(b"\n")), daemon=True)
    try:
        for line in sys.stdin.buffer:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if not isinstance(msg, dict) or not isinstance(msg.get("method"), str):
                continue  # a response (or junk): nothing to answer
            method, params = msg["method"], msg.get("params") or {}
            if "id" not in msg:
                continue  # notifications (initialized, cancelled, ...) get no answer
            if mode == "bad-utf8-stderr":
                stderr_or_die(BAD_SHORT)
                stderr_or_die(BAD_LONG)
            if mode == "silent-discover" and method == "server/discover":
                continue
            if mode == "mute":
                continue
            if method == "tools/call" and mode == "flood-stdout" and params.get("name") == "flood":
                out((RESULT_PREFIX % json.dumps(msg["id"])).encode())
                flood(out, mb)
                time.sleep(HOLD_SECONDS)
                continue
            if method == "tools/call" and mode == "big-stdout" and params.get("name") == "big":
                pieces(out, big_result(msg["id"], mb))
                continue
            if method == "tools/call" and mode == "ignore-eof" and params.get("name") == "slow":
                continue
            out(json.dumps(jsonrpc_answer(msg, "legacy", tools, {"tools": {}})).encode() + b"\n")
            if mode == "flood-stderr" and method == "initialize" and not stderr_flood.is_alive():
                stderr_flood.start()
    except GONE:
        pass
    if mode == "ignore-eof":
        while True:
            time.sleep(1)


# ------------------------------------------------------------------------------ http

class State:
    mode = ""
    mb = 0
    lock = threading.Lock()
    get_count = 0
    sessions: set[str] = set()
    sse_2024: queue.Queue | None = None  # the open GET stream of session s1 (flood-2024)
    stats = {"initialize": 0, "sessionless": 0, "unknown": 0}  # restart-400
    ran = {"initialize": 0, "executed": 0, "unknown": 0}  # ran-400*
    shape = "id"
    restarted = False
    refuse_inits = 0


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:  # no access log on stderr
        pass

    def do_GET(self) -> None:
        self.guard(self.get)

    def do_POST(self) -> None:
        self.guard(self.post)

    def do_DELETE(self) -> None:
        self.guard(self.delete)

    def guard(self, fn) -> None:
        try:
            fn()
        except GONE:
            self.close_connection = True

    # --- response helpers
    def send(self, status: int, body: bytes = b"", ctype: str = "text/plain", headers: dict | None = None) -> None:
        self.send_response(status)
        for k, v in {**({"Content-Type": ctype} if body else {}), **(headers or {})}.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def send_json(self, obj: dict, headers: dict | None = None) -> None:
        self.send(200, json.dumps(obj).encode(), "application/json", headers)

    def start_stream(self, ctype: str, length: int | None = None):
        """Send the headers of a streamed 200 response; return a body writer (chunked unless `length`)."""
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding" if length is None else "Content-Length",
                         "chunked" if length is None else str(length))
        self.end_headers()
        if length is not None:
            return self.wfile.write
        return lambda data: self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def end_chunked(self) -> None:
        self.wfile.write(b"0\r\n\r\n")

    def flood_and_hold(self, write, prefix: bytes) -> None:
        write(prefix)
        flood(write, State.mb)
        time.sleep(HOLD_SECONDS)
        self.close_connection = True  # the body never ends properly

    def read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            body = b""
            while size := int(self.rfile.readline().split(b";")[0], 16):
                body += self.rfile.read(size)
                self.rfile.readline()
            self.rfile.readline()
            return body
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    # --- routes
    def get(self) -> None:
        path, mode = urlsplit(self.path).path, State.mode
        if path == "/count":
            return self.send(200, str(State.get_count).encode())
        if path == "/stats":
            with State.lock:
                return self.send_json(dict(State.ran if mode.startswith("ran-400") else State.stats))
        if path == "/forget":
            with State.lock:
                State.sessions.clear()
            return self.send(200, b"forgotten")
        if path != "/mcp":
            return self.send(404, b"Not Found")
        with State.lock:
            State.get_count += 1
            n = State.get_count
        if mode == "flood-get":
            return self.flood_and_hold(self.start_stream("text/event-stream"), b"data: ")
        if mode == "retry-zero":
            self.start_stream("text/event-stream")(b"retry: 0\nid: %d\n\n" % n)
            return self.end_chunked()
        if mode in ("flood-2024", "ran-400-2024"):
            return self.sse_2024()
        self.send(405, b"Method Not Allowed", headers={"Allow": "POST" if mode in MODERN_HTTP else "POST, DELETE"})

    def delete(self) -> None:
        if State.mode in LEGACY_HTTP:
            State.sessions.discard(self.headers.get("Mcp-Session-Id", ""))
            return self.send(200)
        self.send(405, b"Method Not Allowed", headers={"Allow": "POST"})

    def post(self) -> None:
        url, mode = urlsplit(self.path), State.mode
        body = self.read_body()
        if mode in ("flood-2024", "ran-400-2024"):
            if url.path == "/messages" and parse_qs(url.query).get("session") == ["s1"] and State.sse_2024:
                return self.post_2024(body)
            if url.path == "/mcp":
                return self.send(405, b"Method Not Allowed", headers={"Allow": "GET"})
            return self.send(404, b"Session not found")
        if url.path != "/mcp":
            return self.send(404, b"Not Found")
        try:
            msg = json.loads(body)
            assert isinstance(msg, dict)
        except (ValueError, AssertionError):
            return self.send(400, json.dumps({"jsonrpc": "2.0", "id": None, "error": {
                "code": -32700, "message": "Parse error"}}).encode(), "application/json")
        rid, method = msg.get("id"), msg.get("method")
        if mode == "restart-400":
            return self.restart_400(msg)
        if mode in ("ran-400", "ran-400-modern"):
            return self.ran_400(msg)
        if mode in LEGACY_HTTP:
            sid = self.headers.get("Mcp-Session-Id")
            if method == "initialize" and rid is not None:
                sid = uuid.uuid4().hex
                State.sessions.add(sid)
                caps = {"tools": {"listChanged": True}}
                return self.send_json(jsonrpc_answer(msg, "legacy", ["echo"], caps), {"Mcp-Session-Id": sid})
            if sid is None:
                return self.send(400, b"Bad Request: Server not initialized")
            if sid not in State.sessions:
                return self.send(404, b"Session not found")
            if rid is None:
                return self.send(202)
            return self.send_json(jsonrpc_answer(msg, "legacy", ["echo"], {"tools": {"listChanged": True}}))
        # modern, stateless
        if rid is None:
            return self.send(202)
        if method != "tools/call":
            tools = ["big"] if mode == "big-json" else ["flood"]
            return self.send_json(jsonrpc_answer(msg, "modern", tools, {"tools": {}}))
        if mode == "big-json":
            write = self.start_stream("application/json")
            pieces(write, big_result(rid, State.mb)[:-1])
            return self.end_chunked()
        prefix = (RESULT_PREFIX % json.dumps(rid)).encode()
        if mode == "flood-json":
            return self.flood_and_hold(self.start_stream("application/json"), prefix)
        if mode == "flood-json-declared":
            return self.flood_and_hold(self.start_stream("application/json", len(prefix) + State.mb), prefix)
        if mode == "flood-sse":
            return self.flood_and_hold(self.start_stream("text/event-stream"), b"data: ")
        write, n, start = self.start_stream("text/event-stream"), 0, time.monotonic()  # endless-sse
        while time.monotonic() - start < 120:
            n += 1
            tick = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": f"tick {n}"}}
            write(b"data: %s\n\n" % json.dumps(tick, separators=(",", ":")).encode())
            time.sleep(0.001)
        self.end_chunked()

    def restart_400(self, msg: dict) -> None:
        rid, method = msg.get("id"), msg.get("method")
        sid = self.headers.get("Mcp-Session-Id")
        with State.lock:
            if method == "initialize" and rid is not None:
                State.stats["initialize"] += 1
                refuse = State.refuse_inits > 0
                if refuse:
                    State.refuse_inits -= 1
                else:
                    sid = uuid.uuid4().hex
                    State.sessions.add(sid)
                answer = None if refuse else "initialize"
            elif sid is None:
                State.stats["sessionless"] += method != "server/discover"
                answer = "sessionless"
            elif sid not in State.sessions:
                State.stats["unknown"] += 1
                answer = "unknown"
            else:
                answer = "ok"
                if method == "tools/call" and not State.restarted:
                    State.restarted = True
                    State.sessions.clear()
                    State.refuse_inits = 1
        caps = {"tools": {"listChanged": True}}
        if answer is None:
            return self.send(503, b"Service Unavailable")
        if answer == "initialize":
            return self.send_json(jsonrpc_answer(msg, "legacy", ["echo"], caps), {"Mcp-Session-Id": sid})
        if answer in ("sessionless", "unknown"):
            # The TypeScript SDK's words and shape (server-everything's, its examples').
            words = "Server not initialized" if answer == "sessionless" else "No valid session ID provided"
            return self.send(400, json.dumps({"jsonrpc": "2.0", "error": {"code": -32000, "message": f"Bad Request: {words}"},
                                              "id": None}).encode(), "application/json")
        if rid is None:
            return self.send(202)
        return self.send_json(jsonrpc_answer(msg, "legacy", ["echo"], caps))

    def session_400(self, rid) -> None:
        """400 naming the session, in State.shape."""
        if State.shape == "result":
            body = {"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": "session expired"}]}}
            return self.send(400, json.dumps(body).encode(), "application/json")
        if State.shape == "id":
            body = {"jsonrpc": "2.0", "id": rid, "error": {"code": -32000, "message": "Bad Request: Session expired"}}
            return self.send(400, json.dumps(body).encode(), "application/json")
        self.send(400, b"Invalid or expired session")

    def ran_400(self, msg: dict) -> None:
        rid, method = msg.get("id"), msg.get("method")
        modern = State.mode == "ran-400-modern"
        era = "modern" if modern else "legacy"
        sid = self.headers.get("Mcp-Session-Id")
        caps = {"tools": {"listChanged": True}}
        with State.lock:
            if not modern and method == "initialize" and rid is not None:
                State.ran["initialize"] += 1
                sid = uuid.uuid4().hex
                State.sessions.add(sid)
                return self.send_json(jsonrpc_answer(msg, era, ["echo"], caps), {"Mcp-Session-Id": sid})
            if not modern and sid is not None and sid not in State.sessions:
                State.ran["unknown"] += 1
                return self.session_400(rid)
            if rid is None:
                return self.send(202)
            if method == "tools/call":
                State.ran["executed"] += 1  # it ran; then the server blames the session
                return self.session_400(rid)
        self.send_json(jsonrpc_answer(msg, era, ["echo"], caps))

    # --- the 2024-11-05 HTTP+SSE transport (flood-2024, ran-400-2024)
    def sse_2024(self) -> None:
        q: queue.Queue = queue.Queue()
        State.sse_2024 = q
        write = self.start_stream("text/event-stream")
        write(b"event: endpoint\ndata: /messages?session=s1\n\n")
        while True:
            item = q.get()
            if item == "flood":
                return self.flood_and_hold(write, b"event: message\ndata: ")
            write(b"event: message\ndata: %s\n\n" % json.dumps(item).encode())

    def post_2024(self, body: bytes) -> None:
        try:
            msg = json.loads(body)
        except ValueError:
            return self.send(400, b"Bad Request: invalid JSON")
        tools = ["echo"] if State.mode == "ran-400-2024" else ["flood"]
        if State.mode == "ran-400-2024" and isinstance(msg, dict) and msg.get("method") == "tools/call":
            with State.lock:
                State.ran["executed"] += 1  # it ran; then the server blames the session
            return self.send(400, b"Could not find session")
        self.send(202)
        if not isinstance(msg, dict) or msg.get("id") is None or "method" not in msg:
            return  # notifications and responses: nothing to answer
        if msg["method"] == "tools/call":
            State.sse_2024.put("flood")
        else:
            State.sse_2024.put(jsonrpc_answer(msg, "legacy", tools, {"tools": {}}, version="2024-11-05"))


class QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        if not isinstance(sys.exc_info()[1], GONE):
            super().handle_error(request, client_address)


def http_main(port: int, mode: str, mb: int) -> None:
    State.mode, State.mb = mode, mb
    server = QuietServer(("127.0.0.1", port), Handler)
    server.serve_forever()


# ------------------------------------------------------------------------------ main

def usage(problem: str) -> None:
    print(f"hostile.py: {problem}\n{USAGE}", file=sys.stderr)
    sys.exit(2)


def main(argv: list[str]) -> None:
    if len(argv) < 2 or argv[1] not in ("stdio", "http"):
        usage("first argument must be stdio or http")
    rest = argv[2:]
    port = None
    if argv[1] == "http":
        if not rest or not rest[0].isdigit() or not 0 < int(rest[0]) < 65536:
            usage("http needs a PORT")
        port, rest = int(rest[0]), rest[1:]
    modes = STDIO_MODES if port is None else HTTP_MODES
    if not rest or rest[0] not in modes:
        usage(f"unknown {argv[1]} mode {rest[0] if rest else '(none)'!r}")
    mode, args, kind = rest[0], rest[1:], modes[rest[0]]
    if len(args) > (1 if kind else 0) or (kind == "PIDFILE" and not args):
        usage(f"bad arguments for {mode}: {args}")
    mb = 300 * 1048576
    if kind == "SHAPE":
        if len(args) != 1 or args[0] not in SHAPES:
            usage(f"{mode} needs a SHAPE ({' or '.join(SHAPES)}), not {args}")
        State.shape = args[0]
    if kind == "MB" and args:
        try:
            mb = int(float(args[0]) * 1048576)
            assert mb > 0
        except (ValueError, AssertionError):
            usage(f"MB must be a positive number, not {args[0]!r}")
    if mode != "ignore-eof":
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # die quietly, no KeyboardInterrupt traceback
    if port is None:
        stdio_main(mode, args[0] if args else None, mb)
    else:
        http_main(port, mode, mb)


if __name__ == "__main__":
    main(sys.argv)
