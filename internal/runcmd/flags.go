package runcmd

import (
	"errors"
	"flag"
	"fmt"
	"strings"

	"openvibe.network/agentsandbox"
)

// LimitFlags are the sandbox limit flags of run and of the worker's stack
// (where they are every sandbox's default and the most one may ask for).
type LimitFlags struct{ l agentsandbox.Limits }

// Register defines --memory-mb, --disk-mb, --pids and --cpu-percent on fs,
// with the defaults; what ends each flag's help, e.g. "of the sandbox".
func (f *LimitFlags) Register(fs *flag.FlagSet, what string) {
	fs.IntVar(&f.l.MemoryMB, "memory-mb", agentsandbox.DefaultMemoryMB, "memory limit in MB, files in the workspace included ("+what+")")
	fs.IntVar(&f.l.DiskMB, "disk-mb", agentsandbox.DefaultDiskMB, "size in MB of the writable space: /workspace, /tmp and /dev/shm ("+what+")")
	fs.IntVar(&f.l.Pids, "pids", agentsandbox.DefaultPids, "tasks (processes and threads) limit ("+what+")")
	fs.IntVar(&f.l.CPUPercent, "cpu-percent", agentsandbox.DefaultCPUPercent, "CPU limit in percent of one core ("+what+")")
}

// Limits returns the limits, or an error naming the flag out of range.
func (f *LimitFlags) Limits() (agentsandbox.Limits, error) {
	if err := f.l.Check(); err != nil {
		var le *agentsandbox.LimitError
		if errors.As(err, &le) {
			return f.l, fmt.Errorf("--%s is %d; give at least %d", strings.ReplaceAll(le.Field, "_", "-"), le.Value, le.Min)
		}
		return f.l, err
	}
	return f.l, nil
}

// envFlags collects repeated --env K=V.
type envFlags map[string]string

func (e envFlags) String() string { return "" }

// Set takes K=V, refusing a name the worker API would refuse.
func (e envFlags) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok {
		return fmt.Errorf("want K=V, got %q", s)
	}
	if !agentsandbox.ValidEnvName(k) {
		return fmt.Errorf("%q is not a valid variable name (letters, digits and _, not starting with a digit)", k)
	}
	if strings.IndexByte(v, 0) >= 0 {
		return fmt.Errorf("the value of %s contains a NUL byte", k)
	}
	e[k] = v
	return nil
}
