package agentsandbox

import (
	"fmt"
	"time"
)

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
	return l.Or(Limits{MemoryMB: DefaultMemoryMB, DiskMB: DefaultDiskMB, Pids: DefaultPids, CPUPercent: DefaultCPUPercent})
}

// EgressPorts returns the only destination ports the egress guard allows,
// in order. The slice is the caller's own.
func EgressPorts() []uint16 { return []uint16{80, 443} }

// Minimums of Limits: less and a sandbox cannot start (its init and
// bubblewrap use about 8 tasks and a few MB).
const (
	MinMemoryMB   = 16
	MinDiskMB     = 1
	MinPids       = 16
	MinCPUPercent = 1
)

// Minimums of a browser sandbox's limits: Chromium's processes and their
// threads, and its memory with one page loaded, fit with room to spare
// (docs/browser.md gives what it was measured to use).
const (
	MinBrowserMemoryMB = 512
	MinBrowserDiskMB   = 128
	MinBrowserPids     = 256
)

// LimitError says which limit is out of range and what is allowed.
type LimitError struct {
	// Field is the limit's JSON name (memory_mb, disk_mb, pids, cpu_percent).
	Field string
	Value int
	// Min and Max bound it; Max 0 means no upper bound.
	Min, Max int
	// Browser says that Min is a browser sandbox's minimum.
	Browser bool
}

// Error implements error: "memory_mb is 4096; give 16 to 2048".
func (e *LimitError) Error() string {
	if e.Browser {
		return fmt.Sprintf("%s is %d; a browser sandbox needs at least %d", e.Field, e.Value, e.Min)
	}
	if e.Max == 0 {
		return fmt.Sprintf("%s is %d; give at least %d", e.Field, e.Value, e.Min)
	}
	return fmt.Sprintf("%s is %d; give %d to %d", e.Field, e.Value, e.Min, e.Max)
}

// fields lists l's limits with their JSON names and minimums.
func (l *Limits) fields() []struct {
	name string
	v    *int
	min  int
} {
	return []struct {
		name string
		v    *int
		min  int
	}{
		{"memory_mb", &l.MemoryMB, MinMemoryMB}, {"disk_mb", &l.DiskMB, MinDiskMB},
		{"pids", &l.Pids, MinPids}, {"cpu_percent", &l.CPUPercent, MinCPUPercent},
	}
}

// Check returns a *LimitError for the first limit of l below its minimum,
// zero included: limits a worker is configured with.
func (l Limits) Check() error {
	for _, f := range l.fields() {
		if *f.v < f.min {
			return &LimitError{Field: f.name, Value: *f.v, Min: f.min}
		}
	}
	return nil
}

// CheckBrowser returns a *LimitError for the first limit of l (with its
// defaults) below a browser sandbox's minimum.
func (l Limits) CheckBrowser() error {
	mins := map[string]int{"memory_mb": MinBrowserMemoryMB, "disk_mb": MinBrowserDiskMB, "pids": MinBrowserPids}
	for _, f := range l.fields() {
		if m := mins[f.name]; *f.v < m {
			return &LimitError{Field: f.name, Value: *f.v, Min: m, Browser: true}
		}
	}
	return nil
}

// Within returns a *LimitError for the first limit of l outside its
// minimum and the same limit of bounds: limits a sandbox asks for of a
// worker whose limits are bounds. A zero limit of l is allowed (it takes
// the bound).
func (l Limits) Within(bounds Limits) error {
	bf := bounds.fields()
	for i, f := range l.fields() {
		if *f.v != 0 && (*f.v < f.min || *f.v > *bf[i].v) {
			return &LimitError{Field: f.name, Value: *f.v, Min: f.min, Max: *bf[i].v}
		}
	}
	return nil
}

// Or returns l with every zero limit set to that of def.
func (l Limits) Or(def Limits) Limits {
	df := def.fields()
	for i, f := range l.fields() {
		if *f.v == 0 {
			*f.v = *df[i].v
		}
	}
	return l
}
