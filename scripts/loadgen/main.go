// Command loadgen is the helper of scripts/bench-live.sh, whose load itself
// comes from wrk (checkin.lua): it serves the bare net/http handler that the
// check-ins are compared with, checks that a URL is on loopback, and
// summarises the runs. It listens on and accepts loopback addresses only.
//
//	loadgen bare --listen 127.0.0.1:0 --addr-file FILE
//	loadgen loopback URL          (exit 1 unless URL is http:// on a loopback address)
//	loadgen summary < RESULTS     (medians and ratios of the runs' JSON lines)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"openvibe.network/agentsandbox/internal/atomicfile"
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("loadgen: ")
	if len(os.Args) < 2 {
		log.Fatal("usage: loadgen bare|loopback|summary [flags]")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch os.Args[1] {
	case "bare":
		err = bareCmd(ctx, os.Args[2:])
	case "loopback":
		if len(os.Args) != 3 {
			err = errors.New("usage: loadgen loopback URL")
		} else {
			_, err = loopbackURL(os.Args[2])
		}
	case "summary":
		err = summaryCmd(os.Stdin, os.Stdout)
	default:
		err = fmt.Errorf("unknown command %q: use bare, loopback or summary", os.Args[1])
	}
	if err != nil {
		log.Fatal(err)
	}
}

// bareCmd serves the baseline: a handler that reads the body and answers
// 200 with a small JSON body, on the same net/http server settings.
func bareCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bare", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:0", "loopback `ADDR` to listen on")
	addrFile := fs.String("addr-file", "", "write the address to `FILE` once listening")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := loopbackOnly(*listen); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("bare: %w", err)
	}
	if *addrFile != "" {
		if err := atomicfile.Write(*addrFile, []byte(ln.Addr().String()+"\n"), 0o644); err != nil {
			return fmt.Errorf("bare: %w", err)
		}
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"registered":true}`)
	})}
	go func() {
		<-ctx.Done()
		_ = srv.Shutdown(context.Background())
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("bare: %w", err)
	}
	return nil
}

// loopbackOnly refuses any address that is not a loopback literal or
// localhost: the benchmark never sends traffic off this machine.
func loopbackOnly(hostport string) error {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return err
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("%s is not a loopback address", hostport)
}

// loopbackURL checks that raw is an http URL on a loopback address.
func loopbackURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" {
		return nil, fmt.Errorf("%s: want an http:// URL", raw)
	}
	return u, loopbackOnly(u.Host)
}
