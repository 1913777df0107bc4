package main

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/sandbox/hostcheck"
)

// smallHost is a host of 3 GB with a low fs.file-max (the vm guest's size).
func smallHost(t *testing.T) hostcheck.Host {
	t.Helper()
	root := t.TempDir()
	for name, content := range map[string]string{
		"proc/sys/fs/file-max": "300000\n", "proc/sys/fs/file-nr": "1000\t0\t300000\n",
		"proc/sys/kernel/pty/max": "4096\n", "proc/sys/kernel/pty/reserve": "1024\n", "proc/sys/kernel/pty/nr": "0\n",
		"proc/sys/kernel/pid_max": "4194304\n", "proc/loadavg": "0.1 0.1 0.1 1/100 200\n",
		"proc/meminfo": "MemTotal:        3145728 kB\n",
	} {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return hostcheck.Host{Root: root}
}

func TestCheckHostTables(t *testing.T) {
	fits := stackConfig{capacity: 1, maxOpenFiles: 1024, maxPtys: 32, limits: agentsandbox.Limits{MemoryMB: 1024}}
	tooMany := stackConfig{capacity: 2, maxOpenFiles: 4096, maxPtys: 32}
	for _, tc := range []struct {
		name     string
		cfg      stackConfig
		v1       bool
		err, log string // what the error and the log say ("" none)
	}{
		{"Fits", fits, false, "", ""},
		{"FitsV1", fits, true, "", ""},
		{"MemoryV1Quarter", stackConfig{capacity: 2, maxOpenFiles: 64, maxPtys: 1, limits: agentsandbox.Limits{MemoryMB: 1280}}, true,
			"2 sandboxes × 1600 MB = 3200 MB of memory, but the host has 3072 MB", ""},
		{"Refused", tooMany, false, "the host cannot hold 2 sandboxes at their caps: 2 sandboxes × 256 tasks × 4096 descriptors", ""},
		{"RefusalSaysOvercommit", tooMany, false, "or give --overcommit to start anyway", ""},
		{"Overcommit", func() stackConfig { c := tooMany; c.overcommit = true; return c }(), false, "",
			"--overcommit: starting anyway"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			err := checkHostTables(smallHost(t), tc.cfg, tc.v1, slog.New(slog.NewTextHandler(&logs, nil)))
			var ce configError
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.err != "" && (!errors.As(err, &ce) || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("got %v, want a config error saying %q", err, tc.err)
			}
			if tc.log == "" && strings.Contains(logs.String(), "overcommit") || !strings.Contains(logs.String(), tc.log) {
				t.Errorf("log %q, want %q", logs.String(), tc.log)
			}
		})
	}
}
