package sandbox

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// RootImage is an image a sandbox runs on instead of the host's view (the
// image store, package image, holds it): its layers, read-only and shared,
// stacked under the sandbox's own writable layer in its tmpfs.
type RootImage struct {
	// Ref is the reference it was asked by; Digest its manifest's digest.
	Ref    string
	Digest string
	// Layers are the host directories of its unpacked layers, lowest first.
	Layers []string
	// Env is the image's environment (KEY=VALUE), below the worker's own
	// variables and the create's.
	Env []string
	// WorkingDir is where commands run by default ("": the workspace).
	WorkingDir string
	// UID and GID are the image's user: the sandbox's processes have these
	// ids inside (mapped to the slot's host uid), and own what that user
	// owns in the image. User is that user as the image names it (its
	// USER, when it is a name).
	UID, GID int
	User     string
	// Release is called once the sandbox no longer uses the image (after
	// its wipe, or when its start failed); nil: nothing to release.
	Release func()
}

// once returns a copy of img whose Release runs at most once (nil for nil).
func (img *RootImage) once() *RootImage {
	if img == nil {
		return nil
	}
	c := *img
	if c.Release != nil {
		c.Release = sync.OnceFunc(c.Release)
	}
	return &c
}

// release calls Release, when there is one.
func (img *RootImage) release() {
	if img != nil && img.Release != nil {
		img.Release()
	}
}

// ErrNoImages is returned by Create for an image sandbox on a runtime that
// cannot start one (see Runtime.ImageProblems).
var ErrNoImages = errors.New("sandbox: image sandboxes cannot start on this runtime")

// The parts of an image sandbox's tmpfs (boxdir.go), beside its writable
// directories: the sandbox's root (an overlay), its upper and work
// directories, and the mount points of the layers while it is mounted.
const (
	boxRoot   = "root"
	boxUpper  = "upper"
	boxWork   = "work"
	boxLayers = "layers"
)

// overlayOptions are the overlay's options beside its directories: no
// redirect or metacopy attribute of a layer is ever followed (the unpacker
// keeps none; this says so again), no index, no inode numbers from xino.
const overlayOptions = "redirect_dir=nofollow,metacopy=off,index=off,xino=off"

// overflowID is the id the kernel shows for an id a namespace does not map.
const overflowID = 65534

// idmapBase is where an idmapped layer puts the ids of an image other than
// its user's: image id N (below idmapSpan) is host id idmapBase+N, which no
// user of the host has and no sandbox's user namespace maps (the sandbox sees
// it as the overflow id, nobody). Every owner of an image is then mapped, so
// that overlayfs can copy any file up into the sandbox's upper layer.
const (
	idmapBase = 0x7f000000
	idmapSpan = 65536
)

// mountImageRoot mounts b's root: an overlay of the image's layers (each an
// idmapped mount, where the kernel has them, in which the image user's ids
// are the slot's uid, so that the sandbox owns what that user owns in the
// image and the host sees only the slot's uid), with its upper and work
// directories on the sandbox's tmpfs (charged to it, capped, gone with the
// wipe). The upper layer starts with the sandbox's /etc/hosts and
// /etc/resolv.conf.
func (r *Runtime) mountImageRoot(b *sandboxState) error {
	img := b.opts.Image
	fsDir := filepath.Join(b.dir, boxFS)
	uid := b.slot.uid
	for _, d := range []struct {
		name  string
		mode  os.FileMode
		owner int
	}{{boxRoot, 0o755, 0}, {boxWork, 0o700, 0}, {boxLayers, 0o700, 0}, {boxUpper, 0o755, uid}} {
		p := filepath.Join(fsDir, d.name)
		if err := os.Mkdir(p, d.mode); err != nil {
			return fmt.Errorf("image root: %w", err)
		}
		if err := os.Chown(p, d.owner, d.owner); err != nil {
			return fmt.Errorf("image root: %w", err)
		}
	}
	upper := filepath.Join(fsDir, boxUpper)
	if err := seedUpper(upper, img, uid); err != nil {
		return err
	}
	ns, err := r.idmap(b.slot, img.UID, img.GID)
	if err != nil && !errors.Is(err, errNoIdmap) {
		return err
	}
	err = r.mountOverlay(fsDir, img.Layers, ns)
	if err != nil && ns != nil {
		// A kernel without idmapped mounts, or without overlays of them:
		// the image's files then show as owned by nobody.
		r.idmaps.refuse(r, err)
		_ = unix.Unmount(filepath.Join(fsDir, boxRoot), unix.MNT_DETACH)
		if err := clearDir(filepath.Join(fsDir, boxLayers)); err != nil {
			return err
		}
		err = r.mountOverlay(fsDir, img.Layers, nil)
	}
	return err
}

// mountOverlay mounts the overlay of layers (idmapped through ns unless it
// is nil) at fsDir's root, every directory of it named by a /proc/self/fd
// path.
func (r *Runtime) mountOverlay(fsDir string, layers []string, ns *os.File) error {
	lowers, cleanup, err := attachLayers(filepath.Join(fsDir, boxLayers), layers, ns)
	defer cleanup()
	if err != nil {
		return err
	}
	// The upper and work directories are named by descriptors too: the
	// overlay's options, which the sandbox's mount table shows, then name
	// neither the state dir nor the sandbox.
	var dirs [2]string
	for i, d := range []string{boxUpper, boxWork} {
		fd, err := unix.Open(filepath.Join(fsDir, d), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("image root: %w", err)
		}
		defer unix.Close(fd)
		dirs[i] = "/proc/self/fd/" + strconv.Itoa(fd)
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s,%s", strings.Join(lowers, ":"), dirs[0], dirs[1], overlayOptions)
	if err := unix.Mount("overlay", filepath.Join(fsDir, boxRoot), "overlay", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("image root: mount overlay of %d layers: %w", len(layers), err)
	}
	return nil
}

// clearDir removes the (empty) entries of dir.
func clearDir(dir string) error {
	names, err := readDirNames(dir)
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := unix.Rmdir(filepath.Join(dir, n)); err != nil {
			return fmt.Errorf("image root: %w", err)
		}
	}
	return nil
}

// seedUpper puts the sandbox's own /etc/hosts and /etc/resolv.conf (those
// of every sandbox: localhost only, the in-sandbox resolver) in the upper
// directory, owned by the sandbox's user, so that they hide the image's.
// An image that runs as root and has apt also gets aptSandboxConf: a
// sandbox maps one user, so apt cannot switch to its own _apt user. Every
// directory it makes takes the mode and owner the image gives it; an image
// whose /etc is not a directory gets none of it.
func seedUpper(upper string, img *RootImage, uid int) error {
	if !upperDir(upper, "etc", img, uid) {
		return nil
	}
	gen := etcFiles(hostname)
	files := map[string]string{"etc/hosts": gen["hosts"], "etc/resolv.conf": gen["resolv.conf"]}
	if img.UID == 0 && upperDir(upper, "etc/apt", img, uid) && upperDir(upper, "etc/apt/apt.conf.d", img, uid) {
		files["etc/apt/apt.conf.d/00codes-sandbox"] = aptSandboxConf
	}
	for rel, content := range files {
		p := filepath.Join(upper, rel)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return fmt.Errorf("image root: %w", err)
		}
		if err := os.Chown(p, uid, uid); err != nil {
			return fmt.Errorf("image root: %w", err)
		}
	}
	return nil
}

// aptSandboxConf keeps apt as the sandbox's root: the only user a sandbox
// has (its _apt would show as nobody).
const aptSandboxConf = "// codes-sandbox: this sandbox maps one user, so apt downloads as root, not _apt.\nAPT::Sandbox::User \"root\";\n"

// upperDir makes the directory rel in the upper directory as the image has
// it (its mode, and its owner as its idmapped layers show it), and reports
// whether the image has it as a directory (false: nothing is made).
func upperDir(upper, rel string, img *RootImage, uid int) bool {
	st, ok := topStat(img.Layers, rel)
	if !ok || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return false
	}
	p := filepath.Join(upper, rel)
	if err := os.Mkdir(p, 0o700); err != nil {
		return false
	}
	owner, group := idInSandbox(int(st.Uid), img.UID, uid), idInSandbox(int(st.Gid), img.GID, uid)
	if os.Chown(p, owner, group) != nil || os.Chmod(p, os.FileMode(st.Mode&0o777)|modeBits(st.Mode)) != nil {
		return false
	}
	return true
}

// modeBits turns the sticky bit of a stat mode into os.FileMode's.
func modeBits(m uint32) os.FileMode {
	if m&unix.S_ISVTX != 0 {
		return os.ModeSticky
	}
	return 0
}

// idInSandbox is the host id of a file of the image owned by id, as its
// idmapped layers show it: the slot's uid for the image user's id, the
// idmapBase range for the others (see idRanges).
func idInSandbox(id, imageID, slotUID int) int {
	switch {
	case id == imageID:
		return slotUID
	case id < max(idmapSpan, imageID+1):
		return idmapBase + id
	}
	return overflowID
}

// idRanges maps the image user's id to host and every other id below
// idmapSpan (or the user's) to idmapBase and up.
func idRanges(id, host int) []syscall.SysProcIDMap {
	var m []syscall.SysProcIDMap
	if id > 0 {
		m = append(m, syscall.SysProcIDMap{ContainerID: 0, HostID: idmapBase, Size: id})
	}
	m = append(m, syscall.SysProcIDMap{ContainerID: id, HostID: host, Size: 1})
	if top := max(idmapSpan, id+1); id+1 < top {
		m = append(m, syscall.SysProcIDMap{ContainerID: id + 1, HostID: idmapBase + id + 1, Size: top - id - 1})
	}
	return m
}

// topStat stats rel in the topmost layer that has it (a whiteout hides it).
func topStat(layers []string, rel string) (unix.Stat_t, bool) {
	var st unix.Stat_t
	for i := len(layers) - 1; i >= 0; i-- {
		if err := unix.Lstat(filepath.Join(layers[i], rel), &st); err == nil {
			if st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev == 0 {
				return st, false
			}
			return st, true
		}
	}
	return st, false
}

// attachLayers mounts each layer read-only (idmapped through ns when it is
// not nil) below dir and returns the overlay's lowerdir entries, topmost
// first, as /proc/self/fd paths of descriptors of those mounts (short,
// whatever the layers' paths); cleanup detaches the mounts and closes the
// descriptors (the overlay holds its own references once mounted).
func attachLayers(dir string, layers []string, ns *os.File) (lowers []string, cleanup func(), err error) {
	var fds []int
	var points []string
	cleanup = func() {
		for _, p := range points {
			_ = unix.Unmount(p, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW)
		}
		for _, fd := range fds {
			unix.Close(fd)
		}
	}
	lowers = make([]string, len(layers))
	for i, layer := range layers {
		point := filepath.Join(dir, strconv.Itoa(i))
		if err := os.Mkdir(point, 0o700); err != nil {
			return nil, cleanup, fmt.Errorf("image root: %w", err)
		}
		if err := attachLayer(layer, point, ns); err != nil {
			return nil, cleanup, fmt.Errorf("image root: layer %d: %w", i, err)
		}
		points = append(points, point)
		fd, err := unix.Open(point, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, cleanup, fmt.Errorf("image root: %w", err)
		}
		fds = append(fds, fd)
		lowers[len(layers)-1-i] = "/proc/self/fd/" + strconv.Itoa(fd)
	}
	return lowers, cleanup, nil
}

// attachLayer mounts a clone of the layer's directory at point, read-only,
// nosuid and nodev, idmapped through ns unless it is nil.
func attachLayer(layer, point string, ns *os.File) error {
	if ns == nil {
		if err := unix.Mount(layer, point, "", unix.MS_BIND, ""); err != nil {
			return err
		}
		return unix.Mount("", point, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, "")
	}
	fd, err := unix.OpenTree(unix.AT_FDCWD, layer, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return fmt.Errorf("open_tree: %w", err)
	}
	defer unix.Close(fd)
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP | unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV,
		Userns_fd: uint64(ns.Fd())}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		return fmt.Errorf("idmap: %w", err)
	}
	if err := unix.MoveMount(fd, "", unix.AT_FDCWD, point, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("move_mount: %w", err)
	}
	return nil
}

// isStatic reports whether the ELF program at path has no dynamic loader.
func isStatic(path string) bool {
	f, err := elf.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return false
		}
	}
	return true
}

// imageEnv is the init's environment in an image sandbox: the worker's
// defaults, the image's own variables over them (its PATH, its HOME when it
// has one: else the workspace), USER for the image's user.
func imageEnv(img *RootImage) map[string]string {
	env := baseEnv()
	delete(env, "USER")
	user, _, _ := strings.Cut(img.User, ":")
	if _, err := strconv.Atoi(user); err == nil {
		user = ""
	}
	switch {
	case user != "":
		env["USER"] = user
	case img.UID == 0:
		env["USER"] = "root"
	}
	for _, kv := range img.Env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	return env
}

// checkImage validates a RootImage of Options.
func checkImage(img *RootImage) error {
	if len(img.Layers) == 0 {
		return errors.New("image has no layers")
	}
	if img.UID < 0 || img.GID < 0 || img.UID > 1<<31 || img.GID > 1<<31 {
		return fmt.Errorf("image user %d:%d is out of range", img.UID, img.GID)
	}
	for _, kv := range img.Env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.ContainsAny(k, "=\x00") || strings.IndexByte(v, 0) >= 0 {
			return fmt.Errorf("image env entry %q is not NAME=VALUE", kv)
		}
	}
	if img.WorkingDir != "" && (!filepath.IsAbs(img.WorkingDir) || strings.IndexByte(img.WorkingDir, 0) >= 0) {
		return fmt.Errorf("image working directory %q is not absolute", img.WorkingDir)
	}
	return nil
}
