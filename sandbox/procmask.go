package sandbox

import (
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
)

// ProcMask is what every sandbox's fresh /proc hides of the host: the
// files bound over by an empty read-only /dev/null and the directories
// covered by an empty read-only tmpfs, each named relative to /proc. It
// follows runc's masked paths (kcore, keys, latency_stats, timer_list,
// timer_stats, sched_debug, acpi, asound, scsi), adds what names or
// fingerprints the host (cmdline, config.gz, kallsyms, key-users, the
// per-CPU interrupt counters interrupts and softirqs) and covers fs
// (the host's file systems and disks; runc makes it read-only, which
// bubblewrap can only do by binding the host's own /proc/fs). Only what
// the host's kernel has is listed: a bind over a missing entry fails
// bubblewrap. The host-wide counters programs read (loadavg, stat,
// meminfo, pressure, diskstats, uptime, cpuinfo) stay (see
// docs/sandbox.md, "What /proc shows").
type ProcMask struct {
	Files []string
	Dirs  []string
}

// Entries of /proc a sandbox's /proc hides (see ProcMask).
var (
	maskedProcFiles = []string{"cmdline", "config.gz", "interrupts", "kallsyms", "kcore", "key-users", "keys",
		"latency_stats", "sched_debug", "softirqs", "timer_list", "timer_stats"}
	maskedProcDirs = []string{"acpi", "asound", "fs", "scsi"}
)

// hostProcMask is the ProcMask of the host whose /proc is at proc: the
// masked entries it has, as the kind it has them (a file masked as a
// directory or the other way fails bubblewrap).
func hostProcMask(proc string) ProcMask {
	var m ProcMask
	for _, names := range []struct {
		names []string
		dir   bool
		out   *[]string
	}{{maskedProcFiles, false, &m.Files}, {maskedProcDirs, true, &m.Dirs}} {
		for _, n := range names.names {
			if fi, err := os.Lstat(filepath.Join(proc, n)); err == nil && fi.IsDir() == names.dir {
				*names.out = append(*names.out, n)
			}
		}
	}
	return m
}

// bootIDPath is the kernel's boot id as /proc shows it; every sandbox sees
// its own random one there (boxBootID).
const bootIDPath = "/proc/sys/kernel/random/boot_id"

// writeBootID writes a random boot id (a version 4 UUID, as the kernel's)
// to path, root-owned and read-only: the file a sandbox sees at
// bootIDPath, so that no two sandboxes, and no sandbox and its host, can
// be told apart or linked by the kernel's.
func writeBootID(path string) error {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	id := fmt.Sprintf("%x-%x-%x-%x-%x\n", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
	if err := os.WriteFile(path, []byte(id), 0o444); err != nil {
		return fmt.Errorf("sandbox dir: boot id: %w", err)
	}
	return nil
}
