package main

import (
	"context"
	"fmt"
	"io"
)

// runCmd is a stub until its issue lands.
func runCmd(_ context.Context, _ []string, _ io.Reader, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, "codes-sandbox run: not built yet")
	return 2
}
