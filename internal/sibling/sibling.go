// Package sibling finds the other programs of this build installed next to
// the running one (codes-sandbox beside codes-sandbox-worker, the worker
// beside codes-sandbox-init), and trusts one only when it is as trusted as
// the running program and from the same build, so that it speaks the same
// protocols. A program that only hands over to a sibling (Exec) leaves the
// build check to it (CheckCaller), so that it need not link an executable
// file reader to read the sibling's build information.
package sibling

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
)

// callerBuildEnv carries the build information of a program that Exec
// replaced with its sibling, for the sibling's CheckCaller.
const callerBuildEnv = "AGENTSANDBOX_CALLER_BUILD"

// Find returns the path of the program name in the running program's
// directory once Usable accepts it; read reads a program's build
// information (debug/buildinfo.ReadFile). Errors say what is wrong; a
// missing file is fs.ErrNotExist.
func Find(name string, read func(string) (*debug.BuildInfo, error)) (string, error) {
	self, info, p, err := beside(name)
	if err != nil {
		return "", err
	}
	if err := Usable(self, info, p, read); err != nil {
		return "", err
	}
	return p, nil
}

// Exec replaces this process with the program name next to it, with args,
// once it is as trusted as this one (Owned); its build is checked by the
// program itself: it must call CheckCaller first thing in main. It returns
// only with the reason it could not; a missing file is fs.ErrNotExist.
func Exec(name string, args []string) error {
	self, info, p, err := beside(name)
	if err != nil {
		return err
	}
	if err := Owned(self, p); err != nil {
		return err
	}
	env := append(os.Environ(), callerBuildEnv+"="+info.String())
	return fmt.Errorf("start %s: %w", p, syscall.Exec(p, append([]string{p}, args...), env))
}

// CheckCaller checks, when a sibling started this program with Exec, that
// the two are from the same build (see Usable), and takes the caller's
// build information out of the environment. It returns nil for a program
// started otherwise.
func CheckCaller() error {
	v, ok := os.LookupEnv(callerBuildEnv)
	if !ok {
		return nil
	}
	if err := os.Unsetenv(callerBuildEnv); err != nil {
		return fmt.Errorf("check the caller's build: %w", err)
	}
	caller, err := debug.ParseBuildInfo(v)
	if err != nil {
		return fmt.Errorf("check the caller's build: %w", err)
	}
	// ParseBuildInfo skips the Go version line that String writes first.
	if line, _, _ := strings.Cut(v, "\n"); strings.HasPrefix(line, "go\t") {
		caller.GoVersion = strings.TrimPrefix(line, "go\t")
	}
	self, ok := debug.ReadBuildInfo()
	if !ok {
		return errors.New("check the caller's build: this binary has no build information")
	}
	if why := buildDiff(self, caller); why != "" {
		return fmt.Errorf("the program that started this one is from another build (%s); install both from one build (make build, or the package)", why)
	}
	return nil
}

// beside returns the running program's path and build information, and the
// path of the program name in its directory.
func beside(name string) (self string, info *debug.BuildInfo, path string, err error) {
	if self, err = os.Executable(); err != nil {
		return "", nil, "", fmt.Errorf("find own binary: %w", err)
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "", nil, "", errors.New("this binary has no build information")
	}
	return self, info, filepath.Join(filepath.Dir(self), name), nil
}

// Usable checks that the program at path may be trusted as self's sibling:
// a regular, executable file owned by self's owner and writable by no one
// else (so it is as trusted as self), built by the same build as self (same
// Go version, module version, VCS revision, time and modified flag, and
// every dependency that both link at the same version; so it speaks self's
// protocols). Each program links only the packages its process needs, so a
// dependency only one of them links is no difference. read reads a
// program's build information (debug/buildinfo.ReadFile). Errors say what
// is wrong; a missing file is fs.ErrNotExist.
func Usable(self string, selfInfo *debug.BuildInfo, path string, read func(string) (*debug.BuildInfo, error)) error {
	if err := Owned(self, path); err != nil {
		return err
	}
	info, err := read(path)
	if err != nil {
		return fmt.Errorf("read build info of %s: %w", path, err)
	}
	if why := buildDiff(selfInfo, info); why != "" {
		return fmt.Errorf("%s is from another build (%s); rebuild both with make build", path, why)
	}
	return nil
}

// Owned checks that path is a regular, executable file owned by self's
// owner and writable by no one else, in a directory owned by that owner or
// root and writable by no one else (or another user could put a program of
// their own there between this check and its use). A missing file is
// fs.ErrNotExist.
func Owned(self, path string) error {
	st, err := ownerStat(self)
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	di, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("stat the directory of %s: %w", path, err)
	}
	switch dst, _ := di.Sys().(*syscall.Stat_t); {
	case dst == nil || dst.Uid != st.Uid && dst.Uid != 0:
		return fmt.Errorf("%s is owned by neither root nor the owner of %s", dir, self)
	case di.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("%s is writable by others (mode %v): install the programs in a directory only their owner can change", dir, di.Mode().Perm())
	}
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	ist, _ := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0:
		return fmt.Errorf("%s is not an executable file", path)
	case ist == nil || ist.Uid != st.Uid:
		return fmt.Errorf("%s is not owned by the owner of %s", path, self)
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("%s is writable by others (mode %v)", path, fi.Mode().Perm())
	}
	return nil
}

func ownerStat(path string) (*syscall.Stat_t, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("stat own binary: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil, errors.New("stat own binary: no owner")
	}
	return st, nil
}

// buildDiff says how other's build differs from self's; "" when it does not.
func buildDiff(self, other *debug.BuildInfo) string {
	if self.GoVersion != other.GoVersion {
		return "Go " + other.GoVersion + ", not " + self.GoVersion
	}
	if !sameModule(&self.Main, &other.Main) {
		return "module version " + other.Main.Version
	}
	for _, k := range []string{"vcs.revision", "vcs.time", "vcs.modified", "GOOS", "GOARCH"} {
		if a, b := setting(self, k), setting(other, k); a != b {
			return fmt.Sprintf("%s %q, not %q", k, b, a)
		}
	}
	deps := map[string]*debug.Module{}
	for _, d := range self.Deps {
		deps[d.Path] = d
	}
	for _, d := range other.Deps {
		if s, ok := deps[d.Path]; ok && !sameModule(s, d) {
			return "dependency " + d.Path + " " + d.Version
		}
	}
	return ""
}

func sameModule(a, b *debug.Module) bool {
	if a.Path != b.Path || a.Version != b.Version || a.Sum != b.Sum || (a.Replace == nil) != (b.Replace == nil) {
		return false
	}
	return a.Replace == nil || sameModule(a.Replace, b.Replace)
}

func setting(info *debug.BuildInfo, key string) string {
	for _, s := range info.Settings {
		if s.Key == key {
			return s.Value
		}
	}
	return ""
}
