"""A tiny MCP server (stdio) for the agent's parallel-tool-call test.

`meet(group, count)` returns only when `count` calls of the same group are in flight at
once (or after 60 s, answering "alone"): calls made one after another can never meet,
so the answer tells whether the client ran them concurrently — no timing involved.
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


if __name__ == "__main__":
    server.run("stdio")
