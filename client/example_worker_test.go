package client_test

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"strings"

	"openvibe.network/agentsandbox/client"
	"openvibe.network/agentsandbox/worker/httpapi"
	"openvibe.network/agentsandbox/worker/httpapi/apitest"
)

// A sandbox's life through the worker API: create, put a file, run a
// command with its output streamed, read its usage, delete. (The worker
// here runs on a fake runtime whose commands echo their stdin.)
func ExampleWorker() {
	api, _ := httpapi.New(httpapi.Config{Runtime: apitest.NewFake(1), Token: "secret"})
	srv := httptest.NewServer(api.Handler())
	defer srv.Close()

	ctx := context.Background()
	w := client.NewWorker(srv.URL, "secret", nil)
	info, err := w.Create(ctx, client.CreateOptions{TimeBoxMinutes: 10, Limits: client.RequestLimits{Pids: 64}})
	if err != nil {
		fmt.Println(err)
		return
	}
	sb := w.Sandbox(info.ID)
	if err := w.PutFile(ctx, sb.ID(), "src/main.go", strings.NewReader("package main\n"), 0o644); err != nil {
		fmt.Println(err)
		return
	}
	res, err := sb.Exec(ctx, client.ExecRequest{Argv: []string{"cat"}, Stdin: []byte("hello\n")}, os.Stdout, os.Stderr)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("exit", res.ExitCode, "time box", info.Limits.TimeBoxMinutes, "min, pids", info.Limits.Pids)
	usage, err := sb.Usage(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("workspace bytes", usage.WorkspaceBytes)
	rep, err := sb.Delete(ctx)
	fmt.Println("wiped", rep.Verified, err)
	// Output:
	// hello
	// exit 0 time box 10 min, pids 64
	// workspace bytes 13
	// wiped true <nil>
}

// A dev server in the background: start it, reach it from a second
// command, read its output, stop it. (Processes need a real runtime.)
func ExampleSandbox_Start() {
	ctx := context.Background()
	sb := client.NewWorker("http://127.0.0.1:8088", os.Getenv("WORKER_TOKEN"), nil).Sandbox("SANDBOX_ID")
	srv, err := sb.Start(ctx, client.ExecRequest{Argv: []string{"python3", "-m", "http.server", "8000", "--bind", "127.0.0.1"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	_, _ = sb.Exec(ctx, client.ExecRequest{Argv: []string{"curl", "-s", "http://127.0.0.1:8000/"}}, os.Stdout, os.Stderr)
	_ = srv.Signal(ctx, "TERM")
	rec, err := srv.Output(ctx, true, func(ev client.ExecEvent) error { // what it logged, to its exit
		_, err := os.Stderr.Write(ev.Data)
		return err
	})
	fmt.Println(rec.State, rec.ExitCode, err)
}

// Standard input streamed from a reader: the command reads it as it
// arrives, and its stdin closes at the reader's end.
func ExampleSandbox_Run() {
	ctx := context.Background()
	sb := client.NewWorker("http://127.0.0.1:8088", os.Getenv("WORKER_TOKEN"), nil).Sandbox("SANDBOX_ID")
	res, err := sb.Run(ctx, client.ExecRequest{Argv: []string{"wc", "-c"}}, os.Stdin, os.Stdout, os.Stderr)
	fmt.Println(res.ExitCode, err)
}

// An interactive shell on a terminal: type into it, resize it, read its
// output to its exit.
func ExampleSandbox_Terminal() {
	ctx := context.Background()
	sb := client.NewWorker("http://127.0.0.1:8088", os.Getenv("WORKER_TOKEN"), nil).Sandbox("SANDBOX_ID")
	term, err := sb.Terminal(ctx, client.TerminalOptions{Argv: []string{"bash"}, Rows: 40, Cols: 120})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer term.Close()
	go func() {
		_, _ = io.WriteString(term, "stty size; tty\n")
		_ = term.Resize(50, 160)
		_, _ = io.WriteString(term, "stty size; exit 3\n")
	}()
	_, _ = io.Copy(os.Stdout, term) // to the exit
	rec, err := term.Wait()
	fmt.Println(rec.ExitCode, err, term.Dropped())
}
