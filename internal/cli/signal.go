package cli

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// Interruptible returns a context that ends at the first SIGINT or SIGTERM;
// later ones are ignored (a run wipes its sandbox, a worker drains). The
// handlers are put in place by a goroutine of its own: enabling a signal,
// and disabling it again, waits for the Go runtime's signal thread (about a
// millisecond each, a tenth of a one-off `codes-sandbox run`), which the
// command need not wait for. A signal before they are in place has its
// default effect, as it has before main: the process ends, and the
// parent-death signal ends any sandbox it started.
func Interruptible(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	go func() {
		signalled, _ := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM) // never stopped: later signals stay ignored
		<-signalled.Done()
		cancel()
	}()
	return ctx, cancel
}
