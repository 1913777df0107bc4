package httpapi

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"openvibe.network/agentsandbox/client"
	"openvibe.network/agentsandbox/egress"
	"openvibe.network/agentsandbox/sandbox"
)

// Sizes of BenchmarkRealPorts (the environment overrides them:
// AGENTSANDBOX_PORTS_GETS, AGENTSANDBOX_PORTS_DOWNLOAD_MIB).
const (
	benchGets        = 2000
	benchDownloadMiB = 1024
)

// BenchmarkRealPorts measures the port forwarding on a real sandbox, each
// comparison's sides interleaved in every round (b.N rounds):
//
//   - small GETs, one kept-alive connection, from the same client
//     (scripts/ports/getbench.py, python3) to the same server
//     (scripts/ports/app.py in the sandbox): through the port route from the
//     host, and from inside the sandbox to its own loopback; it reports each
//     side's median and the median of the rounds' added p50;
//   - a 1 GiB download with curl: through the port route from the host (the
//     app in the sandbox serves it), and through the sandbox's egress tunnel
//     (curl in the sandbox, CONNECT through its bridge and the worker's proxy,
//     whose test dialer takes the "public" 93.184.216.34:80 to the same app
//     on the host's loopback); it reports each side's median rate and their
//     ratio.
//
// scripts/bench-ports.sh runs it and prints the figures.
func BenchmarkRealPorts(b *testing.B) {
	gets, mib := envInt("AGENTSANDBOX_PORTS_GETS", benchGets), envInt("AGENTSANDBOX_PORTS_DOWNLOAD_MIB", benchDownloadMiB)
	python, curl := benchBinary(b, "/usr/bin/python3"), benchBinary(b, "/usr/bin/curl")
	hostApp := hostAppServer(b, python)
	proxy, err := egress.NewProxy(egress.ProxyConfig{Guard: egress.NewGuard(egress.GuardConfig{}),
		TestDial: func(ctx context.Context, addr netip.AddrPort) (net.Conn, error) {
			if addr != netip.MustParseAddrPort("93.184.216.34:80") {
				return nil, fmt.Errorf("the benchmark dials only its stand-in, not %s", addr)
			}
			var d net.Dialer
			return d.DialContext(ctx, "tcp", hostApp)
		}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { proxy.Close() })
	api := newRealAPI(b, sandbox.Config{Capacity: 1, Egress: proxy}, func(c *Config) { c.Egress = true })
	ctx := context.Background()
	info, err := api.w.Create(ctx, client.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	sb := api.w.Sandbox(info.ID)
	b.Cleanup(func() { _, _ = sb.Delete(context.Background()) })
	for _, f := range []string{"app.py", "getbench.py"} {
		src, err := os.ReadFile("../../scripts/ports/" + f)
		if err != nil {
			b.Fatal(err)
		}
		if err := sb.Files().Put(ctx, f, bytes.NewReader(src), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := sb.Start(ctx, client.ExecRequest{Argv: []string{"python3", "app.py", "8000"}}); err != nil {
		b.Fatal(err)
	}
	inSandbox := func(argv ...string) string {
		var out, errb bytes.Buffer
		res, err := sb.Run(ctx, client.ExecRequest{Argv: argv}, nil, &out, &errb)
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("%q in the sandbox: %+v %v %s", argv, res, err, errb.String())
		}
		return out.String()
	}
	onHost := func(argv ...string) string {
		out, err := exec.Command(argv[0], argv[1:]...).Output()
		if err != nil {
			b.Fatalf("%q: %v", argv, err)
		}
		return string(out)
	}
	auth := "Authorization: Bearer " + testToken
	port := sb.PortURL(8000)
	deadline := time.Now().Add(portWait)
	for exec.Command(curl, "-fsS", "-o", "/dev/null", "-H", auth, port+"small").Run() != nil {
		if time.Now().After(deadline) {
			b.Fatal("the app in the sandbox does not answer")
		}
		time.Sleep(20 * time.Millisecond)
	}
	size := strconv.Itoa(mib << 20)
	var inside, through, added, portRate, egressRate []float64
	for b.Loop() {
		in := micros(b, inSandbox("python3", "getbench.py", "http://127.0.0.1:8000/small", strconv.Itoa(gets)))
		out := micros(b, onHost(python, "../../scripts/ports/getbench.py", port+"small", strconv.Itoa(gets), auth))
		inside, through, added = append(inside, in), append(through, out), append(added, out-in)
		portRate = append(portRate, rate(b, onHost(curl, "-fsS", "-o", "/dev/null", "-w", "%{speed_download}", "-H", auth, port+"bytes?n="+size)))
		egressRate = append(egressRate, rate(b, inSandbox("sh", "-c",
			`curl -fsS -o /dev/null -w '%{speed_download}' --noproxy '' -x "$HTTP_PROXY" -p http://93.184.216.34:80/bytes?n=`+size)))
	}
	b.ReportMetric(median(inside), "get-inside-p50-us")
	b.ReportMetric(median(through), "get-port-p50-us")
	b.ReportMetric(median(added), "get-added-p50-us")
	b.ReportMetric(median(portRate), "download-port-MiB/s")
	b.ReportMetric(median(egressRate), "download-egress-MiB/s")
	ratios := make([]float64, len(portRate))
	for i := range portRate {
		ratios[i] = portRate[i] / egressRate[i]
	}
	b.ReportMetric(median(ratios), "download-port/egress")
	b.Logf("rounds: GET p50 inside %v µs, through the port %v µs; download MiB/s through the port %v, through egress %v",
		inside, through, portRate, egressRate)
}

// hostAppServer runs scripts/ports/app.py on the host's loopback (the
// egress side's stand-in for a public server) and returns its address.
func hostAppServer(b *testing.B, python string) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // the app binds it again
	app, err := filepath.Abs("../../scripts/ports/app.py")
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(python, app, addr[strings.LastIndexByte(addr, ':')+1:])
	cmd.Dir = b.TempDir()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	deadline := time.Now().Add(portWait)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return addr
		}
		if time.Now().After(deadline) {
			b.Fatalf("the app on the host does not listen: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// benchBinary returns path, failing without it.
func benchBinary(b *testing.B, path string) string {
	if _, err := os.Stat(path); err != nil {
		b.Fatalf("%s is needed: %v", path, err)
	}
	return path
}

// micros reads getbench.py's median (µs).
func micros(b *testing.B, out string) float64 {
	var p50, p90 float64
	if _, err := fmt.Sscan(out, &p50, &p90); err != nil {
		b.Fatalf("getbench said %q: %v", out, err)
	}
	return p50
}

// rate reads curl's speed_download (bytes/s) as MiB/s.
func rate(b *testing.B, out string) float64 {
	v, err := strconv.ParseFloat(strings.TrimSpace(out), 64)
	if err != nil {
		b.Fatalf("curl said %q: %v", out, err)
	}
	return v / (1 << 20)
}

// median is the median of v.
func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// envInt is the environment's integer name, or def.
func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}
