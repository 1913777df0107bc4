package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"

	"openvibe.network/agentsandbox/live"
)

// adminAction is one `ovlive admin NOUN VERB`: its synopsis, how many
// positional arguments it takes, and setup, which registers its flags and
// returns what to check before the store is opened (nil for nothing; its
// error is a usage error, printed with the usage, exit 2) and what to do
// with the store. do returns the one JSON object to print.
type adminAction struct {
	synopsis   string
	positional int
	setup      func(fs *flag.FlagSet) (check func(args []string) error, do adminDo)
}

type adminDo func(ctx context.Context, s live.Store, args []string) (any, error)

func adminActions() map[string]adminAction {
	return map[string]adminAction{
		"person add":        {"--name NAME", 0, personAdd},
		"person list":       {"", 0, personList},
		"stream add":        {"--owner PERSON_ID [--id ID]", 0, streamAdd},
		"stream list":       {"", 0, streamList},
		"service add":       {"--name NAME [--first-party] [--capability CAP]...", 0, serviceAdd},
		"service list":      {"", 0, serviceList},
		"token issue":       {"--service ID | --person ID [--ttl DURATION]", 0, tokenIssue},
		"desk-ticket issue": {"--person ID [--ttl DURATION]", 0, deskTicketIssue},
		"session issue":     {"--person ID [--ttl DURATION]", 0, sessionIssue},
		"credential revoke": {"CREDENTIAL_ID", 1, credentialRevoke},
		"credential list":   {"[--kind service_token|person_token|desk_ticket|session]", 0, credentialList},
	}
}

func adminCmd(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	actions := adminActions()
	var db dbFlags
	fs := newFlags("admin", "[--db DSN] NOUN VERB [flags]", stderr)
	db.register(fs)
	fs.Usage = func() { adminUsage(stderr, fs, actions) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	rest := fs.Args()
	if len(rest) < 2 {
		return usageError(fs, "name what to do, e.g. `person add`")
	}
	name := rest[0] + " " + rest[1]
	a, ok := actions[name]
	if !ok {
		return usageError(fs, "unknown admin command %q", name)
	}
	return runAdmin(ctx, name, a, db, rest[2:], stdout, stderr)
}

// runAdmin parses the action's flags (which may repeat --db), checks them,
// opens the store, runs the action and prints its JSON object.
func runAdmin(ctx context.Context, name string, a adminAction, db dbFlags, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("admin "+name, a.synopsis, stderr)
	db.register(fs) // the admin-level values stay unless repeated here
	check, do := a.setup(fs)
	if code, ok := parse(fs, args, a.positional); !ok {
		return code
	}
	if check != nil {
		if err := check(fs.Args()); err != nil {
			return usageError(fs, "%s", err)
		}
	}
	store, err := openStore(ctx, db)
	if err != nil {
		fmt.Fprintf(stderr, "ovlive admin %s: %v\n", name, err)
		return 1
	}
	defer store.Close()
	out, err := do(ctx, store, fs.Args())
	if err != nil {
		fmt.Fprintf(stderr, "ovlive admin %s: %s\n", name, errorText(err))
		return 1
	}
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		fmt.Fprintf(stderr, "ovlive admin %s: %v\n", name, err)
		return 1
	}
	return 0
}

// errorText is what a person reads for err: the message of a *live.Error
// (which says what to fix), else the whole error.
func errorText(err error) string {
	var le *live.Error
	if errors.As(err, &le) {
		return le.Message
	}
	return err.Error()
}

func adminUsage(w io.Writer, fs *flag.FlagSet, actions map[string]adminAction) {
	fmt.Fprintln(w, "usage: ovlive admin [--db DSN] NOUN VERB [flags]   (each prints one JSON object)")
	names := make([]string, 0, len(actions))
	for n := range actions {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %s\n", strings.TrimSpace(n+" "+actions[n].synopsis))
	}
	fmt.Fprintln(w, "flags:")
	fs.PrintDefaults()
}

// items is the shape of every listing: {"items":[...]}, never null.
func items[T any](list []T, err error) (any, error) {
	if list == nil {
		list = []T{}
	}
	return map[string]any{"items": list}, err
}

type idOut struct {
	ID string `json:"id"`
}
