package agentsandbox

// Usage is what a sandbox uses now, read from its cgroup and its writable
// space.
type Usage struct {
	// MemoryBytes is its memory now, the pages of its files included;
	// MemoryPeakBytes the most it has used (0 where the kernel does not
	// keep it).
	MemoryBytes     int64 `json:"memory_bytes"`
	MemoryPeakBytes int64 `json:"memory_peak_bytes"`
	// CPUSeconds is the CPU time its processes used (0 where the kernel
	// does not account it).
	CPUSeconds float64 `json:"cpu_seconds"`
	// Pids is its number of tasks.
	Pids int `json:"pids"`
	// OOMKills counts its processes the memory limit killed (on a cgroup
	// v1 kernel without that counter: the times the limit was reached), a
	// browser's crashed page among them.
	OOMKills int `json:"oom_kills"`
	// WorkspaceBytes is what its writable space (the workspace, /tmp and
	// /dev/shm together, bounded by Limits.DiskMB) holds.
	WorkspaceBytes int64 `json:"workspace_bytes"`
}
