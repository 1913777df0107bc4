package httpapi

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// transferSize is the file BenchmarkRealFileTransfer moves.
const transferSize = 100 << 20

// BenchmarkRealFileTransfer moves a 100 MiB file into a real sandbox
// through the API with the client (PUT …/files/…, its Content-Length
// known), out again (GET), and copies it on the host with cp, in that order
// each round (interleaved, so the three see the same machine): all three
// between tmpfs files (the host's in /dev/shm, the sandbox's workspace is a
// tmpfs too). It reports the median MiB/s of each and the medians of the
// rounds' ratios upload/cp and download/cp. Run with -benchtime=5x
// for 5 rounds:
//
//	CI=true go test -run '^$' -bench BenchmarkRealFileTransfer -benchtime 5x ./worker/httpapi/
func BenchmarkRealFileTransfer(b *testing.B) {
	rf := newRealFiles(b, 512, 128<<20)
	dir, err := os.MkdirTemp("/dev/shm", "bench-files-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	src := filepath.Join(dir, "src.bin")
	content := make([]byte, transferSize)
	_, _ = rand.Read(content)
	if err := os.WriteFile(src, content, 0o600); err != nil {
		b.Fatal(err)
	}
	want := sha256.Sum256(content)
	content = nil
	ctx := context.Background()
	rates := map[string][]float64{}
	timed := func(name string, f func() error) {
		start := time.Now()
		if err := f(); err != nil {
			b.Fatalf("%s: %v", name, err)
		}
		rates[name] = append(rates[name], float64(transferSize)/(1<<20)/time.Since(start).Seconds())
	}
	for b.Loop() {
		timed("upload", func() error {
			f, err := os.Open(src)
			if err != nil {
				return err
			}
			defer f.Close()
			return rf.files.Put(ctx, "big.bin", f, 0)
		})
		dst := filepath.Join(dir, "down.bin")
		timed("download", func() error {
			f, err := os.Create(dst)
			if err != nil {
				return err
			}
			defer f.Close()
			return rf.files.Get(ctx, "big.bin", f)
		})
		if got := sha256File(b, dst); !bytes.Equal(got, want[:]) {
			b.Fatal("the downloaded file differs from the uploaded one")
		}
		os.Remove(dst)
		timed("cp", func() error { return exec.Command("cp", src, filepath.Join(dir, "cp.bin")).Run() })
		os.Remove(filepath.Join(dir, "cp.bin"))
	}
	for _, name := range []string{"upload", "download"} {
		ratios := make([]float64, len(rates[name]))
		for i, r := range rates[name] {
			ratios[i] = r / rates["cp"][i]
		}
		b.Logf("%s/cp per round: %.2f", name, ratios)
		slices.Sort(ratios)
		b.ReportMetric(ratios[(len(ratios)-1)/2], name+"/cp")
	}
	for name, rs := range rates {
		b.Logf("%s MiB/s per round: %.0f", name, rs)
		slices.Sort(rs)
		b.ReportMetric(rs[(len(rs)-1)/2], name+"-MiB/s")
	}
	b.ReportMetric(0, "ns/op")
}

// sha256File is the SHA-256 of the file at p.
func sha256File(tb testing.TB, p string) []byte {
	tb.Helper()
	f, err := os.Open(p)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		tb.Fatal(err)
	}
	return h.Sum(nil)
}
