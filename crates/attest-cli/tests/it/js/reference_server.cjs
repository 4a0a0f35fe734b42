// The conformance reference server: every server scenario of the official MCP
// conformance suite (@modelcontextprotocol/conformance) implemented with the official
// TypeScript SDK's low-level Server, as each scenario's description asks. Written here
// from those descriptions; served over streamable HTTP (sessions, an event store for
// resumption, Host checks against DNS rebinding) or, with --stdio, over stdin/stdout.
//
//   NODE_PATH=.ci/node/node_modules node reference_server.cjs PORT     streamable HTTP
//   NODE_PATH=.ci/node/node_modules node reference_server.cjs --stdio  stdio
//
// (CommonJS, so that NODE_PATH finds the pinned SDK beside the checkout.) Over HTTP, the
// first line on stdout says where it listens once it does.

const http = require("node:http");
const { randomUUID } = require("node:crypto");
const { Server } = require("@modelcontextprotocol/sdk/server/index.js");
const { StdioServerTransport } = require("@modelcontextprotocol/sdk/server/stdio.js");
const { StreamableHTTPServerTransport } = require("@modelcontextprotocol/sdk/server/streamableHttp.js");
const { InMemoryEventStore } = require("@modelcontextprotocol/sdk/examples/shared/inMemoryEventStore.js");
const { z } = require("zod");
const {
  CallToolRequestSchema,
  CompleteRequestSchema,
  CreateMessageResultSchema,
  ElicitResultSchema,
  GetPromptRequestSchema,
  ListPromptsRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListResourcesRequestSchema,
  ListToolsRequestSchema,
  ReadResourceRequestSchema,
  SetLevelRequestSchema,
  SubscribeRequestSchema,
  UnsubscribeRequestSchema,
} = require("@modelcontextprotocol/sdk/types.js");

// A 1x1 red PNG, and a WAV file of no samples (8 kHz, 16-bit mono).
const PNG =
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
const WAV = (() => {
  const wav = Buffer.alloc(44);
  wav.write("RIFF", 0);
  wav.writeUInt32LE(36, 4);
  wav.write("WAVEfmt ", 8);
  wav.writeUInt32LE(16, 16);
  wav.writeUInt16LE(1, 20);
  wav.writeUInt16LE(1, 22);
  wav.writeUInt32LE(8000, 24);
  wav.writeUInt32LE(16000, 28);
  wav.writeUInt16LE(2, 32);
  wav.writeUInt16LE(16, 34);
  wav.write("data", 36);
  return wav.toString("base64");
})();

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const text = (t) => ({ type: "text", text: t });
const noArgs = { type: "object", properties: {} };

const TOOLS = [
  ["test_simple_text", "Returns simple text"],
  ["test_image_content", "Returns an image"],
  ["test_audio_content", "Returns audio"],
  ["test_embedded_resource", "Returns an embedded resource"],
  ["test_multiple_content_types", "Returns text, an image and a resource"],
  ["test_tool_with_logging", "Sends three log messages while it runs"],
  ["test_tool_with_progress", "Reports progress while it runs"],
  ["test_error_handling", "Always fails"],
  ["test_reconnection", "Closes its SSE stream mid-call, then answers"],
  ["test_elicitation_sep1034_defaults", "Elicits with defaults for every primitive type"],
  ["test_elicitation_sep1330_enums", "Elicits with every enum shape"],
]
  .map(([name, description]) => ({ name, description, inputSchema: noArgs }))
  .concat([
    {
      name: "test_sampling",
      description: "Asks the client's LLM",
      inputSchema: { type: "object", properties: { prompt: { type: "string" } }, required: ["prompt"] },
    },
    {
      name: "test_elicitation",
      description: "Asks the user",
      inputSchema: { type: "object", properties: { message: { type: "string" } }, required: ["message"] },
    },
    {
      // Not a suite scenario: for the proxy's tests of which stream a log line takes
      // (tests/it/mcp_streams.rs). Logs `NAME: started`, then at each gate waits until
      // it is opened (a `resources/read` of `test://gate/GATE`) and logs `NAME: passed GATE`.
      name: "test_tool_with_gated_logging",
      description: "Logs a line, then one more at each gate once it is opened",
      inputSchema: {
        type: "object",
        properties: { name: { type: "string" }, gates: { type: "array", items: { type: "string" } } },
        required: ["name"],
      },
    },
    {
      name: "json_schema_2020_12_tool",
      description: "Tool with JSON Schema 2020-12 features",
      inputSchema: {
        $schema: "https://json-schema.org/draft/2020-12/schema",
        type: "object",
        $defs: {
          address: {
            type: "object",
            properties: { street: { type: "string" }, city: { type: "string" } },
          },
        },
        properties: { name: { type: "string" }, address: { $ref: "#/$defs/address" } },
        additionalProperties: false,
      },
    },
  ]);

const RESOURCES = [
  { uri: "test://static-text", name: "static-text", description: "A text resource", mimeType: "text/plain" },
  { uri: "test://static-binary", name: "static-binary", description: "A PNG resource", mimeType: "image/png" },
  { uri: "test://watched-resource", name: "watched-resource", description: "A resource to watch", mimeType: "text/plain" },
];

const PROMPTS = [
  { name: "test_simple_prompt", description: "A prompt without arguments" },
  {
    name: "test_prompt_with_arguments",
    description: "A prompt with two arguments",
    arguments: [
      { name: "arg1", description: "First test argument", required: true },
      { name: "arg2", description: "Second test argument", required: true },
    ],
  },
  {
    name: "test_prompt_with_embedded_resource",
    description: "A prompt embedding a resource",
    arguments: [{ name: "resourceUri", description: "URI of the resource to embed", required: true }],
  },
  { name: "test_prompt_with_image", description: "A prompt with an image" },
];

const user = (content) => ({ role: "user", content });

// The gates of test_tool_with_gated_logging, by name: opened by a read of
// test://gate/NAME, which answers once the call waiting there has logged past it.
const gates = new Map();
function gate(name) {
  let found = gates.get(name);
  if (!found) {
    found = {};
    found.opened = new Promise((resolve) => (found.open = resolve));
    found.passed = new Promise((resolve) => (found.pass = resolve));
    gates.set(name, found);
  }
  return found;
}

async function elicit(extra, requestedSchema, message) {
  const result = await extra.sendRequest(
    { method: "elicitation/create", params: { message, requestedSchema } },
    ElicitResultSchema,
  );
  return {
    content: [text(`Elicitation completed: action=${result.action}, content=${JSON.stringify(result.content ?? {})}`)],
  };
}

async function callTool(server, name, args, extra) {
  const log = (data) =>
    extra.sendNotification({ method: "notifications/message", params: { level: "info", data } });
  switch (name) {
    case "test_simple_text":
      return { content: [text("This is a simple text response for testing.")] };
    case "test_image_content":
      return { content: [{ type: "image", data: PNG, mimeType: "image/png" }] };
    case "test_audio_content":
      return { content: [{ type: "audio", data: WAV, mimeType: "audio/wav" }] };
    case "test_embedded_resource":
      return {
        content: [
          {
            type: "resource",
            resource: { uri: "test://embedded-resource", mimeType: "text/plain", text: "This is an embedded resource content." },
          },
        ],
      };
    case "test_multiple_content_types":
      return {
        content: [
          text("Multiple content types test:"),
          { type: "image", data: PNG, mimeType: "image/png" },
          {
            type: "resource",
            resource: { uri: "test://mixed-content-resource", mimeType: "application/json", text: '{"test":"data","value":123}' },
          },
        ],
      };
    case "test_tool_with_logging":
      await log("Tool execution started");
      await sleep(50);
      await log("Tool processing data");
      await sleep(50);
      await log("Tool execution completed");
      return { content: [text("Tool with logging executed successfully")] };
    case "test_tool_with_progress": {
      const token = extra._meta?.progressToken;
      for (const progress of [0, 50, 100]) {
        if (token !== undefined) {
          await extra.sendNotification({
            method: "notifications/progress",
            params: { progressToken: token, progress, total: 100 },
          });
        }
        if (progress < 100) await sleep(50);
      }
      return { content: [text("Tool with progress executed successfully")] };
    }
    case "test_error_handling":
      return { isError: true, content: [text("This tool intentionally returns an error for testing")] };
    case "test_reconnection":
      await sleep(50);
      extra.closeSSEStream?.();
      await sleep(200);
      return { content: [text("Reconnection test completed")] };
    case "test_sampling": {
      if (!server.getClientCapabilities()?.sampling) throw new Error("the client does not support sampling");
      const result = await extra.sendRequest(
        {
          method: "sampling/createMessage",
          params: { messages: [user(text(String(args.prompt ?? "")))], maxTokens: 100 },
        },
        CreateMessageResultSchema,
      );
      const answer = result.content?.type === "text" ? result.content.text : JSON.stringify(result.content);
      return { content: [text(`LLM response: ${answer}`)] };
    }
    case "test_elicitation": {
      if (!server.getClientCapabilities()?.elicitation) throw new Error("the client does not support elicitation");
      const result = await extra.sendRequest(
        {
          method: "elicitation/create",
          params: {
            message: String(args.message ?? ""),
            requestedSchema: {
              type: "object",
              properties: {
                username: { type: "string", description: "User's response" },
                email: { type: "string", description: "User's email address" },
              },
              required: ["username", "email"],
            },
          },
        },
        ElicitResultSchema,
      );
      return { content: [text(`User response: action=${result.action}, content=${JSON.stringify(result.content ?? {})}`)] };
    }
    case "test_elicitation_sep1034_defaults":
      return elicit(
        extra,
        {
          type: "object",
          properties: {
            name: { type: "string", default: "John Doe" },
            age: { type: "integer", default: 30 },
            score: { type: "number", default: 95.5 },
            status: { type: "string", enum: ["active", "inactive", "pending"], default: "active" },
            verified: { type: "boolean", default: true },
          },
        },
        "Defaults for every primitive type",
      );
    case "test_elicitation_sep1330_enums": {
      const titled = (prefix, title) =>
        [1, 2, 3].map((i) => ({ const: `${prefix}${i}`, title: `${["First", "Second", "Third"][i - 1]} ${title}` }));
      return elicit(
        extra,
        {
          type: "object",
          properties: {
            untitledSingle: { type: "string", enum: ["option1", "option2", "option3"] },
            titledSingle: { type: "string", oneOf: titled("value", "Option") },
            legacyEnum: {
              type: "string",
              enum: ["opt1", "opt2", "opt3"],
              enumNames: ["Option One", "Option Two", "Option Three"],
            },
            untitledMulti: { type: "array", items: { type: "string", enum: ["option1", "option2", "option3"] } },
            titledMulti: { type: "array", items: { anyOf: titled("value", "Choice") } },
          },
        },
        "Every enum shape",
      );
    }
    case "test_tool_with_gated_logging": {
      await log(`${args.name}: started`);
      for (const name of args.gates ?? []) {
        const waiting = gate(name);
        await waiting.opened;
        gates.delete(name);
        await log(`${args.name}: passed ${name}`);
        waiting.pass();
      }
      return { content: [text(`${args.name}: done`)] };
    }
    case "json_schema_2020_12_tool":
      return { content: [text(`Received: ${JSON.stringify(args)}`)] };
    default:
      throw new Error(`unknown tool: ${name}`);
  }
}

function readResource(uri) {
  if (uri === "test://static-text") {
    return { contents: [{ uri, mimeType: "text/plain", text: "This is the content of the static text resource." }] };
  }
  if (uri === "test://static-binary") return { contents: [{ uri, mimeType: "image/png", blob: PNG }] };
  if (uri === "test://watched-resource") return { contents: [{ uri, mimeType: "text/plain", text: "Watched." }] };
  const template = /^test:\/\/template\/([^/]+)\/data$/.exec(uri);
  if (template) {
    const id = template[1];
    const data = { id, templateTest: true, data: `Data for ID: ${id}` };
    return { contents: [{ uri, mimeType: "application/json", text: JSON.stringify(data) }] };
  }
  throw new Error(`unknown resource: ${uri}`);
}

function getPrompt(name, args) {
  switch (name) {
    case "test_simple_prompt":
      return { messages: [user(text("This is a simple prompt for testing."))] };
    case "test_prompt_with_arguments":
      return { messages: [user(text(`Prompt with arguments: arg1='${args.arg1}', arg2='${args.arg2}'`))] };
    case "test_prompt_with_embedded_resource":
      return {
        messages: [
          user({
            type: "resource",
            resource: { uri: args.resourceUri, mimeType: "text/plain", text: "Embedded resource content for testing." },
          }),
          user(text("Please process the embedded resource above.")),
        ],
      };
    case "test_prompt_with_image":
      return {
        messages: [user({ type: "image", data: PNG, mimeType: "image/png" }), user(text("Please analyze the image above."))],
      };
    default:
      throw new Error(`unknown prompt: ${name}`);
  }
}

function newServer() {
  const server = new Server(
    { name: "attest-conformance-reference", version: "1.0.0" },
    {
      capabilities: {
        tools: { listChanged: true },
        resources: { subscribe: true, listChanged: true },
        prompts: { listChanged: true },
        logging: {},
        completions: {},
      },
    },
  );
  const subscriptions = new Set();
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: TOOLS }));
  server.setRequestHandler(CallToolRequestSchema, async (request, extra) =>
    callTool(server, request.params.name, request.params.arguments ?? {}, extra),
  );
  server.setRequestHandler(ListResourcesRequestSchema, async () => ({ resources: RESOURCES }));
  server.setRequestHandler(ListResourceTemplatesRequestSchema, async () => ({
    resourceTemplates: [
      {
        uriTemplate: "test://template/{id}/data",
        name: "template",
        description: "Data for an id",
        mimeType: "application/json",
      },
    ],
  }));
  server.setRequestHandler(ReadResourceRequestSchema, async (request) => {
    const uri = request.params.uri;
    const opening = /^test:\/\/gate\/(.+)$/.exec(uri);
    if (!opening) return readResource(uri);
    const opened = gate(opening[1]);
    opened.open();
    await opened.passed;
    return { contents: [{ uri, mimeType: "text/plain", text: "passed" }] };
  });
  // The 2026-07-28 revision's subscriptions/listen, which this SDK does not know: each
  // category asked for is acknowledged, one notification of it sent, and the listen
  // ended gracefully, its result naming what was asked.
  server.setRequestHandler(
    z.object({ method: z.literal("subscriptions/listen"), params: z.object({}).passthrough() }),
    async (request, extra) => {
      const _meta = { "io.modelcontextprotocol/subscriptionId": extra.requestId };
      const asked = request.params.notifications ?? {};
      await extra.sendNotification({
        method: "notifications/subscriptions/acknowledged",
        params: { notifications: asked, _meta },
      });
      if (asked.toolsListChanged) {
        await extra.sendNotification({ method: "notifications/tools/list_changed", params: { _meta } });
      }
      return { _meta, listened: asked };
    },
  );
  server.setRequestHandler(SubscribeRequestSchema, async (request) => {
    subscriptions.add(request.params.uri);
    return {};
  });
  server.setRequestHandler(UnsubscribeRequestSchema, async (request) => {
    subscriptions.delete(request.params.uri);
    return {};
  });
  server.setRequestHandler(ListPromptsRequestSchema, async () => ({ prompts: PROMPTS }));
  server.setRequestHandler(GetPromptRequestSchema, async (request) =>
    getPrompt(request.params.name, request.params.arguments ?? {}),
  );
  server.setRequestHandler(SetLevelRequestSchema, async () => ({}));
  server.setRequestHandler(CompleteRequestSchema, async (request) => {
    const prefix = String(request.params.argument?.value ?? "");
    const values = ["paris", "park", "party", "test", "testing"].filter((v) => v.startsWith(prefix));
    return { completion: { values, total: values.length, hasMore: false } };
  });
  return server;
}

async function serveHttp(port) {
  const transports = new Map();
  let hosts = [];
  const httpServer = http.createServer(async (req, res) => {
    if (!req.url?.startsWith("/mcp")) {
      res.writeHead(404).end();
      return;
    }
    const id = req.headers["mcp-session-id"];
    let transport = typeof id === "string" ? transports.get(id) : undefined;
    if (!transport) {
      if (req.method !== "POST" || id !== undefined) {
        res.writeHead(id === undefined ? 400 : 404, { "content-type": "application/json" });
        res.end(JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32000, message: "no such session" } }));
        return;
      }
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        eventStore: new InMemoryEventStore(),
        retryInterval: 500,
        enableDnsRebindingProtection: true,
        allowedHosts: hosts,
        onsessioninitialized: (sessionId) => transports.set(sessionId, transport),
      });
      transport.onclose = () => transport.sessionId && transports.delete(transport.sessionId);
      await newServer().connect(transport);
    }
    await transport.handleRequest(req, res);
  });
  httpServer.listen(port, "127.0.0.1", () => {
    const bound = httpServer.address().port;
    hosts = ["localhost", "127.0.0.1", "[::1]"].flatMap((h) => [h, `${h}:${bound}`]);
    console.log(`reference server listening on http://127.0.0.1:${httpServer.address().port}/mcp`);
  });
}

if (process.argv[2] === "--stdio") {
  newServer().connect(new StdioServerTransport());
} else {
  serveHttp(Number(process.argv[2] ?? 0));
}
