package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"openvibe.network/agentsandbox"
)

// TestProcMask proves, from inside real sandboxes in both views, that /proc
// shows nothing of the host's kernel-wide files a runc container does not
// see (each masked file empty, each masked directory empty, or absent),
// that the boot id is the sandbox's own, that the mount table names no
// host directory of the runtime or the sandbox, and that the programs that
// read /proc still work.
func TestProcMask(t *testing.T) {
	for _, v := range views() {
		t.Run(v.name, func(t *testing.T) { testProcMask(t, v) })
	}
}

func testProcMask(t *testing.T, v view) {
	rt := v.runtime(t, Config{Capacity: 2})
	a := newBox(t, rt, v.options(t, Options{}))
	b := newBox(t, rt, v.options(t, Options{}))

	t.Run("Masked", func(t *testing.T) {
		var paths []string
		for _, f := range maskedProcFiles {
			paths = append(paths, "/proc/"+f)
		}
		for _, d := range maskedProcDirs {
			paths = append(paths, "/proc/"+d)
		}
		paths = append(paths, "/sys/firmware")
		// Each path: "absent", or its size in bytes (a file) or entries (a
		// directory), 0 when masked.
		r := run(t, rt, a.ID, agentsandbox.ExecRequest{Argv: append([]string{"/bin/sh", "-c", `for p in "$@"; do
			if [ -d "$p" ]; then echo "$p $(ls -A "$p" | wc -l)"
			elif [ -e "$p" ]; then echo "$p $(cat "$p" 2>/dev/null | wc -c)"
			else echo "$p absent"; fi
		done`, "sh"}, paths...)})
		if r.ExitCode != 0 {
			t.Fatalf("exit %d: %s", r.ExitCode, r.stderr)
		}
		got := strings.Split(strings.TrimSpace(r.stdout), "\n")
		var want []string // every path empty, or absent where the kernel has none
		for i, p := range paths {
			if i < len(got) && got[i] == p+" absent" {
				want = append(want, got[i])
			} else {
				want = append(want, p+" 0")
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("masked paths (path, bytes or entries):\n got %q\nwant %q", got, want)
		}
	})

	t.Run("ReadOnly", func(t *testing.T) {
		for _, p := range []string{"/proc/sysrq-trigger", "/proc/sys/kernel/hostname", "/proc/sys/net/ipv4/ip_forward", bootIDPath, "/proc/acpi/x", "/proc/fs/x", "/proc/kcore"} {
			if r := sh(t, rt, a.ID, "echo x > "+p); r.ExitCode == 0 {
				t.Errorf("%s is writable in the sandbox", p)
			}
		}
	})

	t.Run("OwnBootID", func(t *testing.T) {
		host, err := os.ReadFile(bootIDPath)
		if err != nil {
			t.Fatal(err)
		}
		ids := []string{strings.TrimSpace(string(host))}
		for _, id := range []string{a.ID, b.ID} {
			got := strings.TrimSpace(shOK(t, rt, id, "cat "+bootIDPath))
			if len(got) != 36 || strings.Count(got, "-") != 4 {
				t.Fatalf("boot id %q is not a UUID", got)
			}
			ids = append(ids, got)
		}
		if ids[0] == ids[1] || ids[0] == ids[2] || ids[1] == ids[2] {
			t.Fatalf("boot ids of the host and two sandboxes: %q, want three different", ids)
		}
	})

	t.Run("MountTableNamesNoHostDir", func(t *testing.T) {
		out := shOK(t, rt, a.ID, "cat /proc/self/mountinfo /proc/self/mounts")
		for _, s := range []string{rt.cfg.StateDir, rt.dir, rt.name, a.ID, b.ID, rt.etcDir, rt.init} {
			if strings.Contains(out, s) {
				t.Errorf("the sandbox's mount table names %q:\n%s", s, out)
			}
		}
	})

	t.Run("ProgramsWork", func(t *testing.T) {
		cmds := [][]string{
			{"nproc"},
			{"python3", "-c", "import os; assert os.cpu_count() >= 1; print(os.getloadavg()); print(open('/proc/meminfo').read()[:40]); print(open('/proc/uptime').read())"},
		}
		if v.image == nil { // the test image has no procps
			cmds = append(cmds, []string{"ps", "-e"}, []string{"free"}, []string{"uptime"}, []string{"top", "-b", "-n", "1"})
		}
		for _, argv := range cmds {
			if r := run(t, rt, a.ID, agentsandbox.ExecRequest{Argv: argv}); r.ExitCode != 0 || r.stdout == "" {
				t.Errorf("%q: exit %d, stdout %q, stderr %q", argv, r.ExitCode, r.stdout, r.stderr)
			}
		}
	})
}

// TestHostProcMask: only the masked entries the host has are listed, each
// as the kind it is (a bind of a file over a directory fails bubblewrap).
func TestHostProcMask(t *testing.T) {
	proc := t.TempDir()
	for _, f := range []string{"cmdline", "kcore", "acpi", "loadavg"} { // acpi a file here: not masked
		if err := os.WriteFile(filepath.Join(proc, f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"fs", "keys", "sys"} { // keys a directory here: not masked
		if err := os.Mkdir(filepath.Join(proc, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	want := ProcMask{Files: []string{"cmdline", "kcore"}, Dirs: []string{"fs"}}
	if diff := cmp.Diff(want, hostProcMask(proc)); diff != "" {
		t.Fatalf("hostProcMask (-want +got):\n%s", diff)
	}
}
