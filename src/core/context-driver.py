# SPDX-License-Identifier: LGPL-2.1-or-later
# A code context's driver, run inside the sandbox (python3 -c) by sandboxd (context.c): it
# starts an IPython kernel with Debian's jupyter_client, on Unix sockets in a private
# directory of the sandbox's own /tmp (the kernel's sockets never leave the sandbox), and
# speaks line-delimited JSON with sandboxd on its stdin and stdout (docs/CONTEXTS.md):
#   in:  {"code": "..."}                  one cell at a time
#   out: {"type": "ready", ...}           once the kernel answers
#        {"type": "stdout"|"stderr", "text": "..."}
#        {"type": "result", "data": {mime: value}, "isMainResult": bool}
#        {"type": "error", "name": ..., "value": ..., "traceback": [...]}
#        {"type": "end", "executionCount": n, "status": "ok"|"error"}  after the cell's
#                                         execute_reply AND its iopub "idle": every output
#        {"type": "lost", "reason": "..."}  the kernel ended; the driver exits
# SIGINT interrupts the cell (jupyter_client's interrupt: SIGINT to the kernel's group).
import ctypes
import json
import os
import signal
import sys
import tempfile

proto = os.fdopen(os.dup(1), "w", encoding="utf-8", errors="replace")
# Whatever else writes to our fd 1 (the kernel's own fds, a library) goes to stderr: only
# the protocol is on the channel.
os.dup2(2, 1)


def emit(o):
    proto.write(json.dumps(o, separators=(",", ":"), ensure_ascii=False) + "\n")
    proto.flush()


try:
    import zmq
    from jupyter_client.manager import KernelManager
except ImportError as e:
    emit({"type": "lost", "reason": "jupyter_client is not installed in this template (%s)" % e})
    sys.exit(3)

libc = ctypes.CDLL(None, use_errno=True)


def kernel_preexec():
    # The kernel ends with its driver (PR_SET_PDEATHSIG, SIGKILL): sandboxd's kill of the
    # driver takes the kernel with it; and the OOM killer takes the kernel first.
    libc.prctl(1, signal.SIGKILL, 0, 0, 0)
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("500")
    except OSError:
        pass


runtime = tempfile.mkdtemp(prefix="sandboxd-context-")
env = dict(os.environ)
# Figures are shown as images (display data), whatever backend plain scripts are given.
env["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
env["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"
env.setdefault("JUPYTER_RUNTIME_DIR", runtime)
env.setdefault("IPYTHONDIR", os.path.join(runtime, "ipython"))

km = KernelManager(kernel_name="python3", transport="ipc", ip=os.path.join(runtime, "kernel"),
                   connection_file=os.path.join(runtime, "kernel.json"))
km.kernel_cmd = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
try:
    km.start_kernel(env=env, preexec_fn=kernel_preexec,
                    extra_arguments=["--InteractiveShell.colors=NoColor",
                                     "--HistoryManager.hist_file=:memory:"])
except Exception as e:
    emit({"type": "lost", "reason": "the kernel did not start: %s" % e})
    sys.exit(3)

# Plain blocking sockets of the kernel manager's own (its client's are asyncio ones).
session = km.session
iopub = km.connect_iopub()
shell = km.connect_shell()


def recv(sock):
    try:
        return session.recv(sock, mode=zmq.NOBLOCK)[1]
    except zmq.ZMQError:
        return None


# kernel_info until it answers (the first requests may be lost while it binds).
info = None
for attempt in range(240):
    session.send(shell, "kernel_info_request", {})
    if shell.poll(500):
        msg = recv(shell)
        if msg and msg["msg_type"] == "kernel_info_reply":
            info = msg
            break
    if not km.is_alive():
        break
if not info:
    emit({"type": "lost", "reason": "the kernel did not answer"})
    km.shutdown_kernel(now=True)
    sys.exit(3)
# The iopub subscription takes a moment to reach the kernel: until it has, what the kernel
# publishes (a cell's output, its "idle") is lost. As jupyter_client's nudge does, ask
# until iopub says something.
for attempt in range(600):
    session.send(shell, "kernel_info_request", {})
    if iopub.poll(200) and recv(iopub):
        break
    if not km.is_alive():
        break
# Other answers to the asks above, and their status messages, are not a cell's.
while shell.poll(100):
    recv(shell)
while iopub.poll(100):
    recv(iopub)


def on_sigint(signum, frame):
    try:
        km.interrupt_kernel()
    except Exception:
        pass


signal.signal(signal.SIGINT, on_sigint)

lang = info["content"].get("language_info", {})
emit({"type": "ready", "language": "python", "version": lang.get("version", ""),
      "pid": km.provisioner.process.pid if km.provisioner else 0})

poller = zmq.Poller()
poller.register(iopub, zmq.POLLIN)
poller.register(shell, zmq.POLLIN)
poller.register(0, zmq.POLLIN)

inbuf = b""
queue = []
current = None   # the msg_id of the cell that runs
reply = None     # its execute_reply, once there
idle = False     # its iopub "idle", once there


def lost(reason):
    emit({"type": "lost", "reason": reason})
    sys.exit(3)


# Every cell runs, whatever the one before it raised: stop_on_error (a notebook's "run all"
# stops at the first error) makes ipykernel abort, with no output and status "aborted",
# any execute_request that reaches it soon after an error (before its event loop turns
# again); for separate RunCode calls that is a race a loaded machine loses (CONTEXTS.md).
def start_next():
    global current, reply, idle
    if current or not queue:
        return
    current = session.send(shell, "execute_request",
                           {"code": queue.pop(0), "silent": False, "store_history": True,
                            "user_expressions": {}, "allow_stdin": False,
                            "stop_on_error": False})["header"]["msg_id"]
    reply, idle = None, False


def finish_if_done():
    global current
    if current and reply is not None and idle:
        c = reply["content"]
        emit({"type": "end", "executionCount": c.get("execution_count") or 0, "status": c.get("status", "ok")})
        current = None
        start_next()


def on_iopub(msg):
    global idle
    if msg["parent_header"].get("msg_id") != current or not current:
        return
    t, c = msg["msg_type"], msg["content"]
    if t == "stream":
        emit({"type": "stderr" if c.get("name") == "stderr" else "stdout", "text": c.get("text", "")})
    elif t in ("display_data", "update_display_data"):
        emit({"type": "result", "data": c.get("data", {}), "isMainResult": False})
    elif t == "execute_result":
        emit({"type": "result", "data": c.get("data", {}), "isMainResult": True})
    elif t == "error":
        emit({"type": "error", "name": c.get("ename", ""), "value": c.get("evalue", ""),
              "traceback": c.get("traceback", [])})
    elif t == "status" and c.get("execution_state") == "idle":
        idle = True


while True:
    try:
        events = dict(poller.poll(500))
    except InterruptedError:
        continue
    if 0 in events:
        data = os.read(0, 1 << 20)
        if not data:
            km.shutdown_kernel(now=True)
            sys.exit(0)
        inbuf += data
        while b"\n" in inbuf:
            line, inbuf = inbuf.split(b"\n", 1)
            try:
                req = json.loads(line)
            except ValueError:
                continue
            if isinstance(req, dict) and isinstance(req.get("code"), str):
                queue.append(req["code"])
        start_next()
    while True:
        msg = recv(iopub)
        if not msg:
            break
        on_iopub(msg)
    while True:
        msg = recv(shell)
        if not msg:
            break
        if current and msg["parent_header"].get("msg_id") == current:
            reply = msg
    finish_if_done()
    if not km.is_alive():
        code = km.provisioner.process.poll() if km.provisioner and km.provisioner.process else None
        lost("the kernel ended (%s)" % ("killed by signal %d" % -code if code is not None and code < 0
                                        else "exit status %s" % code))
