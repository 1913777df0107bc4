package httpapi

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/egress/policy"
	"openvibe.network/agentsandbox/sandbox"
)

// Limits of a create's secrets.
const (
	maxSecrets     = 32
	maxSecretBytes = 16 << 10
)

// checkSecrets validates a create's secrets against its env and its
// egress (opts, from egressOptions): the sandbox must have egress; names
// as env names and not also in env; a value of at most maxSecretBytes with
// no NUL, CR or LF (it goes into header values); hosts that are policy
// patterns of names on port 443, each allowed by the sandbox's policy.
// Errors: a 400 saying what to fix; nothing of a value is ever in one.
func checkSecrets(secrets map[string]agentsandbox.Secret, env map[string]string, opts sandbox.Options) error {
	if len(secrets) == 0 {
		return nil
	}
	if len(secrets) > maxSecrets {
		return badRequest("secrets has %d entries; at most %d are allowed", len(secrets), maxSecrets)
	}
	if !opts.Egress {
		return badRequest("secrets need egress: this sandbox's egress mode is none, so nothing could use them; create it with egress public or allow")
	}
	pol, err := policy.Compile(opts.EgressPolicy, policy.Limits{})
	if err != nil {
		return badRequest("egress: %v", err)
	}
	for _, name := range slices.Sorted(maps.Keys(secrets)) {
		s := secrets[name]
		switch {
		case !agentsandbox.ValidEnvName(name):
			return badRequest("secrets name %q is not a valid variable name (letters, digits and _, not starting with a digit)", clipName(name))
		case hasKey(env, name):
			return badRequest("secrets.%s is also in env: give the variable in one of them", name)
		case slices.Contains(agentsandbox.SecretCAEnv, name):
			return badRequest("secrets.%s: the name is one of the variables that name the sandbox's trust bundle (%s): choose another name", name, strings.Join(agentsandbox.SecretCAEnv, ", "))
		case s.Value == "":
			return badRequest("secrets.%s.value is empty: give the credential", name)
		case len(s.Value) > maxSecretBytes:
			return badRequest("secrets.%s.value is %d bytes; at most %d are allowed", name, len(s.Value), maxSecretBytes)
		case strings.ContainsAny(s.Value, "\x00\r\n"):
			return badRequest("secrets.%s.value contains a NUL, CR or LF byte, which no header may carry: remove it", name)
		}
		if _, err := policy.SecretHosts(name, s.Hosts); err != nil {
			return secretError(err)
		}
		if err := pol.AllowsSecretHosts(name, s.Hosts); err != nil {
			return secretError(err)
		}
	}
	return nil
}

// patchSecrets validates a PATCH's secrets for the sandbox of info (as a
// create's, against its egress policy; at most maxSecrets with those it
// has) and adds or rotates them. Errors: a 400 saying what to fix (never
// quoting a value), 404.
func (s *Server) patchSecrets(info sandbox.Info, secrets map[string]agentsandbox.Secret) (sandbox.Info, map[string]string, error) {
	names := maps.Clone(info.Secrets)
	for k := range secrets {
		names[k] = nil
	}
	if len(names) > maxSecrets {
		return sandbox.Info{}, nil, badRequest("the sandbox would have %d secrets; at most %d are allowed", len(names), maxSecrets)
	}
	if err := checkSecrets(secrets, nil, sandbox.Options{Egress: info.Egress, EgressPolicy: info.EgressPolicy}); err != nil {
		return sandbox.Info{}, nil, err
	}
	out, placeholders, err := s.cfg.Runtime.UpdateSecrets(info.ID, secrets)
	switch {
	case errors.Is(err, sandbox.ErrNotFound):
		return sandbox.Info{}, nil, errSandboxNotFound(info.ID)
	case errors.Is(err, sandbox.ErrInvalid):
		return sandbox.Info{}, nil, badRequest("secrets: %s", strings.TrimSuffix(err.Error(), ": "+sandbox.ErrInvalid.Error()))
	case err != nil:
		return sandbox.Info{}, nil, fmt.Errorf("update secrets: %w", err)
	}
	return out, placeholders, nil
}

// secretError answers a *policy.Error about a secret's hosts.
func secretError(err error) error {
	var perr *policy.Error
	if errors.As(err, &perr) {
		return &Error{Status: http.StatusBadRequest, Code: CodeInvalidRequest, Message: perr.Field + ": " + perr.Message}
	}
	return badRequest("secrets: %v", err)
}

func hasKey(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}

// clipName bounds a client-supplied name quoted in an error.
func clipName(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// secretsView is what the API shows of a sandbox's secrets: names and
// hosts.
func secretsView(in map[string][]string) map[string]SecretInfo {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]SecretInfo, len(in))
	for k, v := range in {
		out[k] = SecretInfo{Hosts: slices.Clone(v)}
	}
	return out
}
