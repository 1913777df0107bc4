package sandbox

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"openvibe.network/agentsandbox"
)

func testSpec() BwrapSpec {
	return BwrapSpec{
		InitBinary: "/run/cs/rt-1/init",
		InitArgs:   []string{initMarker, `{"ready_fd":4}`},
		ControlDir: "/run/cs/rt-1/abc",
		EtcDir:     "/run/cs/etc-0123",
		UsrLinks:   map[string]string{"lib": "usr/lib", "bin": "usr/bin"},
		DiskBytes:  512 << 20,
		TmpBytes:   64 << 20,
		Hostname:   "sandbox",
		Env:        map[string]string{"PATH": "/usr/bin", "HOME": Workspace},
		SeccompFD:  3,
	}
}

// hasSeq reports whether seq appears contiguously in argv.
func hasSeq(argv []string, seq ...string) bool {
	for i := 0; i+len(seq) <= len(argv); i++ {
		if slices.Equal(argv[i:i+len(seq)], seq) {
			return true
		}
	}
	return false
}

func TestArgv(t *testing.T) {
	for _, tc := range []struct {
		name   string
		edit   func(*BwrapSpec)
		want   [][]string // contiguous sequences that must appear
		absent []string   // arguments that must not appear
	}{
		{
			name: "Isolation",
			want: [][]string{
				{"--unshare-all", "--unshare-user", "--disable-userns"},
				{"--cap-drop", "ALL"}, {"--new-session"}, {"--die-with-parent"}, {"--as-pid-1"},
				{"--uid", "1000", "--gid", "1000"}, {"--clearenv"},
				{"--seccomp", "3"}, {"--hostname", "sandbox"},
			},
			absent: []string{"--share-net", "--cap-add", "--info-fd", "--block-fd"},
		},
		{
			name: "Filesystem",
			want: [][]string{
				{"--ro-bind", "/usr", "/usr"},
				{"--symlink", "usr/bin", "/bin"}, {"--symlink", "usr/lib", "/lib"},
				{"--ro-bind", "/run/cs/etc-0123", "/etc"},
				{"--proc", "/proc"}, {"--dev", "/dev"},
				{"--size", "67108864", "--tmpfs", "/tmp"},
				{"--size", "67108864", "--tmpfs", "/dev/shm"},
				{"--size", "536870912", "--tmpfs", "/workspace"},
				{"--bind", "/run/cs/rt-1/abc", "/.sandbox"},
				{"--ro-bind", "/run/cs/rt-1/init", "/.init"},
				{"--remount-ro", "/"}, {"--chdir", "/workspace"},
			},
			absent: []string{"/home", "/root", "/run", "/var", "/etc/shadow", "/etc/ssh", "/sys", "/"},
		},
		{
			name: "EnvironmentSorted",
			want: [][]string{{"--clearenv", "--setenv", "HOME", "/workspace", "--setenv", "PATH", "/usr/bin"}},
		},
		{
			name: "InitLast",
			want: [][]string{{"--", "/.init", initMarker, `{"ready_fd":4}`}},
		},
		{
			name: "EgressHandshake",
			edit: func(s *BwrapSpec) { s.InfoFD, s.BlockFD = 5, 6 },
			want: [][]string{{"--info-fd", "5"}, {"--block-fd", "6"}},
		},
		{
			name: "DiskSize",
			edit: func(s *BwrapSpec) { s.DiskBytes = 8 << 20 },
			want: [][]string{{"--size", "8388608", "--tmpfs", "/workspace"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := testSpec()
			if tc.edit != nil {
				tc.edit(&spec)
			}
			argv := Argv(spec)
			for _, seq := range tc.want {
				if !hasSeq(argv, seq...) {
					t.Errorf("argv lacks %q:\n%q", seq, argv)
				}
			}
			for _, a := range tc.absent {
				// "/" may appear only as the target of --remount-ro.
				for i, x := range argv {
					if x == a && !(a == "/" && i > 0 && argv[i-1] == "--remount-ro") {
						t.Errorf("argv has %q at %d:\n%q", a, i, argv)
					}
				}
			}
			if argv[len(argv)-3] != "/.init" {
				t.Errorf("the init is not the command: %q", argv[len(argv)-4:])
			}
		})
	}
}

func TestArgvHostPathsOnlyReadOnly(t *testing.T) {
	argv := Argv(testSpec())
	for i, a := range argv {
		if a == "--bind" && argv[i+2] != ControlDir {
			t.Errorf("writable bind of %q to %q", argv[i+1], argv[i+2])
		}
		if a == "--dev-bind" || a == "--dev-bind-try" || a == "--bind-try" {
			t.Errorf("argv has %s", a)
		}
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
		{"ErrEnvName", Options{Env: map[string]string{"": "x"}}, Options{}, "env"},
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
			got, err := workspaceRel(tc.in)
			if got != tc.want || !errors.Is(err, tc.err) {
				t.Fatalf("workspaceRel(%q) = %q, %v; want %q, %v", tc.in, got, err, tc.want, tc.err)
			}
		})
	}
}

func TestFrames(t *testing.T) {
	var buf bytes.Buffer
	fw := &frameWriter{w: &buf}
	big := bytes.Repeat([]byte("x"), maxFrame+10)
	if err := fw.json(frameRequest, controlRequest{Op: opExec, Argv: []string{"a"}}); err != nil {
		t.Fatal(err)
	}
	if err := copyFrames(fw, bytes.NewReader(big)); err != nil {
		t.Fatal(err)
	}
	fr := newFrameReader(&buf)
	kind, p, err := fr.next()
	if err != nil || kind != frameRequest || !strings.Contains(string(p), `"op":"exec"`) {
		t.Fatalf("first frame %c %q %v", kind, p, err)
	}
	var got []byte
	for {
		kind, p, err := fr.next()
		if err != nil {
			t.Fatal(err)
		}
		if kind == frameEnd {
			break
		}
		got = append(got, p...)
	}
	if !bytes.Equal(got, big) {
		t.Fatalf("data: %d bytes, want %d", len(got), len(big))
	}
	if _, _, err := fr.next(); !errors.Is(err, io.EOF) {
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
