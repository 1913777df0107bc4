package main

import (
	"debug/buildinfo"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"syscall"
)

// leanInitName is the lean init binary (cmd/codes-sandbox-init) that
// sandboxes run when it lies next to this program.
const leanInitName = "codes-sandbox-init"

// initBinary returns the program the runtime starts inside each sandbox: the
// lean init next to this binary when it is usable (see usableInit), which
// starts in a fraction of this binary's time, else "" (the runtime's default:
// this binary, re-executed). It logs which one sandboxes run, and why a lean
// init that is present is not used.
func initBinary(log *slog.Logger) string {
	self, err := os.Executable()
	info, ok := debug.ReadBuildInfo()
	if err != nil || !ok {
		log.Info("sandboxes run this binary as their init", "reason", "no build info")
		return ""
	}
	p := filepath.Join(filepath.Dir(self), leanInitName)
	if err := usableInit(self, info, p, buildinfo.ReadFile); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			log.Info("sandboxes run this binary as their init", "reason", leanInitName+" is not next to it")
		} else {
			log.Warn("sandboxes run this binary as their init", "reason", err.Error())
		}
		return ""
	}
	log.Info("sandboxes run the lean init", "path", p)
	return p
}

// usableInit checks that the program at path may stand in for self as the
// init: a regular, executable file owned by self's owner and writable by no
// one else (so it is as trusted as self), built by the same build as self
// (same Go version, module version, VCS revision, time and modified flag,
// every dependency at the version self links; so it speaks self's
// protocol). Errors say what is wrong; a missing file is fs.ErrNotExist.
func usableInit(self string, selfInfo *debug.BuildInfo, path string, read func(string) (*debug.BuildInfo, error)) error {
	st, err := ownerStat(self)
	if err != nil {
		return err
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
	info, err := read(path)
	if err != nil {
		return fmt.Errorf("read build info of %s: %w", path, err)
	}
	if why := buildDiff(selfInfo, info); why != "" {
		return fmt.Errorf("%s is from another build (%s); rebuild both with make build", path, why)
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

// buildDiff says how init's build differs from self's; "" when it does not.
func buildDiff(self, init *debug.BuildInfo) string {
	if self.GoVersion != init.GoVersion {
		return "Go " + init.GoVersion + ", not " + self.GoVersion
	}
	if !sameModule(&self.Main, &init.Main) {
		return "module version " + init.Main.Version
	}
	for _, k := range []string{"vcs.revision", "vcs.time", "vcs.modified", "GOOS", "GOARCH"} {
		if a, b := setting(self, k), setting(init, k); a != b {
			return fmt.Sprintf("%s %q, not %q", k, b, a)
		}
	}
	deps := map[string]*debug.Module{}
	for _, d := range self.Deps {
		deps[d.Path] = d
	}
	for _, d := range init.Deps {
		if s, ok := deps[d.Path]; !ok || !sameModule(s, d) {
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
