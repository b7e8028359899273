# SPDX-License-Identifier: LGPL-2.1-or-later
# sandbox-run's Python runtime: run as `python3 -c` inside the sandbox, with the request
# (JSON: file, handler, event, context, deadlineMs) on standard input and fd 3 as the
# channel back to sandbox-run, where it writes one JSON line per message:
#   {"status":"started"}                   the runtime is up (before the handler loads)
#   {"status":"ok"} + a line of JSON         the handler's return value, as the next line
#   {"status":"raised"|"syntax"|"nohandler","error":{errorType,errorMessage,stackTrace}}
# Standard output is standard error here (sandbox-run's sh wrapper did 3>&1 1>&2), so
# whatever the handler prints is a log line and never mixes with its result.

import importlib.machinery
import importlib.util
import json
import os
import sys
import time
import traceback

CHANNEL = 3


def send(data):
    data = memoryview(data)
    while data:
        data = data[os.write(CHANNEL, data):]


def send_message(message, payload=None):
    out = json.dumps(message).encode() + b'\n'
    if payload is not None:
        out += payload + b'\n'
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:
        pass
    send(out)


def user_frames(tb):
    """Lambda's stackTrace: the frames of the handler's code, not of this runtime."""
    frames = [f for f in traceback.extract_tb(tb) if f.filename != '<string>']
    return traceback.format_list(frames)


def error_object(e, error_type=None, message=None, trace=None):
    return {'errorMessage': str(e) if message is None else message,
            'errorType': error_type or type(e).__name__,
            'stackTrace': user_frames(e.__traceback__) if trace is None else trace}


def fail(status, error):
    send_message({'status': status, 'error': error})
    os._exit(0)


class LambdaContext:
    """The context argument, as AWS Lambda's Python runtime gives it."""

    def __init__(self, fields, deadline_ms):
        self._deadline_ms = deadline_ms
        self.client_context = None
        self.identity = None
        for key, value in fields.items():
            setattr(self, key, value)

    def get_remaining_time_in_millis(self):
        return max(0, int(self._deadline_ms - time.time() * 1000))

    def __repr__(self):
        return f'LambdaContext({self.function_name!r}, aws_request_id={self.aws_request_id!r})'


def load_handler(path, name):
    module_name = os.path.splitext(os.path.basename(path))[0]
    with open(path, 'rb') as f:
        source = f.read()
    try:
        code = compile(source, path, 'exec', dont_inherit=True)
    except SyntaxError as e:
        trace = [f'  File "{e.filename}" Line {e.lineno}\n    {(e.text or "").strip()}\n']
        fail('syntax', error_object(e, 'Runtime.UserCodeSyntaxError',
                                    f"Syntax error in module '{module_name}': {e}", trace))
    # The loader named explicitly: spec_from_file_location() guesses one from the suffix
    # and gives None for a handler file that does not end in .py (h.txt, a bare name).
    spec = importlib.util.spec_from_file_location(module_name, path,
                                                  loader=importlib.machinery.SourceFileLoader(module_name, path))
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        exec(code, module.__dict__)
    except ImportError as e:
        fail('raised', error_object(e, 'Runtime.ImportModuleError',
                                    f"Unable to import module '{module_name}': {e}"))
    except BaseException as e:
        fail('raised', error_object(e))
    handler = getattr(module, name, None)
    if handler is None or not callable(handler):
        what = 'missing on' if handler is None else 'is not callable in'
        fail('nohandler', {'errorMessage': f"Handler '{name}' {what} module '{module_name}'",
                           'errorType': 'Runtime.HandlerNotFound', 'stackTrace': []})
    return handler


def marshal(result):
    try:
        return json.dumps(result, ensure_ascii=False, allow_nan=False).encode('utf-8')
    except UnicodeEncodeError:
        return json.dumps(result, allow_nan=False).encode()


def main():
    os.set_inheritable(CHANNEL, False)
    request = json.loads(sys.stdin.buffer.read())
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    send_message({'status': 'started'})

    path = request['file']
    sys.argv = [path]
    sys.path.insert(0, os.path.dirname(path))
    handler = load_handler(path, request['handler'])
    context = LambdaContext(request['context'], request['deadlineMs'])
    try:
        result = handler(request['event'], context)
    except BaseException as e:
        fail('raised', error_object(e))
    try:
        payload = marshal(result)
    except (TypeError, ValueError) as e:
        fail('raised', error_object(e, 'Runtime.MarshalError', f'Unable to marshal response: {e}', []))
    send_message({'status': 'ok'}, payload)
    os._exit(0)


main()
