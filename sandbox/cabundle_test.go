package sandbox

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestImageCABundles: an image's own trust bundles are found where
// Alpine and Red Hat's family keep them, symlinks followed inside the
// image only, each once; a link out of the image or a loop finds nothing.
func TestImageCABundles(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files []string          // regular files
		links map[string]string // symlink: target
		want  []string
	}{
		{"Debian", []string{"/etc/ssl/certs/ca-certificates.crt"}, nil, nil},
		{"Alpine", []string{"/etc/ssl/certs/ca-certificates.crt", "/etc/ssl/cert.pem"}, nil, []string{"/etc/ssl/cert.pem"}},
		{"RedHat", []string{"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem"}, map[string]string{
			"/etc/pki/tls/certs/ca-bundle.crt": "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
			"/etc/ssl/certs":                   "../pki/tls/certs",
		}, []string{"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem"}},
		{"AlpineLinkToDebianPath", []string{"/etc/ssl/certs/ca-certificates.crt"}, map[string]string{"/etc/ssl/cert.pem": "certs/ca-certificates.crt"}, nil},
		{"LinkOutOfImage", nil, map[string]string{"/etc/ssl/cert.pem": "../../../../../../../outside"}, nil},
		{"Loop", nil, map[string]string{"/etc/ssl/cert.pem": "/etc/ssl/cert.pem"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			root := filepath.Join(base, "root")
			if err := os.WriteFile(filepath.Join(base, "outside"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, f := range tc.files {
				os.MkdirAll(filepath.Dir(filepath.Join(root, f)), 0o755)
				if err := os.WriteFile(filepath.Join(root, f), []byte("bundle"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			for l, target := range tc.links {
				os.MkdirAll(filepath.Dir(filepath.Join(root, l)), 0o755)
				if err := os.Symlink(target, filepath.Join(root, l)); err != nil {
					t.Fatal(err)
				}
			}
			if diff := cmp.Diff(tc.want, imageCABundles(root)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
