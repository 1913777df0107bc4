package inside

import (
	"errors"
	"os"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
	"openvibe.network/agentsandbox/sandbox/control"
)

// resolveBeneath confines a lookup to the workspace: no "..", absolute path
// or symlink may leave it, and no /proc magic link is followed.
const resolveBeneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS

// resolveNoLinks confines a lookup to its directory and follows no symlink
// at all (a trailing one is opened itself with O_PATH|O_NOFOLLOW): for walks
// that must see links as links.
const resolveNoLinks = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS

// maxPathBytes bounds a path given to openat2 (PATH_MAX is 4096 with its
// NUL): deeper trees are refused, not walked with a descriptor per level.
const maxPathBytes = 4000

// openAt opens rel beneath dirfd with flags (O_CLOEXEC is added) and the
// resolve flags, retrying when the kernel could not rule out a race with a
// rename (EAGAIN) or was interrupted.
func openAt(dirfd int, rel string, flags int, mode uint32, resolve uint64) (int, error) {
	how := &unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Mode: uint64(mode), Resolve: resolve}
	for try := 0; ; try++ {
		fd, err := unix.Openat2(dirfd, rel, how)
		if (errors.Is(err, unix.EAGAIN) && try < 16) || errors.Is(err, unix.EINTR) {
			continue
		}
		return fd, err
	}
}

// openDirAt opens the directory rel beneath dirfd for reading, following
// symlinks that stay beneath it.
func openDirAt(dirfd int, rel string) (int, error) {
	return openAt(dirfd, rel, unix.O_RDONLY|unix.O_DIRECTORY, 0, resolveBeneath)
}

// readNames returns the names in directory fd (any descriptor of it, O_PATH
// too), sorted; "." and ".." are left out.
func readNames(fd int) ([]string, error) {
	dfd, err := openAt(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY, 0, unix.RESOLVE_BENEATH)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(dfd), "dir")
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	return names, nil
}

// lstatAt stats name in directory fd without following a symlink.
func lstatAt(fd int, name string) (unix.Stat_t, error) {
	var st unix.Stat_t
	for {
		err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
		if !errors.Is(err, unix.EINTR) {
			return st, err
		}
	}
}

// fileType names the type of a stat mode as FileInfo.Type does.
func fileType(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return "file"
	case unix.S_IFDIR:
		return "directory"
	case unix.S_IFLNK:
		return "symlink"
	}
	return "other"
}

// fileInfo describes name by its stat.
func fileInfo(name string, st *unix.Stat_t) control.FileInfo {
	return control.FileInfo{Name: name, Type: fileType(st.Mode), Size: st.Size, Mode: st.Mode & 0o7777,
		ModTime: st.Mtim.Nano()}
}

// splitRel splits a clean relative path into its directory ("." when none)
// and its last element.
func splitRel(rel string) (dir, base string) {
	i := strings.LastIndexByte(rel, '/')
	if i < 0 {
		return ".", rel
	}
	return rel[:i], rel[i+1:]
}

// joinRel joins a clean relative directory ("." for none) and a name.
func joinRel(dir, name string) string {
	if dir == "." || dir == "" {
		return name
	}
	return dir + "/" + name
}
