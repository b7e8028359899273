// SPDX-License-Identifier: LGPL-2.1-or-later
// The official MCP TypeScript SDK (@modelcontextprotocol/sdk, pinned by package-lock.json)
// as a client of sandboxd-mcp over stdio: Client + StdioClientTransport, which spawn the
// server, negotiate, list the tools (whose outputSchemas the SDK then checks every
// structuredContent against) and call them. tests/integration/test_mcp.py gives the steps
// as JSON on stdin and asserts on what this prints as JSON on stdout:
//
//   usage: node mcp-client.mjs SERVER [ARG...] < steps.json
//          node mcp-client.mjs http://HOST:PORT/mcp < steps.json  (StreamableHTTPClientTransport,
//          with $MCP_TOKEN as the bearer token)
//   steps: [{"op": "list"},
//           {"op": "call", "name": TOOL, "arguments": {...}, "save": VAR, "path": "a.b"},
//           {"op": "parallel", "calls": [call, ...]}, {"op": "sleep", "ms": N}]
//   A call may have "timeout" (ms, the SDK's request timeout; default 300000), "progress"
//   (true: an onprogress handler, so a progressToken, and resetTimeoutOnProgress: its result
//   then has "progress", the notifications counted) and "cancelAfter" (ms: aborted then, which
//   sends notifications/cancelled).
//   A string argument "$VAR" is replaced by what an earlier call saved (its structuredContent
//   at path). Calls that fail at the protocol level are {"error": code, "message": ...}.

import { readFileSync } from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const [server, ...serverArgs] = process.argv.slice(2);
const steps = JSON.parse(readFileSync(0, 'utf8'));
const vars = {};

function substitute(value) {
    if (typeof value === 'string' && value.startsWith('$') && value.slice(1) in vars)
        return vars[value.slice(1)];
    if (Array.isArray(value))
        return value.map(substitute);
    if (value && typeof value === 'object')
        return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, substitute(v)]));
    return value;
}

async function call(client, step) {
    const started = Date.now();
    const options = { timeout: step.timeout ?? 300000 };
    let progress = 0;
    if (step.progress) {
        options.onprogress = () => { progress++; };
        options.resetTimeoutOnProgress = true;
    }
    if (step.cancelAfter !== undefined) {
        const abort = new AbortController();
        setTimeout(() => abort.abort('cancelled by the test'), step.cancelAfter);
        options.signal = abort.signal;
    }
    try {
        const result = await client.callTool({ name: step.name, arguments: substitute(step.arguments ?? {}) },
                                             undefined, options);
        if (step.save && result.structuredContent)
            vars[step.save] = step.path.split('.').reduce((o, k) => o?.[k], result.structuredContent);
        return { name: step.name, result, progress, ms: Date.now() - started };
    } catch (e) {
        return { name: step.name, error: e.code ?? null, message: String(e.message ?? e), progress,
                 ms: Date.now() - started };
    }
}

const transport = /^https?:/.test(server)
    ? new StreamableHTTPClientTransport(new URL(server), {
        requestInit: { headers: { Authorization: `Bearer ${process.env.MCP_TOKEN}` } },
    })
    : new StdioClientTransport({
        command: server,
        args: serverArgs,
        // The SDK passes a bare environment; the sanitizers' options (tools/test's ASan run) too.
        env: Object.fromEntries(['PATH', 'SANDBOXD_VARLINK_ADDRESS', 'ASAN_OPTIONS', 'UBSAN_OPTIONS']
            .filter((k) => process.env[k] !== undefined).map((k) => [k, process.env[k]])),
        stderr: 'inherit',
    });
const client = new Client({ name: 'sandboxd-tests', version: '1.0.0' });
await client.connect(transport);

const out = {
    serverVersion: client.getServerVersion(),
    serverCapabilities: client.getServerCapabilities(),
    instructions: client.getInstructions(),
    protocolVersion: transport.protocolVersion ?? transport._protocolVersion ?? null,
    steps: [],
};
for (const step of steps) {
    if (step.op === 'list')
        out.steps.push({ tools: (await client.listTools()).tools });
    else if (step.op === 'call')
        out.steps.push(await call(client, step));
    else if (step.op === 'sleep')
        out.steps.push(await new Promise((resolve) => setTimeout(() => resolve({ slept: step.ms }), step.ms)));
    else if (step.op === 'parallel')
        out.steps.push({ parallel: await Promise.all(step.calls.map((c) => call(client, c))) });
    else
        throw new Error(`unknown step ${step.op}`);
}
await client.close();
process.stdout.write(JSON.stringify(out) + '\n');
