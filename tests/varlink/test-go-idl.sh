#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Our server's introspection read by varlink-go: GetInfo, and every interface
# description through varlink-go's IDL parser (varlink-idl-check.go, built offline from
# Debian's golang-github-varlink-go-dev).

source "$(dirname "$0")/common.sh"
require_tool go golang-go
require_tool python3 python3
require_path /usr/share/gocode/src/github.com/varlink/go/varlink/idl golang-github-varlink-go-dev

mkdir "$dir/gocache"
if ! HOME="$dir" GOCACHE="$dir/gocache" GO111MODULE=off GOPATH=/usr/share/gocode GOFLAGS= \
     go build -o "$dir/varlink-idl-check" "$(dirname "$0")/varlink-idl-check.go"; then
        echo "not ok 1 - varlink-idl-check.go does not build"
        exit 1
fi

start_our_server "$dir/ours.socket"
failed=0
if timeout 60 "$dir/varlink-idl-check" "unix:$dir/ours.socket"; then
        echo "ok 1 - varlink-go reads our server's interfaces"
else
        echo "not ok 1 - varlink-go reads our server's interfaces"
        failed=1
fi
stop_our_server || failed=1
exit $failed
