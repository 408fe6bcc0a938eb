"""Test peer: an MCP server built on PyPI `mcp==2.3.0` (installed by install.sh
into .peers/venv). It serves both protocol eras: the legacy `initialize`
handshake (2024-11-05 .. 2025-11-25) and the stateless 2026-07-28 era
(`server/discover`, per-request `_meta`, `input_required` results).

Usage:
    .peers/venv/bin/python tests/peers/pyserver.py stdio
    .peers/venv/bin/python tests/peers/pyserver.py http <port> [stateless] [json]
        (binds 127.0.0.1, endpoint path /mcp)

Environment:
    PYSERVER_ERA=modern   serve only 2026-07-28: `initialize` is refused with
                          -32022 (data.supported == ["2026-07-28"]) on every
                          transport; a modern-only server.
    PYSERVER_ERA=legacy   serve only the initialize handshake: `server/discover`
                          and any request carrying the 2026-07-28 `_meta`
                          envelope get -32601 Method not found, like older SDKs.
    unset (or empty)      both eras (the default).

See tests/peers/README.md for the observed wire shapes of every tool.
"""

from __future__ import annotations

import os
import sys
import warnings
from typing import Annotated

import anyio
from mcp_types import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PROTOCOL_VERSION_META_KEY,
    UNSUPPORTED_PROTOCOL_VERSION,
    Completion,
    CompletionArgument,
    CompletionContext,
    EmptyResult,
    ListResourcesResult,
    PaginatedRequestParams,
    PromptReference,
    ResourceTemplateReference,
    SetLevelRequestParams,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from mcp.server import CacheHint, MCPServer, NotificationOptions, ServerRequestContext
from mcp.server.mcpserver import (
    AcceptedElicitation,
    Context,
    Elicit,
    ElicitationResult,
    Resolve,
)
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.resources import BinaryResource, TextResource
from mcp.server.runner import _serve_modern_stream, serve_loop
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import InboundLadderRejection, classify_inbound_request

# ctx.log()/ctx.warning() are marked deprecated as of 2026-07-28 (SEP-2577); we
# still want to exercise notifications/message, so silence the warning.
warnings.filterwarnings("ignore", message=".*logging capability is deprecated.*")

server = MCPServer(
    name="pyserver",
    version="1.0.0",
    instructions="Test peer for the Rust MCP client.",
    log_level="WARNING",
    # 2026-07-28 era only: fills `ttlMs`/`cacheScope` on tools/list results
    # (the handshake-era sieve strips both keys, so legacy results carry neither).
    cache_hints={"tools/list": CacheHint(ttl_ms=60_000)},
)

# The legacy `initialize` result advertises `tools.listChanged: true` because
# add_tool (below) sends notifications/tools/list_changed. MCPServer builds its
# InitializationOptions with a default NotificationOptions() (all False) on
# every transport (stdio here; the HTTP session manager asks the low-level
# server the same way), so default the argument on this one instance. The
# 2026-07-28 era ignores NotificationOptions: there listChanged is derived from
# `subscriptions/listen` being served (it is).
_lowlevel_init_options = server._lowlevel_server.create_initialization_options


def _init_options_with_tools_changed(notification_options=None, *args, **kwargs):
    return _lowlevel_init_options(notification_options or NotificationOptions(tools_changed=True), *args, **kwargs)


server._lowlevel_server.create_initialization_options = _init_options_with_tools_changed  # type: ignore[method-assign]


# --------------------------------------------------------------------------- tools


@server.tool(description="Echo the message back.", structured_output=False)
def echo(message: str) -> str:
    return f"Echo: {message}"


class AddResult(TypedDict):
    sum: float


@server.tool(description="Add two numbers; structured result {sum}.")
def add(a: float, b: float) -> AddResult:
    return AddResult(sum=a + b)


@server.tool(description="Always fails with a tool error (isError: true).", structured_output=False)
def fail() -> str:
    raise ToolError("this tool always fails")


@server.tool(
    description="Sleep `seconds`, reporting progress `steps` times, then return 'done'.", structured_output=False
)
async def slow(seconds: float, steps: int, ctx: Context) -> str:
    steps = max(int(steps), 1)
    for i in range(1, steps + 1):
        await anyio.sleep(seconds / steps)
        await ctx.report_progress(i, steps, f"step {i}/{steps}")
    return "done"


class NameForm(BaseModel):
    name: str = Field(description="Your name")


def ask_for_name() -> Elicit[NameForm]:
    # Resolver: the framework turns this into an `elicitation/create` request
    # (legacy era) or an `input_required` result (2026-07-28 era).
    return Elicit("What is your name?", NameForm)


@server.tool(description="Ask the user's name via form elicitation and greet them.", structured_output=False)
def ask_name(answer: Annotated[ElicitationResult[NameForm], Resolve(ask_for_name)]) -> str:
    if isinstance(answer, AcceptedElicitation):
        return f"Hello, {answer.data.name}"
    if answer.action == "decline":
        return "declined"
    return "cancelled"


@server.tool(description="Kill the server process immediately (simulates a crash).", structured_output=False)
def crash() -> str:
    sys.stdout.flush()
    os._exit(1)


_LEVELS = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]
_min_log_level = {"level": "debug"}  # legacy era: set by logging/setLevel


@server.tool(description="Send a warning-level log notification, then return 'logged'.", structured_output=False)
async def log(message: str, ctx: Context) -> str:
    # Legacy era: filtered by the level last set with logging/setLevel (below).
    # 2026-07-28 era: the SDK itself only delivers it when the request's _meta
    # carries "io.modelcontextprotocol/logLevel" at "warning" or lower.
    if _LEVELS.index("warning") >= _LEVELS.index(_min_log_level["level"]):
        await ctx.log("warning", message, logger_name="pyserver")
    return "logged"


async def _set_level(ctx: ServerRequestContext, params: SetLevelRequestParams) -> EmptyResult:
    _min_log_level["level"] = params.level
    return EmptyResult()


# MCPServer registers no logging/setLevel handler; adding one makes the legacy
# `initialize` result advertise `capabilities.logging`.
server._lowlevel_server.add_request_handler("logging/setLevel", SetLevelRequestParams, _set_level)


def extra_tool() -> str:
    return "extra"


@server.tool(
    description="Register the tool `extra_tool` (returns 'extra') and announce notifications/tools/list_changed.",
    structured_output=False,
)
async def add_tool(ctx: Context) -> str:
    if server._tool_manager.get_tool("extra_tool") is not None:
        return "extra_tool already registered"
    server.add_tool(extra_tool, description="Added at runtime by add_tool.", structured_output=False)
    # Legacy era: a plain notification on the connection's standalone channel
    # (the stdio pipe). At 2026-07-28 the SDK drops that copy (change
    # notifications may only ride subscriptions/listen streams) and the bus
    # publish below is what reaches listeners. Each call is a no-op in the
    # other era, so both are always made.
    await ctx.session.send_tool_list_changed()
    await ctx.notify_tools_changed()
    return "added extra_tool"


@server.tool(description="Sleep (practically) forever; for timeout and cancellation tests.", structured_output=False)
async def sleep_forever() -> str:
    await anyio.sleep(10**9)
    return "woke up"


# ----------------------------------------------------------------- prompts/resources


@server.prompt(description="Greet someone by name.")
def greet(name: str) -> str:
    return f"Please greet {name} warmly."


@server.resource("py://readme", name="readme", description="Readme text", mime_type="text/plain")
def readme() -> str:
    return "pyserver readme: a test peer for the Rust MCP client."


@server.resource("py://items/{id}", name="item", description="An item by id", mime_type="text/plain")
def item(id: str) -> str:
    return f"item {id}"


server.add_resource(
    BinaryResource(
        uri="py://blob",
        name="blob",
        description="The bytes 0..=255",
        mime_type="application/octet-stream",
        data=bytes(range(256)),
    )
)

GENERATED_RESOURCES = 25
for _n in range(GENERATED_RESOURCES):
    server.add_resource(
        TextResource(uri=f"py://gen/{_n}", name=f"gen{_n}", mime_type="text/plain", text=f"generated {_n}")
    )

# resources/list pagination: pages of 10 over [readme, blob, gen/0..24]. The
# cursors are deliberately odd: page 1 -> nextCursor "" (an empty string IS a
# cursor; only its absence ends the list), page 2 (cursor "") -> nextCursor
# "p3", page 3 (cursor "p3") -> no nextCursor. MCPServer's own resources/list
# handler does not paginate, so replace it on the low-level server.
PAGE_SIZE = 10


def _page_cursor(page: int) -> str | None:
    """The cursor that requests 0-based page `page`: none, then "", then "p3", "p4", ..."""
    return None if page == 0 else "" if page == 1 else f"p{page + 1}"


async def _list_resources_paged(ctx: ServerRequestContext, params: PaginatedRequestParams) -> ListResourcesResult:
    resources = await server.list_resources()
    pages = max(1, -(-len(resources) // PAGE_SIZE))
    cursors = [_page_cursor(i) for i in range(pages)]
    if params.cursor not in cursors:
        raise MCPError(code=INVALID_PARAMS, message=f"Invalid cursor: {params.cursor!r}")
    page = cursors.index(params.cursor)
    start = page * PAGE_SIZE
    next_cursor = _page_cursor(page + 1) if page + 1 < pages else None
    return ListResourcesResult(resources=resources[start : start + PAGE_SIZE], next_cursor=next_cursor)


server._lowlevel_server.add_request_handler("resources/list", PaginatedRequestParams, _list_resources_paged)


# completion/complete: the greet prompt's `name` argument. Registering a handler
# makes both eras advertise `capabilities.completions`.
GREET_NAMES = ["Ann", "Alice", "Bob", "Carol"]


@server.completion()
async def _complete(
    ref: PromptReference | ResourceTemplateReference,
    argument: CompletionArgument,
    context: CompletionContext | None,
) -> Completion | None:
    if isinstance(ref, PromptReference) and ref.name == "greet" and argument.name == "name":
        prefix = argument.value.lower()
        values = [n for n in GREET_NAMES if n.lower().startswith(prefix)]
        return Completion(values=values, total=len(values), has_more=False)
    return None  # -> {"completion":{"values":[]}}


# ------------------------------------------------------------ era restriction
# PYSERVER_ERA=modern|legacy turns pyserver into a single-era server. Two hooks:
#
# 1. A ServerMiddleware (`_EraGate`). mcp 2.3.0 runs `Server.middleware` around
#    every inbound request on every transport (stdio loops, the streamable-HTTP
#    legacy loops, stateful and stateless, and the modern single-exchange POST)
#    before validation, method lookup and the handshake; raising before
#    `call_next` vetoes the request, `initialize` included.
# 2. On stdio only, the connection driver. `Server.run` drives
#    `serve_dual_era_loop`, where the first request locks the connection's era
#    before any middleware runs: an enveloped `server/discover` would lock it
#    modern, and the client's fallback `initialize` would then be refused by the
#    SDK itself. So legacy drives the SDK's handshake-only `serve_loop` (what the
#    HTTP session manager uses), and modern drives the SDK's modern stream loop
#    (what a modern-opened stdio connection runs; it refuses `initialize` with
#    -32022 itself). `_serve_modern_stream` is private; mcp is pinned exactly.

ERA = os.environ.get("PYSERVER_ERA", "")
if ERA not in ("", "modern", "legacy"):
    print(f"PYSERVER_ERA must be 'modern' or 'legacy' (or unset), not {ERA!r}", file=sys.stderr)
    sys.exit(2)


def _has_envelope(params: object) -> bool:
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and PROTOCOL_VERSION_META_KEY in meta


class _EraGate:
    async def __call__(self, ctx: ServerRequestContext, call_next):  # type: ignore[no-untyped-def]
        if ctx.request_id is None:  # notifications pass untouched
            return await call_next(ctx)
        modern_connection = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        if ERA == "modern" and not modern_connection:
            if ctx.method == "initialize":
                requested = (ctx.params or {}).get("protocolVersion")
                data: dict[str, object] = {"supported": list(MODERN_PROTOCOL_VERSIONS)}
                if isinstance(requested, str):
                    data["requested"] = requested
                raise MCPError(
                    code=UNSUPPORTED_PROTOCOL_VERSION,
                    message="this server serves only the 2026-07-28 protocol; the initialize handshake is not accepted",
                    data=data,
                )
            # Any other handshake-era request (e.g. legacy stateless HTTP, which
            # needs no initialize): the modern ladder's envelope rejection.
            verdict = classify_inbound_request({"method": ctx.method, "params": ctx.params})
            if isinstance(verdict, InboundLadderRejection):
                raise MCPError(code=verdict.code, message=verdict.message, data=verdict.data)
            raise MCPError(code=INVALID_REQUEST, message="2026-07-28 requests must carry the MCP-Protocol-Version header")
        if ERA == "legacy" and (modern_connection or ctx.method == "server/discover" or _has_envelope(ctx.params)):
            raise MCPError(code=METHOD_NOT_FOUND, message="Method not found", data=ctx.method)
        return await call_next(ctx)


if ERA:
    server.middleware.append(_EraGate())


async def _run_stdio_single_era() -> None:
    lowlevel = server._lowlevel_server
    async with stdio_server() as (read_stream, write_stream), lowlevel.lifespan(lowlevel) as state:
        if ERA == "legacy":
            await serve_loop(
                lowlevel, read_stream, write_stream, lifespan_state=state,
                init_options=lowlevel.create_initialization_options(),
            )
        else:
            try:
                await _serve_modern_stream(lowlevel, read_stream, write_stream, lifespan_state=state, raise_exceptions=False)
            finally:
                await write_stream.aclose()


# --------------------------------------------------------------------------- main


def main(argv: list[str]) -> None:
    if len(argv) < 2 or argv[1] not in ("stdio", "http"):
        print("usage: pyserver.py stdio | http <port> [stateless] [json]", file=sys.stderr)
        sys.exit(2)
    if argv[1] == "stdio":
        if ERA:
            anyio.run(_run_stdio_single_era)
        else:
            server.run("stdio")
        return
    if len(argv) < 3:
        print("usage: pyserver.py http <port> [stateless] [json]", file=sys.stderr)
        sys.exit(2)
    port = int(argv[2])
    flags = set(argv[3:])
    unknown = flags - {"stateless", "json"}
    if unknown:
        print(f"unknown flags: {sorted(unknown)}", file=sys.stderr)
        sys.exit(2)
    server.run(
        "streamable-http",
        host="127.0.0.1",
        port=port,
        streamable_http_path="/mcp",
        stateless_http="stateless" in flags,
        json_response="json" in flags,
    )


if __name__ == "__main__":
    main(sys.argv)
