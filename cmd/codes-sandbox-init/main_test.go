package main

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/egress"
	"openvibe.network/agentsandbox/internal/testenv"
	"openvibe.network/agentsandbox/sandbox"
)

// buildInit builds this command into a temporary directory.
func buildInit(tb testing.TB) string {
	tb.Helper()
	goBin := testenv.RequireBinary(tb, "go", "install Go (make deps)")
	bin := filepath.Join(tb.TempDir(), "codes-sandbox-init")
	if out, err := exec.Command(goBin, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		tb.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func TestNotInit(t *testing.T) {
	var buf bytes.Buffer
	if code := notInit(&buf); code != 2 || !strings.Contains(buf.String(), "run codes-sandbox instead") {
		t.Fatalf("notInit = %d, %q", code, buf.String())
	}
}

// TestLean guards the point of this command: it links the in-sandbox
// packages and what they need, and nothing of the host side (no runtime,
// proxy, metrics, stores or schema engine), so every sandbox's init starts
// in a fraction of the worker's time.
func TestLean(t *testing.T) {
	testenv.OnlyDeps(t, []string{
		"openvibe.network/agentsandbox/cmd/codes-sandbox-init", "openvibe.network/agentsandbox/inside", "openvibe.network/agentsandbox/inside/capexec",
		"openvibe.network/agentsandbox/inside/bridge", "openvibe.network/agentsandbox/sandbox/control",
		"openvibe.network/agentsandbox/internal/hostname", "openvibe.network/agentsandbox/internal/tunnel",
		"github.com/miekg/dns", "golang.org/x/sys/", "golang.org/x/net/",
	}, "which is not part of the sandbox's inside")
}

// TestInit runs the built binary as a sandbox's init: a sandbox starts and
// runs commands through it, and the binary run by hand refuses.
func TestInit(t *testing.T) {
	testenv.RequireSandbox(t)
	bin := buildInit(t)
	var stderr bytes.Buffer
	cmd := exec.Command(bin)
	cmd.Stderr = &stderr
	if err := cmd.Run(); cmd.ProcessState.ExitCode() != 2 || !strings.Contains(stderr.String(), "started by its runtime") {
		t.Errorf("run by hand: %v, stderr %q; want exit code 2 and an explanation", err, stderr.String())
	}
	proxy, err := egress.NewProxy(egress.ProxyConfig{Guard: egress.NewGuard(egress.GuardConfig{})})
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	rt, err := sandbox.NewRuntime(sandbox.Config{Capacity: 1, InitBinary: bin, Egress: proxy})
	if err != nil {
		t.Fatalf("NewRuntime: %v", err)
	}
	defer func() {
		if err := rt.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()
	for _, tc := range []struct {
		name   string
		egress bool
		want   string
	}{
		{name: "NoEgress", want: "hi proxy=\n"},
		{name: "Egress", egress: true, want: "hi proxy=set\n"}, // the bridge ran
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			info, err := rt.Create(ctx, sandbox.Options{Egress: tc.egress, Env: map[string]string{"GREETING": "hi"}})
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			var out bytes.Buffer
			req := agentsandbox.ExecRequest{Argv: []string{"sh", "-c", "echo $GREETING proxy=${HTTPS_PROXY:+set}; exit 3"}}
			res, err := rt.Exec(ctx, info.ID, req, &out, nil)
			if err != nil || res.ExitCode != 3 || out.String() != tc.want {
				t.Errorf("Exec: %v %+v %q; want exit code 3 and %q", err, res, out.String(), tc.want)
			}
			if rep, err := rt.Delete(ctx, info.ID); err != nil || !rep.Verified {
				t.Errorf("Delete: %v %v", err, rep.Leftovers)
			}
		})
	}
}
