package hostcheck

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fakeTables writes the files ReadTables reads under a new root.
func fakeTables(tb testing.TB, files map[string]string) Host {
	tb.Helper()
	root := tb.TempDir()
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	return Host{Root: root}
}

// hostFiles are a 23 GB host's tables (this project's test machine).
func hostFiles() map[string]string {
	return map[string]string{
		"proc/sys/fs/file-max": "2466286\n", "proc/sys/fs/file-nr": "4636\t0\t2466286\n",
		"proc/sys/kernel/pty/max": "4096\n", "proc/sys/kernel/pty/reserve": "1024\n", "proc/sys/kernel/pty/nr": "3\n",
		"proc/sys/kernel/pid_max": "32768\n", "proc/loadavg": "0.10 0.20 0.30 2/346 31316\n",
		"proc/meminfo": "MemTotal:       24684544 kB\nMemFree:        19881916 kB\n",
	}
}

func TestReadTables(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		got, err := fakeTables(t, hostFiles()).ReadTables()
		if err != nil {
			t.Fatal(err)
		}
		want := Tables{FileMax: 2466286, FilesInUse: 4636, PtyMax: 4096, PtyReserve: 1024, PtysInUse: 3,
			PidMax: 32768, Tasks: 346, MemTotal: 24684544 << 10}
		if got != want {
			t.Fatalf("got %+v, want %+v", got, want)
		}
	})
	for _, tc := range []struct{ name, file, content, says string }{
		{"ErrMissing", "proc/sys/kernel/pid_max", "", "pid_max"},
		{"ErrGarbage", "proc/sys/fs/file-nr", "many\n", "file-nr"},
		{"ErrShortLoadavg", "proc/loadavg", "0.1 0.2\n", "loadavg has no field 5"},
		{"ErrNoMemTotal", "proc/meminfo", "MemFree: 1 kB\n", "no MemTotal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := hostFiles()
			if tc.content == "" {
				delete(files, tc.file)
			} else {
				files[tc.file] = tc.content
			}
			_, err := fakeTables(t, files).ReadTables()
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("got %v, want an error saying %q", err, tc.says)
			}
		})
	}
}

func TestOvercommits(t *testing.T) {
	host := Tables{FileMax: 2466286, FilesInUse: 4636, PtyMax: 4096, PtyReserve: 1024, PtysInUse: 3,
		PidMax: 32768, Tasks: 346, MemTotal: 24684544 << 10}
	small := Tables{FileMax: 300000, FilesInUse: 1000, PtyMax: 4096, PtyReserve: 1024, PidMax: 4194304, Tasks: 100,
		MemTotal: 3 << 30}
	defaults := Demand{Capacity: 2, Pids: 256, MaxOpenFiles: 4096, MaxPtys: 32, MemoryBytes: 2048 << 20}
	with := func(f func(*Demand)) Demand { d := defaults; f(&d); return d }
	for _, tc := range []struct {
		name   string
		tables Tables
		demand Demand
		want   []string // the start of each sentence
	}{
		{"DefaultsFit", host, defaults, nil},
		{"DefaultsV1Fit", host, with(func(d *Demand) { d.MemoryBytes += d.MemoryBytes / 4 }), nil},
		{"IssueCapacity100Memory8192", host, with(func(d *Demand) { d.Capacity, d.MemoryBytes = 100, 8192<<20 }), []string{
			"100 sandboxes × 256 tasks × 4096 descriptors (--max-open-files) = 104857600 open files, but the host has 2461650 free (fs.file-max 2466286 − 4636 in use)",
			"100 sandboxes × 32 pseudo-terminals (--max-ptys) = 3200, but the host has 3069 free (kernel.pty.max 4096 − pty.reserve 1024 − 3 in use)",
			"100 sandboxes × 8192 MB = 819200 MB of memory, but the host has 24106 MB: lower --capacity or --memory-mb",
		}},
		{"FilesExactlyFit", Tables{FileMax: 2*256*4096 + 10, FilesInUse: 10, PtyMax: 4096, PidMax: 32768, MemTotal: 8 << 30}, defaults, nil},
		{"FilesOneOver", Tables{FileMax: 2*256*4096 + 10, FilesInUse: 11, PtyMax: 4096, PidMax: 32768, MemTotal: 8 << 30}, defaults, []string{
			"2 sandboxes × 256 tasks × 4096 descriptors (--max-open-files) = 2097152 open files, but the host has 2097151 free",
		}},
		{"PidsOver", host, with(func(d *Demand) {
			d.Capacity, d.Pids, d.MaxOpenFiles, d.MaxPtys, d.MemoryBytes = 40, 1024, 32, 1, 16<<20
		}), []string{
			"40 sandboxes × 1024 tasks (--pids) = 40960, but the host has 32422 pids free (kernel.pid_max 32768 − 346 tasks)",
		}},
		{"SmallGuest", small, defaults, []string{
			"2 sandboxes × 256 tasks × 4096 descriptors (--max-open-files) = 2097152 open files, but the host has 299000 free",
			"2 sandboxes × 2048 MB = 4096 MB of memory, but the host has 3072 MB",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.tables.Overcommits(tc.demand)
			if len(got) != len(tc.want) || slices.ContainsFunc(got, func(s string) bool {
				return !strings.HasPrefix(s, tc.want[slices.Index(got, s)])
			}) {
				t.Fatalf("got %q, want sentences starting %q", got, tc.want)
			}
		})
	}
}
