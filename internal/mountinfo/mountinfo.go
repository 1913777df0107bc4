// Package mountinfo parses /proc/PID/mountinfo, the kernel's mount table of
// a process's mount namespace, for the runtime (its sandboxes' mounts, the
// cgroup file systems) and the self-test (what a sandbox may write).
package mountinfo

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Mount is one line of a mount table.
type Mount struct {
	// Dev is the file system's device ("major:minor"): mounts of one file
	// system share it.
	Dev string
	// Root is the directory of the file system that is mounted at Point
	// ("/" for the whole of it; a cgroup mount in a cgroup namespace or a
	// bind mount shows the subtree it is), octal escapes decoded.
	Root string
	// Point is where it is mounted (octal escapes decoded).
	Point string
	// Options are the per-mount options ("ro", "nosuid"…).
	Options []string
	// FSType is the file system's type ("tmpfs", "cgroup2"…).
	FSType string
	// Source is the mount's source ("tmpfs", "/dev/vda"…).
	Source string
	// SuperOptions are the file system's own options ("size=…", "max=…").
	SuperOptions []string
}

// ReadOnly reports whether the mount is read-only.
func (m Mount) ReadOnly() bool { return has(m.Options, "ro") }

// Has reports whether the file system's options include key (alone or as
// key=value).
func (m Mount) Has(key string) bool { return has(m.SuperOptions, key) }

// Value returns the value of a key=value file system option, or "".
func (m Mount) Value(key string) string {
	for _, o := range m.SuperOptions {
		if v, ok := strings.CutPrefix(o, key+"="); ok {
			return v
		}
	}
	return ""
}

func has(opts []string, key string) bool {
	for _, o := range opts {
		if o == key || strings.HasPrefix(o, key+"=") {
			return true
		}
	}
	return false
}

// Parse returns the mounts of a mountinfo text, in order. Lines that are not
// mount lines are skipped.
func Parse(text string) []Mount {
	var out []Mount
	for _, line := range strings.Split(text, "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 6 || len(g) < 3 {
			continue
		}
		out = append(out, Mount{
			Dev: f[2], Root: Unescape(f[3]), Point: Unescape(f[4]), Options: strings.Split(f[5], ","),
			FSType: g[0], Source: Unescape(g[1]), SuperOptions: strings.Split(g[2], ","),
		})
	}
	return out
}

// Read parses /proc/PID/mountinfo under procRoot. Errors: the file cannot
// be read (the process is gone, or not ours to read).
func Read(procRoot string, pid int) ([]Mount, error) {
	b, err := os.ReadFile(procRoot + "/" + strconv.Itoa(pid) + "/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read mount table: %w", err)
	}
	return Parse(string(b)), nil
}

// Visible returns the mounts a process sees: of several mounts at one
// point, only the last (the others lie under it), in the order points were
// first mounted.
func Visible(mounts []Mount) []Mount {
	index := map[string]int{}
	var out []Mount
	for _, m := range mounts {
		if i, ok := index[m.Point]; ok {
			out[i] = m
			continue
		}
		index[m.Point] = len(out)
		out = append(out, m)
	}
	return out
}

// Covering returns the points of the mounts that now cover parts of the
// file system mounted at dir (a container runtime's masks over /proc):
// those below dir mounted after the last mount at dir, in order.
func Covering(mounts []Mount, dir string) []string {
	last := -1
	for i, m := range mounts {
		if m.Point == dir {
			last = i
		}
	}
	if last < 0 {
		return nil
	}
	var out []string
	for _, m := range mounts[last+1:] {
		if strings.HasPrefix(m.Point, strings.TrimSuffix(dir, "/")+"/") {
			out = append(out, m.Point)
		}
	}
	return out
}

// Unescape decodes the octal escapes (\040 for a space) of a mountinfo field.
func Unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
