// SPDX-License-Identifier: LGPL-2.1-or-later
// A JavaScript code context's driver, run inside the sandbox (node -e) by sandboxd
// (context.c): a REPL on Node's vm module, one V8 context whose globals (var, let, const,
// functions) last from cell to cell, speaking the same line-delimited JSON as the Python
// driver (context-driver.py, docs/CONTEXTS.md) on its stdin and stdout. SIGINT interrupts
// a cell (vm's breakOnSigint); a cell's value that is a promise is awaited.
'use strict';
const fs = require('fs');
const util = require('util');
const vm = require('vm');

function emit(o) {
  fs.writeSync(1, JSON.stringify(o) + '\n');
}

function text(args) {
  return util.formatWithOptions({ colors: false }, ...args) + '\n';
}

const sandboxConsole = {};
for (const m of ['log', 'info', 'debug', 'dir'])
  sandboxConsole[m] = (...a) => emit({ type: 'stdout', text: text(a) });
for (const m of ['error', 'warn', 'trace'])
  sandboxConsole[m] = (...a) => emit({ type: 'stderr', text: text(a) });

// display(value) or display({mime: data}, {raw: true}): a result that is not the cell's
// value, as IPython's display() gives.
function bundle(value, raw) {
  if (raw && value && typeof value === 'object') {
    const data = {};
    for (const [k, v] of Object.entries(value))
      data[k] = typeof v === 'string' || k.endsWith('json') ? v : String(v);
    return data;
  }
  const data = { 'text/plain': util.inspect(value, { colors: false, depth: 4 }) };
  if (value !== null && typeof value === 'object' && !(value instanceof Error)) {
    try {
      const json = JSON.parse(JSON.stringify(value));
      if (json !== undefined)
        data['application/json'] = json;
    } catch (e) { /* not JSON: text only */ }
  }
  return data;
}

const sandbox = {
  console: sandboxConsole,
  require,
  process,
  Buffer,
  URL,
  URLSearchParams,
  TextEncoder,
  TextDecoder,
  setTimeout, clearTimeout, setInterval, clearInterval, setImmediate, clearImmediate,
  queueMicrotask,
  structuredClone,
  fetch: globalThis.fetch,
  display: (value, options) => emit({ type: 'result', data: bundle(value, options && options.raw), isMainResult: false }),
};
sandbox.globalThis = sandbox;
const context = vm.createContext(sandbox);

let count = 0;
let running = false;
const queue = [];

function reportError(e) {
  const isError = e instanceof Error || (e && typeof e === 'object' && 'stack' in e);
  emit({
    type: 'error',
    name: isError ? String(e.name) : 'Error',
    value: isError ? String(e.message) : util.inspect(e),
    // The cell's own frames: the driver's and vm's are not the user's.
    traceback: isError && e.stack ?
      String(e.stack).split('\n').filter((l, i) => i === 0 || !/^\s+at /.test(l) || /cell-\d+/.test(l)) : [],
  });
}

async function runCell(code) {
  count++;
  let status = 'ok';
  try {
    let value = new vm.Script(code, { filename: `cell-${count}` })
      .runInContext(context, { breakOnSigint: true, displayErrors: false });
    if (value && typeof value.then === 'function')
      value = await value;
    if (value !== undefined)
      emit({ type: 'result', data: bundle(value, false), isMainResult: true });
  } catch (e) {
    status = 'error';
    reportError(e);
  }
  emit({ type: 'end', executionCount: count, status });
}

async function pump() {
  if (running)
    return;
  running = true;
  while (queue.length > 0)
    await runCell(queue.shift());
  running = false;
}

// Between cells a SIGINT has nothing to stop; during one, vm's own handler takes it.
process.on('SIGINT', () => {});
process.on('uncaughtException', (e) => emit({ type: 'stderr', text: 'Uncaught ' + util.inspect(e) + '\n' }));
process.on('unhandledRejection', (e) => emit({ type: 'stderr', text: 'Unhandled rejection ' + util.inspect(e) + '\n' }));

let inbuf = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk) => {
  inbuf += chunk;
  let nl;
  while ((nl = inbuf.indexOf('\n')) >= 0) {
    const line = inbuf.slice(0, nl);
    inbuf = inbuf.slice(nl + 1);
    let req;
    try {
      req = JSON.parse(line);
    } catch (e) {
      continue;
    }
    if (req && typeof req.code === 'string')
      queue.push(req.code);
  }
  pump();
});
process.stdin.on('end', () => process.exit(0));

emit({ type: 'ready', language: 'javascript', version: process.versions.node, pid: process.pid });
