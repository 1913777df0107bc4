package main

import (
	"os"

	"openvibe.network/agentsandbox/sandbox"
)

func main() {
	if c, ok := sandbox.MaybeReexec(sandbox.InitHooks{}); ok {
		os.Exit(c)
	}
}
