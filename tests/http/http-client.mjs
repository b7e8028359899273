// SPDX-License-Identifier: LGPL-2.1-or-later
// What tests/integration/test_http.py reads sandboxd-http with, besides Python: a real
// EventSource (the npm package eventsource, which parses with eventsource-parser as the
// WHATWG HTML standard's "interpret an event stream" says: CR, LF and CRLF all end a line)
// and ajv, a JSON Schema 2020-12 validator, against the bridge's own openapi.json.
//
//   node http-client.mjs sse URL TOKEN [BODY]
//       Opens URL as an EventSource (a POST of BODY when given) with the bearer TOKEN and
//       prints one JSON line per event, {"event", "data", "t"} (t: ms since start), until
//       an event "result" or "error", or the stream fails or ends: then {"closed": true,
//       "code": STATUS or null, "opened": bool} and exit 0.
//   node http-client.mjs validate OPENAPI
//       Reads lines {"pointer": JSON-POINTER into the document, "body": VALUE} and answers
//       each with {"ok": true} or {"ok": false, "errors": [...]}.

import fs from 'node:fs';
import readline from 'node:readline';
import { EventSource } from 'eventsource';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';

const [cmd, ...args] = process.argv.slice(2);
const out = (o) => process.stdout.write(JSON.stringify(o) + '\n');

if (cmd === 'sse') {
    const [url, token, body] = args;
    const t0 = performance.now();
    let opened = false;
    const es = new EventSource(url, {
        fetch: (input, init) => fetch(input, {
            ...init,
            method: body === undefined ? 'GET' : 'POST',
            body,
            headers: { ...init.headers, Authorization: `Bearer ${token}`,
                       ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) },
        }),
    });
    const done = (code) => {
        es.close();
        out({ closed: true, code: code ?? null, opened });
        process.exit(0);
    };
    es.onopen = () => { opened = true; };
    for (const name of ['stdout', 'stderr', 'result', 'error', 'log', 'message']) {
        es.addEventListener(name, (e) => {
            // An "error" event of the stream (data) or of EventSource itself (no data).
            if (name === 'error' && e.data === undefined)
                return done(e.code);
            out({ event: name, data: e.data, t: performance.now() - t0 });
            if (name === 'result' || name === 'error')
                done(200);
        });
    }
} else if (cmd === 'validate') {
    const doc = JSON.parse(fs.readFileSync(args[0], 'utf8'));
    // The document is one schema resource (its own keywords ignored, strict off); a
    // response's schema is reached by its JSON pointer, its $refs resolve inside it.
    const ajv = new Ajv2020({ strict: false, allErrors: true });
    addFormats(ajv);
    ajv.addSchema(doc, 'openapi.json');
    const cache = new Map();
    const rl = readline.createInterface({ input: process.stdin });
    rl.on('line', (line) => {
        const { pointer, body } = JSON.parse(line);
        try {
            let v = cache.get(pointer);
            if (!v) {
                v = ajv.compile({ $ref: `openapi.json#${pointer}` });
                cache.set(pointer, v);
            }
            out(v(body) ? { ok: true } : { ok: false, errors: v.errors });
        } catch (e) {
            out({ ok: false, errors: [String(e)] });
        }
    });
} else {
    process.stderr.write('usage: http-client.mjs sse URL TOKEN [BODY] | validate OPENAPI\n');
    process.exit(2);
}
