package egress

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// DefaultInstanceData is where cloud-init writes what it learned of the
// instance from its cloud (the readable copy, without secrets).
const DefaultInstanceData = "/run/cloud-init/instance-data.json"

// maxInstanceData bounds the instance data file read.
const maxInstanceData = 16 << 20

// publicAddressKeys are the keys (lower case, without '-' and '_') under
// which the clouds' metadata, as cloud-init keeps it, names the
// instance's public addresses that are on no interface (1:1 NAT): EC2 and
// those that copy it ("public-ipv4", "public-ipv4s", "public-ipv6s"), GCE
// ("externalIp", "externalIpv6"), Azure ("publicIpAddress"), DigitalOcean
// ("floating_ip"), cloud-init's own "public_ipv4"/"public_ipv6".
var publicAddressKeys = []string{
	"publicipv4", "publicipv4s", "publicipv6", "publicipv6s",
	"externalip", "externalipv6", "publicipaddress", "floatingip",
}

// InstanceDataAddrs returns the public addresses named in cloud-init's
// instance data file at path (see DefaultInstanceData), one prefix per
// address: every address found under a key of publicAddressKeys, at any
// depth, whether the value is a string (a list separated by spaces,
// commas or new lines included), a list or an object holding them. It
// reads the file only: it never asks a metadata service. A missing file is
// no address and no error. Errors: the file could not be read, or is not
// JSON.
func InstanceDataAddrs(path string) ([]netip.Prefix, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("instance data: %w", err)
	}
	defer f.Close()
	var doc any
	if err := json.NewDecoder(io.LimitReader(f, maxInstanceData)).Decode(&doc); err != nil {
		return nil, fmt.Errorf("instance data %s: %w", path, err)
	}
	var out []netip.Prefix
	walkPublic(doc, false, &out)
	slices.SortFunc(out, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	return slices.Compact(out), nil
}

// walkPublic adds to out the addresses in v: every one when under is true
// (v is the value of a public-address key), else those under such keys
// inside v.
func walkPublic(v any, under bool, out *[]netip.Prefix) {
	switch v := v.(type) {
	case map[string]any:
		for k, sub := range v {
			key := strings.ToLower(strings.NewReplacer("-", "", "_", "").Replace(k))
			walkPublic(sub, under || slices.Contains(publicAddressKeys, key), out)
		}
	case []any:
		for _, sub := range v {
			walkPublic(sub, under, out)
		}
	case string:
		if !under {
			return
		}
		for _, f := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\t' || r == '\r' }) {
			if a, err := netip.ParseAddr(f); err == nil && a.Zone() == "" {
				a = a.Unmap()
				*out = append(*out, netip.PrefixFrom(a, a.BitLen()))
			}
		}
	}
}

// instanceData keeps the addresses of an instance data file, read again
// only when the file changed (its size or modification time). Safe for
// concurrent use.
type instanceData struct {
	path string

	mu    sync.Mutex
	size  int64
	mod   time.Time
	seen  bool
	addrs []netip.Prefix
}

// prefixes returns the file's addresses; a file that went away has none.
// Errors: the file changed and could not be read (the last addresses are
// kept, and the error is returned once per change of the file).
func (d *instanceData) prefixes() ([]netip.Prefix, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	st, err := os.Stat(d.path)
	if errors.Is(err, fs.ErrNotExist) {
		d.seen, d.addrs = false, nil
		return nil, nil
	}
	if err != nil {
		return slices.Clone(d.addrs), fmt.Errorf("instance data: %w", err)
	}
	if d.seen && st.Size() == d.size && st.ModTime().Equal(d.mod) {
		return slices.Clone(d.addrs), nil
	}
	d.seen, d.size, d.mod = true, st.Size(), st.ModTime()
	addrs, err := InstanceDataAddrs(d.path)
	if err != nil {
		return slices.Clone(d.addrs), err
	}
	d.addrs = addrs
	return slices.Clone(addrs), nil
}
