package inside

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

// fetchTimeout bounds fetchOnce's whole exchange.
const fetchTimeout = 15 * time.Second

// fetchOnce is the HTTPS client of control.FetchMarker: one GET of url
// through the proxy the environment names, the system trust store
// (SSL_CERT_FILE: the sandbox's bundle), and "Authorization: Bearer " with
// the value of the variable env (a secret's placeholder). It prints the
// answer's status and the X-Egress-Refused header, if any; it fails (1)
// when no answer came.
func fetchOnce(url, env string) int {
	ctx, cancel := context.WithTimeout(context.Background(), fetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		fmt.Fprintf(os.Stderr, "sandbox fetch: %v\n", err)
		return 1
	}
	req.Header.Set("Authorization", "Bearer "+os.Getenv(env))
	tr := http.DefaultTransport.(*http.Transport).Clone()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		fmt.Fprintf(os.Stderr, "sandbox fetch: %v\n", err)
		return 1
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	refused := resp.Header.Get("X-Egress-Refused")
	if refused == "" {
		refused = "-"
	}
	fmt.Printf("%d %s\n", resp.StatusCode, refused)
	return 0
}
