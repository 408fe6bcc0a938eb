"""The Python SDK client (PyPI mcp 2.3.0, the test venv) for mcp-bench: one
measurement, a JSON line on stdout.
    python client.py TRANSPORT KIND SERVER URL SEQ CONC BIG IN_FLIGHT
"""

import json
import resource
import sys
import time

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def measure(session: ClientSession, kind: str, start: float, seq: int, conc: int, big: int, in_flight: int) -> dict:
    async def echo() -> None:
        await session.call_tool("echo", {"message": "hi"})

    if kind == "seq":
        c0, t0 = time.process_time(), time.perf_counter()
        for _ in range(seq):
            await echo()
        return {"value": (time.process_time() - c0) * 1e6 / seq, "wall_us": (time.perf_counter() - t0) * 1e6 / seq}
    if kind == "conc":
        per = conc // in_flight
        t0 = time.perf_counter()

        async def worker() -> None:
            for _ in range(per):
                await echo()

        async with anyio.create_task_group() as tg:
            for _ in range(in_flight):
                tg.start_soon(worker)
        return {"value": per * in_flight / (time.perf_counter() - t0)}
    if kind == "cold":
        await echo()
        return {"value": (time.perf_counter() - start) * 1e3}
    t0 = time.perf_counter()
    r = await session.call_tool("big", {"bytes": big})
    if len(r.content[0].text) != big:
        raise RuntimeError("short result")
    return {"value": (time.perf_counter() - t0) * 1e3, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


async def main() -> None:
    transport, kind, server, url, seq, conc, big, in_flight = sys.argv[1:9]
    start = time.perf_counter()
    args = (kind, start, int(seq), int(conc), int(big), int(in_flight))
    if transport == "http":
        from mcp.client.streamable_http import streamable_http_client

        async with streamable_http_client(url) as (read, write, *_):
            async with ClientSession(read, write) as session:
                await session.initialize()
                out = await measure(session, *args)
    else:
        async with stdio_client(StdioServerParameters(command=server, args=["stdio"])) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                out = await measure(session, *args)
    print(json.dumps(out))


anyio.run(main)
