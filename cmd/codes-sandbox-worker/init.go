package main

import (
	"openvibe.network/agentsandbox/inside"
	"openvibe.network/agentsandbox/inside/bridge"
)

// maybeInit runs the init inside a sandbox, with the egress bridge, when
// this process was started as one (this binary re-executed, when the lean
// codes-sandbox-init is not used) and reports its exit code.
func maybeInit() (int, bool) {
	return inside.MaybeRun(inside.Hooks{Bridge: bridge.Run})
}
