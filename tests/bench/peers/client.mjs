// The TypeScript SDK v2 client (@modelcontextprotocol/client, pinned in
// tests/bench/run.sh) for mcp-bench: one measurement, a JSON line on stdout.
//   node client.mjs TRANSPORT KIND SERVER URL SEQ CONC BIG IN_FLIGHT
import { createRequire } from "node:module";
import path from "node:path";

const require = createRequire(path.join(process.env.NODE_PATH, "x.js"));
const { Client, StreamableHTTPClientTransport } = await import(require.resolve("@modelcontextprotocol/client"));
const { StdioClientTransport } = await import(require.resolve("@modelcontextprotocol/client/stdio"));

const [transport, kind, server, url, seq, conc, big, inFlight] = process.argv.slice(2);
const start = performance.now();
const client = new Client({ name: "bench", version: "0" });
await client.connect(
  transport === "http"
    ? new StreamableHTTPClientTransport(new URL(url))
    : new StdioClientTransport({ command: server, args: ["stdio"] }),
);
const echo = () => client.callTool({ name: "echo", arguments: { message: "hi" } });
let out;
if (kind === "seq") {
  const n = Number(seq);
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < n; i++) await echo();
  const c = process.cpuUsage(c0);
  out = { value: (c.user + c.system) / n, wall_us: ((performance.now() - t0) * 1000) / n };
} else if (kind === "conc") {
  const per = Math.floor(Number(conc) / Number(inFlight));
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: Number(inFlight) }, async () => {
      for (let i = 0; i < per; i++) await echo();
    }),
  );
  out = { value: (per * Number(inFlight)) / ((performance.now() - t0) / 1000) };
} else if (kind === "cold") {
  await echo();
  out = { value: performance.now() - start };
} else {
  const t0 = performance.now();
  const r = await client.callTool({ name: "big", arguments: { bytes: Number(big) } });
  if (r.content[0].text.length !== Number(big)) throw new Error("short result");
  out = { value: performance.now() - t0, rss_mb: process.resourceUsage().maxRSS / 1024 };
}
await client.close();
console.log(JSON.stringify(out));
process.exit(0);
