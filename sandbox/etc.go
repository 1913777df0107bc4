package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"

	"openvibe.network/agentsandbox/sandbox/control"
)

// etcHostFiles are the host /etc entries a sandbox sees, when present: the
// dynamic loader's cache, alternatives, certificates, time zone, MIME types
// and a few library configuration files. Everything else of /etc (shadow,
// ssh, the worker's configuration, gitconfig, the host's environment
// variables in /etc/environment…) stays out.
var etcHostFiles = []string{
	"ld.so.cache", "ld.so.conf", "ld.so.conf.d",
	"ssl/openssl.cnf", "ca-certificates.conf",
	"localtime", "timezone", "mime.types", "protocols", "services",
	"gai.conf", "host.conf", "inputrc", "magic", "magic.mime",
	"os-release", "debian_version", "perl", "python3", "python3.11",
	"bash.bashrc", "profile", "login.defs", "terminfo",
}

// etcHostDirs are the host /etc directories a sandbox sees bound read-only
// over an empty directory of its copy rather than copied: those of dozens
// to hundreds of entries (a Debian host's alternatives, certificates and
// font configuration), which
// every runtime (every `codes-sandbox run`) would otherwise copy and remove,
// and which hold nothing private (symlinks into /usr, public CA
// certificates, fontconfig's files). One that is not a directory on the host is copied as the
// other files are.
var etcHostDirs = []string{"alternatives", "ssl/certs", "fonts"}

// etcBinds returns the etcHostDirs that hostEtc has as directories.
func etcBinds(hostEtc string) []string {
	var out []string
	for _, name := range etcHostDirs {
		if fi, err := os.Lstat(filepath.Join(hostEtc, name)); err == nil && fi.IsDir() {
			out = append(out, name)
		}
	}
	return out
}

// ChromiumConfig is the sandbox's own /etc/chromium.d, which Debian's
// launcher (/usr/bin/chromium, a shell script) sources before it starts
// Chromium: the host's is never shown (an operator's flags or keys may be
// in it). Its one file of flags makes `chromium` on the PATH work in a
// sandbox: Chromium's own sandbox off (it needs user namespaces, which this
// sandbox refuses: this sandbox is the boundary, as for the browser of
// BrowserArgv) and shared memory in /tmp (/dev/shm is small). The README,
// which the launcher skips, keeps the directory from being empty, which
// the launcher's `. /etc/chromium.d/*` would fail on.
var ChromiumConfig = map[string]string{
	"README": "Files in this directory are sourced by /usr/bin/chromium before it starts Chromium.\n" +
		"This one is the sandbox's own (codes-sandbox): the host's /etc/chromium.d is not shown.\n",
	"sandbox": "# Chromium in a codes-sandbox sandbox: the sandbox is its boundary (Chromium's own sandbox\n" +
		"# needs user namespaces, which the sandbox refuses), and /dev/shm is small.\n" +
		"export CHROMIUM_FLAGS=\"$CHROMIUM_FLAGS --no-sandbox --disable-dev-shm-usage\"\n",
}

// etcFiles returns the generated /etc contents: the sandbox user and group,
// a localhost-only hosts file, files-then-dns lookups, a resolver at the
// sandbox's own loopback (reached only when egress is on; without egress the
// sandbox has no network at all) asked over TCP (use-vc: on a cgroup v1 host
// the sandbox may not open UDP sockets, see seccomp.Options), and Chromium's launcher configuration
// (ChromiumConfig).
func etcFiles(hostname string) map[string]string {
	uid, gid := strconv.Itoa(control.SandboxUID), strconv.Itoa(control.SandboxGID)
	return map[string]string{
		"passwd": "root:x:0:0:root:/nonexistent:/usr/sbin/nologin\n" +
			"sandbox:x:" + uid + ":" + gid + ":sandbox:" + Workspace + ":/bin/sh\n" +
			"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
		"group": "root:x:0:\nsandbox:x:" + gid + ":\nnogroup:x:65534:\n",
		"hosts": "127.0.0.1\tlocalhost " + hostname + "\n::1\tlocalhost ip6-localhost ip6-loopback\n",
		"nsswitch.conf": "passwd: files\ngroup: files\nshadow: files\n" +
			"hosts: files dns\nnetworks: files\nprotocols: files\nservices: files\n",
		"resolv.conf":        "nameserver 127.0.0.1\noptions ndots:0 use-vc\n",
		"chromium.d/README":  ChromiumConfig["README"],
		"chromium.d/sandbox": ChromiumConfig["sandbox"],
	}
}

// Names of the /etc copies under a state dir: etcPrefix+fingerprint when
// complete, etcTmpPrefix while being built, etcGonePrefix while being
// removed. removeUnusedEtc takes any of them that no runtime holds.
const (
	etcPrefix     = "etc-"
	etcTmpPrefix  = etcPrefix + "tmp-"
	etcGonePrefix = etcPrefix + "gone-"
)

// buildEtc returns the prepared /etc of every sandbox under stateDir: the
// generated files plus a copy of the etcHostFiles entries of hostEtc, with
// an empty directory for each of binds (etcBinds of hostEtc: the runtime's
// argv binds the same ones over them), in a directory named by a
// fingerprint of its sources. One directory bound at
// /etc costs one mount instead of one per file; the fingerprint (names,
// sizes, modification times) makes a changed host /etc give a new copy, and
// runtimes share an existing one.
//
// It also returns a shared lock on the directory, which the runtime holds
// for as long as its sandboxes may bind it: removeUnusedEtc removes only
// copies that no one holds.
func buildEtc(stateDir, hostEtc string, binds []string) (dir string, lock *os.File, err error) {
	gen := etcFiles(hostname)
	h := sha256.New()
	for _, name := range slices.Sorted(maps.Keys(gen)) {
		fmt.Fprintf(h, "gen %s %q\n", name, gen[name])
	}
	for _, name := range slices.Concat(etcHostFiles, etcHostDirs) {
		if slices.Contains(binds, name) {
			fmt.Fprintf(h, "bind %s\n", name)
		} else if fi, err := os.Lstat(filepath.Join(hostEtc, name)); err == nil {
			fmt.Fprintf(h, "host %s %d %d %v\n", name, fi.Size(), fi.ModTime().UnixNano(), fi.Mode())
		}
	}
	dir = filepath.Join(stateDir, etcPrefix+hex.EncodeToString(h.Sum(nil))[:16])
	// A copy found but removed before it could be locked (its last holder
	// had just ended) is built again; a few rounds are plenty.
	for range 3 {
		lock, err = lockShared(dir)
		if err == nil {
			return dir, lock, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", nil, fmt.Errorf("build /etc: lock %s: %w", dir, err)
		}
		switch lock, err = newEtc(stateDir, hostEtc, binds, gen, dir); {
		case err != nil:
			return "", nil, err
		case lock != nil:
			return dir, lock, nil
		}
	}
	return "", nil, fmt.Errorf("build /etc: %s was removed each time it was made; is another program removing copies in %s?", dir, stateDir)
}

// newEtc builds a copy in a temporary directory, locked (shared) before it
// is filled so that no one removes it, and renames it to dir. It returns
// nil and no error when another runtime made dir first (take theirs).
func newEtc(stateDir, hostEtc string, binds []string, gen map[string]string, dir string) (*os.File, error) {
	tmp, err := os.MkdirTemp(stateDir, etcTmpPrefix)
	if err != nil {
		return nil, fmt.Errorf("build /etc: %w", err)
	}
	lock, err := lockShared(tmp)
	if err == nil {
		err = fillEtc(tmp, hostEtc, binds, gen)
	}
	if err == nil {
		if err = os.Rename(tmp, dir); err == nil {
			return lock, nil
		}
		if _, serr := os.Lstat(dir); serr == nil {
			err = nil // another runtime made it first
		}
	}
	if lock != nil {
		lock.Close()
	}
	os.RemoveAll(tmp)
	if err != nil {
		return nil, fmt.Errorf("build /etc: %w", err)
	}
	return nil, nil
}

// lockShared opens the directory at path and takes a shared lock on it,
// waiting while a remover holds it, then checks that path still names that
// directory: fs.ErrNotExist when it is gone or was removed meanwhile.
func lockShared(path string) (*os.File, error) {
	f, err := openDir(path)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH); err != nil {
		f.Close()
		return nil, err
	}
	if !namesFile(path, f) {
		f.Close()
		return nil, fs.ErrNotExist
	}
	return f, nil
}

// removeUnusedEtc removes every /etc copy under stateDir that no runtime
// holds, but keep: copies of a host /etc that has changed since, and what a
// builder or remover that died left half done. keep is the copy of the
// host's /etc as it is now, which the runtime that ends leaves for the next
// one (the next `codes-sandbox run` binds it instead of building and
// removing its own: 4 to 6 ms of each run); a runtime that finds /etc
// changed builds a new copy and removes the old.
// A copy leaves its name (a rename) before it is emptied, so a runtime
// that looks for it meanwhile builds a new one instead of binding a
// half-removed one. It removes nothing while a live runtime in stateDir
// other than self has not declared its copy (see undeclaredRuntime).
// Errors name the copy that could not be removed.
func removeUnusedEtc(stateDir, self, keep string) error {
	if undeclaredRuntime(stateDir, self) {
		return nil
	}
	paths, err := filepath.Glob(filepath.Join(stateDir, etcPrefix+"*"))
	if err != nil {
		return fmt.Errorf("remove unused /etc copies: %w", err)
	}
	var errs []error
	for _, p := range paths {
		if p == keep {
			continue
		}
		if err := removeEtcIfUnused(p); err != nil {
			errs = append(errs, fmt.Errorf("remove unused /etc copy: %w", err))
		}
	}
	return errors.Join(errs...)
}

// removeEtcIfUnused removes the copy at path unless a runtime holds it (or
// path is not a directory, so not a copy).
func removeEtcIfUnused(path string) error {
	f, err := openDir(path)
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.ELOOP):
		return nil
	case err != nil:
		return err
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); errors.Is(err, syscall.EWOULDBLOCK) {
		return nil // in use
	} else if err != nil {
		return fmt.Errorf("lock %s: %w", path, err)
	}
	// A copy removed and made again between the open and the lock is a new
	// one, held by its maker.
	if !namesFile(path, f) {
		return nil
	}
	gone := filepath.Join(filepath.Dir(path), etcGonePrefix+randomID())
	if err := os.Rename(path, gone); err != nil {
		return err
	}
	return removeOwnTree(gone)
}

// etcLink is the symlink in a runtime's directory to the /etc copy it
// holds: it declares that the runtime locks its copy.
const etcLink = "etc"

// undeclaredRuntime reports whether a live runtime in stateDir other than
// self has no etcLink: one still starting, or one of a build from before
// copies were locked, which binds its copy without holding it.
func undeclaredRuntime(stateDir, self string) bool {
	dirs, _ := filepath.Glob(filepath.Join(stateDir, "rt-*"))
	for _, d := range dirs {
		name := filepath.Base(d)
		if name == self {
			continue
		}
		if _, err := os.Lstat(filepath.Join(d, etcLink)); err == nil {
			continue
		}
		// The lock of a runtime of an earlier build is in its directory.
		if lockHeld(filepath.Join(runtimeLockDir, name+".lock")) || lockHeld(filepath.Join(d, "lock")) {
			return true
		}
	}
	return false
}

// lockHeld reports whether another process holds the lock file at path
// (never creating it).
func lockHeld(path string) bool {
	f, err := os.OpenFile(path, os.O_RDWR|syscall.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	return errors.Is(syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB), syscall.EWOULDBLOCK)
}

// openDir opens the directory at path, never following a symlink.
func openDir(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
}

// namesFile reports whether path (not followed) is the file f has open.
func namesFile(path string, f *os.File) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Lstat(path)
	return err == nil && os.SameFile(a, b)
}

func fillEtc(dir, hostEtc string, binds []string, gen map[string]string) error {
	if err := os.Chmod(dir, 0o755); err != nil {
		return fmt.Errorf("build /etc: %w", err)
	}
	for name, content := range gen {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			return fmt.Errorf("build /etc: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return fmt.Errorf("build /etc: %w", err)
		}
	}
	if err := os.Symlink("/proc/self/mounts", filepath.Join(dir, "mtab")); err != nil {
		return fmt.Errorf("build /etc: %w", err)
	}
	for _, name := range slices.Concat(etcHostFiles, etcHostDirs) {
		dst := filepath.Join(dir, name)
		if slices.Contains(binds, name) { // a mount point for the bind
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return fmt.Errorf("build /etc: %w", err)
			}
			continue
		}
		src := filepath.Join(hostEtc, name)
		if _, err := os.Lstat(src); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return fmt.Errorf("build /etc: %w", err)
		}
		if err := copyTree(src, dst); err != nil {
			return fmt.Errorf("build /etc: %w", err)
		}
	}
	return nil
}

// copyTree copies a file, symlink or directory tree, keeping modes and
// symlink targets; other file types are skipped.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.Mkdir(target, fi.Mode().Perm())
		case fi.Mode()&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case fi.Mode().IsRegular():
			return copyFile(p, target, fi.Mode().Perm())
		}
		return nil
	})
}

func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Chmod(dst, perm) // not reduced by the umask
}
