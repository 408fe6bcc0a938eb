// A stdio server on the official TypeScript SDK v2 (npm @modelcontextprotocol/server,
// pinned in tests/peers/install.sh), served with its own era entry, serveStdio: the
// opening message picks the era, and an `initialize` read after `server/discover`
// moves the connection to the 2025 era (it accepts both). The era tests start it
// late, to show the client sends one handshake at a time.
//
//   node tests/peers/tsserver/server.mjs
//
// Tools: echo {message}, touch (updates ts://note and says so to subscribers).
// Resource: ts://note (subscribable). Legacy connections answer resources/subscribe.
import { createRequire } from "node:module";

// The packages live in .peers/tsserver (tests/peers/install.sh), not beside this file.
const require = createRequire(new URL("../../../.peers/tsserver/package.json", import.meta.url));
const { McpServer, fromJsonSchema } = require("@modelcontextprotocol/server");
const { serveStdio } = require("@modelcontextprotocol/server/stdio");

let version = 0;

serveStdio(({ era }) => {
  const server = new McpServer(
    { name: "ts-v2", version: "2.4.0" },
    { capabilities: { tools: {}, resources: { subscribe: true, listChanged: true } } },
  );
  server.registerResource("note", "ts://note", { mimeType: "text/plain" }, async (uri) => ({
    contents: [{ uri: uri.href, text: `note version ${version}` }],
  }));
  server.registerTool(
    "echo",
    {
      description: "Echoes the message back",
      inputSchema: fromJsonSchema({
        type: "object",
        properties: { message: { type: "string" } },
        required: ["message"],
      }),
    },
    async ({ message }) => ({ content: [{ type: "text", text: `echo (${era}): ${message}` }] }),
  );
  server.registerTool("touch", { description: "Updates ts://note" }, async () => {
    version += 1;
    await server.server.sendResourceUpdated({ uri: "ts://note" });
    return { content: [{ type: "text", text: `note is now version ${version}` }] };
  });
  if (era !== "modern") {
    server.server.setRequestHandler("resources/subscribe", async () => ({}));
    server.server.setRequestHandler("resources/unsubscribe", async () => ({}));
  }
  return server;
});
