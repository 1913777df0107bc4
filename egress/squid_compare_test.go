package egress

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// envSquid names the squid binary (squid-openssl) TestCompareBroker runs
// as a third side (scripts/bench-broker-squid.sh sets it).
const envSquid = "AGENTSANDBOX_COMPARE_SQUID"

// squidBump is a Squid ssl-bump proxy TestCompareBroker starts and stops
// itself: its own configuration, certificate database and CA in a
// temporary directory, on a port of 127.0.0.1, resolving only the names
// of its hosts file (its DNS is 127.0.0.1, where nothing answers).
type squidBump struct {
	addr string
	// roots trusts the CA Squid signs its certificates with.
	roots *x509.CertPool
}

// startSquid starts squid (the binary at bin) bumping every CONNECT:
// upstream certificates verified against upstreamCA (PEM), hosts resolved
// to 127.0.0.1, and the Authorization header replaced by
// "Bearer "+value (the work the broker does: the client sends a
// placeholder). Cleanup stops it, its helpers with it, and removes its
// directory.
func startSquid(t *testing.T, bin string, upstreamCA []byte, hosts []string, value string) *squidBump {
	t.Helper()
	dir, err := os.MkdirTemp("", "agentsandbox-squid-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() { // what Squid said, before its directory goes
			if log, err := os.ReadFile(filepath.Join(dir, "cache.log")); err == nil {
				t.Logf("squid's cache.log (last 4 KiB):\n%s", log[max(0, len(log)-4096):])
			}
		}
		os.RemoveAll(dir)
	})
	caPEM, keyPEM, roots := squidCA(t)
	port := freePort(t)
	files := map[string][]byte{
		"ca.pem":       caPEM,
		"ca.key":       keyPEM,
		"upstream.pem": upstreamCA,
		"hosts":        []byte("127.0.0.1 " + strings.Join(hosts, "\n127.0.0.1 ") + "\n"), // one a line: Squid cuts long lines
		"squid.conf": fmt.Appendf(nil, `http_port 127.0.0.1:%d ssl-bump tls-cert=%[2]s/ca.pem tls-key=%[2]s/ca.key generate-host-certificates=on dynamic_cert_mem_cache_size=16MB
sslcrtd_program /usr/lib/squid/security_file_certgen -s %[2]s/ssl_db -M 16MB
sslcrtd_children 4 startup=1 idle=1
acl step1 at_step SslBump1
ssl_bump peek step1
ssl_bump bump all
tls_outgoing_options cafile=%[2]s/upstream.pem
request_header_access Authorization deny all
request_header_replace Authorization Bearer %[3]s
http_access allow localhost
http_access deny all
hosts_file %[2]s/hosts
dns_nameservers 127.0.0.1
cache deny all
cache_mem 0 MB
pid_filename %[2]s/squid.pid
cache_log %[2]s/cache.log
access_log none
coredump_dir %[2]s
visible_hostname squid-bench
icp_port 0
pinger_enable off
htcp_port 0
snmp_port 0
shutdown_lifetime 0 seconds
`, port, dir, value),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	db := exec.Command("/usr/lib/squid/security_file_certgen", "-c", "-s", filepath.Join(dir, "ssl_db"), "-M", "16MB")
	if out, err := db.CombinedOutput(); err != nil {
		t.Fatalf("security_file_certgen: %v: %s", err, out)
	}
	chownTree(t, dir, "proxy")
	cmd := exec.Command(bin, "-N", "-f", filepath.Join(dir, "squid.conf"))
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start squid: %v", err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // squid and its helpers
		_ = cmd.Wait()
	})
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	for deadline := time.Now().Add(20 * time.Second); ; {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "cache.log"))
			t.Fatalf("squid did not listen on %s: %s", addr, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return &squidBump{addr: addr, roots: roots}
}

// squidCA returns a new ECDSA P-256 CA (like the broker's) as PEM, and a
// pool that trusts it.
func squidCA(t *testing.T) (certPEM, keyPEM []byte, roots *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "squid bench CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kd, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	roots = x509.NewCertPool()
	roots.AddCert(cert)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kd}), roots
}

// freePort returns a port of 127.0.0.1 nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// chownTree gives dir and everything in it to the user name (Squid drops
// to it).
func chownTree(t *testing.T, dir, name string) {
	t.Helper()
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatalf("squid's user: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	err = filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
	if err != nil {
		t.Fatal(err)
	}
}
