package client_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"strings"

	"openvibe.network/agentsandbox/client"
	"openvibe.network/agentsandbox/worker/httpapi"
	"openvibe.network/agentsandbox/worker/httpapi/apitest"
)

// A sandbox's life through the worker API: create, put a file, run a
// command with its output streamed, delete. (The worker here runs on a fake
// runtime whose commands echo their stdin.)
func ExampleWorker() {
	api, _ := httpapi.New(httpapi.Config{Runtime: apitest.NewFake(1), Token: "secret"})
	srv := httptest.NewServer(api.Handler())
	defer srv.Close()

	ctx := context.Background()
	w := client.NewWorker(srv.URL, "secret", nil)
	sb, err := w.Create(ctx, client.CreateOptions{TimeBoxMinutes: 10})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer w.Delete(ctx, sb.ID)
	if err := w.PutFile(ctx, sb.ID, "src/main.go", strings.NewReader("package main\n"), 0o644); err != nil {
		fmt.Println(err)
		return
	}
	res, err := w.Exec(ctx, sb.ID, client.ExecRequest{Argv: []string{"cat"}, Stdin: []byte("hello\n")}, os.Stdout, os.Stderr)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("exit", res.ExitCode, "time box", sb.Limits.TimeBoxMinutes, "min")
	// Output:
	// hello
	// exit 0 time box 10 min
}
