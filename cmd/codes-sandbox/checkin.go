package main

import (
	"context"
	"fmt"
	"io"
)

// checkinCmd is a stub until its issue lands.
func checkinCmd(_ context.Context, _ []string, _ io.Reader, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, "codes-sandbox checkin: not built yet")
	return 2
}
