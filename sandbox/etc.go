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

	"openvibe.network/agentsandbox/sandbox/control"
)

// etcHostFiles are the host /etc entries a sandbox sees, when present: the
// dynamic loader's cache, alternatives, certificates, time zone, MIME types
// and a few library configuration files. Everything else of /etc (shadow,
// ssh, the worker's configuration, gitconfig, the host's environment
// variables in /etc/environment…) stays out.
var etcHostFiles = []string{
	"alternatives", "ld.so.cache", "ld.so.conf", "ld.so.conf.d",
	"ssl/certs", "ssl/openssl.cnf", "ca-certificates.conf",
	"localtime", "timezone", "mime.types", "protocols", "services",
	"gai.conf", "host.conf", "inputrc", "magic", "magic.mime",
	"os-release", "debian_version", "fonts", "perl", "python3", "python3.11",
	"bash.bashrc", "profile", "login.defs", "terminfo",
}

// etcFiles returns the generated /etc contents: the sandbox user and group,
// a localhost-only hosts file, files-then-dns lookups, and a resolver at the
// sandbox's own loopback (reached only when egress is on; without egress the
// sandbox has no network at all).
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
		"resolv.conf": "nameserver 127.0.0.1\noptions ndots:0\n",
	}
}

// buildEtc returns the prepared /etc of every sandbox under stateDir: the
// generated files plus a copy of the etcHostFiles entries of hostEtc, in a
// directory named by a fingerprint of its sources. One directory bound at
// /etc costs one mount instead of one per file; the fingerprint (names,
// sizes, modification times) makes a changed host /etc give a new copy, and
// runtimes share an existing one.
func buildEtc(stateDir, hostEtc string) (string, error) {
	gen := etcFiles(hostname)
	h := sha256.New()
	for _, name := range slices.Sorted(maps.Keys(gen)) {
		fmt.Fprintf(h, "gen %s %q\n", name, gen[name])
	}
	for _, name := range etcHostFiles {
		if fi, err := os.Lstat(filepath.Join(hostEtc, name)); err == nil {
			fmt.Fprintf(h, "host %s %d %d %v\n", name, fi.Size(), fi.ModTime().UnixNano(), fi.Mode())
		}
	}
	dir := filepath.Join(stateDir, "etc-"+hex.EncodeToString(h.Sum(nil))[:16])
	if _, err := os.Stat(dir); err == nil {
		return dir, nil
	}
	tmp, err := os.MkdirTemp(stateDir, "etc-tmp-")
	if err != nil {
		return "", fmt.Errorf("build /etc: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := fillEtc(tmp, hostEtc, gen); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, serr := os.Stat(dir); serr == nil {
			return dir, nil // another runtime made it first
		}
		return "", fmt.Errorf("build /etc: %w", err)
	}
	return dir, nil
}

func fillEtc(dir, hostEtc string, gen map[string]string) error {
	if err := os.Chmod(dir, 0o755); err != nil {
		return fmt.Errorf("build /etc: %w", err)
	}
	for name, content := range gen {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return fmt.Errorf("build /etc: %w", err)
		}
	}
	if err := os.Symlink("/proc/self/mounts", filepath.Join(dir, "mtab")); err != nil {
		return fmt.Errorf("build /etc: %w", err)
	}
	for _, name := range etcHostFiles {
		src := filepath.Join(hostEtc, name)
		if _, err := os.Lstat(src); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		dst := filepath.Join(dir, name)
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
