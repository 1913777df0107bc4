package main

import (
	"context"
	"fmt"
	"io"
)

// selftestCmd is a stub until its issue lands.
func selftestCmd(_ context.Context, _ []string, _ io.Reader, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, "codes-sandbox selftest: not built yet")
	return 2
}
