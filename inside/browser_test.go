package inside

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"openvibe.network/agentsandbox/sandbox/control"
)

// TestReadMessage: the browser's output is cut into whole messages at the
// delimiter, however its writes fell; one over the bound is refused, a
// part left at the end is not a message.
func TestReadMessage(t *testing.T) {
	big := strings.Repeat("x", 100<<10) // over the reader's buffer
	tests := []struct {
		name    string
		in      string
		want    []string
		wantErr error
	}{
		{"Two", "{\"id\":1}\x00{\"id\":2}\x00", []string{`{"id":1}`, `{"id":2}`}, io.EOF},
		{"LongerThanTheBuffer", big + "\x00", []string{big}, io.EOF},
		{"PartAtTheEnd", "{\"id\":1}\x00{\"id\"", []string{`{"id":1}`}, io.EOF},
		{"Empty", "", nil, io.EOF},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := bufio.NewReaderSize(strings.NewReader(tc.in), 64<<10)
			var got []string
			var err error
			for {
				var m []byte
				if m, err = readMessage(r); err != nil {
					break
				}
				got = append(got, string(m))
			}
			if !errors.Is(err, tc.wantErr) || strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Fatalf("messages %d %.40q, err %v; want %d, %v", len(got), got, err, len(tc.want), tc.wantErr)
			}
		})
	}
	t.Run("TooLarge", func(t *testing.T) {
		r := bufio.NewReader(io.MultiReader(strings.NewReader("{"), &endless{}))
		if _, err := readMessage(r); !errors.Is(err, errMessageTooLarge) {
			t.Fatalf("err %v, want errMessageTooLarge", err)
		}
	})
}

// endless reads as bytes that are never the delimiter.
type endless struct{}

func (endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	return len(p), nil
}

// TestCopyMessages: the client's frames reach the browser as whole
// messages only, each with its delimiter, however they were split; a part
// left when the client ends is dropped, so the next client starts clean.
func TestCopyMessages(t *testing.T) {
	var frames bytes.Buffer
	fw := control.NewWriter(&frames)
	for _, p := range []string{"{\"id\":", "1}\x00{\"id\":2}\x00{\"id\"", ":3"} {
		if err := fw.Frame(control.FrameData, []byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	if err := fw.Frame(control.FrameEnd, nil); err != nil {
		t.Fatal(err)
	}
	var browser bytes.Buffer
	if err := copyMessages(control.NewReader(&frames), &browser); err != nil {
		t.Fatal(err)
	}
	if got, want := browser.String(), "{\"id\":1}\x00{\"id\":2}\x00"; got != want {
		t.Fatalf("the browser got %q, want %q", got, want)
	}
}
