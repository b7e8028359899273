# SPDX-License-Identifier: LGPL-2.1-or-later
# Sourced by the varlink suite's scripts: a private directory, our certification server
# in it, and the rule for missing tools (a skip, but a failure when CI=true).

set -euo pipefail

: "${VARLINK_CERTIFICATION:?the path of varlink-certification (set by meson)}"

dir=$(mktemp -d "${TMPDIR:-/tmp}/varlink-test.XXXXXX")
pids=()

cleanup() {
        local pid
        for pid in "${pids[@]}"; do
                kill -TERM "$pid" 2>/dev/null || true
        done
        rm -rf "$dir"
}
trap cleanup EXIT

# missing WHAT PACKAGE: skip the test, or fail it when CI=true.
missing() {
        if [ "${CI:-}" = true ]; then
                echo "FAIL: $1 is missing (apt-get install $2); CI=true makes this a failure" >&2
                exit 1
        fi
        echo "SKIP: $1 is missing (apt-get install $2)"
        exit 77
}

# require_tool COMMAND PACKAGE
require_tool() {
        command -v "$1" >/dev/null 2>&1 || missing "$1" "$2"
}

# require_path PATH PACKAGE
require_path() {
        [ -e "$1" ] || missing "$1" "$2"
}

# wait_for_socket PATH PID: until PATH accepts connections; fails if PID dies first.
wait_for_socket() {
        local i
        for i in $(seq 100); do
                if ! kill -0 "$2" 2>/dev/null; then
                        echo "FAIL: the server (pid $2) exited before listening on $1" >&2
                        return 1
                fi
                if python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).connect(sys.argv[1])' "$1" 2>/dev/null; then
                        return 0
                fi
                sleep 0.1
        done
        echo "FAIL: nothing listens on $1 after 10 s" >&2
        return 1
}

# start_our_server PATH: our certification server on PATH, its output in PATH.log.
start_our_server() {
        "$VARLINK_CERTIFICATION" --varlink="unix:$1" >"$1.log" 2>&1 &
        server_pid=$!
        pids+=("$server_pid")
        wait_for_socket "$1" "$server_pid"
}

# stop_our_server: SIGTERM, and it must exit 0 (under the sanitizers: no leak, no error).
stop_our_server() {
        local rc=0
        kill -TERM "$server_pid"
        wait "$server_pid" || rc=$?
        if [ "$rc" != 0 ]; then
                echo "FAIL: our server exited with $rc:" >&2
                cat "$dir"/*.log >&2 || true
                return 1
        fi
}
