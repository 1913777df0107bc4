package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

	"openvibe.network/agentsandbox/client"
	"openvibe.network/agentsandbox/internal/cli"
	"openvibe.network/agentsandbox/mcpserver"
)

// mcpHelp is what mcp --help says after its synopsis.
const mcpHelp = `Serves the worker's MCP tools over stdio (stdin and stdout) for a local agent host
(Claude Desktop, an IDE, an agent framework): create sandboxes, run commands, files, archives,
a browser. The tools call the worker at --worker with its API token; the sandboxes they create
are wiped when the session ends (stdin closes, SIGINT or SIGTERM). Logs are JSON on stderr.
The worker serves the same tools over Streamable HTTP at /v1/mcp (docs/mcp.md).`

func mcpCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	var workerURL, tokenFile string
	fs := cli.NewFlagSet("codes-sandbox mcp", "--worker URL --api-token-file FILE", mcpHelp)
	fs.StringVar(&workerURL, "worker", "", "the worker API's URL, e.g. http://127.0.0.1:8088 (required)")
	fs.StringVar(&tokenFile, "api-token-file", "", "file holding the worker's API token (required)")
	if code, ok := cli.Parse(fs, args, 0, 0, stdout, stderr); !ok {
		return code
	}
	if !strings.HasPrefix(workerURL, "http://") && !strings.HasPrefix(workerURL, "https://") {
		fmt.Fprintln(stderr, "codes-sandbox mcp: give --worker, the worker's http:// or https:// URL")
		return 2
	}
	token, err := apiToken(tokenFile)
	if err != nil {
		fmt.Fprintf(stderr, "codes-sandbox mcp: %v\n", err)
		return 2
	}
	log := newLogger(stderr)
	srv, err := mcpserver.New(mcpserver.Config{Worker: client.NewWorker(workerURL, token, &http.Client{}), Logger: log})
	if err != nil {
		fmt.Fprintf(stderr, "codes-sandbox mcp: %v\n", err)
		return 1
	}
	if err := srv.RunStdio(ctx, stdin, stdout); err != nil {
		log.Error("mcp failed", "err", err.Error())
		return 1
	}
	return 0
}
