package sandbox

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"openvibe.network/agentsandbox"
)

// TestSelfTestView: a sandbox made by the self-test's view is that view's
// alone: the runtime neither lists it, counts it active, nor finds it by
// id for any operation, whether it runs in the self-test's own slot or an
// ordinary one; the view in turn sees none of the runtime's sandboxes; and
// the runtime refuses to make a self-test sandbox itself.
func TestSelfTestView(t *testing.T) {
	for _, ownSlot := range []bool{true, false} {
		t.Run(fmt.Sprintf("SelfTestSlot=%v", ownSlot), func(t *testing.T) {
			rt := newRuntime(t, Config{Capacity: 1, SelfTestSlot: ownSlot})
			view := rt.SelfTest()
			probe := newBox(t, view, Options{})
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			if got := shOK(t, view, probe.ID, "echo probe"); got != "probe\n" {
				t.Fatalf("exec through the view: %q", got)
			}
			if got := view.List(); len(got) != 1 || got[0].ID != probe.ID {
				t.Errorf("the view lists %+v, want the probe", got)
			}
			if got := rt.List(); len(got) != 0 {
				t.Errorf("the runtime lists %+v, want nothing", got)
			}
			if n := rt.Active(); n != 0 {
				t.Errorf("the runtime counts %d active, want 0", n)
			}
			_, execErr := rt.Exec(ctx, probe.ID, agentsandbox.ExecRequest{Argv: []string{"true"}}, nil, nil)
			_, startErr := rt.Start(ctx, probe.ID, agentsandbox.ExecRequest{Argv: []string{"true"}})
			_, pidsErr := rt.HostPids(probe.ID)
			_, usageErr := rt.Usage(probe.ID)
			_, extendErr := rt.Extend(probe.ID, 10*time.Minute)
			_, delErr := rt.Delete(ctx, probe.ID)
			for name, err := range map[string]error{"Exec": execErr, "Start": startErr, "HostPids": pidsErr,
				"Usage": usageErr, "Extend": extendErr, "Delete": delErr} {
				if !errors.Is(err, ErrNotFound) {
					t.Errorf("the runtime's %s of the probe: %v, want ErrNotFound", name, err)
				}
			}
			if got := shOK(t, view, probe.ID, "echo still"); got != "still\n" {
				t.Fatalf("the probe after the runtime's attempts: %q", got)
			}
			if _, err := rt.Create(ctx, Options{SelfTest: true}); err == nil {
				t.Error("the runtime made a self-test sandbox itself")
			}
			if !ownSlot {
				return
			}
			box := newBox(t, rt, Options{})
			if _, err := view.Usage(box.ID); !errors.Is(err, ErrNotFound) {
				t.Errorf("the view's Usage of the runtime's sandbox: %v, want ErrNotFound", err)
			}
			if got := view.List(); len(got) != 1 || got[0].ID != probe.ID {
				t.Errorf("the view lists %+v, want only the probe", got)
			}
			if n := rt.Active(); n != 1 {
				t.Errorf("the runtime counts %d active, want its one sandbox", n)
			}
		})
	}
}
