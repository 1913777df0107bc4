package main

import (
	"fmt"
	"log/slog"
	"os"
	"strings"

	"openvibe.network/agentsandbox/sandbox/hostcheck"
)

// workerOOMScoreAdj is the worker's own oom_score_adj: below every other
// process's default, far below its sandboxes' (sandbox.SandboxOOMScoreAdj),
// so that when the host runs out of memory the kernel kills sandboxes, not
// the worker that wipes them and checks in.
const workerOOMScoreAdj = -500

// lowerOwnOOMScore sets the worker's oom_score_adj to workerOOMScoreAdj;
// without CAP_SYS_RESOURCE the kernel refuses, which is logged.
func lowerOwnOOMScore(log *slog.Logger) {
	if err := os.WriteFile("/proc/self/oom_score_adj", []byte(fmt.Sprint(workerOOMScoreAdj)), 0); err != nil {
		log.Warn("cannot lower the worker's oom_score_adj (it needs CAP_SYS_RESOURCE): under host memory pressure the kernel may kill it "+
			"as readily as any process; sandboxes still have 1000, but may lower theirs to 0", "want", workerOOMScoreAdj, "err", err.Error())
	}
}

// checkHostTables holds capacity × the per-sandbox caps of cfg against
// the tables of host (hostcheck.Tables.Overcommits; on cgroup v1, where
// TCP buffers are charged beside the memory limit, a quarter more memory
// per sandbox). When they do not fit it returns a configError with the
// sums and the fix, or with cfg.overcommit only logs a warning per table.
func checkHostTables(host hostcheck.Host, cfg stackConfig, cgroupV1 bool, log *slog.Logger) error {
	t, err := host.ReadTables()
	if err != nil {
		log.Warn("cannot hold the capacity against the host's tables", "err", err.Error())
		return nil
	}
	mem := int64(cfg.limits.WithDefaults().MemoryMB) << 20
	if cgroupV1 {
		mem += mem / 4
	}
	over := t.Overcommits(hostcheck.Demand{Capacity: cfg.capacity, Pids: cfg.limits.WithDefaults().Pids,
		MaxOpenFiles: cfg.maxOpenFiles, MaxPtys: cfg.maxPtys, MemoryBytes: mem})
	if len(over) == 0 {
		return nil
	}
	if cfg.overcommit {
		for _, o := range over {
			log.Warn("the host cannot hold every sandbox at its caps (--overcommit: starting anyway)", "overcommit", o)
		}
		return nil
	}
	return configError{fmt.Errorf("the host cannot hold %d sandboxes at their caps: %s; or give --overcommit to start anyway",
		cfg.capacity, strings.Join(over, "; "))}
}
