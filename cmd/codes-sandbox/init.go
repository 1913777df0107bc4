package main

// maybeInit runs the in-sandbox init (or another re-executed stage) when this
// process was started as one, and reports its exit code. Stub until the
// sandbox issue lands.
func maybeInit() (int, bool) { return 0, false }
