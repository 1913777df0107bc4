package main

import (
	"context"
	"fmt"
	"io"
)

// serveCmd is a stub until its issue lands.
func serveCmd(_ context.Context, _ []string, _ io.Reader, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, "codes-sandbox serve: not built yet")
	return 2
}
