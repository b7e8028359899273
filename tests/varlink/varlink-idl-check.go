// SPDX-License-Identifier: LGPL-2.1-or-later

// varlink-idl-check ADDRESS: asks the varlink service at ADDRESS (unix:/path) what it
// implements (org.varlink.service.GetInfo) and reads each interface's description with
// varlink-go's own IDL parser; then checks that an unknown interface and an unknown
// method are refused with the errors varlink-go expects. Exits 0 if all holds.
//
// varlink-go (0.4.0, Debian 12) reads an interface name in small letters only, where
// varlink.org's grammar allows capitals (systemd's io.systemd.Resolve, our
// io.sandboxd.Sandbox): for such a name the "interface" line alone is given to the parser
// in small letters, and everything else as it is.
//
// Build offline from Debian's golang-github-varlink-go-dev:
//   GO111MODULE=off GOPATH=/usr/share/gocode go build -o DIR/varlink-idl-check varlink-idl-check.go
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/varlink/go/varlink"
	"github.com/varlink/go/varlink/idl"
)

func check(ctx context.Context, c *varlink.Connection) error {
	var vendor, product, version, url string
	var interfaces []string

	if err := c.GetInfo(ctx, &vendor, &product, &version, &url, &interfaces); err != nil {
		return fmt.Errorf("GetInfo: %w", err)
	}
	fmt.Printf("%s %s %s (%s): %v\n", vendor, product, version, url, interfaces)

	found := false
	for _, name := range interfaces {
		description, err := c.GetInterfaceDescription(ctx, name)
		if err != nil {
			return fmt.Errorf("GetInterfaceDescription(%s): %w", name, err)
		}
		parsed := description
		if lower := strings.ToLower(name); lower != name {
			parsed = strings.Replace(description, "interface "+name+"\n", "interface "+lower+"\n", 1)
			fmt.Printf("%s: its name given to varlink-go's parser as %s\n", name, lower)
		}
		i, err := idl.New(parsed)
		if err != nil {
			return fmt.Errorf("the description of %s does not parse: %w", name, err)
		}
		if i.Name != strings.ToLower(name) {
			return fmt.Errorf("the description of %s is of %s", name, i.Name)
		}
		fmt.Printf("%s: %d methods, %d types, %d errors\n", name, len(i.Methods), len(i.Aliases), len(i.Errors))
		found = found || name == "org.varlink.service"
	}
	if !found {
		return fmt.Errorf("GetInfo does not list org.varlink.service")
	}

	_, err := c.GetInterfaceDescription(ctx, "org.example.nonexistent")
	var notFound *varlink.InterfaceNotFound
	if !errors.As(err, &notFound) || notFound.Interface != "org.example.nonexistent" {
		return fmt.Errorf("unknown interface: want InterfaceNotFound, got %v", err)
	}

	var out struct{}
	err = c.Call(ctx, "org.varlink.service.NoSuchMethod", nil, &out)
	var noMethod *varlink.MethodNotFound
	if !errors.As(err, &noMethod) {
		return fmt.Errorf("unknown method: want MethodNotFound, got %v", err)
	}
	return nil
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintf(os.Stderr, "Usage: %s unix:/path\n", os.Args[0])
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	c, err := varlink.NewConnection(ctx, os.Args[1])
	if err != nil {
		fmt.Fprintf(os.Stderr, "connect %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
	defer c.Close()
	if err := check(ctx, c); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		os.Exit(1)
	}
	fmt.Println("ok: every description parses with varlink-go's IDL parser")
}
