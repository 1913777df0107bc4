package sandbox

import (
	"os"
	"path/filepath"
	"testing"
)

// TestCommandViewRunnable: a one-command sandbox starts with its command
// itself only when the host can tell, through /usr, the top-level links and
// the /etc binds, that execvp will find a program the sandbox may run; every
// other case (missing, not executable, a script whose interpreter is missing,
// a lookup that leaves the view) goes through a first process that reports it.
func TestCommandViewRunnable(t *testing.T) {
	root := t.TempDir()
	elf := "\x7fELF\x02\x01\x01"
	for _, f := range []struct {
		path, content string
		mode          os.FileMode
	}{
		{"usr/bin/prog", elf, 0o755},
		{"usr/bin/script", "#!/usr/bin/prog -x\necho hi\n", 0o755},
		{"usr/bin/script-via-link", "#!/bin/prog\n", 0o755},
		{"usr/bin/script-of-script", "#!/usr/bin/script\n", 0o755},
		{"usr/bin/no-interpreter", "#!/usr/bin/missing\n", 0o755},
		{"usr/bin/relative-interpreter", "#!prog\n", 0o755},
		{"usr/bin/private", elf, 0o750},
		{"usr/bin/text", "echo hi\n", 0o755},
		{"usr/closed/prog", elf, 0o755},
	} {
		p := filepath.Join(root, f.path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(f.content), f.mode); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"usr/bin/dir", "etc/alternatives"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(root, "usr/closed"), 0o750); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{
		"usr/bin/relative":             "prog",
		"usr/bin/absolute":             "/usr/bin/prog",
		"usr/bin/alternative":          "/etc/alternatives/alternative",
		"etc/alternatives/alternative": "/usr/bin/prog",
		"usr/bin/to-workspace":         "/workspace/prog",
		"usr/bin/loop":                 "loop",
		"usr/bin/up":                   "../bin/prog",
	} {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	view := commandView{root: root, links: map[string]string{"bin": "usr/bin"}, etcBinds: []string{"alternatives"}}
	const path = "/usr/local/bin:/usr/bin:/bin"
	for _, tc := range []struct {
		name, argv0, path string
		want              commandVerdict
	}{
		{"InPath", "prog", path, commandRuns},
		{"ThroughTopLink", "prog", "/bin", commandRuns},
		{"AbsoluteThroughTopLink", "/bin/prog", "", commandRuns},
		{"DotDot", "/usr/bin/../bin/prog", "", commandRuns},
		{"Script", "script", path, commandRuns},
		{"ScriptInterpreterThroughLink", "script-via-link", path, commandRuns},
		{"ScriptOfScript", "script-of-script", path, commandRuns},
		{"RelativeLink", "relative", path, commandRuns},
		{"UpLink", "up", path, commandRuns},
		{"AbsoluteLink", "absolute", path, commandRuns},
		{"AlternativesBind", "alternative", path, commandRuns},
		{"Missing", "missing", path, commandMissing},
		{"InterpreterMissing", "no-interpreter", path, commandUnsure},
		{"InterpreterRelative", "relative-interpreter", path, commandUnsure},
		{"NotForOthers", "private", path, commandUnsure},
		{"NotAProgram", "text", path, commandUnsure},
		{"Directory", "dir", path, commandUnsure},
		{"LinkIntoWorkspace", "to-workspace", path, commandUnsure},
		{"LinkLoop", "loop", path, commandUnsure},
		{"NotADirectory", "/usr/bin/prog/x", "", commandUnsure},
		{"UnsearchableDirectory", "/usr/closed/prog", "", commandUnsure},
		{"RelativeName", "./prog", path, commandUnsure},
		{"EmptyPathEntry", "prog", ":/usr/bin", commandUnsure},
		{"WorkspaceFirstInPath", "prog", "/workspace:/usr/bin", commandUnsure},
		{"OutsideView", "/tmp/prog", "", commandUnsure},
		{"EmptyName", "", path, commandUnsure},
		{"MissingAbsolute", "/usr/bin/missing", "", commandMissing},
		{"MissingThroughTopLink", "/bin/missing", "", commandMissing},
		{"MissingPastAFile", "missing", "/usr/bin/prog:/usr/bin", commandMissing},
		{"MissingButWorkspaceInPath", "missing", "/usr/bin:/workspace", commandUnsure},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := view.find(tc.argv0, tc.path); got != tc.want {
				t.Fatalf("find(%q, %q) = %v, want %v", tc.argv0, tc.path, got, tc.want)
			}
		})
	}
	if (commandView{}).find("prog", path) != commandUnsure {
		t.Fatal("the zero view found a command")
	}
}
