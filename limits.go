package agentsandbox

import "time"

// Time-box bounds: how long a sandbox lives, counted from when it accepts
// commands. The check-in reports them as limits.time_box_minutes.
const (
	DefaultTimeBox = 5 * time.Minute
	MaxTimeBox     = 30 * time.Minute
)

// Default limits of a sandbox.
const (
	DefaultMemoryMB   = 2048
	DefaultDiskMB     = 512
	DefaultPids       = 256
	DefaultCPUPercent = 100
)

// Limits of a sandbox; zero fields take the defaults.
type Limits struct {
	// MemoryMB bounds the sandbox's memory, its workspace's pages included
	// (default 2048).
	MemoryMB int `json:"memory_mb"`
	// DiskMB is the size of the sandbox's writable space: the workspace,
	// /tmp and /dev/shm together (default 512).
	DiskMB int `json:"disk_mb"`
	// Pids bounds the sandbox's tasks (default 256).
	Pids int `json:"pids"`
	// CPUPercent is a share of one core (default 100).
	CPUPercent int `json:"cpu_percent"`
}

// WithDefaults returns l with every zero field set to its default.
func (l Limits) WithDefaults() Limits {
	for _, f := range []struct {
		v   *int
		def int
	}{
		{&l.MemoryMB, DefaultMemoryMB}, {&l.DiskMB, DefaultDiskMB},
		{&l.Pids, DefaultPids}, {&l.CPUPercent, DefaultCPUPercent},
	} {
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	return l
}

// EgressPorts returns the only destination ports the egress guard allows,
// in order. The slice is the caller's own.
func EgressPorts() []uint16 { return []uint16{80, 443} }
