package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/workerapi"
	"time"
)

// Sandbox is a handle of one sandbox of a worker: its state, time box,
// commands (foreground, background, on a terminal) and deletion. Make it
// with (*Worker).Sandbox; it holds only the id, so it is cheap, safe for
// concurrent use, and says nothing of whether the sandbox exists (its
// methods fail with ErrSandboxNotFound once it is gone).
type Sandbox struct {
	w  *Worker
	id string
}

// Sandbox returns the handle of sandbox id, such as the ID of Create's
// answer.
func (w *Worker) Sandbox(id string) *Sandbox { return &Sandbox{w: w, id: id} }

// ID returns the sandbox's id.
func (sb *Sandbox) ID() string { return sb.id }

// Files is the sandbox's workspace files and archives.
func (sb *Sandbox) Files() *Files { return sb.w.Files(sb.id) }

// path is the path of the sandbox plus rest.
func (sb *Sandbox) path(rest ...string) string { return sandboxPath(sb.id, rest...) }

// Info returns the sandbox's description, state and usage. It fails with
// ErrSandboxNotFound once the sandbox is gone.
func (sb *Sandbox) Info(ctx context.Context) (SandboxInfo, error) {
	var in SandboxInfo
	if err := sb.w.doJSON(ctx, http.MethodGet, sb.path(), nil, &in, http.StatusOK); err != nil {
		return SandboxInfo{}, fmt.Errorf("sandbox info: %w", err)
	}
	return in, nil
}

// Usage returns what the sandbox uses now (Info's Usage). It fails with
// ErrSandboxNotFound once the sandbox is gone.
func (sb *Sandbox) Usage(ctx context.Context) (Usage, error) {
	in, err := sb.Info(ctx)
	if err != nil {
		return Usage{}, err
	}
	return in.Usage, nil
}

// Extend sets the sandbox's time box anew to minutes (5..30) counted from
// its start, as every time box is, and returns its new description. It
// fails with ErrInvalidRequest for minutes out of range or an end already
// past, and with ErrSandboxNotFound once the sandbox is gone.
func (sb *Sandbox) Extend(ctx context.Context, minutes int) (SandboxInfo, error) {
	var in SandboxInfo
	body := workerapi.PatchRequest{TimeBoxMinutes: &minutes}
	if err := sb.w.doJSON(ctx, http.MethodPatch, sb.path(), body, &in, http.StatusOK); err != nil {
		return SandboxInfo{}, fmt.Errorf("extend sandbox: %w", err)
	}
	return in, nil
}

// UpdateSecrets adds or rotates secrets of the sandbox, by name (PATCH
// with secrets): a name it has keeps its placeholder and the proxy puts
// the new value in from the next request on; a new name gets a new
// placeholder, in the environment of the commands started after. It
// returns the sandbox's description and the placeholder of each secret
// given, by name. The sandbox must have been created with secrets or
// with an egress allow entry with methods or paths, and each host must be
// within those hosts (its trust bundle cannot change): else
// ErrInvalidRequest, saying what to fix. ErrSandboxNotFound once the
// sandbox is gone.
func (sb *Sandbox) UpdateSecrets(ctx context.Context, secrets map[string]agentsandbox.Secret) (SandboxInfo, map[string]string, error) {
	var in SandboxInfo
	body := workerapi.PatchRequest{Secrets: secrets}
	if err := sb.w.doJSON(ctx, http.MethodPatch, sb.path(), body, &in, http.StatusOK); err != nil {
		return SandboxInfo{}, nil, fmt.Errorf("update secrets: %w", err)
	}
	return in, in.SecretPlaceholders, nil
}

// Delete wipes the sandbox (its commands are killed) and returns the
// wipe's report. It fails with ErrSandboxNotFound for an unknown sandbox,
// and with a 500 *APIError (code wipe_unverified) listing Leftovers when
// the wipe could not verify itself.
func (sb *Sandbox) Delete(ctx context.Context) (WipeReport, error) {
	var rep workerapi.WipeReport
	if err := sb.w.doJSON(ctx, http.MethodDelete, sb.path(), nil, &rep, http.StatusOK); err != nil {
		return WipeReport{}, fmt.Errorf("delete sandbox: %w", err)
	}
	return WipeReport{Verified: rep.Verified, Duration: time.Duration(rep.DurationMS * float64(time.Millisecond))}, nil
}

// Exec runs a command in the foreground, copying its output to stdout and
// stderr (nil: discarded) as it arrives, and returns how it ended; its
// errors are those of ExecStream, or a writer's. Ending ctx closes the
// request, which kills the command.
func (sb *Sandbox) Exec(ctx context.Context, req ExecRequest, stdout, stderr io.Writer) (ExecResult, error) {
	return sb.ExecStream(ctx, req, writeOutput(stdout, stderr))
}

// writeOutput is the event callback that copies output to stdout and
// stderr (nil: discarded).
func writeOutput(stdout, stderr io.Writer) func(ExecEvent) error {
	return func(ev ExecEvent) error {
		dst := stdout
		if ev.Stream == "stderr" {
			dst = stderr
		}
		if dst == nil || len(ev.Data) == 0 {
			return nil
		}
		_, err := dst.Write(ev.Data)
		return err
	}
}

// Processes lists the sandbox's commands, foreground and background,
// running and exited, oldest first. It fails with ErrSandboxNotFound once
// the sandbox is gone.
func (sb *Sandbox) Processes(ctx context.Context) ([]ProcessInfo, error) {
	var out workerapi.ProcessList
	if err := sb.w.doJSON(ctx, http.MethodGet, sb.path("processes"), nil, &out, http.StatusOK); err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	infos := make([]ProcessInfo, len(out.Items))
	for i, p := range out.Items {
		infos[i] = processInfo(p)
	}
	return infos, nil
}
