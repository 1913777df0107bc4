// Command loadtest is the driver of scripts/loadtest.sh: it loads a running
// worker through the Go client (client/) and prints what the load cost. It
// talks to a loopback worker only and runs nothing but /bin/true.
//
//	loadtest load  --worker URL --token-file F --clients N --duration D [--pid P] [--file-bytes B]
//	loadtest burst --worker URL --token-file F --clients N --rounds R [--bwrap]
//
// load: N clients, each in a loop until the duration ends: create → exec
// /bin/true → upload a small file → download it (compared) → delete.
// It prints the rounds per second, p50/p99 of each operation, the worker's
// RSS and open descriptors (sampled from /proc/P), and fails when any
// operation failed or the worker still lists a sandbox at the end.
//
// burst: R rounds, interleaved, of N at once (released together): N raw
// bubblewrap starts of /bin/true with every namespace unshared (with
// --bwrap), N creates through the API, N execs of /bin/true (one in each
// sandbox just made), and N host fork+exec of /bin/true; then the N
// sandboxes are deleted. It prints, per side, the medians over the rounds
// of p50, p99 and the wall for all N, and the ratios of the API's sides to
// raw bubblewrap's and the host's.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"openvibe.network/agentsandbox/client"
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("loadtest: ")
	if len(os.Args) < 2 {
		log.Fatal("usage: loadtest load|burst [flags] (see the package doc)")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch os.Args[1] {
	case "load":
		err = loadCmd(ctx, os.Args[2:], os.Stdout)
	case "burst":
		err = burstCmd(ctx, os.Args[2:], os.Stdout)
	default:
		err = fmt.Errorf("unknown command %q: use load or burst", os.Args[1])
	}
	if err != nil {
		log.Fatal(err)
	}
}

// newWorker returns a client of the worker at rawURL, which must be http://
// on a loopback address, with the token in tokenFile and room for n
// connections kept alive. Errors: a URL off loopback, an unreadable token.
func newWorker(rawURL, tokenFile string, n int) (*client.Worker, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "http" {
		return nil, fmt.Errorf("--worker %q: give http://127.0.0.1:PORT", rawURL)
	}
	ip := net.ParseIP(u.Hostname())
	if ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("--worker %q: the load test talks to a loopback worker only", rawURL)
	}
	tok, err := os.ReadFile(tokenFile)
	if err != nil {
		return nil, fmt.Errorf("read the token: %w", err)
	}
	return client.NewWorker(rawURL, strings.TrimSpace(string(tok)), httpClient(n)), nil
}

// checkEmpty fails when the worker still lists a sandbox.
func checkEmpty(ctx context.Context, w *client.Worker) error {
	left, err := w.List(ctx)
	if err != nil {
		return err
	}
	if len(left) > 0 {
		ids := make([]string, len(left))
		for i, sb := range left {
			ids[i] = sb.ID
		}
		return fmt.Errorf("%d sandbox(es) left after the run: %s", len(left), strings.Join(ids, ", "))
	}
	return nil
}

// errCount counts the errors of one kind and keeps the first.
type errCount struct {
	n     int
	first error
}

func (e *errCount) add(err error) {
	if e.n == 0 {
		e.first = err
	}
	e.n++
}

func (e *errCount) err(what string) error {
	if e.n == 0 {
		return nil
	}
	return fmt.Errorf("%d %s failed, the first: %w", e.n, what, e.first)
}

var errMismatch = errors.New("the downloaded file differs from the uploaded one")
