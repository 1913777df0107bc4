package cgroup

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestStartInside: on v1 a process started by StartInside is born in the
// group in every hierarchy (its /proc/PID/cgroup says so before it could
// be moved), the starting thread is back where it was (the group's tasks
// hold the process alone), and a start error is returned as is; on v2 it
// refuses with ErrUnavailable without running start.
func TestStartInside(t *testing.T) {
	h := realHierarchy(t, Options{})
	g := newGroup(t, h, Limits{Pids: 32})
	if h.Version() != 1 {
		ran := false
		err := g.StartInside(func() error { ran = true; return nil })
		if !errors.Is(err, ErrUnavailable) || ran {
			t.Fatalf("v2: StartInside = %v, start ran %v; want ErrUnavailable and start not run", err, ran)
		}
		return
	}
	cmd := exec.Command("/bin/sleep", "300")
	if err := g.StartInside(cmd.Start); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	b, err := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	home, err := homeDirs(string(b), g)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(g.Paths(), home); diff != "" {
		t.Fatalf("the started process's cgroups (-group +process):\n%s", diff)
	}
	for _, d := range g.Paths() {
		tasks, err := readPids(d + "/tasks")
		if err != nil {
			t.Fatal(err)
		}
		if want := []int{cmd.Process.Pid}; !cmp.Equal(want, tasks) {
			t.Fatalf("%s/tasks = %v, want only the started process %v (the starting thread left)", d, tasks, want)
		}
	}

	failed := errors.New("start failed")
	if err := g.StartInside(func() error { return failed }); !errors.Is(err, failed) {
		t.Fatalf("StartInside with a failing start = %v, want its error", err)
	}
}

// TestHomeDirs maps a thread's /proc/PID/cgroup to its directories in a
// group's hierarchies: mounts of the whole hierarchy, mounts of a subtree
// (a cgroup namespace, a bind mount), and what cannot be mapped.
func TestHomeDirs(t *testing.T) {
	v1 := func(root string) *Hierarchy {
		dirs := map[string]string{"memory": "/sys/fs/cgroup/memory", "pids": "/sys/fs/cgroup/pids",
			"cpu": "/sys/fs/cgroup/cpu,cpuacct", "cpuacct": "/sys/fs/cgroup/cpu,cpuacct"}
		roots := map[string]string{}
		for c := range dirs {
			roots[c] = root
		}
		return &Hierarchy{version: 1, parent: "codes-sandbox", dirs: dirs, roots: roots}
	}
	const self = "12:pids:/user.slice/a\n4:memory:/user.slice/a\n3:cpu,cpuacct:/user.slice\n1:name=systemd:/user.slice/a\n0::/\n"
	for _, tc := range []struct {
		name    string
		h       *Hierarchy
		text    string
		want    []string
		wantErr string
	}{
		{name: "WholeHierarchies", h: v1("/"), text: self,
			want: []string{"/sys/fs/cgroup/memory/user.slice/a", "/sys/fs/cgroup/pids/user.slice/a", "/sys/fs/cgroup/cpu,cpuacct/user.slice"}},
		{name: "Subtree", h: v1("/docker/c1"), text: strings.ReplaceAll(self, ":/user.slice", ":/docker/c1/user.slice"),
			want: []string{"/sys/fs/cgroup/memory/user.slice/a", "/sys/fs/cgroup/pids/user.slice/a", "/sys/fs/cgroup/cpu,cpuacct/user.slice"}},
		{name: "AtTheSubtreeRoot", h: v1("/docker/c1"), text: "12:pids:/docker/c1\n4:memory:/docker/c1\n3:cpu,cpuacct:/docker/c1\n",
			want: []string{"/sys/fs/cgroup/memory", "/sys/fs/cgroup/pids", "/sys/fs/cgroup/cpu,cpuacct"}},
		{name: "ErrOutsideTheSubtree", h: v1("/docker/c1"), text: strings.ReplaceAll(self, ":/user.slice", ":/docker/c10/user.slice"),
			wantErr: "outside the mount"},
		{name: "ErrMissingController", h: v1("/"), text: "12:pids:/\n3:cpu,cpuacct:/\n", wantErr: "no memory entry"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := homeDirs(tc.text, tc.h.group("x"))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("homeDirs (-want +got):\n%s", diff)
			}
		})
	}
}
