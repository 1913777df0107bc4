package httpapi

import (
	"errors"
	"net/http"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/egress/policy"
	"openvibe.network/agentsandbox/sandbox"
)

// egressOptions turns a create's egress policy (nil: the worker's default)
// into the sandbox's options: mode none gives it no egress at all, the
// others the proxy with the policy, validated and in canonical form.
// Errors: a 400 saying what to fix (code invalid_egress_policy), or
// no_egress when the worker has no proxy and the policy needs one.
func (s *Server) egressOptions(req *agentsandbox.EgressPolicy) (sandbox.Options, error) {
	p := s.cfg.EgressDefault
	if req != nil {
		p = *req
	} else if p.Mode == "" || !s.cfg.Egress {
		// No policy asked: public where there is a proxy, else none (a
		// worker without a proxy has always made sandboxes without egress).
		p = agentsandbox.EgressPolicy{Mode: agentsandbox.EgressPublic}
		if !s.cfg.Egress {
			p.Mode = agentsandbox.EgressNone
		}
	}
	check := s.cfg.CheckEgress
	if check == nil {
		check = func(p agentsandbox.EgressPolicy) (agentsandbox.EgressPolicy, error) {
			c, err := policy.Compile(p, policy.Limits{})
			if err != nil {
				return agentsandbox.EgressPolicy{}, err
			}
			return c.Spec(), nil
		}
	}
	canon, err := check(p)
	var perr *policy.Error
	switch {
	case errors.As(err, &perr):
		return sandbox.Options{}, &Error{Status: http.StatusBadRequest, Code: "invalid_egress_policy",
			Message: "egress." + perr.Field + ": " + perr.Message}
	case err != nil:
		return sandbox.Options{}, badRequest("egress: %v", err)
	case canon.Mode == agentsandbox.EgressNone:
		return sandbox.Options{}, nil
	case !s.cfg.Egress:
		return sandbox.Options{}, &Error{Status: http.StatusBadRequest, Code: "no_egress",
			Message: "this worker runs without an egress proxy: create the sandbox with egress {\"mode\":\"none\"}, or use a worker with egress"}
	}
	return sandbox.Options{Egress: true, EgressPolicy: canon}, nil
}

// egressView is the policy a sandbox runs under, as the API shows it.
func egressView(in sandbox.Info) agentsandbox.EgressPolicy {
	switch {
	case !in.Egress:
		return agentsandbox.EgressPolicy{Mode: agentsandbox.EgressNone}
	case in.EgressPolicy.Mode == "":
		return agentsandbox.EgressPolicy{Mode: agentsandbox.EgressPublic}
	}
	return in.EgressPolicy
}
