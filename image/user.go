package image

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"
)

// maxIDFile bounds what is read of an image's /etc/passwd or /etc/group.
const maxIDFile = 4 << 20

// imageConfig takes what the runtime needs from an image's configuration,
// its user resolved in the image's own files (docker's rules: a name is
// looked up in /etc/passwd, a group in /etc/group; a user without a group
// takes its passwd entry's, or 0).
func (s *Store) imageConfig(cf *v1.ConfigFile, hexes []string) (ImageConfig, error) {
	c := ImageConfig{Env: cf.Config.Env, WorkingDir: cf.Config.WorkingDir, User: cf.Config.User}
	if c.WorkingDir != "" && !strings.HasPrefix(c.WorkingDir, "/") {
		c.WorkingDir = "/" + c.WorkingDir
	}
	for _, kv := range c.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" || strings.IndexByte(kv, 0) >= 0 {
			return c, fmt.Errorf("%w: environment entry %q is not KEY=VALUE", ErrBadImage, clipStr(kv))
		}
	}
	dirs := make([]string, len(hexes))
	for i, h := range hexes {
		dirs[i] = s.layerDir(h)
	}
	uid, gid, err := resolveUser(c.User, func(rel string) ([]byte, error) { return readLayered(dirs, rel) })
	if err != nil {
		return c, fmt.Errorf("%w: user %q: %w", ErrBadImage, clipStr(c.User), err)
	}
	c.UID, c.GID = uid, gid
	return c, nil
}

func clipStr(s string) string {
	if len(s) > 100 {
		return s[:100] + "…"
	}
	return s
}

// resolveUser resolves USER[:GROUP] (names or numbers) with read, which
// returns an image file ("etc/passwd", "etc/group") or an error.
func resolveUser(spec string, read func(rel string) ([]byte, error)) (int, int, error) {
	user, group, hasGroup := strings.Cut(spec, ":")
	if user == "" {
		user = "0"
	}
	uid, gid := -1, 0
	if n, err := strconv.Atoi(user); err == nil {
		uid = n
	}
	if passwd, err := read("etc/passwd"); err == nil {
		for _, f := range fields(passwd, 7) {
			if f[0] == user || uid >= 0 && f[2] == strconv.Itoa(uid) {
				u, err1 := strconv.Atoi(f[2])
				g, err2 := strconv.Atoi(f[3])
				if err1 == nil && err2 == nil {
					uid, gid = u, g
					break
				}
			}
		}
	}
	if uid < 0 {
		return 0, 0, fmt.Errorf("no user %q in the image's /etc/passwd", user)
	}
	if hasGroup {
		if n, err := strconv.Atoi(group); err == nil {
			gid = n
		} else {
			found := false
			if data, err := read("etc/group"); err == nil {
				for _, f := range fields(data, 3) {
					if f[0] == group {
						if g, err := strconv.Atoi(f[2]); err == nil {
							gid, found = g, true
							break
						}
					}
				}
			}
			if !found {
				return 0, 0, fmt.Errorf("no group %q in the image's /etc/group", group)
			}
		}
	}
	if uid < 0 || gid < 0 || uid > 1<<31 || gid > 1<<31 {
		return 0, 0, fmt.Errorf("ids %d:%d out of range", uid, gid)
	}
	return uid, gid, nil
}

// fields splits each line of a colon-separated file with at least n fields.
func fields(data []byte, n int) [][]string {
	var out [][]string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 64<<10)
	for sc.Scan() {
		if f := strings.Split(sc.Text(), ":"); len(f) >= n {
			out = append(out, f)
		}
	}
	return out
}

// errHidden: a layer above hides the file (a whiteout, an opaque directory).
var errHidden = errors.New("hidden by a layer above")

// readLayered reads the file rel as the stacked layers dirs (lowest first)
// show it: from the topmost layer that has it, unless a layer above hides
// it. Paths are resolved beneath each layer without following links; a
// file that is a link is not read.
func readLayered(dirs []string, rel string) ([]byte, error) {
	for i := len(dirs) - 1; i >= 0; i-- {
		data, err := readInLayer(dirs[i], rel)
		if err == nil || errors.Is(err, errHidden) {
			return data, err
		}
	}
	return nil, os.ErrNotExist
}

// readInLayer reads rel in one layer: errHidden when the layer hides it
// from the layers below, os.ErrNotExist when it says nothing about it.
func readInLayer(dir, rel string) ([]byte, error) {
	root, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(root)
	parts := strings.Split(rel, "/")
	fd, err := unix.Dup(root)
	if err != nil {
		return nil, err
	}
	defer func() { unix.Close(fd) }()
	for i, p := range parts {
		var st unix.Stat_t
		if err := unix.Fstatat(fd, p, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if isOpaque(fd) {
				return nil, errHidden
			}
			return nil, os.ErrNotExist
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFCHR:
			return nil, errHidden // a whiteout
		case unix.S_IFDIR:
			if i == len(parts)-1 {
				return nil, errHidden
			}
		case unix.S_IFREG:
			if i < len(parts)-1 {
				return nil, errHidden
			}
		default:
			return nil, errHidden
		}
		next, err := unix.Openat(fd, p, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, err
		}
		unix.Close(fd)
		fd = next
	}
	f := os.NewFile(uintptr(fd), rel)
	fd = -1
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxIDFile))
}

// isOpaque reports whether the directory fd hides the layers below.
func isOpaque(fd int) bool {
	buf := make([]byte, 4)
	n, err := unix.Fgetxattr(fd, "trusted.overlay.opaque", buf)
	return err == nil && string(buf[:n]) == "y"
}
