#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Issue 32: Claude Code in a claude-code sandbox, its key added by the egress proxy.

Claude Code's CLI from npm (pinned by tests/claude-code/package-lock.json, npm ci into the
build directory) is shown to the test system at /opt/sandboxd/claude-code, where the
template's "requires" looks for it. A stand-in of the Messages API serves
https://api.anthropic.com:8443 (test_egress's network namespace, certificate and hosts
file: the name maps to it; the proxy trusts the test's CA through --trust=) and streams
what Claude Code's CLI expects (SSE): first a tool_use of Bash, then, once the tool's
result comes back, the end of the turn. The command runs in the sandbox as uid 1000 in
/work and writes a file; the stand-in saw the x-api-key that the proxy added (the owner's
secret), never the placeholder the sandbox holds; the sandbox's environment, files and
process memory hold no key; another host is refused.

In PLAIN_ONLY (run.py): the CLI is a 356 MiB native binary.
Run through run.py, or directly: python3 -m unittest -v test_claude_code
"""

import json
import os
import signal
import subprocess
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import harness  # noqa: E402
import test_egress  # noqa: E402

S = None
_owned = False
KEY = 'sk-ant-api03-standin-5c0ffee5ecret'
PORT = 8443
CLI_DIR = '/opt/sandboxd/claude-code'

# The stand-in: /v1/messages, streamed (SSE) or not; a log line per request.
STANDIN = r'''
import http.server, json, ssl, sys

def sse(events):
    return ''.join(f'event: {name}\ndata: {json.dumps(data)}\n\n' for name, data in events).encode()

def message(content, stop):
    return {"id": "msg_standin", "type": "message", "role": "assistant", "model": "claude-standin",
            "content": content, "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 10}}

def stream(blocks, stop):
    ev = [("message_start", {"type": "message_start", "message": message([], None)})]
    for i, b in enumerate(blocks):
        if b["type"] == "tool_use":
            ev.append(("content_block_start", {"type": "content_block_start", "index": i,
                       "content_block": {"type": "tool_use", "id": b["id"], "name": b["name"], "input": {}}}))
            ev.append(("content_block_delta", {"type": "content_block_delta", "index": i,
                       "delta": {"type": "input_json_delta", "partial_json": json.dumps(b["input"])}}))
        else:
            ev.append(("content_block_start", {"type": "content_block_start", "index": i,
                       "content_block": {"type": "text", "text": ""}}))
            ev.append(("content_block_delta", {"type": "content_block_delta", "index": i,
                       "delta": {"type": "text_delta", "text": b["text"]}}))
        ev.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    ev.append(("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                 "usage": {"output_tokens": 10}}))
    ev.append(("message_stop", {"type": "message_stop"}))
    return sse(ev)

class H(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get('Content-Length', 0))) or b'{}')
        tools = [t.get("name") for t in body.get("tools", [])]
        last = (body.get("messages") or [{}])[-1].get("content")
        result = isinstance(last, list) and any(isinstance(c, dict) and c.get("type") == "tool_result" for c in last)
        with open(sys.argv[3], 'a') as f:
            f.write(json.dumps({"path": self.path, "key": self.headers.get_all("x-api-key"),
                                "tools": "Bash" in tools, "tool_result": result}) + "\n")
        if not self.path.startswith("/v1/messages") or self.path.startswith("/v1/messages/count_tokens"):
            out, ctype = json.dumps({"input_tokens": 10}).encode(), "application/json"
        else:
            if "Bash" in tools and not result:
                blocks, stop = [{"type": "tool_use", "id": "toolu_standin1", "name": "Bash",
                                 "input": {"command": "id -u > proof.txt && pwd >> proof.txt",
                                           "description": "Write the proof file"}}], "tool_use"
            else:
                blocks, stop = [{"type": "text", "text": "Done."}], "end_turn"
            if body.get("stream"):
                out, ctype = stream(blocks, stop), "text/event-stream"
            else:
                out, ctype = json.dumps(message(blocks, stop)).encode(), "application/json"
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(out)))
        self.send_header("request-id", "req_standin")
        self.end_headers()
        self.wfile.write(out)
    def do_GET(self):
        self.do_POST()
    def log_message(self, *a):
        pass

ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[1], sys.argv[2])
srv = http.server.ThreadingHTTPServer((sys.argv[4], int(sys.argv[5])), H)
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
print("ready", flush=True)
srv.serve_forever()
'''


def setUpModule():
    global S, _owned
    S, _owned = harness.module_setup()
    test_egress.S = S


def tearDownModule():
    harness.module_teardown(_owned)


class ClaudeCode(test_egress.EgressNetwork):
    TEMPLATE = 'claude-code'

    @classmethod
    def setUpClass(cls):
        cls.standin = None
        super().setUpClass()
        try:
            cls._install_cli()
            cls._start_standin()
        except Exception:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        if cls.standin is not None:
            os.killpg(cls.standin.pid, signal.SIGKILL)
            cls.standin.wait()
        super().tearDownClass()

    @classmethod
    def _install_cli(cls):
        """The admin's one command, done the test's way: npm ci of the lock file into the
        build directory, the package's postinstall (which puts the native binary in place),
        and that directory shown at /opt/sandboxd/claude-code in the test system only."""
        dest = harness.npm_ci(S.paths.build, os.path.join(S.paths.source, 'tests', 'claude-code'), 'claude-code')
        pkg = os.path.join(dest, 'node_modules', '@anthropic-ai', 'claude-code')
        binary = os.path.join(dest, 'node_modules', '@anthropic-ai', 'claude-code-linux-x64', 'claude')
        os.makedirs(os.path.join(dest, 'bin'), exist_ok=True)
        link = os.path.join(dest, 'bin', 'claude')
        if not os.path.lexists(link):
            os.symlink(os.path.relpath(binary, os.path.join(dest, 'bin')), link)
        cls.host_cli = binary
        assert os.path.exists(binary), os.listdir(pkg)
        # In sandboxd's own mount namespace (its unit's), where bwrap starts and the
        # template's "requires" is looked for; nothing of the host's /opt is needed there.
        pid = S.show('sandboxd.service', 'MainPID')['MainPID']
        script = (f'set -e; if ! test -d {CLI_DIR}; then '
                  f'test -d /opt/sandboxd || mount -t tmpfs -o mode=0755 tmpfs /opt; mkdir -p {CLI_DIR}; fi; '
                  f'mount --bind {dest} {CLI_DIR}; mount -o remount,bind,ro {CLI_DIR}')
        cp = S.run(['nsenter', '-t', pid, '-m', 'sh', '-c', script])
        assert cp.returncode == 0, cp.stderr

    @classmethod
    def _start_standin(cls):
        script = os.path.join(cls.dir, 'standin.py')
        with open(script, 'w') as f:
            f.write(STANDIN)
        cls.log = os.path.join(cls.dir, 'standin.log')
        cls.standin = subprocess.Popen(
            S.wrap(['ip', 'netns', 'exec', cls.netns, 'python3', script, f'{cls.dir}/server.pem',
                    f'{cls.dir}/server.key', cls.log, test_egress.SERVER_ADDR, str(PORT)]),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        line = cls.standin.stdout.readline().decode()
        assert line.strip() == 'ready', f'the stand-in did not start: {line}'

    def requests(self):
        try:
            with open(self.log) as f:
                return [json.loads(line) for line in f]
        except FileNotFoundError:
            return []

    def test_claude_code_runs_a_bash_tool_with_an_injected_key(self):
        self.ok(self.ctl('secret', 'set', 'ANTHROPIC_API_KEY', input=KEY))
        self.addCleanup(self.ctl, 'secret', 'remove', 'ANTHROPIC_API_KEY')
        # The template's egress, on the stand-in's port; its address is a private one (the
        # test's namespace), which only a range allows.
        sid = self.create(f'--allow-host=api.anthropic.com:{PORT}', f'--allow-host={test_egress.NET}.0/24:{PORT}')

        env = ('--env', f'ANTHROPIC_BASE_URL=https://api.anthropic.com:{PORT}')
        t0 = time.monotonic()
        cp = self.exec(sid, 'claude', '--version', opts=env, timeout=120)
        version_inside = time.monotonic() - t0
        self.ok(cp)
        self.assertRegex(cp.stdout, r'\d+\.\d+\.\d+')

        cp = self.exec(sid, 'claude', '-p', 'Write the proof file.', '--model', 'claude-standin',
                       '--allowedTools', 'Bash', '--dangerously-skip-permissions', '--output-format', 'json',
                       opts=env, timeout=300)
        self.ok(cp, 'claude -p')
        result = json.loads(cp.stdout)
        self.assertEqual(result.get('result'), 'Done.', result)

        # The command ran in the sandbox, as uid 1000, in the workspace.
        self.assertEqual(self.ok(self.exec(sid, 'cat', '/work/proof.txt')).stdout, '1000\n/work\n')

        # The stand-in got the owner's key on every request; the tool's result came back.
        got = self.requests()
        self.assertTrue(any(r['tool_result'] for r in got), got)
        self.assertTrue(got)
        for r in got:
            self.assertEqual(r['key'], [KEY], r)

        # What the sandbox holds is the placeholder: no key in its environment, files or memory.
        self.assertEqual(self.ok(self.exec(sid, 'printenv', 'ANTHROPIC_API_KEY')).stdout, 'added-by-sandboxd-egress\n')
        self.assert_key_absent(sid, KEY)

        # Another host is refused.
        cp = self.exec(sid, 'curl', '-sS', '--max-time', '20', 'https://other.test/')
        self.assertNotEqual(cp.returncode, 0)
        self.assertIn('403', cp.stderr)
        sys.stderr.write(f'claude --version in the sandbox (first exec): {version_inside:.2f} s\n')

    def test_missing_cli_says_how_to_install_it(self):
        # A template like claude-code whose required path is not there.
        tmpl = {'payload': 'bwrap', 'ro_binds': ['/usr', '/opt/sandboxd/not-installed'],
                'requires': [{'path': '/opt/sandboxd/not-installed/bin/x',
                              'install': 'npm install -g --prefix /opt/sandboxd/not-installed x'}]}
        path = os.path.join(self.dir, 'needs.json')
        with open(path, 'w') as f:
            json.dump(tmpl, f)
        self.ok(self.ctl('template-create', 'needs-x', path))
        self.addCleanup(self.ctl, 'template-remove', 'needs-x')
        cp = self.ctl('create', '--template', 'needs-x')
        self.assertNotEqual(cp.returncode, 0)
        self.assertIn('npm install -g --prefix /opt/sandboxd/not-installed x', cp.stderr)


if __name__ == '__main__':
    unittest.main()
