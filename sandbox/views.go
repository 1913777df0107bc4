package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// The runtime's read-only views, in its directory (see mountViews).
const (
	viewInitDir = "init.d"    // holds the init binary's link: the init view's layer
	viewInit    = "init.view" // the init view's mount point
	viewEtc     = "etc.view"  // the /etc view's mount point
	viewEmpty   = "empty"     // the second, empty layer an overlay without an upper one needs
)

// mountViews mounts, in the runtime's directory dir, read-only overlays of
// initDir (which holds the init binary) and of etcDir (the prepared /etc),
// and returns the host paths of the init binary and the /etc to bind into
// sandboxes through them. A bind's root in a sandbox's
// /proc/self/mountinfo is its source's path in its file system (the state
// dir, the runtime's name); an overlay's is "/", and its layers show as
// /proc/self/fd paths of descriptors the runtime closes once it is mounted.
// On error nothing is left mounted.
func mountViews(dir, initDir, etcDir string) (initBin, etc string, err error) {
	empty := filepath.Join(dir, viewEmpty)
	if err := os.Mkdir(empty, 0o755); err != nil {
		return "", "", fmt.Errorf("views: %w", err)
	}
	views := []struct{ point, layer string }{{filepath.Join(dir, viewInit), initDir}, {filepath.Join(dir, viewEtc), etcDir}}
	for i, v := range views {
		if err := mountView(v.point, v.layer, empty); err != nil {
			for _, done := range views[:i] {
				_ = unix.Unmount(done.point, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW)
			}
			return "", "", err
		}
	}
	return filepath.Join(views[0].point, "init"), views[1].point, nil
}

// mountView mounts a read-only, nosuid, nodev overlay of layer (over the
// empty directory empty) at point, which it makes.
func mountView(point, layer, empty string) error {
	if err := os.Mkdir(point, 0o755); err != nil {
		return fmt.Errorf("views: %w", err)
	}
	var fds []int
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	for _, l := range []string{layer, empty} {
		fd, err := unix.Open(l, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("views: open %s: %w", l, err)
		}
		fds = append(fds, fd)
	}
	opts := "lowerdir=/proc/self/fd/" + strconv.Itoa(fds[0]) + ":/proc/self/fd/" + strconv.Itoa(fds[1])
	if err := unix.Mount("overlay", point, "overlay", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("views: mount an overlay of %s at %s: %w", layer, point, err)
	}
	return nil
}

// unmountViews detaches the runtime's views (see mountViews) in its
// directory dir; views never mounted are fine.
func unmountViews(dir string) error {
	for _, v := range []string{viewInit, viewEtc} {
		p := filepath.Join(dir, v)
		if err := unix.Unmount(p, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("unmount %s: %w", p, err)
		}
	}
	return nil
}
