package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// Bounds of Run.
const (
	// stdinChunk is the most one stdin request of Run carries, well under
	// the worker's default body limit.
	stdinChunk = 16 << 20
	// killTimeout bounds the kill of a command whose run failed.
	killTimeout = 10 * time.Second
)

// Run runs req like Exec with its standard input streamed from stdin (nil:
// none) as it is read: it starts req in the background, feeds stdin to it
// (closing its stdin at stdin's end) while following its output to stdout
// and stderr (nil: discarded), and returns how it ended. req.Stdin and
// req.Timeout must be empty (bound the command with ctx). When ctx ends,
// stdin fails to read, or the output cannot be followed, the command is
// killed. Its errors are Start's and Output's, a writer's, or stdin's
// (wrapped as "read stdin").
func (sb *Sandbox) Run(ctx context.Context, req ExecRequest, stdin io.Reader, stdout, stderr io.Writer) (ExecResult, error) {
	p, err := sb.Start(ctx, req)
	if err != nil {
		return ExecResult{}, fmt.Errorf("run: %w", err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	fed := make(chan error, 1)
	go func() {
		err := p.feed(runCtx, stdin)
		if err == nil || runCtx.Err() != nil || errors.Is(err, ErrProcessNotFound) || errors.Is(err, ErrProcessExited) {
			fed <- nil // the run ended first, or the command exited before reading all of stdin, as it may
			return
		}
		cancel() // the command cannot get its input: end the run
		fed <- err
	}()
	var dropped int64
	write := writeOutput(stdout, stderr)
	rec, err := p.Output(runCtx, true, func(ev ExecEvent) error {
		dropped += ev.DroppedBytes
		return write(ev)
	})
	if err != nil {
		p.kill(ctx)
		cancel()
		if ferr := <-fed; ferr != nil {
			err = ferr
		}
		return ExecResult{}, fmt.Errorf("run: %w", err)
	}
	cancel() // the command exited: stop sending what it will never read
	<-fed
	return ExecResult{ExitCode: rec.ExitCode, Reason: rec.Reason, DroppedBytes: dropped}, nil
}

// feed streams src (nil: nothing) to the process's stdin in requests of at
// most stdinChunk bytes, then closes it. src is read by a goroutine of its
// own, so that feed returns once ctx ends even while a Read blocks (that
// goroutine stays until the Read returns).
func (p *Process) feed(ctx context.Context, src io.Reader) error {
	pieces, srcErr := pump(ctx, src)
	for more := src != nil; more; {
		pr, pw := io.Pipe()
		sent := make(chan error, 1)
		go func() { sent <- p.Stdin(ctx, pr, false) }()
		for n := 0; more && n < stdinChunk; {
			var b []byte
			select {
			case b, more = <-pieces:
			case <-ctx.Done():
				pw.CloseWithError(ctx.Err())
				<-sent
				return ctx.Err()
			}
			if _, err := pw.Write(b); err != nil {
				break // the request failed: sent says why
			}
			n += len(b)
		}
		pw.Close()
		if err := <-sent; err != nil {
			return err
		}
	}
	if err := *srcErr; err != nil {
		return fmt.Errorf("read stdin: %w", err)
	}
	return p.Stdin(ctx, nil, true)
}

// pump sends what it reads of src (nil: nothing) as pieces until src ends
// or ctx does, then closes pieces; *srcErr is src's error (not io.EOF)
// once pieces is closed.
func pump(ctx context.Context, src io.Reader) (pieces <-chan []byte, srcErr *error) {
	ch := make(chan []byte)
	var errp error
	go func() {
		defer close(ch)
		for src != nil {
			b := make([]byte, 32<<10)
			n, err := src.Read(b)
			if n > 0 {
				select {
				case ch <- b[:n]:
				case <-ctx.Done():
					return
				}
			}
			if err != nil {
				if !errors.Is(err, io.EOF) {
					errp = err
				}
				return
			}
		}
	}()
	return ch, &errp
}

// kill sends KILL to the process, bounded by killTimeout even once ctx
// ended; a process already gone is no error, and others are dropped (the
// caller is already failing).
func (p *Process) kill(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), killTimeout)
	defer cancel()
	_ = p.Signal(ctx, "KILL")
}
