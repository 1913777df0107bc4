package main

import (
	"openvibe.network/agentsandbox/egress"
	"openvibe.network/agentsandbox/sandbox"
)

// maybeInit runs the init inside a sandbox, with the egress bridge, when
// this process was started as one (this binary re-executed, when the lean
// codes-sandbox-init is not used) and reports its exit code.
func maybeInit() (int, bool) {
	return sandbox.MaybeReexec(sandbox.InitHooks{Bridge: egress.Bridge})
}
