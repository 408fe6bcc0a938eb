"""A tiny MCP server (stdio) for the agent's parallel-tool-call test.

`meet(group, count)` returns only when `count` calls of the same group are in flight at
once (or after 60 s, answering "alone"): calls made one after another can never meet,
so the answer tells whether the client ran them concurrently — no timing involved.

`crowd(group, until)` counts the calls of `group` in flight, keeps the highest count
seen, and returns only once that peak has reached `until` (or after 60 s), answering
"peak N": with a client that keeps at most `until` calls in flight, every answer is
at most `until`, and the first `until` calls answer exactly `until`.
"""

from __future__ import annotations

import anyio

from mcp.server import MCPServer

server = MCPServer("rendezvous")
_arrived: dict[str, int] = {}
_met: dict[str, anyio.Event] = {}


@server.tool(description="Wait until `count` calls of `group` are in flight together.", structured_output=False)
async def meet(group: str, count: int) -> str:
    _arrived[group] = _arrived.get(group, 0) + 1
    event = _met.setdefault(group, anyio.Event())
    if _arrived[group] >= count:
        event.set()
    with anyio.move_on_after(60):
        await event.wait()
        return "met"
    return "alone"


_in_flight: dict[str, int] = {}
_peak: dict[str, int] = {}
_peaked: dict[str, anyio.Event] = {}


@server.tool(description="Count the calls of `group` in flight; return once the peak reaches `until`.", structured_output=False)
async def crowd(group: str, until: int) -> str:
    _in_flight[group] = _in_flight.get(group, 0) + 1
    _peak[group] = max(_peak.get(group, 0), _in_flight[group])
    event = _peaked.setdefault(group, anyio.Event())
    if _peak[group] >= until:
        event.set()
    try:
        with anyio.move_on_after(60):
            await event.wait()
        return f"peak {_peak[group]}"
    finally:
        _in_flight[group] -= 1


if __name__ == "__main__":
    server.run("stdio")
