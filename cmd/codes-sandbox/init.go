package main

import (
	"openvibe.network/agentsandbox/egress"
	"openvibe.network/agentsandbox/sandbox"
)

// maybeInit runs the re-executed stages of this program (the sandbox
// launcher on the host, the init inside a sandbox, with the egress bridge)
// when this process was started as one, and reports its exit code.
func maybeInit() (int, bool) {
	return sandbox.MaybeReexec(sandbox.InitHooks{Bridge: egress.Bridge})
}
