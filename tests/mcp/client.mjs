// client.mjs - drives nanobox's MCP server with the official MCP TypeScript
// SDK (@modelcontextprotocol/sdk), a client nobody here wrote, through the
// scenario of the MCP issue: list the tools, create a sandbox, write a file,
// exec python3 on it, read the result, list the directory, open a port, hit
// a tool error, destroy the sandbox, run code once.
//
//   node client.mjs --transport stdio --bin /path/to/nanobox
//       (NANOBOX_URL and NANOBOX_API_KEY are passed to `nanobox mcp`)
//   node client.mjs --transport http --url http://127.0.0.1:8080/mcp --key KEY
//   (--code-image IMAGE adds run_code in a session of a sandbox of IMAGE:
//   state kept between calls, a matplotlib plot as an image, an exception)
//   --scenario long: instead, long calls with progress (see long() below);
//   --request-timeout MS gives them that timeout instead of the SDK's default
//   --scenario long-code: run_code and file transfers with progress and
//   cancellation in a sandbox of --code-image (see longCode() below);
//   --file-bytes sets the size of the file it writes and reads
//
// Prints one JSON summary on stdout (tests/integration/test_mcp.py asserts
// on it); every tool call's result is kept whatever it was, so one failing
// step does not hide the others. Exit status 0 unless the SDK could not
// connect at all.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

function parseArgs(argv) {
  const opts = { transport: "stdio", bin: "nanobox", url: null, key: null, port: 8000, "code-image": null, scenario: "main", "file-bytes": "1048576", "request-timeout": null };
  for (let i = 2; i < argv.length; i++) {
    const name = argv[i].replace(/^--/, "");
    if (!(name in opts)) throw new Error(`unknown option ${argv[i]}`);
    opts[name] = argv[++i];
  }
  return opts;
}

function makeTransport(opts) {
  if (opts.transport === "stdio") {
    const env = {};
    for (const k of ["PATH", "HOME", "NANOBOX_URL", "NANOBOX_API_KEY", "XDG_CONFIG_HOME"]) {
      if (process.env[k] !== undefined) env[k] = process.env[k];
    }
    return new StdioClientTransport({ command: opts.bin, args: ["mcp"], env, stderr: "inherit" });
  }
  if (opts.transport === "http") {
    const headers = opts.key ? { Authorization: `Bearer ${opts.key}` } : {};
    return new StreamableHTTPClientTransport(new URL(opts.url), { requestInit: { headers } });
  }
  throw new Error(`unknown transport ${opts.transport}`);
}

function textOf(result) {
  return (result.content || []).filter((c) => c.type === "text").map((c) => c.text).join("");
}

// image content items, described: type, size, and whether the bytes are a PNG's
function imagesOf(result) {
  return (result.content || []).filter((c) => c.type === "image").map((c) => {
    const bytes = Buffer.from(c.data || "", "base64");
    return {
      mimeType: c.mimeType,
      bytes: bytes.length,
      png: bytes.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])),
    };
  });
}

async function main() {
  const opts = parseArgs(process.argv);
  const transport = makeTransport(opts);
  const summary = { transport: opts.transport, steps: {} };

  // the SDK hands the negotiated version to transports that want it (HTTP)
  const setVersion = transport.setProtocolVersion?.bind(transport);
  transport.setProtocolVersion = (v) => {
    summary.protocolVersion = v;
    if (setVersion) setVersion(v);
  };

  const client = new Client({ name: "nanobox-mcp-test", version: "1.0.0" });
  await client.connect(transport);
  summary.serverInfo = client.getServerVersion();
  summary.capabilities = client.getServerCapabilities();
  summary.instructions = client.getInstructions();
  if (opts.transport === "http") summary.sessionId = transport.sessionId ?? null;

  await client.ping();
  summary.ping = true;

  const listed = await client.listTools();
  summary.tools = listed.tools.map((t) => ({
    name: t.name,
    description: t.description,
    inputSchema: t.inputSchema,
    annotations: t.annotations ?? null,
    outputSchema: t.outputSchema ?? null,
  }));

  async function call(step, name, args, options) {
    const t0 = Date.now();
    try {
      const r = await client.callTool({ name, arguments: args }, undefined, options);
      summary.steps[step] = {
        isError: r.isError === true,
        text: textOf(r),
        types: (r.content || []).map((c) => c.type),
        images: imagesOf(r),
        structured: r.structuredContent ?? null,
        ms: Date.now() - t0,
      };
    } catch (e) {
      summary.steps[step] = { thrown: String(e?.message ?? e), code: e?.code ?? null, ms: Date.now() - t0 };
    }
    return summary.steps[step];
  }

  if (opts.scenario === "long" || opts.scenario === "long-code") {
    if (opts.scenario === "long") await long(call, summary, opts["request-timeout"]);
    else await longCode(call, summary, opts["code-image"], Number(opts["file-bytes"]));
    await client.close();
    process.stdout.write(JSON.stringify(summary) + "\n");
    return;
  }

  const created = await call("create", "sandbox_create", { metadata: { test: "mcp" }, ttl: 600 });
  const sid = created.structured?.sandboxId ?? (created.text?.match(/sandbox_id: (\S+)/) || [])[1];
  summary.sandboxId = sid ?? null;

  if (sid) {
    const script = "import sys\nprint('hello from', sys.argv[1])\nprint('to stderr', file=sys.stderr)\n";
    await call("write", "sandbox_write_file", { sandbox_id: sid, path: "/workspace/hello.py", content: script });
    await call("write_b64", "sandbox_write_file", {
      sandbox_id: sid, path: "blob.bin", content: Buffer.from([0, 1, 2, 255, 254]).toString("base64"), encoding: "base64",
    });
    await call("exec", "sandbox_exec", {
      sandbox_id: sid, command: "python3 /workspace/hello.py mcp > /workspace/out.txt; cat /workspace/out.txt",
    });
    await call("exec_plain", "sandbox_exec", { sandbox_id: sid, command: "echo out; echo err >&2" });
    await call("exec_fail", "sandbox_exec", { sandbox_id: sid, command: "echo oops >&2; exit 3" });
    await call("exec_timeout", "sandbox_exec", { sandbox_id: sid, command: "echo started; sleep 30", timeout: 1 });
    await call("read", "sandbox_read_file", { sandbox_id: sid, path: "/workspace/out.txt" });
    await call("read_binary", "sandbox_read_file", { sandbox_id: sid, path: "/workspace/blob.bin" });
    await call("list_files", "sandbox_list_files", { sandbox_id: sid });
    await call("serve", "sandbox_exec", {
      sandbox_id: sid,
      command: `setsid nohup python3 -m http.server ${opts.port} --bind 127.0.0.1 --directory /workspace >/dev/null 2>&1 </dev/null & sleep 1`,
    });
    await call("open_port", "sandbox_open_port", { sandbox_id: sid, port: Number(opts.port), duration: 120 });
    await call("list", "sandbox_list", { metadata: { test: "mcp" } });
    // the tools around the basic ones: TTL, background processes, files, ports
    await call("set_timeout", "sandbox_set_timeout", { sandbox_id: sid, ttl: 900 });
    const started = await call("start", "sandbox_start_process", { sandbox_id: sid, command: "echo ready; cat; echo bye >&2" });
    const pid = started.structured?.pid ?? Number((started.text?.match(/process (\d+)/) || [])[1]);
    await call("list_processes", "sandbox_list_processes", { sandbox_id: sid });
    await call("stdin", "sandbox_write_process_stdin", { sandbox_id: sid, pid, data: "hello\n", eof: true });
    for (let i = 0; i < 50; i++) {
      const r = await call("read_output", "sandbox_read_process_output", { sandbox_id: sid, pid });
      if (r.structured ? r.structured.running === false : !/ running /.test(r.text ?? "")) break;
      await new Promise((res) => setTimeout(res, 100));
    }
    await call("kill", "sandbox_kill_process", { sandbox_id: sid, pid });
    await call("list_processes_after", "sandbox_list_processes", { sandbox_id: sid });
    await call("mkdir", "sandbox_make_dir", { sandbox_id: sid, path: "data/sub" });
    await call("move", "sandbox_move_file", { sandbox_id: sid, from: "hello.py", to: "data/sub/moved.py" });
    await call("list_moved", "sandbox_list_files", { sandbox_id: sid, path: "data/sub" });
    await call("delete", "sandbox_delete_file", { sandbox_id: sid, path: "data", recursive: true });
    await call("list_ports", "sandbox_list_ports", { sandbox_id: sid });
    await call("close_port", "sandbox_close_port", { sandbox_id: sid, port: Number(opts.port) });
    await call("list_ports_after", "sandbox_list_ports", { sandbox_id: sid });
    await call("bad_args", "sandbox_exec", { sandbox_id: sid, comand: "typo" });
    await call("destroy", "sandbox_destroy", { sandbox_id: sid });
    await call("after_destroy", "sandbox_exec", { sandbox_id: sid, command: "true" });
  }
  await call("run_code", "run_code", { language: "python", code: "print(6 * 7)" });

  // a session: run_code with a sandbox_id keeps state, returns plots as images
  if (opts["code-image"]) {
    const made = await call("code_create", "sandbox_create", { image: opts["code-image"], ttl: 600 });
    const csid = made.structured?.sandboxId ?? (made.text?.match(/sandbox_id: (\S+)/) || [])[1];
    summary.codeSandboxId = csid ?? null;
    if (csid) {
      await call("code_set", "run_code", { sandbox_id: csid, code: "x = 41" });
      await call("code_get", "run_code", { sandbox_id: csid, code: "print(x + 1)" });
      await call("code_value", "run_code", { sandbox_id: csid, code: "x * 2" });
      await call("code_plot", "run_code", {
        sandbox_id: csid,
        code: "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()",
      });
      await call("code_raise", "run_code", { sandbox_id: csid, code: "print('before')\n1 / 0" });
      await call("code_destroy", "sandbox_destroy", { sandbox_id: csid });
    }
  }
  await call("unknown_tool", "no_such_tool", {});

  await client.close();
  process.stdout.write(JSON.stringify(summary) + "\n");
}

// Long calls, side by side in one sandbox: a command 5 s longer than its
// request timeout (the SDK's default 60 s, or timeoutMs), which only
// progress notifications keep alive (resetTimeoutOnProgress), and a
// command cancelled (AbortSignal: the SDK sends notifications/cancelled)
// once its first progress came. The sandbox stays for the test to look
// into (summary.sandboxId).
async function long(call, summary, timeoutMs) {
  const secs = (timeoutMs ? Math.ceil(Number(timeoutMs) / 1000) : 60) + 5;
  const made = await call("create", "sandbox_create", { ttl: 600 });
  const sid = made.structured?.sandboxId ?? (made.text?.match(/sandbox_id: (\S+)/) || [])[1];
  summary.sandboxId = sid ?? null;
  if (!sid) return;
  summary.progress = { long: [], cancel: [] };
  const abort = new AbortController();
  const longCall = call("long", "sandbox_exec", { sandbox_id: sid, command: `echo begin; sleep ${secs}; echo end`, timeout: 120 }, {
    ...(timeoutMs ? { timeout: Number(timeoutMs) } : {}),
    resetTimeoutOnProgress: true,
    onprogress: (p) => summary.progress.long.push(p),
  });
  const cancelCall = call("cancel", "sandbox_exec", { sandbox_id: sid, command: "sleep 301", timeout: 100 }, {
    resetTimeoutOnProgress: true,
    signal: abort.signal,
    onprogress: (p) => {
      summary.progress.cancel.push(p);
      abort.abort("the test cancels it");
    },
  });
  await cancelCall;
  summary.cancelledAt = Date.now();
  await longCall;
}

// A cell longer than the request timeout it is given (7 s, the SDK's default
// is 60 s: the same rule, sooner) lives on its progress (one every 5 s); a
// `while True` cell cancelled on its first progress is interrupted, so the
// next cell of the context answers at once and x is still there; a file
// written and read back with progress reports its bytes.
async function longCode(call, summary, image, fileBytes) {
  const made = await call("create", "sandbox_create", { image, ttl: 600 });
  const sid = made.structured?.sandboxId ?? (made.text?.match(/sandbox_id: (\S+)/) || [])[1];
  summary.sandboxId = sid ?? null;
  if (!sid) return;
  summary.progress = { cell: [], spin: [], write: [], read: [] };
  await call("set", "run_code", { sandbox_id: sid, code: "x = 41" });
  await call("cell", "run_code", {
    sandbox_id: sid, timeout: 60,
    code: "import time\nfor i in range(12):\n    time.sleep(1)\nprint('slept', x)",
  }, { timeout: 7000, resetTimeoutOnProgress: true, onprogress: (p) => summary.progress.cell.push(p) });

  const abort = new AbortController();
  await call("spin", "run_code", { sandbox_id: sid, timeout: 120, code: "while True:\n    pass" }, {
    timeout: 7000, resetTimeoutOnProgress: true, signal: abort.signal,
    onprogress: (p) => {
      summary.progress.spin.push(p);
      abort.abort("the test cancels it");
    },
  });
  await call("after", "run_code", { sandbox_id: sid, code: "x + 1", timeout: 30 });

  const data = Buffer.alloc(fileBytes);
  for (let i = 0; i < fileBytes; i++) data[i] = (i * 7919) & 0xff;
  await call("write", "sandbox_write_file", {
    sandbox_id: sid, path: "big.bin", content: data.toString("base64"), encoding: "base64",
  }, { onprogress: (p) => summary.progress.write.push(p) });
  const read = await call("read", "sandbox_read_file", { sandbox_id: sid, path: "big.bin" },
    { onprogress: (p) => summary.progress.read.push(p) });
  const b64 = (read.text || "").split("\n").slice(1).join("");
  summary.readBack = Buffer.from(b64, "base64").equals(data);
  delete read.text; // 1 MiB of base64 is no use in the summary
}

main().catch((e) => {
  process.stderr.write(`client.mjs: ${e?.stack ?? e}\n`);
  process.exit(1);
});
