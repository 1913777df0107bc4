package vmtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestQuote(t *testing.T) {
	for _, s := range []string{"", "plain", "it's", `a "b" $c`, "new\nline", "'"} {
		out, err := exec.Command("bash", "-c", "printf %s "+quote(s)).Output()
		if err != nil {
			t.Fatal(err)
		}
		if string(out) != s {
			t.Errorf("quote(%q) reads back as %q", s, out)
		}
	}
}

func TestDriverScript(t *testing.T) {
	script, err := driverScript([]Command{
		{Name: "a", Argv: []string{"sandbox.test", "-test.v"}, Env: []string{"CI=true"}},
		{Name: "b.2", Argv: []string{"bash", "-c", "echo 'x y'"}, Timeout: time.Minute},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"step 0 a 600 'CI=true' -- 'sandbox.test' '-test.v'\n",
		"step 1 b.2 60 -- 'bash' '-c' 'echo '\\''x y'\\'''\n",
		"cp -a /share/bin/. /tmp/vmtest/bin/",
	} {
		if !strings.Contains(script, want) {
			t.Errorf("driver lacks %q:\n%s", want, script)
		}
	}
	if out, err := exec.Command("bash", "-n", "-c", script).CombinedOutput(); err != nil {
		t.Fatalf("bash -n: %v: %s", err, out)
	}
}

func TestDriverScriptRefuses(t *testing.T) {
	for name, cmds := range map[string][]Command{
		"EmptyName":     {{Name: "", Argv: []string{"true"}}},
		"SpaceInName":   {{Name: "a b", Argv: []string{"true"}}},
		"DuplicateName": {{Name: "a", Argv: []string{"true"}}, {Name: "a", Argv: []string{"true"}}},
		"NoArgv":        {{Name: "a"}},
		"BadEnv":        {{Name: "a", Argv: []string{"true"}, Env: []string{"NOEQUALS"}}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := driverScript(cmds); err == nil {
				t.Fatal("no error")
			}
		})
	}
}

func TestReadResult(t *testing.T) {
	dir := t.TempDir()
	vm := filepath.Join(dir, "vmtest")
	if err := os.MkdirAll(vm, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{"0.code": "3\n", "0.out": "hello\n", "0.ms": "1500\n"} {
		if err := os.WriteFile(filepath.Join(vm, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	res, err := readResult(dir, 0, "x")
	if err != nil {
		t.Fatal(err)
	}
	if res != (Result{Name: "x", ExitCode: 3, Output: "hello\n", Duration: 1500 * time.Millisecond}) {
		t.Fatalf("%+v", res)
	}
	if _, err := readResult(dir, 1, "y"); err == nil {
		t.Fatal("a missing result read without error")
	}
	rep := Report{Results: []Result{res}}
	if got, ok := rep.Result("x"); !ok || got.ExitCode != 3 {
		t.Fatalf("Result(x) = %+v, %v", got, ok)
	}
	if _, ok := rep.Result("y"); ok {
		t.Fatal("Result(y) found")
	}
}

func TestRoot(t *testing.T) {
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "scripts", "vm", "run.sh")); err != nil {
		t.Fatalf("root %s has no scripts/vm/run.sh: %v", root, err)
	}
}
