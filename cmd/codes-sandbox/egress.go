package main

import (
	"context"
	"fmt"
	"io"
)

// egressCmd is a stub until its issue lands.
func egressCmd(_ context.Context, _ []string, _ io.Reader, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, "codes-sandbox egress: not built yet")
	return 2
}
