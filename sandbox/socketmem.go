package sandbox

// Socket buffers are kernel memory: a sandbox's must be charged to its
// cgroup or refused (issue 28). cgroup v2 charges every socket's buffers
// to the memory controller; v1 charges TCP's alone, to a counter of its own
// the runtime bounds (cgroup.tcpLimitV1), so on v1 the seccomp filter
// refuses every other inet socket (seccomp.Options.TCPOnlyInet). Netlink
// but NETLINK_ROUTE is refused everywhere.

// InetDatagramsRefused reports whether this runtime's sandboxes may open
// only TCP inet sockets (UDP, ICMP echo, raw, SCTP and MPTCP refused with
// EPERM): on a cgroup v1 host, which cannot charge their buffers.
func (r *Runtime) InetDatagramsRefused() bool { return r.base.Version() == 1 }

// SocketMemory says, for the report's limits, how the sandboxes' socket
// buffers are bounded on this host.
func (r *Runtime) SocketMemory() string {
	if r.InetDatagramsRefused() {
		return "cgroup v1: TCP buffers bounded by memory.kmem.tcp.limit_in_bytes (a quarter of memory_mb, beside it); " +
			"UDP and other non-TCP inet sockets refused (v1 cannot charge their buffers); netlink: NETLINK_ROUTE only"
	}
	return "charged to the sandbox's cgroup (v2); netlink: NETLINK_ROUTE only"
}
