package egress

import (
	"net/netip"

	"openvibe.network/agentsandbox/internal/hostname"
)

// parseHost accepts only canonical hosts (see hostname.Parse) and refuses
// the rest with ReasonNotCanonical; for a literal it returns the address and
// true.
func parseHost(host string) (netip.Addr, bool, Verdict) {
	a, literal, problem := hostname.Parse(host)
	if problem != "" {
		return netip.Addr{}, false, refuse(ReasonNotCanonical, "%s", problem)
	}
	return a, literal, Verdict{}
}
