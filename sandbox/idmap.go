package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
)

// errNoIdmap: the kernel cannot make idmapped mounts (or overlays of them).
var errNoIdmap = errors.New("this kernel has no idmapped mounts")

// idmaps holds, per slot, the user namespaces that map an image user's ids
// to the slot's uid (one per image user seen), for idmapped mounts.
type idmaps struct {
	mu sync.Mutex
	ns map[idmapKey]*os.File
	// none is set once the kernel refused one (then every image sandbox
	// runs without: see Runtime.ImageProblems).
	none string
}

type idmapKey struct{ slotUID, uid, gid int }

// idmap returns the user namespace in which uid:gid are the slot's uid (and
// gid), made on first use by a process started in a new user namespace
// with that mapping (the host's cat, holding on its standard input), kept
// for the runtime's life. errNoIdmap when the kernel cannot idmap.
func (r *Runtime) idmap(s *slot, uid, gid int) (*os.File, error) {
	m := &r.idmaps
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.none != "" {
		return nil, errNoIdmap
	}
	key := idmapKey{s.uid, uid, gid}
	if f := m.ns[key]; f != nil {
		return f, nil
	}
	f, err := newIdmapNS(s.uid, uid, gid)
	if err != nil {
		return nil, fmt.Errorf("image root: user namespace for idmapped layers: %w", err)
	}
	if m.ns == nil {
		m.ns = map[idmapKey]*os.File{}
	}
	m.ns[key] = f
	return f, nil
}

// refuse records that idmapped layers failed (err), for good.
func (m *idmaps) refuse(r *Runtime, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.none == "" {
		m.none = "image sandboxes run without idmapped layers (Linux 5.12+, overlays of them 5.19+; here: " + err.Error() +
			"): an image's files show as owned by nobody, and a sandbox writes only where the image lets everyone write, its workspace and /tmp"
		r.log.Warn("image sandboxes without idmapped layers", "why", m.none)
	}
}

// problem says why image sandboxes run without idmapped layers ("" when
// they have them).
func (m *idmaps) problem() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.none
}

// close releases the namespaces (at Close).
func (m *idmaps) close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, f := range m.ns {
		f.Close()
	}
	m.ns = nil
}

// newIdmapNS starts cat in a new user namespace whose uid_map and gid_map
// map uid and gid to hostID (and the other ids: idRanges), opens its
// namespace and lets it end.
func newIdmapNS(hostID, uid, gid int) (*os.File, error) {
	cat, err := exec.LookPath("cat")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(cat)
	cmd.Env = []string{}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: idRanges(uid, hostID),
		GidMappings: idRanges(gid, hostID),
		Pdeathsig:   syscall.SIGKILL,
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/ns/user", cmd.Process.Pid))
	in.Close()
	_ = cmd.Wait()
	return f, err
}
