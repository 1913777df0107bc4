package hostcheck

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Tables are the host-wide tables and memory every sandbox of a worker
// draws from, and what the rest of the host already holds of them.
type Tables struct {
	// FileMax is fs.file-max, FilesInUse the first field of fs.file-nr.
	FileMax, FilesInUse int64
	// PtyMax, PtyReserve and PtysInUse are kernel.pty.max, kernel.pty.reserve
	// (kept for the host's initial devpts) and kernel.pty.nr.
	PtyMax, PtyReserve, PtysInUse int64
	// PidMax is kernel.pid_max, Tasks the tasks now (/proc/loadavg).
	PidMax, Tasks int64
	// MemTotal is the host's RAM in bytes (/proc/meminfo).
	MemTotal int64
}

// ReadTables reads the host's Tables under h.Root. Errors name the file
// that could not be read or parsed.
func (h Host) ReadTables() (Tables, error) {
	var t Tables
	var err error
	num := func(rel string, field int, dst *int64) {
		if err != nil {
			return
		}
		var b []byte
		if b, err = os.ReadFile(filepath.Join(h.Root, rel)); err != nil {
			err = fmt.Errorf("read host tables: %w", err)
			return
		}
		f := strings.FieldsFunc(string(b), func(r rune) bool { return r == ' ' || r == '\t' || r == '\n' || r == '/' })
		if len(f) <= field {
			err = fmt.Errorf("read host tables: %s has no field %d", rel, field+1)
			return
		}
		if *dst, err = strconv.ParseInt(f[field], 10, 64); err != nil {
			err = fmt.Errorf("read host tables: %s: %w", rel, err)
		}
	}
	num("proc/sys/fs/file-max", 0, &t.FileMax)
	num("proc/sys/fs/file-nr", 0, &t.FilesInUse)
	num("proc/sys/kernel/pty/max", 0, &t.PtyMax)
	num("proc/sys/kernel/pty/reserve", 0, &t.PtyReserve)
	num("proc/sys/kernel/pty/nr", 0, &t.PtysInUse)
	num("proc/sys/kernel/pid_max", 0, &t.PidMax)
	num("proc/loadavg", 4, &t.Tasks) // "0.00 0.01 0.05 1/123 4567": running/total
	if err != nil {
		return Tables{}, err
	}
	b, rerr := os.ReadFile(filepath.Join(h.Root, "proc/meminfo"))
	if rerr != nil {
		return Tables{}, fmt.Errorf("read host tables: %w", rerr)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "MemTotal:"); ok {
			kb, perr := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if perr != nil {
				return Tables{}, fmt.Errorf("read host tables: proc/meminfo MemTotal: %w", perr)
			}
			t.MemTotal = kb << 10
		}
	}
	if t.MemTotal == 0 {
		return Tables{}, fmt.Errorf("read host tables: no MemTotal in proc/meminfo")
	}
	return t, nil
}

// Demand is the most a worker's sandboxes may take of the host's Tables.
type Demand struct {
	// Capacity is the number of sandboxes at once.
	Capacity int
	// Pids, MaxOpenFiles and MaxPtys are one sandbox's caps: its tasks,
	// each task's descriptors, its pseudo-terminals.
	Pids, MaxOpenFiles, MaxPtys int
	// MemoryBytes is the most memory one sandbox is charged for (its
	// limit, and on cgroup v1 its TCP buffers beside it).
	MemoryBytes int64
}

// Overcommits returns, for each table d can take more of than the host
// has free, one sentence with the sums and the fix; none when d fits.
// AIO contexts (fs.aio-max-nr) are not counted: sandboxes may not make
// any (the seccomp filter refuses io_setup).
func (t Tables) Overcommits(d Demand) []string {
	c := int64(d.Capacity)
	var out []string
	if files, free := c*int64(d.Pids)*int64(d.MaxOpenFiles), t.FileMax-t.FilesInUse; files > free {
		out = append(out, fmt.Sprintf("%d sandboxes × %d tasks × %d descriptors (--max-open-files) = %d open files, "+
			"but the host has %d free (fs.file-max %d − %d in use): lower --capacity, --pids or --max-open-files, "+
			"or raise fs.file-max (sysctl -w fs.file-max=%d)", c, d.Pids, d.MaxOpenFiles, files, free, t.FileMax, t.FilesInUse,
			t.FilesInUse+files+files/4))
	}
	if ptys, free := c*int64(d.MaxPtys), t.PtyMax-t.PtyReserve-t.PtysInUse; ptys > free {
		out = append(out, fmt.Sprintf("%d sandboxes × %d pseudo-terminals (--max-ptys) = %d, but the host has %d free "+
			"(kernel.pty.max %d − pty.reserve %d − %d in use): lower --capacity or --max-ptys, or raise kernel.pty.max",
			c, d.MaxPtys, ptys, free, t.PtyMax, t.PtyReserve, t.PtysInUse))
	}
	if pids, free := c*int64(d.Pids), t.PidMax-t.Tasks; pids > free {
		out = append(out, fmt.Sprintf("%d sandboxes × %d tasks (--pids) = %d, but the host has %d pids free "+
			"(kernel.pid_max %d − %d tasks): lower --capacity or --pids, or raise kernel.pid_max",
			c, d.Pids, pids, free, t.PidMax, t.Tasks))
	}
	if mem := c * d.MemoryBytes; mem > t.MemTotal {
		out = append(out, fmt.Sprintf("%d sandboxes × %d MB = %d MB of memory, but the host has %d MB: lower --capacity or --memory-mb",
			c, d.MemoryBytes>>20, mem>>20, t.MemTotal>>20))
	}
	return out
}
