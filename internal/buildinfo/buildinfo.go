// Package buildinfo says which build of a command is running: its version,
// the VCS revision it was built from and the Go version, for `--version`
// and the build-info metric.
//
// The version is the one given at link time,
//
//	go build -ldflags "-X openvibe.network/agentsandbox/internal/buildinfo.version=1.4.0" ./cmd/ovlive
//
// or else the main module's version from the binary's build information
// ("(devel)" for a build of a work tree). The revision and its time come from
// the build information's VCS stamp (absent with -buildvcs=false).
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// version is set only by the linker (-ldflags -X); nothing assigns it.
var version string

// Info describes a build.
type Info struct {
	// Version is the link-time version, else the main module's version,
	// else "unknown".
	Version string `json:"version"`
	// Revision is the VCS revision, "" when the build has none.
	Revision string `json:"revision,omitempty"`
	// Time is the revision's commit time (RFC 3339), "" when unknown.
	Time string `json:"time,omitempty"`
	// Modified says the work tree had uncommitted changes.
	Modified bool `json:"modified,omitempty"`
	// GoVersion is the Go toolchain that built the binary.
	GoVersion string `json:"go_version"`
}

// Read returns the running binary's build information.
func Read() Info {
	bi, ok := debug.ReadBuildInfo()
	return fromBuild(version, bi, ok)
}

// fromBuild combines a link-time version with the build information.
func fromBuild(linked string, bi *debug.BuildInfo, ok bool) Info {
	info := Info{Version: linked, GoVersion: runtime.Version()}
	if !ok || bi == nil {
		if info.Version == "" {
			info.Version = "unknown"
		}
		return info
	}
	if bi.GoVersion != "" {
		info.GoVersion = bi.GoVersion
	}
	if info.Version == "" {
		info.Version = bi.Main.Version
	}
	if info.Version == "" {
		info.Version = "unknown"
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Revision = s.Value
		case "vcs.time":
			info.Time = s.Value
		case "vcs.modified":
			info.Modified = s.Value == "true"
		}
	}
	return info
}

// String is the one line `PROG --version` prints, without the program's
// name: "1.4.0 (revision 1a2b3c4d5e6f, modified; go1.26.8)".
func (i Info) String() string {
	rev := "no revision"
	if i.Revision != "" {
		rev = "revision " + short(i.Revision)
		if i.Modified {
			rev += ", modified"
		}
	}
	return fmt.Sprintf("%s (%s; %s)", i.Version, rev, i.GoVersion)
}

// short returns the first 12 characters of a revision.
func short(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return rev
}
