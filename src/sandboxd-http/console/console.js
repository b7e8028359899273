// SPDX-License-Identifier: LGPL-2.1-or-later
// The console page of sandboxd-http (docs/TERMINALS.md): the token's tenant's sandboxes,
// their state and metrics, and a terminal (xterm.js) on the WebSocket of
// /api/v1/sessions/{id}/terminal. The token stays in this tab (sessionStorage), is sent
// as a header to the REST routes and as the WebSocket's subprotocol bearer.TOKEN: never
// in a URL.
'use strict';

const $ = (selector) => document.querySelector(selector);
let token = sessionStorage.getItem('sandboxd-token') || '';
let term = null, socket = null;

function status(text, error) {
    $('#status').textContent = text;
    $('#status').className = error ? 'error' : '';
}

async function api(path) {
    const r = await fetch('/api/v1' + path, { headers: { Authorization: 'Bearer ' + token } });
    const body = await r.json().catch(() => ({}));
    if (!r.ok)
        throw new Error(`${r.status} ${body.error ? body.error.code + ': ' + body.error.message : ''}`);
    return body;
}

function bytes(n) {
    if (n === undefined || n === null)
        return '';
    const units = ['B', 'K', 'M', 'G', 'T'];
    let i = 0;
    for (; n >= 1024 && i < units.length - 1; i++)
        n /= 1024;
    return (i ? n.toFixed(1) : String(n)) + units[i];
}

function cell(row, text, cls) {
    const td = row.insertCell();
    td.textContent = text;
    if (cls)
        td.className = cls;
    return td;
}

async function refresh() {
    const sessions = await api('/sessions');
    const body = $('#sandboxes tbody');
    body.replaceChildren();
    for (const s of sessions) {
        const m = s.state === 'running' ? await api(`/sessions/${s.id}/metrics`).catch(() => ({})) : {};
        const row = body.insertRow();
        row.dataset.id = s.id;
        cell(row, s.id);
        cell(row, s.name || '');
        cell(row, s.template);
        cell(row, s.state, 'state');
        cell(row, bytes(m.memoryCurrent), 'num');
        cell(row, bytes(s.memoryMax), 'num');
        cell(row, m.cpuUsageNSec !== undefined ? (m.cpuUsageNSec / 1e9).toFixed(2) : '', 'num');
        cell(row, m.tasksCurrent !== undefined ? String(m.tasksCurrent) : '', 'num');
        cell(row, bytes(m.workBytesUsed), 'num');
        const td = row.insertCell();
        if (s.state === 'running') {
            const b = document.createElement('button');
            b.textContent = 'Terminal';
            b.dataset.terminal = s.id;
            b.addEventListener('click', () => openTerminal(s.id));
            td.appendChild(b);
        }
    }
    $('#sandboxes').hidden = false;
    status(`${sessions.length} sandbox${sessions.length === 1 ? '' : 'es'} of your tenant.`);
}

function closeTerminal() {
    if (socket)
        socket.close();
    if (term)
        term.dispose();
    socket = term = null;
    $('#terminal-box').style.display = 'none';
}

function openTerminal(id) {
    closeTerminal();
    $('#terminal-box').style.display = 'block';
    $('#terminal-title').textContent = `Terminal of ${id}: `;
    const rows = Number($('#rows').value), cols = Number($('#cols').value);
    term = new Terminal({ rows, cols, cursorBlink: true, scrollback: 5000 });
    term.open($('#terminal'));
    const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
    socket = new WebSocket(`${scheme}//${location.host}/api/v1/sessions/${encodeURIComponent(id)}/terminal` +
                           `?rows=${rows}&cols=${cols}`, ['sandboxd.terminal.v1', 'bearer.' + token]);
    socket.binaryType = 'arraybuffer';
    const ws = socket, t = term;
    ws.onopen = () => { t.focus(); status(`Connected to ${id}.`); };
    ws.onmessage = (e) => {
        if (typeof e.data !== 'string') {
            t.write(new Uint8Array(e.data));
            return;
        }
        const m = JSON.parse(e.data);
        if (m.type === 'exit')
            status(`The shell of ${id} ended with ${m.exit_code}.`);
    };
    ws.onclose = (e) => {
        if (e.code !== 1000)
            status(`The terminal of ${id} closed (${e.code}${e.reason ? ': ' + e.reason : ''}).`, true);
    };
    const encoder = new TextEncoder();
    t.onData((data) => ws.readyState === WebSocket.OPEN && ws.send(encoder.encode(data)));
    t.onBinary((data) => ws.readyState === WebSocket.OPEN && ws.send(Uint8Array.from(data, (c) => c.charCodeAt(0))));
    t.onResize(({ rows, cols }) => ws.readyState === WebSocket.OPEN &&
               ws.send(JSON.stringify({ type: 'resize', rows, cols })));
}

$('#resize').addEventListener('click', () => {
    if (term)
        term.resize(Number($('#cols').value), Number($('#rows').value));
});
$('#close').addEventListener('click', closeTerminal);
$('#login').addEventListener('submit', (e) => {
    e.preventDefault();
    token = $('#token').value.trim();
    sessionStorage.setItem('sandboxd-token', token);
    refresh().catch((err) => status(String(err.message || err), true));
});
if (token) {
    $('#token').value = token;
    refresh().catch((err) => status(String(err.message || err), true));
}
