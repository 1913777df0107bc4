package sandbox

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/sandbox/control"
)

func testSpec() BwrapSpec {
	return BwrapSpec{
		InitBinary:  "/run/cs/rt-1/init",
		InitArgs:    []string{control.InitMarker},
		WritableDir: "/run/cs/rt-1/abc/fs",
		PtsDir:      "/run/cs/rt-1/abc/pts",
		EtcDir:      "/run/cs/etc-0123",
		UsrLinks:    map[string]string{"lib": "usr/lib", "bin": "usr/bin"},
		Hostname:    "sandbox",
		Env:         map[string]string{"PATH": "/usr/bin", "HOME": Workspace},
		SeccompFD:   3,
	}
}

// TestArgv compares whole option lists: the order matters (the writable
// binds and the init's bind must come before `--remount-ro /`, and /dev/pts
// and /dev/shm before `--remount-ro /dev`), and nothing may be added.
func TestArgv(t *testing.T) {
	base := []string{
		"--unshare-all", "--unshare-user", "--disable-userns",
		"--cap-drop", "ALL",
		"--new-session", "--die-with-parent", "--as-pid-1",
		"--uid", "1000", "--gid", "1000",
		"--hostname", "sandbox",
		"--clearenv",
		"--setenv", "HOME", "/workspace", "--setenv", "PATH", "/usr/bin",
		"--ro-bind", "/usr", "/usr",
		"--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
		"--ro-bind", "/run/cs/etc-0123", "/etc",
		"--proc", "/proc",
		"--dev", "/dev",
		"--dev-bind", "/run/cs/rt-1/abc/pts", "/dev/pts",
		"--bind", "/run/cs/rt-1/abc/fs/workspace", "/workspace",
		"--bind", "/run/cs/rt-1/abc/fs/tmp", "/tmp",
		"--bind", "/run/cs/rt-1/abc/fs/shm", "/dev/shm",
		"--ro-bind", "/run/cs/rt-1/init", "/.init",
		"--remount-ro", "/dev",
		"--remount-ro", "/",
		"--chdir", "/workspace",
		"--seccomp", "3",
	}
	initBind := slices.Index(base, "/run/cs/rt-1/init") - 1 // --ro-bind INIT /.init
	procEnd := slices.Index(base, "/proc") + 1              // the masks follow --proc /proc
	for _, tc := range []struct {
		name        string
		edit        func(*BwrapSpec)
		wantOptions []string
		wantCommand []string
	}{
		{"Init", nil, base, []string{"/.init", control.InitMarker}},
		{"Handshake", func(s *BwrapSpec) { s.InfoFD = 4 },
			append(slices.Clone(base), "--info-fd", "4"), []string{"/.init", control.InitMarker}},
		{"OneCommand", func(s *BwrapSpec) { s.InitArgs = []string{control.ExecMarker, "4096", "--", "sh", "-c", "--setenv"} },
			base, []string{"/.init", control.ExecMarker, "4096", "--", "sh", "-c", "--setenv"}},
		{"CappedByPrlimit", func(s *BwrapSpec) {
			s.Exec, s.BlockFD = []string{"/usr/bin/prlimit", "--nofile=64:64", "--core=0:0", "--", "sh", "-c", "--setenv"}, 5
		},
			slices.Concat(base[:initBind], base[initBind+3:], []string{"--block-fd", "5"}),
			[]string{"/usr/bin/prlimit", "--nofile=64:64", "--core=0:0", "--", "sh", "-c", "--setenv"}},
		{"EtcBinds", func(s *BwrapSpec) { s.EtcBinds = []string{"alternatives", "ssl/certs"} },
			slices.Concat(base[:33], []string{"--ro-bind", "/etc/alternatives", "/etc/alternatives", "--ro-bind", "/etc/ssl/certs", "/etc/ssl/certs"}, base[33:]),
			[]string{"/.init", control.InitMarker}},
		{"CABundle", func(s *BwrapSpec) {
			s.EtcBinds, s.CABundle = []string{"ssl/certs"}, "/run/cs/rt-1/abc/fs/ca-certificates.crt"
		},
			slices.Concat(base[:33], []string{"--ro-bind", "/etc/ssl/certs", "/etc/ssl/certs",
				"--ro-bind", "/run/cs/rt-1/abc/fs/ca-certificates.crt", "/etc/ssl/certs/ca-certificates.crt"}, base[33:]),
			[]string{"/.init", control.InitMarker}},
		{"CABundleImage", func(s *BwrapSpec) {
			s.CABundle, s.CABundleAlso = "/run/cs/rt-1/abc/fs/ca-certificates.crt", []string{"/etc/ssl/cert.pem"}
		},
			slices.Concat(base[:33], []string{"--ro-bind", "/run/cs/rt-1/abc/fs/ca-certificates.crt", "/etc/ssl/certs/ca-certificates.crt",
				"--ro-bind", "/run/cs/rt-1/abc/fs/ca-certificates.crt", "/etc/ssl/cert.pem"}, base[33:]),
			[]string{"/.init", control.InitMarker}},
		{"ProcMask", func(s *BwrapSpec) {
			s.ProcMask, s.BootID = ProcMask{Files: []string{"kcore", "keys"}, Dirs: []string{"acpi"}}, "/run/cs/rt-1/abc/fs/boot_id"
		},
			slices.Concat(base[:procEnd], []string{"--ro-bind", "/dev/null", "/proc/kcore", "--ro-bind", "/dev/null", "/proc/keys",
				"--tmpfs", "/proc/acpi", "--remount-ro", "/proc/acpi",
				"--ro-bind", "/run/cs/rt-1/abc/fs/boot_id", "/proc/sys/kernel/random/boot_id"}, base[procEnd:]),
			[]string{"/.init", control.InitMarker}},
		{"EnvValueLooksLikeAnOption", func(s *BwrapSpec) { s.Env = map[string]string{"X": "--bind"} },
			slices.Concat(base[:15], []string{"--setenv", "X", "--bind"}, base[21:]), []string{"/.init", control.InitMarker}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := testSpec()
			if tc.edit != nil {
				tc.edit(&spec)
			}
			options, command := Argv(spec)
			if diff := cmp.Diff(tc.wantOptions, options); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantCommand, command); diff != "" {
				t.Errorf("command (-want +got):\n%s", diff)
			}
		})
	}
}

func TestArgsFile(t *testing.T) {
	got := argsFile([]string{"--setenv", "K", "a b", ""})
	if want := "--setenv\x00K\x00a b\x00\x00"; string(got) != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestResolve(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      Options
		want    Options
		wantErr string
	}{
		{"Defaults", Options{}, Options{TimeBox: agentsandbox.DefaultTimeBox, Limits: agentsandbox.Limits{MemoryMB: 2048, DiskMB: 512, Pids: 256, CPUPercent: 100}}, ""},
		{"Given", Options{TimeBox: time.Minute, Limits: agentsandbox.Limits{MemoryMB: 64, DiskMB: 8, Pids: 16, CPUPercent: 50}},
			Options{TimeBox: time.Minute, Limits: agentsandbox.Limits{MemoryMB: 64, DiskMB: 8, Pids: 16, CPUPercent: 50}}, ""},
		{"MaxTimeBox", Options{TimeBox: agentsandbox.MaxTimeBox}, Options{TimeBox: agentsandbox.MaxTimeBox, Limits: agentsandbox.Limits{MemoryMB: 2048, DiskMB: 512, Pids: 256, CPUPercent: 100}}, ""},
		{"ErrTimeBoxLong", Options{TimeBox: agentsandbox.MaxTimeBox + time.Second}, Options{}, "time box"},
		{"ErrTimeBoxNegative", Options{TimeBox: -time.Second}, Options{}, "time box"},
		{"ErrPidsTooFew", Options{Limits: agentsandbox.Limits{Pids: 8}}, Options{}, "at least 16"},
		{"ErrMemoryTooSmall", Options{Limits: agentsandbox.Limits{MemoryMB: 4}}, Options{}, "at least 16"},
		{"ErrDiskNegative", Options{Limits: agentsandbox.Limits{DiskMB: -1}}, Options{}, "limit disk_mb is -1; give at least 1"},
		{"ErrEnvName", Options{Env: map[string]string{"": "x"}}, Options{}, "env"},
		{"ErrSecretsWithoutEgress", Options{Secrets: map[string]agentsandbox.Secret{"K": {Value: "v", Hosts: []string{"a.example"}}}}, Options{},
			"secrets need egress"},
		{"ErrSecretAlsoInEnv", Options{Egress: true, Env: map[string]string{"K": "x"}, Secrets: map[string]agentsandbox.Secret{"K": {Value: "v", Hosts: []string{"a.example"}}}},
			Options{}, "secret K is also in env"},
		{"ErrSecretNewline", Options{Egress: true, Secrets: map[string]agentsandbox.Secret{"K": {Value: "v\r\n", Hosts: []string{"a.example"}}}},
			Options{}, "CR or LF"},
		{"ErrCanaryNotSelfTest", Options{Egress: true, Secrets: map[string]agentsandbox.Secret{"K": {Value: "v", Hosts: []string{"a.example"}}},
			EgressCanary: &agentsandbox.EgressCanary{Host: "a.example"}}, Options{}, "an egress canary is the self-test's"},
		{"ErrCanaryWithoutSecrets", Options{Egress: true, SelfTest: true, EgressCanary: &agentsandbox.EgressCanary{Host: "a.example"}}, Options{},
			"an egress canary is the self-test's"},
		{"ErrEnvValueNUL", Options{Env: map[string]string{"K": "a\x00--bind"}}, Options{}, "NUL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := resolve(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got.TimeBox != tc.want.TimeBox || got.Limits != tc.want.Limits {
				t.Fatalf("got %+v %v, want %+v", got, err, tc.want)
			}
		})
	}
}

func TestWorkspaceRel(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		err      error
	}{
		{"a.txt", "a.txt", nil},
		{"a/./b/../c", "a/c", nil},
		{"/workspace/a", "a", nil},
		{"/workspace", ".", nil},
		{".", ".", nil},
		{"..", "", ErrPath},
		{"a/../../b", "", ErrPath},
		{"/etc/passwd", "", ErrPath},
		{"/workspacex/a", "", ErrPath},
		{"/workspace/../etc", "", ErrPath},
		{"", "", ErrPath},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := control.WorkspaceRel(tc.in)
			if got != tc.want || !errors.Is(err, tc.err) {
				t.Fatalf("control.WorkspaceRel(%q) = %q, %v; want %q, %v", tc.in, got, err, tc.want, tc.err)
			}
		})
	}
}

func TestFrames(t *testing.T) {
	var buf bytes.Buffer
	fw := control.NewWriter(&buf)
	big := bytes.Repeat([]byte("x"), control.MaxFrame+10)
	if err := fw.JSON(control.FrameRequest, control.Request{Op: control.OpExec, Argv: []string{"a"}}); err != nil {
		t.Fatal(err)
	}
	if err := control.CopyFrames(fw, bytes.NewReader(big)); err != nil {
		t.Fatal(err)
	}
	fr := control.NewReader(&buf)
	kind, p, err := fr.Next()
	if err != nil || kind != control.FrameRequest || !strings.Contains(string(p), `"op":"exec"`) {
		t.Fatalf("first frame %c %q %v", kind, p, err)
	}
	var got []byte
	for {
		kind, p, err := fr.Next()
		if err != nil {
			t.Fatal(err)
		}
		if kind == control.FrameEnd {
			break
		}
		got = append(got, p...)
	}
	if !bytes.Equal(got, big) {
		t.Fatalf("data: %d bytes, want %d", len(got), len(big))
	}
	if _, _, err := fr.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the end: %v", err)
	}
}

func TestEtcFiles(t *testing.T) {
	files := etcFiles("sandbox")
	for _, name := range []string{"passwd", "group", "hosts", "nsswitch.conf", "resolv.conf"} {
		if files[name] == "" {
			t.Errorf("no generated /etc/%s", name)
		}
	}
	if !strings.Contains(files["passwd"], "sandbox:x:1000:1000:sandbox:/workspace:") {
		t.Errorf("passwd: %q", files["passwd"])
	}
	if strings.Contains(files["passwd"], "root:x:0:0:root:/root") {
		t.Errorf("passwd points at /root: %q", files["passwd"])
	}
}
