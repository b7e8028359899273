// SPDX-License-Identifier: LGPL-2.1-or-later
// E2B's own SDK (the npm package e2b, pinned by package-lock.json), unchanged, against a
// sandboxd-http: tests/integration/test_e2b.py runs one scenario per call,
//   node e2b-client.mjs SCENARIO
// with E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY set, and reads what it prints: one JSON
// object with what the scenario saw. An assertion that fails exits non-zero with its
// message; every sandbox a scenario created is killed before it ends.
import assert from 'node:assert/strict';
import http from 'node:http';
import { Sandbox, CommandExitError, InvalidArgumentError, NotFoundError, AuthenticationError, RateLimitError, SandboxError } from 'e2b';
import { Sandbox as CodeSandbox } from '@e2b/code-interpreter';

const created = [];
async function create(opts, cls = Sandbox) {
  const sbx = await cls.create(opts);
  created.push(sbx);
  return sbx;
}

const scenarios = {
  // create, commands.run with streaming callbacks, a failing command, getInfo, kill
  async commands() {
    const sbx = await create({ timeoutMs: 120_000 });
    const out = [], err = [];
    const r = await sbx.commands.run('echo hello; echo oops >&2; pwd; echo $HOME', {
      onStdout: (d) => out.push(d), onStderr: (d) => err.push(d),
    });
    assert.equal(r.exitCode, 0);
    assert.equal(r.stdout, 'hello\n/work\n/work\n', 'the home is the workspace');
    assert.equal(r.stderr, 'oops\n');
    assert.equal(out.join(''), r.stdout);
    assert.equal(err.join(''), 'oops\n');
    // output arrives while the command runs: the first line before the command ends
    const seen = [];
    const t0 = Date.now();
    await sbx.commands.run('echo one; sleep 1.5; echo two', { onStdout: (d) => seen.push([Date.now() - t0, d]) });
    assert.equal(seen.map((s) => s[1]).join(''), 'one\ntwo\n');
    const firstAt = seen[0][0], lastAt = seen[seen.length - 1][0];
    assert.ok(lastAt - firstAt >= 1000, `streamed, not at the end: ${JSON.stringify(seen)}`);
    let exitError;
    try {
      await sbx.commands.run('echo bad >&2; exit 3');
    } catch (e) {
      exitError = e;
    }
    assert.ok(exitError instanceof CommandExitError, String(exitError));
    assert.equal(exitError.exitCode, 3);
    assert.equal(exitError.stderr, 'bad\n');
    const env = await sbx.commands.run('echo $GREETING', { envs: { GREETING: 'hi' }, cwd: '/home/user' });
    assert.equal(env.stdout, 'hi\n');
    const info = await sbx.getInfo();
    assert.equal(info.sandboxId, sbx.sandboxId);
    assert.equal(info.state, 'running');
    assert.ok(await sbx.isRunning());
    assert.equal(await sbx.kill(), true);
    assert.equal(await Sandbox.kill(sbx.sandboxId), false, 'killed already: false');
    let nf;
    try {
      await Sandbox.getInfo(sbx.sandboxId);
    } catch (e) {
      nf = e;
    }
    assert.ok(nf instanceof NotFoundError, String(nf));
    return { id: sbx.sandboxId, firstAt, lastAt };
  },

  // a background command: listed, killed; the handle's wait ends
  async background() {
    const sbx = await create();
    const h = await sbx.commands.run('echo started; sleep 60', { background: true });
    assert.ok(h.pid > 0);
    const listed = await sbx.commands.list();
    assert.ok(listed.some((p) => p.pid === h.pid), JSON.stringify(listed));
    assert.equal(await sbx.commands.kill(h.pid), true);
    let e;
    try {
      await h.wait();
    } catch (x) {
      e = x;
    }
    assert.ok(e instanceof CommandExitError, String(e));
    assert.equal(h.stdout, 'started\n');
    assert.equal(await sbx.commands.kill(h.pid), false, 'gone: false');
    return { pid: h.pid, exitCode: e.exitCode, error: e.error };
  },

  // a background command's stdin: sendStdin, closeStdin
  async stdin() {
    const sbx = await create();
    const h = await sbx.commands.run('cat; echo done', { background: true, stdin: true });
    await h.sendStdin('hello\n');
    await sbx.commands.sendStdin(h.pid, 'again\n');
    await sbx.commands.closeStdin(h.pid);
    const r = await h.wait();
    assert.equal(r.stdout, 'hello\nagain\ndone\n');
    return { stdout: r.stdout };
  },

  // a terminal: create with a size, input, resize, kill
  async pty() {
    const sbx = await create();
    let seen = '';
    const dec = new TextDecoder();
    const t = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => { seen += dec.decode(d); } });
    const until = async (re) => {
      for (let i = 0; i < 200 && !re.test(seen); i++)
        await new Promise((r) => setTimeout(r, 50));
      assert.match(seen, re);
    };
    const enc = new TextEncoder();
    await sbx.pty.sendInput(t.pid, enc.encode('stty size; echo $((6*7))\n'));
    await until(/24 80/);
    await until(/42/);
    await sbx.pty.resize(t.pid, { cols: 100, rows: 30 });
    await sbx.pty.sendInput(t.pid, enc.encode('stty size\n'));
    await until(/30 100/);
    assert.equal(await sbx.pty.kill(t.pid), true);
    let e;
    try {
      await t.wait();
    } catch (x) {
      e = x;
    }
    assert.ok(e instanceof CommandExitError, String(e));
    return { pid: t.pid };
  },

  // files: write (one, several), read (text, bytes), list, exists, getInfo, makeDir, rename, remove
  async files() {
    const sbx = await create();
    const w = await sbx.files.write('/home/user/notes/a.txt', 'alpha\n');
    assert.equal(w.path, '/home/user/notes/a.txt');
    assert.equal(await sbx.files.read('/home/user/notes/a.txt'), 'alpha\n');
    assert.equal(await sbx.files.read('notes/a.txt'), 'alpha\n', 'relative: from the home');
    const bin = new Uint8Array(300000).map((_, i) => (i * 7) % 256);
    await sbx.files.write('bin.dat', bin);
    assert.deepEqual(await sbx.files.read('bin.dat', { format: 'bytes' }), bin);
    const many = await sbx.files.write([{ path: 'm/1.txt', data: 'one' }, { path: 'm/2.txt', data: 'two' }]);
    assert.deepEqual(many.map((f) => f.path).sort(), ['/home/user/m/1.txt', '/home/user/m/2.txt']);
    assert.equal(await sbx.files.read('m/2.txt'), 'two');
    // parts of 1 MiB: multipart (the default) and application/octet-stream
    const big = new Uint8Array(3_500_000).map((_, i) => (i * 13) % 251);
    await sbx.files.write('big/multipart.dat', big);
    await sbx.files.write('big/octet.dat', big, { useOctetStream: true });
    assert.deepEqual(await sbx.files.read('big/multipart.dat', { format: 'bytes' }), big);
    assert.deepEqual(await sbx.files.read('big/octet.dat', { format: 'bytes' }), big);
    await sbx.files.remove('big');
    await sbx.files.write('empty.txt', '');
    assert.equal(await sbx.files.read('empty.txt'), '');
    const cat = await sbx.commands.run('cat /work/notes/a.txt');
    assert.equal(cat.stdout, 'alpha\n', 'the commands see the same files');
    const list = await sbx.files.list('/home/user');
    const names = list.map((e) => e.name).sort();
    assert.deepEqual(names, ['bin.dat', 'empty.txt', 'm', 'notes']);
    const notes = list.find((e) => e.name === 'notes');
    assert.equal(notes.type, 'dir');
    assert.equal(notes.path, '/home/user/notes');
    const deep = await sbx.files.list('/home/user', { depth: 2 });
    assert.ok(deep.some((e) => e.path === '/home/user/m/1.txt'), JSON.stringify(deep));
    assert.equal(await sbx.files.exists('notes/a.txt'), true);
    assert.equal(await sbx.files.exists('nope.txt'), false);
    const st = await sbx.files.getInfo('bin.dat');
    assert.equal(st.size, 300000);
    assert.equal(st.type, 'file');
    assert.equal(await sbx.files.makeDir('new/deeper'), true);
    assert.equal(await sbx.files.makeDir('new/deeper'), false, 'there already: false');
    const moved = await sbx.files.rename('notes/a.txt', 'new/deeper/b.txt');
    assert.equal(moved.path, '/home/user/new/deeper/b.txt');
    await sbx.files.remove('new');
    assert.equal(await sbx.files.exists('new'), false);
    let nf;
    try {
      await sbx.files.read('missing.txt');
    } catch (e) {
      nf = e;
    }
    assert.ok(nf instanceof NotFoundError, String(nf));
    return { entries: names };
  },

  // files.watchDir: what commands.run does is seen (typed, named from the directory),
  // recursively; stop() ends it; a missing directory is NotFound
  async watch() {
    const sbx = await create({ timeoutMs: 120_000 });
    await sbx.files.makeDir('watched');
    const events = [];
    const handle = await sbx.files.watchDir('/home/user/watched', (e) => events.push(e), { recursive: true });
    const until = async (what, test) => {
      for (let i = 0; i < 100 && !events.some(test); i++)
        await new Promise((r) => setTimeout(r, 100));
      assert.ok(events.some(test), `${what}: ${JSON.stringify(events)}`);
    };
    await sbx.commands.run('echo hi > watched/new.txt && mkdir watched/sub');
    await until('created', (e) => e.name === 'new.txt' && e.type === 'create');
    await until('written', (e) => e.name === 'new.txt' && e.type === 'write');
    await until('a directory', (e) => e.name === 'sub' && e.type === 'create');
    await sbx.commands.run('echo deep > watched/sub/deep.txt && mv watched/new.txt watched/moved.txt && rm watched/moved.txt');
    await until('below, recursive', (e) => e.name === 'sub/deep.txt' && e.type === 'create');
    await until('renamed', (e) => e.name === 'new.txt' && e.type === 'rename');
    await until('moved in', (e) => e.name === 'moved.txt' && e.type === 'create');
    await until('removed', (e) => e.name === 'moved.txt' && e.type === 'remove');
    await handle.stop();
    const seen = events.length;
    await sbx.commands.run('touch watched/after.txt');
    await new Promise((r) => setTimeout(r, 1000));
    assert.equal(events.length, seen, `nothing after stop(): ${JSON.stringify(events.slice(seen))}`);
    const refused = (path) => sbx.files.watchDir(path, () => {}).then(() => undefined, (e) => e);
    const nf = await refused('/home/user/nowhere');
    assert.ok(nf instanceof NotFoundError, String(nf));
    await sbx.files.write('watched/plain.txt', 'x');
    const inv = await refused('/home/user/watched/plain.txt');
    assert.ok(inv instanceof InvalidArgumentError, String(inv));
    return { events: events.map((e) => `${e.type} ${e.name}`) };
  },

  // setTimeout, pause, list (state), connect (resumes), commands after it
  async lifecycle() {
    const sbx = await create({ timeoutMs: 60_000 });
    await sbx.commands.run('echo kept > /work/state.txt');
    const before = await sbx.getInfo();
    await sbx.setTimeout(600_000);
    const after = await sbx.getInfo();
    const extended = after.endAt.getTime() - before.endAt.getTime();
    assert.ok(extended > 500_000, `endAt moved by ${extended} ms`);
    assert.equal(await sbx.pause(), true);
    assert.equal(await Sandbox.pause(sbx.sandboxId), false, 'paused already: false');
    const paused = await Sandbox.list({ query: { state: ['paused'] } }).nextItems();
    assert.ok(paused.some((s) => s.sandboxId === sbx.sandboxId), JSON.stringify(paused));
    const running = await Sandbox.list({ query: { state: ['running'] } }).nextItems();
    assert.ok(!running.some((s) => s.sandboxId === sbx.sandboxId));
    const again = await Sandbox.connect(sbx.sandboxId);
    assert.equal((await again.getInfo()).state, 'running');
    assert.equal((await again.files.read('state.txt')), 'kept\n');
    assert.equal((await again.commands.run('echo back')).stdout, 'back\n');
    return { extended };
  },

  // what the SDK says for a wrong key, an unknown sandbox, an unknown template
  async errors() {
    let auth;
    try {
      await Sandbox.create({ apiKey: 'e2b_' + '0'.repeat(64) });
    } catch (e) {
      auth = e;
    }
    assert.ok(auth instanceof AuthenticationError, String(auth));
    let nf;
    try {
      await Sandbox.connect('nosuchsandbox');
    } catch (e) {
      nf = e;
    }
    assert.ok(nf instanceof NotFoundError, String(nf));
    let tpl;
    try {
      await Sandbox.create('no-such-template');
    } catch (e) {
      tpl = e;
    }
    assert.ok(tpl instanceof SandboxError, `${tpl} ${tpl && tpl.stack}`);
    assert.match(tpl.message, /no-such-template/);
    assert.match(tpl.message, /Template=/);
    return { auth: auth.name, notFound: nf.name, template: tpl.message };
  },

  // list with metadata (sandboxd's labels)
  async metadata() {
    const run = `r${process.pid}`;
    const a = await create({ metadata: { project: 'e2b-test', run } });
    await create({ metadata: { project: 'other', run } });
    await create();
    assert.deepEqual((await a.getInfo()).metadata, { project: 'e2b-test', run });
    const mine = await Sandbox.list({ query: { metadata: { run } } }).nextItems();
    assert.equal(mine.length, 2, JSON.stringify(mine));
    const one = await Sandbox.list({ query: { metadata: { project: 'e2b-test', run } } }).nextItems();
    assert.deepEqual(one.map((s) => s.sandboxId), [a.sandboxId]);
    assert.deepEqual(one[0].metadata, { project: 'e2b-test', run });
    return { listed: mine.length };
  },

  // the code interpreter: runCode with state, a chart, an error, contexts, JavaScript
  async code() {
    const sbx = await create({}, CodeSandbox);
    const a = await sbx.runCode('x = 41\nx + 1');
    assert.equal(a.text, '42');
    const out = [];
    const b = await sbx.runCode('x += 1\nprint(x)', { onStdout: (m) => out.push(m.line) });
    assert.deepEqual(b.logs.stdout, ['42\n']);
    assert.deepEqual(out, ['42\n']);
    const chart = await sbx.runCode('import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()');
    const png = chart.results.find((r) => r.png);
    assert.ok(png, JSON.stringify(chart.results.map((r) => r.formats())));
    const bytes = Buffer.from(png.png, 'base64');
    assert.equal(bytes.subarray(1, 4).toString(), 'PNG');
    const err = await sbx.runCode('1 / 0');
    assert.equal(err.error.name, 'ZeroDivisionError');
    assert.match(err.error.traceback, /ZeroDivisionError/);
    const ctx = await sbx.createCodeContext({ language: 'python', cwd: '/home/user' });
    assert.equal(ctx.cwd, '/home/user');
    await sbx.runCode('y = 1', { context: ctx });
    const other = await sbx.runCode('print(x)', { context: ctx });
    assert.equal(other.error.name, 'NameError', 'a context of its own');
    const listed = await sbx.listCodeContexts();
    assert.ok(listed.some((c) => c.id === ctx.id), JSON.stringify(listed));
    await sbx.removeCodeContext(ctx);
    const js = await sbx.runCode('const z = 2; z + 1', { language: 'js' });
    assert.equal(js.text, '3');
    return { png: bytes.length };
  },

  // snapshots (sandboxd's, of /work) and forks
  async snapshots() {
    const sbx = await create();
    await sbx.files.write('kept.txt', 'from the snapshot');
    const snap = await sbx.createSnapshot();
    assert.ok(snap.snapshotId);
    const all = await Sandbox.listSnapshots().nextItems();
    assert.ok(all.some((s) => s.snapshotId === snap.snapshotId), JSON.stringify(all));
    const mine = await sbx.listSnapshots().nextItems();
    assert.deepEqual(mine.map((s) => s.snapshotId), [snap.snapshotId]);
    const from = await Sandbox.create(snap.snapshotId);
    created.push(from);
    assert.equal(await from.files.read('kept.txt'), 'from the snapshot');
    const forks = await sbx.fork({ count: 2 });
    assert.equal(forks.length, 2);
    for (const f of forks) {
      assert.ok(f instanceof Sandbox, String(f));
      created.push(f);
      assert.equal(await f.files.read('/home/user/kept.txt'), 'from the snapshot');
      assert.equal((await f.commands.run('cat kept.txt')).stdout, 'from the snapshot');
    }
    assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), true);
    assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), false, 'gone: false');
    return { snapshot: snap.snapshotId };
  },

  // a server in the sandbox: getHost's name (as the Host header) and E2b-Sandbox-Port
  async ports() {
    const url = new URL(process.env.E2B_SANDBOX_URL), key = process.env.E2B_API_KEY;
    const sbx = await create();
    await sbx.files.write('site/index.html', 'hello from the sandbox\n');
    const srv = await sbx.commands.run('cd /work/site && exec python3 -m http.server 8000 --bind 127.0.0.1',
                                       { background: true });
    const host = sbx.getHost(8000);
    assert.match(host, new RegExp(`^8000-${sbx.sandboxId}\\.`));
    const byHost = () => new Promise((resolve, reject) => {
      const req = http.request({ host: url.hostname, port: url.port, path: '/index.html', setHost: false,
                                 headers: { Host: host, 'X-Access-Token': key } }, (res) => {
        let body = '';
        res.on('data', (d) => { body += d; });
        res.on('end', () => resolve([res.statusCode, body]));
      });
      req.on('error', reject);
      req.end();
    });
    let got;
    for (let i = 0; i < 100; i++) {
      got = await byHost();
      if (got[0] === 200)
        break;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.deepEqual(got, [200, 'hello from the sandbox\n']);
    const r = await fetch(new URL('/index.html', url), {
      headers: { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '8000', 'X-Access-Token': key } });
    assert.equal(r.status, 200);
    assert.equal(await r.text(), 'hello from the sandbox\n');
    const denied = await fetch(new URL('/index.html', url), {
      headers: { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '8000' } });
    assert.equal(denied.status, 401, 'a token is needed');
    await srv.kill();
    return { host };
  },

  // past the tenant's quota of sandboxes ([TenantQuota] Sandboxes=1): RateLimitError
  async ratelimit() {
    await create();
    let e;
    try {
      await create();
    } catch (x) {
      e = x;
    }
    assert.ok(e instanceof RateLimitError, String(e));
    assert.match(e.message, /Sandboxes/);
    return { message: e.message };
  },

  // create + first command, timed (bench/bench_e2b.py)
  async bench() {
    const n = Number(process.env.BENCH_N || 10);
    const times = [], create = [];
    for (let i = 0; i < n; i++) {
      const t0 = process.hrtime.bigint();
      const sbx = await Sandbox.create();
      const tc = process.hrtime.bigint();
      const r = await sbx.commands.run('echo ok');
      const t1 = process.hrtime.bigint();
      assert.equal(r.stdout, 'ok\n');
      times.push(Number(t1 - t0) / 1e6);
      create.push(Number(tc - t0) / 1e6);
      await sbx.kill();
    }
    // the same through sandboxd's REST API from this process (Node's fetch)
    const url = process.env.E2B_API_URL, auth = { Authorization: 'Bearer ' + process.env.E2B_API_KEY };
    const post = async (path, body) => {
      const r = await fetch(url + path, { method: 'POST', headers: { ...auth, 'Content-Type': 'application/json' },
                                          body: JSON.stringify(body) });
      assert.ok(r.ok, `${path}: ${r.status}`);
      return r.json();
    };
    const rest = [];
    for (let i = 0; i < n; i++) {
      const t0 = process.hrtime.bigint();
      const { id } = await post('/api/v1/sessions', { template: 'shell' });
      const r = await post(`/api/v1/sessions/${id}/execute`, { argv: ['/bin/bash', '-l', '-c', 'echo ok'] });
      const t1 = process.hrtime.bigint();
      assert.equal(r.stdout, 'ok\n');
      rest.push(Number(t1 - t0) / 1e6);
      await fetch(`${url}/api/v1/sessions/${id}`, { method: 'DELETE', headers: auth });
    }
    return { ms: times, createMs: create, restMs: rest };
  },
};

const name = process.argv[2];
if (!scenarios[name]) {
  console.error(`usage: e2b-client.mjs ${Object.keys(scenarios).join('|')}`);
  process.exit(2);
}
let code = 0;
try {
  console.log(JSON.stringify(await scenarios[name]()));
} catch (e) {
  console.error(e && e.stack ? e.stack : String(e));
  code = 1;
} finally {
  for (const s of created)
    await s.kill().catch(() => {});
}
process.exit(code);
