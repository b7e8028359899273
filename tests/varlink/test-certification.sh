#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# varlink certification against an independent implementation, varlink-go (Debian's
# varlink-go package): its certification client against our server, and our client
# against its certification server.

source "$(dirname "$0")/common.sh"
require_tool varlink-go-certification varlink-go
require_tool python3 python3

failed=0

echo "# varlink-go's client against our server"
start_our_server "$dir/ours.socket"
if ! timeout 60 varlink-go-certification --client --varlink="unix:$dir/ours.socket" >"$dir/go-client.out" 2>&1; then
        echo "varlink-go-certification --client exited non-zero"
        failed=1
fi
cat "$dir/go-client.out"
# It reports a failed step on stdout and carries on or returns 0: read what it says.
if grep -q 'failed' "$dir/go-client.out" || ! grep -qx "End: 'true'" "$dir/go-client.out"; then
        echo "not ok 1 - varlink-go's certification client against our server"
        failed=1
else
        echo "ok 1 - varlink-go's certification client against our server"
fi
stop_our_server || failed=1

echo "# our client against varlink-go's server"
varlink-go-certification --varlink="unix:$dir/go.socket" >"$dir/go-server.log" 2>&1 &
go_pid=$!
pids+=("$go_pid")
if wait_for_socket "$dir/go.socket" "$go_pid" &&
   timeout 60 "$VARLINK_CERTIFICATION" --client --varlink="unix:$dir/go.socket"; then
        echo "ok 2 - our certification client against varlink-go's server"
else
        echo "not ok 2 - our certification client against varlink-go's server"
        cat "$dir/go-server.log"
        failed=1
fi

exit $failed
