package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// Under systemd the worker runs as a service whose cgroup (v2) is delegated
// to it (Delegate=yes): it owns that subtree and nothing else. There it
// moves itself into a leaf of its own (the "no internal processes" rule
// allows controllers to be enabled only in a cgroup without processes) and
// makes every sandbox's group beneath the service's:
//
//	/sys/fs/cgroup/system.slice/codes-sandbox.service/
//	  codes-sandbox-worker/    the worker's own processes
//	  sandboxes/rt-<name>/<id> one group per sandbox
//
// In a container with a cgroup namespace of its own (Kubernetes on v2,
// podman --cgroupns=private) the container's cgroup is the namespace's
// root, "/", and is delegated the same way: the worker's leaf and the
// sandboxes' groups are made beneath it (package hostprep makes the mount
// writable first).
const (
	// WorkerLeaf is the cgroup, below its delegated service's, that the
	// worker moves its processes into.
	WorkerLeaf = "codes-sandbox-worker"
	// delegatedParent holds the sandboxes' groups below the service's.
	delegatedParent = "sandboxes"
)

// ownCgroup returns the v2 cgroup path ("/system.slice/x.service") in a
// /proc/self/cgroup text (its "0::PATH" line), or false.
func ownCgroup(text string) (string, bool) {
	for _, l := range strings.Split(text, "\n") {
		if p, ok := strings.CutPrefix(l, "0::"); ok && strings.HasPrefix(p, "/") {
			return path.Clean(p), true
		}
	}
	return "", false
}

// delegatedBase returns the delegated cgroup a worker in own runs under
// (own itself, or own's parent once the worker moved into its leaf),
// relative to the v2 mount: a systemd service's, or "" for the root of a
// cgroup namespace of its own (namespaced); false for any other.
func delegatedBase(own string, namespaced bool) (string, bool) {
	if path.Base(own) == WorkerLeaf {
		own = path.Dir(own)
	}
	if own == "/" {
		return "", namespaced
	}
	if !strings.HasSuffix(path.Base(own), ".service") {
		return "", false
	}
	return strings.TrimPrefix(own, "/"), true
}

// initCgroupNS is the inode of the initial cgroup namespace
// (PROC_CGROUP_INIT_INO of include/linux/proc_ns.h).
const initCgroupNS = 0xEFFFFFFB

// InNamespace reports whether this process is in a cgroup namespace of its
// own (a container's): its /proc/self/ns/cgroup is not the initial one.
func InNamespace() bool {
	var st syscall.Stat_t
	if err := syscall.Stat("/proc/self/ns/cgroup", &st); err != nil {
		return false
	}
	return st.Ino != initCgroupNS
}

// delegatedMissing returns the required controllers the service's cgroup
// (base below mount) does not offer its children, by its cgroup.controllers.
func delegatedMissing(mount, base string, read func(string) ([]byte, error)) ([]string, error) {
	b, err := read(filepath.Join(mount, base, "cgroup.controllers"))
	if err != nil {
		return nil, fmt.Errorf("detect cgroups: the service's cgroup /%s: %w", base, err)
	}
	have := strings.Fields(string(b))
	var missing []string
	for _, c := range required {
		if !slices.Contains(have, c) {
			missing = append(missing, c)
		}
	}
	return missing, nil
}

// Problems says, for a person, why the hierarchy cannot enforce every
// limit, with the setting that fixes it; empty when it can.
func (h *Hierarchy) Problems() []string {
	if len(h.missing) == 0 {
		return nil
	}
	if h.base == "" {
		return []string{fmt.Sprintf("the cgroup controllers %s are not available in the worker's container's cgroup (the root of its cgroup namespace), "+
			"so its sandboxes' limits cannot be enforced: run it where the container runtime enables them for containers (Kubernetes and podman "+
			"on cgroup v2 do), or on the host", strings.Join(h.missing, ", "))}
	}
	return []string{fmt.Sprintf("the cgroup controllers %s are not delegated to the worker's cgroup /%s, so its sandboxes' limits cannot be enforced: "+
		"add Delegate=yes to the worker's systemd unit (deploy/codes-sandbox.service has it) and restart it, or give --cgroup-parent",
		strings.Join(h.missing, ", "), h.base)}
}

// moveIntoLeaf moves every process of the service's cgroup into the
// worker's leaf, so that controllers can be enabled for the service's
// children. Processes that end meanwhile are fine.
func (h *Hierarchy) moveIntoLeaf(mount string) error {
	svc := filepath.Join(mount, h.base)
	b, err := os.ReadFile(filepath.Join(svc, "cgroup.procs"))
	if err != nil {
		return fmt.Errorf("move into %s: %w", WorkerLeaf, err)
	}
	pids := strings.Fields(string(b))
	if len(pids) == 0 {
		return nil
	}
	leaf := filepath.Join(svc, WorkerLeaf)
	if err := h.mkdir(leaf, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("move into %s: %w", leaf, writeHint(err))
	}
	for _, pid := range pids {
		if err := writeFile(filepath.Join(leaf, "cgroup.procs"), pid); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("move process %s into %s: %w", pid, leaf, writeHint(err))
		}
	}
	return nil
}

// writeHint adds to a failed write into the cgroup file system what the
// usual causes are and how to fix them.
func writeHint(err error) error {
	switch {
	case errors.Is(err, syscall.EROFS):
		return fmt.Errorf("%w (the cgroup file system is read-only: in a container, give the worker a writable cgroup of its own, e.g. a cgroup namespace with it delegated, or run it on the host)", err)
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return fmt.Errorf("%w (not permitted: run the worker as root, and in a container with its cgroup delegated to it)", err)
	}
	return err
}
