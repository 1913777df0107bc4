// Package client holds the Go clients other programs import: the worker API
// client OpenVibe.Codes uses (Worker) and the Live check-in client a
// sandbox worker uses to report to OpenVibe.Live (Live).
//
// A Worker speaks to one worker (docs/openapi.yaml). Create makes a
// sandbox; Sandbox(id) is a handle of it:
//
//	w := client.NewWorker("http://127.0.0.1:8088", token, nil)
//	info, err := w.Create(ctx, client.CreateOptions{TimeBoxMinutes: 10, Limits: client.RequestLimits{MemoryMB: 512}})
//	sb := w.Sandbox(info.ID)
//	res, err := sb.Exec(ctx, client.ExecRequest{Argv: []string{"go", "test", "./..."}}, os.Stdout, os.Stderr)
//	usage, err := sb.Usage(ctx)           // memory, CPU, tasks, workspace bytes
//	info, err = sb.Extend(ctx, 20)        // a time box of 20 minutes from its start
//	rep, err := sb.Delete(ctx)            // the verified wipe's report
//
// A Pool uses several workers as one (NewPool): Create places each
// sandbox on the worker with the most free slots and moves on when one is
// full or does not answer; the handle's ID (KEY-ID) names its worker, so
// Pool.Sandbox finds it again.
//
// Commands run in the foreground (Exec, ExecStream: ending ctx kills
// them), in the background (Start returns a *Process: Info, Output with
// follow, Signal, Stdin, Wait), with stdin streamed from an io.Reader
// (Run), or on a terminal (Terminal returns a *Terminal, an
// io.ReadWriteCloser over the worker's attach WebSocket with Resize,
// CloseInput, Wait and Dropped).
//
// Errors are *APIError values; errors.Is matches them to ErrNotFound,
// ErrSandboxNotFound, ErrProcessNotFound, ErrProcessExited, ErrCapacity, ErrUnauthorized and
// ErrInvalidRequest by the worker's error code, never by its message; a
// pool's worker that does not answer fails with an error matching
// ErrUnreachable that names it.
// Neither client follows redirects, so a token goes only to the base URL
// it was made with.
package client
