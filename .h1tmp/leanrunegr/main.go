package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"openvibe.network/agentsandbox/egress"
	"openvibe.network/agentsandbox/sandbox"
)

func main() {
	if c, ok := sandbox.MaybeReexec(sandbox.InitHooks{Bridge: egress.Bridge}); ok {
		os.Exit(c)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := runCmd(ctx, os.Args[2:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
