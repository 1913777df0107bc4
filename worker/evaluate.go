package worker

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"openvibe.network/agentsandbox"
)

// evaluate turns what the self-test saw into a Result: each check passes
// only on positive evidence, and each failure carries a reason for a person.
// A check whose evidence could not be gathered (the probe did not run; no
// sandbox was created to wipe) is not run: absent from Checks, listed in
// NotRun, with the reason.
func evaluate(obs *observation) Result {
	res := Result{Checks: map[string]bool{}, NotRun: []string{}, Reasons: []string{}}
	if obs.setup != "" { // once, in full: it is why every check below could not run
		res.Reasons = append(res.Reasons, trimReason("the probe could not run: "+obs.setup))
	}
	for _, p := range obs.host {
		res.Reasons = append(res.Reasons, trimReason(p))
	}
	judges := map[string]func(*observation) string{
		agentsandbox.CheckNetworkNamespace:     judgeNetworkNamespace,
		agentsandbox.CheckNoDirectEgress:       judgeDirectEgress,
		agentsandbox.CheckEgressRefusesPrivate: judgeEgress,
		agentsandbox.CheckCleanEnv:             judgeCleanEnv,
		agentsandbox.CheckNoHostFiles:          judgeHostFiles,
		agentsandbox.CheckNoCapabilities:       judgeCapabilities,
		agentsandbox.CheckSeccomp:              judgeSeccomp,
		agentsandbox.CheckLimits:               judgeLimits,
		agentsandbox.CheckWipe:                 judgeWipe,
	}
	for _, c := range agentsandbox.Checks() {
		notRun := ""
		switch {
		case c == agentsandbox.CheckWipe && !obs.wiped:
			notRun = "no probe sandbox was created, so no wipe was tested"
		case c != agentsandbox.CheckWipe && obs.setup != "":
			notRun = "the probe could not run"
		}
		if notRun != "" {
			res.NotRun = append(res.NotRun, c)
			res.Reasons = append(res.Reasons, trimReason(c+": not run: "+notRun))
			continue
		}
		why := judges[c](obs)
		res.Checks[c] = why == ""
		if why != "" {
			res.Reasons = append(res.Reasons, trimReason(c+": "+why))
		}
	}
	if obs.browser {
		switch {
		case obs.setup != "":
			res.NotRun = append(res.NotRun, agentsandbox.CheckBrowser)
			res.Reasons = append(res.Reasons, trimReason(agentsandbox.CheckBrowser+": not run: the probe could not run"))
		case obs.browserNR != "":
			res.NotRun = append(res.NotRun, agentsandbox.CheckBrowser)
			res.Reasons = append(res.Reasons, trimReason(agentsandbox.CheckBrowser+": not run: "+obs.browserNR))
		default:
			res.Checks[agentsandbox.CheckBrowser] = obs.browserWhy == ""
			if obs.browserWhy != "" {
				res.Reasons = append(res.Reasons, trimReason(agentsandbox.CheckBrowser+": "+obs.browserWhy))
			}
		}
	}
	if obs.brokerValue != "" {
		switch {
		case obs.setup != "":
			res.NotRun = append(res.NotRun, agentsandbox.CheckCredentialsBrokered)
			res.Reasons = append(res.Reasons, trimReason(agentsandbox.CheckCredentialsBrokered+": not run: the probe could not run"))
		case obs.brokerNR != "":
			res.NotRun = append(res.NotRun, agentsandbox.CheckCredentialsBrokered)
			res.Reasons = append(res.Reasons, trimReason(agentsandbox.CheckCredentialsBrokered+": not run: "+obs.brokerNR))
		default:
			why := judgeCredentialsBrokered(obs)
			res.Checks[agentsandbox.CheckCredentialsBrokered] = why == ""
			if why != "" {
				res.Reasons = append(res.Reasons, trimReason(agentsandbox.CheckCredentialsBrokered+": "+why))
			}
		}
	}
	res.Passed = len(res.Reasons) == 0
	res.UserNamespace = obs.setup == "" && userNamespace(obs)
	return res
}

// first returns the first value of the probe's line key, and whether there
// was one.
func (o *observation) first(key string) (string, bool) {
	v, ok := o.lines[key]
	if !ok || len(v) == 0 {
		return "", false
	}
	return strings.TrimSpace(v[0]), true
}

func judgeNetworkNamespace(o *observation) string {
	dev, ok1 := o.first("netdev")
	route, ok2 := o.first("route")
	switch {
	case !ok1 || !ok2:
		return "the probe printed no interfaces or routes"
	case dev != "lo":
		return fmt.Sprintf("the sandbox sees network interfaces %q (only lo expected)", dev)
	case route != "0":
		return fmt.Sprintf("the sandbox sees %s IPv4 route(s) (none expected)", route)
	}
	return ""
}

func judgeDirectEgress(o *observation) string {
	direct, ok := o.first("direct")
	switch {
	case o.canaryConns > 0:
		return fmt.Sprintf("the canary listener on the host's %s received %d connection(s) from the sandbox", o.canaryAddr, o.canaryConns)
	case !ok:
		return "the probe did not try a direct connection"
	case direct != "failed":
		return fmt.Sprintf("a direct connection from the sandbox to the host's %s succeeded", o.canaryAddr)
	}
	return ""
}

func judgeEgress(o *observation) string {
	var problems []string
	answers := o.lines["proxy"]
	switch {
	case !o.egress:
		problems = append(problems, "the probe sandbox has no egress proxy, so its refusals cannot be proved")
	case len(answers) == 0 || strings.TrimSpace(answers[0]) == "none":
		problems = append(problems, "the sandbox has no proxy address (HTTP_PROXY unset): egress is unavailable")
	default:
		for _, a := range answers {
			f := strings.Fields(a) // kind target status
			if len(f) != 3 || f[2] != "403" {
				problems = append(problems, fmt.Sprintf("the proxy did not refuse with 403: %s", strings.TrimSpace(a)))
			}
		}
		if len(answers) < 4 {
			problems = append(problems, fmt.Sprintf("the proxy was asked %d of 4 private targets", len(answers)))
		}
	}
	if o.canaryConns > 0 {
		problems = append(problems, fmt.Sprintf("the canary listener on %s was reached", o.canaryAddr))
	}
	problems = append(problems, o.guard...)
	return strings.Join(problems, "; ")
}

func judgeCleanEnv(o *observation) string {
	n, ok := o.first("environ_read")
	switch {
	case slices.ContainsFunc(o.secrets, func(v string) bool { return v != "" && strings.Contains(o.out, v) }):
		return "a value of the worker's own environment or credentials is visible in the sandbox"
	case !ok || !slices.Contains(o.lines["env-end"], ""):
		return "the probe did not list the sandbox's environments"
	case n == "0":
		return "the probe could read no /proc/*/environ, so the environment was not proved clean"
	}
	return ""
}

// judgeCredentialsBrokered: the probe secret's placeholder (not its
// value) in the environment, the sandbox's CA and no private key in the
// bundle SSL_CERT_FILE names, the value nowhere in the probe's output
// (every environment and command line it read) nor in any file of the
// sandbox (searched from the host, with private keys), the canary
// reached over TLS for its own name with exactly the value, and the
// proxy's refusal of the placeholder sent to another host.
func judgeCredentialsBrokered(o *observation) string {
	var problems []string
	if strings.Contains(o.out, o.brokerValue) {
		problems = append(problems, "the probe secret's value is visible inside the sandbox")
	}
	problems = append(problems, o.brokerFiles...)
	problems = append(problems, judgeCanary(o)...)
	switch ph, _ := o.first("broker_env"); {
	case strings.Contains(ph, o.brokerValue):
		problems = append(problems, "the probe secret's variable holds its value, not a placeholder")
	case !strings.HasPrefix(ph, agentsandbox.SecretPlaceholderPrefix):
		problems = append(problems, fmt.Sprintf("the probe secret's variable holds %q, not a placeholder", truncate(ph, 64)))
	}
	b, _ := o.first("broker_bundle")
	if f := strings.Fields(b); len(f) != 3 || f[0] == "0" || f[1] != "0" || f[2] != agentsandbox.SandboxCABundle {
		problems = append(problems, fmt.Sprintf("the sandbox's trust bundle is not as it must be (certificates, private keys, SSL_CERT_FILE: %q; want at least one, none, %s)",
			truncate(b, 120), agentsandbox.SandboxCABundle))
	}
	if r, _ := o.first("broker_refused"); r != "403 secret-host-mismatch" {
		problems = append(problems, fmt.Sprintf("the proxy answered %q, not 403 secret-host-mismatch, to the placeholder sent to a host the secret is not for", truncate(r, 120)))
	}
	return strings.Join(problems, "; ")
}

// judgeCanary: the probe's HTTPS request with the placeholder reached
// the canary once, for its own name (Host and TLS server name), with
// exactly the probe secret's value in place of the placeholder. No
// reason shows a value the canary received.
func judgeCanary(o *observation) []string {
	fetch, _ := o.first("broker_fetch")
	if len(o.brokerSeen) == 0 {
		return []string{fmt.Sprintf("the TLS canary for %s received no request: the proxy did not pass the probe's request on (the probe got %q)",
			probeSecretHost, truncate(fetch, 160))}
	}
	var problems []string
	if len(o.brokerSeen) != 1 {
		problems = append(problems, fmt.Sprintf("the TLS canary received %d requests, the probe sent one", len(o.brokerSeen)))
	}
	want := []string{"Bearer " + o.brokerValue}
	for _, r := range o.brokerSeen {
		switch {
		case r.host != probeSecretHost || r.sni != probeSecretHost:
			problems = append(problems, fmt.Sprintf("the TLS canary received a request for %q (server name %q), not for %s", truncate(r.host, 64), truncate(r.sni, 64), probeSecretHost))
		case slices.Equal(r.auth, want):
		case strings.Contains(strings.Join(r.auth, " "), agentsandbox.SecretPlaceholderPrefix):
			problems = append(problems, "the TLS canary received the placeholder, not the value: the broker did not substitute it")
		default:
			problems = append(problems, fmt.Sprintf("the TLS canary received %d Authorization value(s), not exactly the probe secret's", len(r.auth)))
		}
	}
	if fetch != "200 -" {
		problems = append(problems, fmt.Sprintf("the probe's HTTPS request to %s got %q, not 200", probeSecretHost, truncate(fetch, 160)))
	}
	return problems
}

func judgeHostFiles(o *observation) string {
	var problems []string
	if _, ok := o.first("hostfiles"); !ok {
		problems = append(problems, "the probe did not look for host files")
	}
	if seen := o.lines["hostfile"]; len(seen) > 0 {
		problems = append(problems, "host files are visible in the sandbox: "+strings.Join(seen, ", "))
	}
	problems = append(problems, o.mounts...)
	return strings.Join(problems, "; ")
}

func judgeCapabilities(o *observation) string {
	st := o.status()
	var problems []string
	for _, k := range []string{"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"} {
		v, ok := st[k]
		if !ok {
			problems = append(problems, k+" not reported")
		} else if n, err := strconv.ParseUint(v, 16, 64); err != nil || n != 0 {
			problems = append(problems, fmt.Sprintf("%s is %s", k, v))
		}
	}
	if st["NoNewPrivs"] != "1" {
		problems = append(problems, fmt.Sprintf("NoNewPrivs is %q (1 expected)", st["NoNewPrivs"]))
	}
	if len(problems) > 0 {
		return "the sandbox holds capabilities or may gain them: " + strings.Join(problems, ", ")
	}
	return ""
}

func judgeSeccomp(o *observation) string {
	st := o.status()
	code, _ := o.first("unshare")
	switch {
	case st["Seccomp"] != "2":
		return fmt.Sprintf("the sandbox's processes are not under a seccomp filter (Seccomp: %q, 2 expected)", st["Seccomp"])
	case code == "":
		return "the probe did not try to create a user namespace"
	case code == "0":
		return "the sandbox could create a new user namespace (unshare -U succeeded)"
	case code == "127":
		return "unshare is not installed, so the filter's refusal could not be probed"
	}
	return ""
}

func judgeLimits(o *observation) string {
	problems := slices.Clone(o.limits)
	if _, ok := o.lines["fork-begin"]; !ok {
		problems = append(problems, "the probe did not reach its process-limit test")
	} else {
		spawned := 0
		for _, v := range o.lines["spawned"] {
			if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n > spawned {
				spawned = n
			}
		}
		if spawned >= probeForks || spawned >= probeLimits().Pids {
			problems = append(problems, fmt.Sprintf("the sandbox started %d processes under a pids limit of %d", spawned, probeLimits().Pids))
		}
	}
	if len(o.lines["cgroup"]) == 0 {
		problems = append(problems, "the probe could not read its own cgroup")
	}
	if udp := o.lines["udp"]; o.datagramsRefused && (len(udp) == 0 || slices.ContainsFunc(udp, func(v string) bool { return v != "refused" })) {
		problems = append(problems, fmt.Sprintf("the sandbox could open a UDP socket (%q) on a cgroup v1 host, "+
			"which cannot charge its buffers: they hold memory no limit bounds", udp))
	}
	return strings.Join(problems, "; ")
}

func judgeWipe(o *observation) string {
	if !o.wiped {
		return "no probe sandbox was created, so no wipe was tested"
	}
	return strings.Join(o.wipe, "; ")
}

// status returns the probe's /proc/self/status lines by key.
func (o *observation) status() map[string]string {
	st := map[string]string{}
	for _, l := range o.lines["status"] {
		if k, v, ok := strings.Cut(strings.TrimSpace(l), " "); ok {
			st[k] = strings.TrimSpace(v)
		}
	}
	return st
}

// userNamespace reports whether the probe's uid map is not the host's
// identity map.
func userNamespace(o *observation) bool {
	maps := o.lines["uid_map"]
	if len(maps) == 0 {
		return false
	}
	for _, m := range maps {
		if strings.Join(strings.Fields(m), " ") == "0 0 4294967295" {
			return false
		}
	}
	return true
}
