package main

import (
	"os"

	"openvibe.network/agentsandbox/egress"
	"openvibe.network/agentsandbox/sandbox"
)

func main() {
	if c, ok := sandbox.MaybeReexec(sandbox.InitHooks{Bridge: egress.Bridge}); ok {
		os.Exit(c)
	}
}
