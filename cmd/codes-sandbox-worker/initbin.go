package main

import (
	"debug/buildinfo"
	"errors"
	"io/fs"
	"log/slog"

	"openvibe.network/agentsandbox/internal/sibling"
)

// leanInitName is the lean init binary (cmd/codes-sandbox-init) that the
// worker's sandboxes run when it lies next to the worker.
const leanInitName = "codes-sandbox-init"

// initBinary returns the program the runtime starts inside each sandbox: the
// lean init next to this program when sibling.Find accepts it, which starts
// in a fraction of the worker's time, else "" (the runtime's default: this
// program, re-executed). It logs which one sandboxes run, and why a lean init
// that is present is not used.
func initBinary(log *slog.Logger) string {
	p, err := sibling.Find(leanInitName, buildinfo.ReadFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		log.Info("sandboxes run this binary as their init", "reason", leanInitName+" is not next to it")
		return ""
	case err != nil:
		log.Warn("sandboxes run this binary as their init", "reason", err.Error())
		return ""
	}
	log.Info("sandboxes run the lean init", "path", p)
	return p
}
