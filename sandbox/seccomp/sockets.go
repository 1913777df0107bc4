package seccomp

import (
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// This file is the policy's socket rules: which address families, and on a
// cgroup v1 host which inet socket types, a sandbox may open. They are kept
// apart from the refusals by name (policy.go) because their answer depends
// on the host (Options) and because each guards memory, not only attack
// surface: a socket's buffers are kernel memory the sandbox's cgroup must be
// charged for, or the sandbox can hold memory its limit never sees.

// Options are the host-dependent parts of the policy.
type Options struct {
	// TCPOnlyInet refuses every inet (AF_INET, AF_INET6) socket but TCP
	// streams: UDP, ICMP echo, raw, SCTP and MPTCP sockets get EPERM. Set it
	// on a cgroup v1 host, whose memory controller charges only TCP's socket
	// buffers (memory.kmem.tcp.*): a datagram socket's receive queue there
	// is memory no limit of the sandbox bounds.
	TCPOnlyInet bool
}

// retEAFNOSUPPORT is the answer to a family (or netlink protocol) the policy
// does not offer: EAFNOSUPPORT, what a kernel built without the family
// says, so that libraries take their "not available" path (libaudit and
// libudev carry on without netlink audit or uevents; ss falls back to
// /proc/net) where EPERM could be taken for a fatal permission failure.
const retEAFNOSUPPORT = retErrno | uint32(unix.EAFNOSUPPORT)

// sockTypeMask selects a socket's type from socket()'s type argument,
// dropping SOCK_NONBLOCK and SOCK_CLOEXEC (the kernel's SOCK_TYPE_MASK).
const sockTypeMask = 0xf

// tcpProtocols are socket()'s protocol values that give a TCP stream: the
// default and IPPROTO_TCP (IPPROTO_SCTP and IPPROTO_MPTCP give other
// streams).
var tcpProtocols = []uint32{0, unix.IPPROTO_TCP}

// socketBlock is the check of socket(family, type, protocol); every path
// returns. A sandbox may open sockets of AF_UNIX, the inet families (its
// network namespace has only loopback and the egress bridge) and AF_NETLINK
// for NETLINK_ROUTE alone (which glibc's getaddrinfo, ip and Chromium's
// network-change notifier read). Every other family (AF_PACKET, AF_VSOCK,
// AF_KEY, AF_ALG, Bluetooth, …) is refused: each reaches past the namespace
// (vsock to the hypervisor host), exposes kernel code no sandbox needs, or
// holds memory no cgroup is charged for. Other netlink protocols are
// refused for the last reason: NETLINK_USERSOCK lets a process queue
// messages to its own sockets, uncharged, until the host runs out of
// memory.
func socketBlock(o Options) []bpf.Instruction {
	allow, refuse := bpf.RetConstant{Val: retAllow}, bpf.RetConstant{Val: retEAFNOSUPPORT}
	// Laid out as: family checks, then one block per allowed family (each
	// ending in returns), so every jump goes forward.
	netlink := []bpf.Instruction{
		bpf.LoadAbsolute{Off: argLo(2), Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.NETLINK_ROUTE, SkipFalse: 1},
		allow,
		refuse,
	}
	inet := []bpf.Instruction{allow}
	if o.TCPOnlyInet {
		eperm := bpf.RetConstant{Val: retEPERM}
		inet = []bpf.Instruction{
			bpf.LoadAbsolute{Off: argLo(1), Size: 4},
			bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: sockTypeMask},
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SOCK_STREAM, SkipFalse: 4},
			bpf.LoadAbsolute{Off: argLo(2), Size: 4},
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: tcpProtocols[0], SkipTrue: 1},
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: tcpProtocols[1], SkipFalse: 1},
			allow,
			eperm,
		}
	}
	// After the four family tests come: refuse (1), AF_UNIX's allow (1),
	// inet, netlink.
	ins := []bpf.Instruction{bpf.LoadAbsolute{Off: argLo(0), Size: 4}}
	// A jump of k from test i lands on i+1+k: AF_UNIX's allow is at 5,
	// inet at 6, netlink at 6+len(inet).
	const toUnix, toInet = 4, 4
	toNetlink := uint8(2 + len(inet))
	ins = append(ins,
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.AF_UNIX, SkipTrue: toUnix},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.AF_INET, SkipTrue: toInet},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.AF_INET6, SkipTrue: toInet - 1},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.AF_NETLINK, SkipTrue: toNetlink},
		refuse,
		allow, // AF_UNIX
	)
	ins = append(ins, inet...)
	return append(ins, netlink...)
}

// socketpairBlock is the check of socketpair(family, …): only AF_UNIX
// implements it among the allowed families, so any other is refused as
// socket() would refuse it.
func socketpairBlock() []bpf.Instruction {
	return argIn(0, []uint32{unix.AF_UNIX}, retAllow, retEAFNOSUPPORT)
}
