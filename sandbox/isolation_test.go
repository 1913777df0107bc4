package sandbox

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"openvibe.network/agentsandbox"
)

func randomHex(tb testing.TB) string {
	tb.Helper()
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// TestIsolation proves each isolation fact from inside a real sandbox (and
// the host uid from outside), in a sandbox with the host's view and in one
// on the Debian test image.
func TestIsolation(t *testing.T) {
	for _, v := range views() {
		t.Run(v.name, func(t *testing.T) { testIsolation(t, v) })
	}
}

func testIsolation(t *testing.T, v view) {
	canary := "canary-" + randomHex(t)
	t.Setenv("CODES_SANDBOX_TEST_SECRET", canary)
	rootCanary := filepath.Join("/root", ".codes-sandbox-canary-"+randomHex(t))
	configDir := filepath.Join("/etc", "codes-sandbox-test-"+randomHex(t))
	for _, f := range []string{rootCanary, filepath.Join(configDir, "token")} {
		if err := os.MkdirAll(filepath.Dir(f), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte(canary), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { os.Remove(rootCanary); os.RemoveAll(configDir) })

	// A descriptor this process inherited without close-on-exec (as a
	// worker might from whoever started it) must not reach the sandbox.
	leakFD, err := syscall.Open(rootCanary, syscall.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(leakFD) })

	rt := v.runtime(t, Config{Capacity: 1})
	info := newBox(t, rt, v.options(t, Options{}))
	id := info.ID

	t.Run("OnlyStandardDescriptors", func(t *testing.T) {
		out := shOK(t, rt, id, "ls /proc/self/fd")
		if out != "0\n1\n2\n3\n" { // 3 is ls's own directory
			t.Fatalf("descriptors in a command: %q (the test leaked fd %d)", out, leakFD)
		}
	})

	t.Run("OnlyLoopback", func(t *testing.T) {
		out := shOK(t, rt, id, "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '; echo routes; tail -n +2 /proc/net/route; tail -n +2 /proc/net/ipv6_route | grep -v ' lo$' || true")
		if out != "lo\nroutes\n" {
			t.Fatalf("interfaces and routes: %q", out)
		}
		if r := sh(t, rt, id, "ls /sys/class/net"); r.ExitCode == 0 {
			t.Fatalf("/sys/class/net is visible: %q", r.stdout)
		}
	})
	t.Run("HostLoopbackUnreachable", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		port := ln.Addr().(*net.TCPAddr).Port
		for _, argv := range [][]string{
			{"/bin/bash", "-c", fmt.Sprintf("exec 3<>/dev/tcp/127.0.0.1/%d", port)},
			{"python3", "-c", fmt.Sprintf("import socket; socket.create_connection(('127.0.0.1', %d), timeout=5)", port)},
		} {
			r := run(t, rt, id, agentsandbox.ExecRequest{Argv: argv})
			if r.ExitCode == 0 {
				t.Errorf("%q connected to the host's loopback listener", argv)
			}
		}
		if pendingConn(t, ln) {
			t.Fatal("the host listener accepted a connection from the sandbox")
		}
	})
	t.Run("CleanEnvironment", func(t *testing.T) {
		out := shOK(t, rt, id, "env; for f in /proc/[0-9]*/environ; do cat $f 2>/dev/null; echo; done; echo checked")
		if strings.Contains(out, canary) || !strings.Contains(out, "checked") {
			t.Fatalf("the worker's secret reached the sandbox:\n%s", out)
		}
		// bubblewrap itself runs with an empty environment on the host side.
		pids, err := rt.HostPids(id)
		if err != nil {
			t.Fatal(err)
		}
		for _, pid := range pids {
			env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
			if strings.Contains(string(env), canary) {
				t.Fatalf("host pid %d of the sandbox has the secret in its environment", pid)
			}
		}
	})
	t.Run("NoHostFiles", func(t *testing.T) {
		paths := []string{rootCanary, filepath.Join(configDir, "token"), configDir, "/work", "/run/codes-sandbox"}
		if v.image == nil {
			// The image has its own /root, /home, /var and /etc/shadow.
			paths = append(paths, "/root", "/home", "/run", "/var", "/etc/shadow", "/etc/ssh", "/etc/gitconfig", "/etc/machine-id", "/etc/environment")
		}
		out := shOK(t, rt, id, "ls -a / ; for f in "+strings.Join(paths, " ")+"; do test -e $f && echo VISIBLE $f; done; true")
		if strings.Contains(out, "VISIBLE") {
			t.Fatalf("host files visible:\n%s", out)
		}
		got := strings.Fields(out)
		want := []string{".", "..", ".init", ".sandbox", "bin", "dev", "etc", "lib", "lib64", "proc", "sbin", "tmp", "usr", "workspace"}
		if v.image != nil {
			want = append([]string{".", "..", ".init", "workspace", "proc", "dev", "tmp"}, v.topLevel(t)...)
		}
		for _, name := range got {
			if !slices.Contains(want, name) && (v.image != nil || !strings.HasPrefix(name, "lib")) {
				t.Errorf("unexpected top-level entry %q in %q", name, got)
			}
		}
	})
	t.Run("NoCapabilities", func(t *testing.T) {
		out := shOK(t, rt, id, "grep -E '^(Cap|NoNewPrivs|Seccomp:)' /proc/self/status")
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			k, v, _ := strings.Cut(line, ":")
			v = strings.TrimSpace(v)
			want := "0000000000000000"
			switch k {
			case "NoNewPrivs":
				want = "1"
			case "Seccomp":
				want = "2"
			}
			if v != want {
				t.Errorf("%s is %s, want %s", k, v, want)
			}
		}
		if !strings.Contains(out, "CapAmb") || !strings.Contains(out, "Seccomp") {
			t.Fatalf("status lines missing: %q", out)
		}
	})
	t.Run("SeccompAndNamespacesRefused", func(t *testing.T) {
		for _, cmd := range []string{"unshare -U true", "unshare -n true", "unshare -m true", "mount -t tmpfs x /tmp"} {
			if r := sh(t, rt, id, cmd); r.ExitCode == 0 {
				t.Errorf("%q succeeded", cmd)
			}
		}
	})
	t.Run("HostProcessesInvisible", func(t *testing.T) {
		out := shOK(t, rt, id, "for p in /proc/[0-9]*; do echo $(basename $p) $(cat $p/comm); done")
		hostInit, _ := os.ReadFile("/proc/1/comm")
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			f := strings.Fields(line)
			if len(f) == 2 && f[0] == "1" && f[1] == strings.TrimSpace(string(hostInit)) && f[1] != "bwrap" {
				t.Fatalf("the host's init is visible: %q", line)
			}
			if len(f) == 2 && f[1] == "go" {
				t.Fatalf("a host process is visible: %q", line)
			}
		}
		if n := strings.Count(out, "\n"); n > 8 {
			t.Fatalf("%d processes visible, want only the sandbox's:\n%s", n, out)
		}
	})
	t.Run("ReadOnlyOS", func(t *testing.T) {
		if v.image != nil {
			// The image's root is the sandbox's to change: every write goes
			// to its upper layer, in its tmpfs, and the image is untouched.
			before := v.digest(t)
			shOK(t, rt, id, "echo x > /usr/x && echo x > /etc/x && echo x >> /etc/passwd && echo x > /x && echo x > /bin/x")
			if after := v.digest(t); after != before {
				t.Error("a write in the sandbox changed the image")
			}
			return
		}
		for _, f := range []string{"/usr/x", "/etc/x", "/etc/passwd", "/x", "/bin/x"} {
			if r := sh(t, rt, id, "echo x > "+f); r.ExitCode == 0 {
				t.Errorf("%s is writable", f)
			}
		}
		shOK(t, rt, id, "echo x > /workspace/x && echo y > /tmp/y")
	})
	t.Run("Programs", func(t *testing.T) {
		for _, argv := range [][]string{
			{"sh", "-c", "true"}, {"awk", "BEGIN{print 1}"}, {"python3", "-c", "print(1)"},
			{"perl", "-e", "print 1"}, {"git", "--version"}, {"curl", "--version"},
		} {
			if _, err := os.Stat(filepath.Join(v.root(t), "usr/bin", argv[0])); err != nil {
				continue
			}
			if r := run(t, rt, id, agentsandbox.ExecRequest{Argv: argv}); r.ExitCode != 0 {
				t.Errorf("%q: exit %d: %s", argv, r.ExitCode, r.stderr)
			}
		}
		user := "sandbox"
		if v.image != nil {
			user = "root"
		}
		if out := shOK(t, rt, id, "head -c 27 /etc/ssl/certs/ca-certificates.crt; echo; whoami; echo ~"); out != "-----BEGIN CERTIFICATE-----\n"+user+"\n/workspace\n" {
			t.Errorf("user and home: %q", out)
		}
	})
	t.Run("HostUID", func(t *testing.T) {
		pids, err := rt.HostPids(id)
		if err != nil || len(pids) < 2 {
			t.Fatalf("host pids %v: %v", pids, err)
		}
		for _, pid := range pids {
			uid, err := hostUIDOf(pid)
			if err != nil {
				t.Fatal(err)
			}
			if uid == 0 || uid != info.HostUID {
				t.Errorf("host pid %d runs as uid %d, want %d", pid, uid, info.HostUID)
			}
		}
	})
}

// hostUIDOf returns the real uid of a host process.
func hostUIDOf(pid int) (int, error) {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(st), "\n") {
		if v, ok := strings.CutPrefix(line, "Uid:"); ok {
			f := strings.Fields(v)
			for _, x := range f {
				if x != f[0] {
					return 0, fmt.Errorf("pid %d has mixed uids %q", pid, v)
				}
			}
			return strconv.Atoi(f[0])
		}
	}
	return 0, fmt.Errorf("pid %d: no Uid line", pid)
}
