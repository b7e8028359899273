// SPDX-License-Identifier: LGPL-2.1-or-later

// varlink-sandbox-client ADDRESS: sandboxd driven by varlink-go's client, a varlink
// implementation that is not ours: creates a sandbox, runs a command with "more" and
// checks the streamed output (every chunk base64 of 1 to 65536 bytes, each stream whole
// and in order) and the result, runs one without "more", destroys the sandbox and checks
// that it is gone (NoSuchSandbox). Exits 0 if all holds.
//
// Build offline from Debian's golang-github-varlink-go-dev:
//   GO111MODULE=off GOPATH=/usr/share/gocode go build -o DIR/varlink-sandbox-client varlink-sandbox-client.go
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/varlink/go/varlink"
)

const iface = "io.sandboxd.Sandbox"

type execInfo struct {
	TimedOut    bool   `json:"timedOut"`
	OOMKilled   bool   `json:"oomKilled"`
	Signal      int    `json:"signal"`
	ExitCode    int    `json:"exitCode"`
	StdoutBytes uint64 `json:"stdoutBytes"`
	StderrBytes uint64 `json:"stderrBytes"`
}

// One reply of Exec: a chunk ([]byte fields are base64 in JSON, as encoding/json has them)
// or the result.
type execReply struct {
	ExitStatus *int      `json:"exitStatus"`
	Stdout     []byte    `json:"stdout"`
	Stderr     []byte    `json:"stderr"`
	Info       *execInfo `json:"info"`
}

type execParams struct {
	ID   string   `json:"id"`
	Argv []string `json:"argv"`
}

const (
	stdoutSize = 300000
	chunkMax   = 65536
	// Writes stdoutSize bytes in pieces with pauses between them, so that they come in
	// several replies, then "err" to stderr, and exits 7.
	script = `i=0; while [ $i -lt 3 ]; do head -c 100000 /dev/zero | tr '\0' x; sleep 0.1; i=$((i+1)); done; echo err >&2; exit 7`
)

func streamedExec(ctx context.Context, c *varlink.Connection, id string) error {
	receive, err := c.Send(ctx, iface+".Exec", execParams{ID: id, Argv: []string{"sh", "-c", script}}, varlink.More)
	if err != nil {
		return fmt.Errorf("Exec: %w", err)
	}
	var stdout, stderr bytes.Buffer
	chunks := 0
	for {
		var r execReply
		flags, err := receive(ctx, &r)
		if err != nil {
			return fmt.Errorf("Exec reply %d: %w", chunks, err)
		}
		if flags&varlink.Continues == 0 {
			if r.ExitStatus == nil || r.Info == nil {
				return fmt.Errorf("the last reply has no exitStatus or info: %+v", r)
			}
			if r.Stdout != nil || r.Stderr != nil {
				return fmt.Errorf("the last reply of a stream carries output: %+v", r)
			}
			if *r.ExitStatus != 7 || r.Info.ExitCode != 7 || r.Info.Signal != 0 || r.Info.TimedOut {
				return fmt.Errorf("want exit status 7, got %d, info %+v", *r.ExitStatus, *r.Info)
			}
			if r.Info.StdoutBytes != stdoutSize || r.Info.StderrBytes != 4 {
				return fmt.Errorf("info counts %d/%d bytes, want %d/4", r.Info.StdoutBytes, r.Info.StderrBytes, stdoutSize)
			}
			break
		}
		chunks++
		if r.ExitStatus != nil || r.Info != nil {
			return fmt.Errorf("chunk %d carries the result: %+v", chunks, r)
		}
		if (r.Stdout == nil) == (r.Stderr == nil) {
			return fmt.Errorf("chunk %d: want stdout or stderr, got %+v", chunks, r)
		}
		if len(r.Stdout)+len(r.Stderr) < 1 || len(r.Stdout)+len(r.Stderr) > chunkMax {
			return fmt.Errorf("chunk %d has %d bytes (1 to %d allowed)", chunks, len(r.Stdout)+len(r.Stderr), chunkMax)
		}
		stdout.Write(r.Stdout)
		stderr.Write(r.Stderr)
	}
	if !bytes.Equal(stdout.Bytes(), bytes.Repeat([]byte("x"), stdoutSize)) {
		return fmt.Errorf("streamed stdout differs: %d bytes", stdout.Len())
	}
	if stderr.String() != "err\n" {
		return fmt.Errorf("streamed stderr is %q", stderr.String())
	}
	if chunks < stdoutSize/chunkMax+2 {
		return fmt.Errorf("only %d chunks for %d bytes", chunks, stdoutSize+4)
	}
	fmt.Printf("Exec with more: %d chunks, %d + %d bytes, exit status 7\n", chunks, stdout.Len(), stderr.Len())
	return nil
}

func run(ctx context.Context, c *varlink.Connection) error {
	var created struct {
		ID string `json:"id"`
	}
	if err := c.Call(ctx, iface+".CreateSandbox", map[string]interface{}{"template": "shell"}, &created); err != nil {
		return fmt.Errorf("CreateSandbox: %w", err)
	}
	fmt.Printf("created %s\n", created.ID)
	destroyed := false
	defer func() {
		if !destroyed {
			c.Call(ctx, iface+".Destroy", map[string]string{"id": created.ID}, &struct{}{})
		}
	}()

	if err := streamedExec(ctx, c, created.ID); err != nil {
		return err
	}

	var r execReply
	if err := c.Call(ctx, iface+".Exec", execParams{ID: created.ID, Argv: []string{"echo", "one reply"}}, &r); err != nil {
		return fmt.Errorf("Exec without more: %w", err)
	}
	if r.ExitStatus == nil || *r.ExitStatus != 0 || string(r.Stdout) != "one reply\n" || r.Info == nil {
		return fmt.Errorf("Exec without more: %+v", r)
	}

	if err := c.Call(ctx, iface+".Destroy", map[string]string{"id": created.ID}, &struct{}{}); err != nil {
		return fmt.Errorf("Destroy: %w", err)
	}
	destroyed = true
	err := c.Call(ctx, iface+".GetSandbox", map[string]string{"id": created.ID}, &struct{}{})
	var e *varlink.Error
	if !errors.As(err, &e) || e.Name != iface+".NoSuchSandbox" {
		return fmt.Errorf("GetSandbox after Destroy: want %s.NoSuchSandbox, got %v", iface, err)
	}
	fmt.Printf("destroyed %s: GetSandbox says %s\n", created.ID, e.Name)
	return nil
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintf(os.Stderr, "Usage: %s unix:/path\n", os.Args[0])
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()

	c, err := varlink.NewConnection(ctx, os.Args[1])
	if err != nil {
		fmt.Fprintf(os.Stderr, "connect %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
	defer c.Close()
	if err := run(ctx, c); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		os.Exit(1)
	}
	fmt.Println("ok: sandboxd works with varlink-go's client")
}
