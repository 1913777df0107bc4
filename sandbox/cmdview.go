package sandbox

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"
)

// maxSymlinks is how many symbolic links a lookup follows (the kernel's
// limit for one path).
const maxSymlinks = 40

// maxInterpreters bounds how many `#!` interpreters a command may go
// through (the kernel's own bound is a few).
const maxInterpreters = 2

// commandView is the part of a one-command sandbox's file system that the
// host sees exactly as the sandbox will when its command starts: /usr
// (bound read-only), the top-level links to it (bin -> usr/bin...), and
// the host /etc directories bound into the sandbox's /etc. A path
// anywhere else (the workspace, /tmp, the generated /etc files, /proc,
// /dev) is outside the view: the host cannot tell what the sandbox will
// find there. The zero commandView holds nothing.
type commandView struct {
	root     string            // the host path of the sandbox's /: "/" but in tests
	links    map[string]string // top-level links (usrLinks)
	etcBinds []string          // host /etc directories bound at the same path
}

// commandVerdict is what the host can tell of a one-command sandbox's
// command before the sandbox starts (commandView.find).
type commandVerdict int

const (
	// commandUnsure: the sandbox alone can tell (the lookup leaves the
	// view), or the file found cannot be run; a first process that reports
	// the failure as the shell would (127, 126) starts it.
	commandUnsure commandVerdict = iota
	// commandRuns: the sandbox's execvp will run the file it finds.
	commandRuns
	// commandMissing: no candidate exists, and every one is in the view.
	commandMissing
)

// find says what the sandbox's execvp(argv0) with PATH pathEnv will do:
// commandRuns when the first existing candidate resolves, inside the view,
// to a regular file others may execute that is an ELF program, or a `#!`
// script whose interpreter is runnable too; commandMissing when no
// candidate exists (each looked up in the view); commandUnsure when the
// lookup leaves the view (a relative name, an empty PATH entry, a link
// into the workspace...) or the first candidate that exists cannot be run.
func (v commandView) find(argv0, pathEnv string) commandVerdict {
	if v.root == "" || argv0 == "" {
		return commandUnsure
	}
	var candidates []string
	if strings.Contains(argv0, "/") {
		candidates = []string{argv0}
	} else {
		for _, dir := range strings.Split(pathEnv, ":") {
			if !path.IsAbs(dir) {
				return commandUnsure // "" or relative: the working directory, outside the view
			}
			candidates = append(candidates, dir+"/"+argv0)
		}
	}
	for _, c := range candidates {
		if !path.IsAbs(c) {
			return commandUnsure // relative to the working directory: outside the view
		}
		host, known, err := v.lookup(c)
		switch {
		case !known:
			return commandUnsure
		case errors.Is(err, fs.ErrNotExist):
			continue // execvp goes on to the next directory
		case errors.Is(err, syscall.ENOTDIR) && len(candidates) > 1:
			continue // so it does past a file on a PATH directory's way
		case err != nil:
			return commandUnsure
		}
		if v.executable(host, 0) {
			return commandRuns
		}
		return commandUnsure
	}
	return commandMissing
}

// executable reports whether the host file host (a resolved lookup)
// starts as a program in the sandbox: a regular file with the others'
// execute bit (the sandbox's uid owns no host file), holding an ELF
// program or a `#!` line whose interpreter is runnable.
func (v commandView) executable(host string, depth int) bool {
	// One open, then the descriptor's own mode: never blocking (on a FIFO,
	// say) and never following a link the lookup did not see.
	f, err := os.OpenFile(host, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o001 == 0 {
		return false
	}
	var head [256]byte
	n, _ := f.Read(head[:])
	switch b := head[:n]; {
	case bytes.HasPrefix(b, []byte("\x7fELF")):
		return true
	case bytes.HasPrefix(b, []byte("#!")) && depth < maxInterpreters:
		line, _, complete := bytes.Cut(b[2:], []byte("\n"))
		fields := strings.Fields(string(line))
		if !complete || len(fields) == 0 || !path.IsAbs(fields[0]) {
			return false
		}
		interp, known, err := v.lookup(fields[0])
		return known && err == nil && v.executable(interp, depth+1)
	default:
		return false // execvp would hand it to /bin/sh (ENOEXEC)
	}
}

// lookup resolves the absolute sandbox path p as the kernel would inside
// the sandbox, component by component and following symbolic links, and
// returns the host path of the file it names. known is false when the
// walk leaves the view or meets a directory the sandbox may not search;
// err is the lookup's failure otherwise (fs.ErrNotExist, ENOTDIR, ELOOP).
func (v commandView) lookup(p string) (host string, known bool, err error) {
	rest := strings.Split(p, "/")
	cur := "/"
	links := 0
	for len(rest) > 0 {
		name := rest[0]
		rest = rest[1:]
		switch name {
		case "", ".":
			continue
		case "..":
			cur = path.Dir(cur)
			continue
		}
		next := path.Join(cur, name)
		target, isLink := "", false
		if v.bindParent(next) {
			cur = next // the generated /etc, a directory every sandbox searches
			continue
		}
		if t, ok := v.links[name]; ok && cur == "/" {
			target, isLink = t, true
		} else {
			h := v.hostPath(next)
			if h == "" {
				return "", false, nil
			}
			fi, err := os.Lstat(h)
			if err != nil {
				return "", true, err
			}
			switch {
			case fi.Mode()&fs.ModeSymlink != 0:
				if target, err = os.Readlink(h); err != nil {
					return "", true, err
				}
				isLink = true
			case len(rest) > 0 && !fi.IsDir():
				return "", true, syscall.ENOTDIR
			case fi.IsDir() && fi.Mode().Perm()&0o001 == 0:
				return "", false, nil // not searchable by the sandbox's uid
			}
		}
		if !isLink {
			cur = next
			continue
		}
		if links++; links > maxSymlinks {
			return "", true, syscall.ELOOP
		}
		if path.IsAbs(target) {
			cur = "/"
		}
		rest = append(strings.Split(target, "/"), rest...)
	}
	if host = v.hostPath(cur); host == "" {
		return "", false, nil
	}
	return host, true, nil
}

// bindParent reports whether p is a directory above one of the /etc binds
// (/etc itself, /etc/ssl for ssl/certs), which the runtime generates.
func (v commandView) bindParent(p string) bool {
	for _, d := range v.etcBinds {
		if strings.HasPrefix("/etc/"+d, p+"/") {
			return true
		}
	}
	return false
}

// hostPath is the host path of the clean absolute sandbox path p, or ""
// when p is outside the view.
func (v commandView) hostPath(p string) string {
	inside := func(dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }
	ok := inside("/usr")
	for _, d := range v.etcBinds {
		ok = ok || inside("/etc/"+d)
	}
	if !ok {
		return ""
	}
	return path.Join(v.root, p)
}
