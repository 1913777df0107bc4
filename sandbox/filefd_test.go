package sandbox

import (
	"bytes"
	"os"
	"testing"

	"openvibe.network/agentsandbox"
)

// TestPutFileCharged: the content of an upload is written by the init, in
// the sandbox's cgroup, so its pages count in the sandbox's memory.
func TestPutFileCharged(t *testing.T) {
	rt := newRuntime(t, Config{Capacity: 1})
	id := newBox(t, rt, Options{Limits: agentsandbox.Limits{MemoryMB: 256, DiskMB: 64}}).ID
	before, err := rt.Usage(id)
	if err != nil {
		t.Fatal(err)
	}
	const blob = 32 << 20
	if err := rt.PutFile(t.Context(), id, "blob", bytes.NewReader(make([]byte, blob)), 0); err != nil {
		t.Fatal(err)
	}
	after, err := rt.Usage(id)
	if err != nil {
		t.Fatal(err)
	}
	if after.MemoryBytes-before.MemoryBytes < blob/2 || after.WorkspaceBytes-before.WorkspaceBytes < blob {
		t.Errorf("a %d-byte upload: memory %d → %d, workspace %d → %d bytes; want both grown by it",
			blob, before.MemoryBytes, after.MemoryBytes, before.WorkspaceBytes, after.WorkspaceBytes)
	}
}

// TestCheckWorkspaceFile: a descriptor from the init is read only when it
// is a regular file of a tmpfs, written only when it is a pipe.
func TestCheckWorkspaceFile(t *testing.T) {
	shm, err := os.CreateTemp("/dev/shm", "checkfile-")
	if err != nil {
		t.Skipf("no /dev/shm tmpfs: %v", err)
	}
	defer os.Remove(shm.Name())
	defer shm.Close()
	proc, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	defer proc.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	for _, tc := range []struct {
		name  string
		check func(*os.File) error
		f     *os.File
		ok    bool
	}{
		{"OKFile", checkWorkspaceFile, shm, true},
		{"ErrFileProc", checkWorkspaceFile, proc, false},
		{"ErrFilePipe", checkWorkspaceFile, pr, false},
		{"OKPipe", checkPipe, pw, true},
		{"ErrPipeFile", checkPipe, shm, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.check(tc.f); (err == nil) != tc.ok {
				t.Errorf("check(%s) = %v, want ok %v", tc.f.Name(), err, tc.ok)
			}
		})
	}
}
