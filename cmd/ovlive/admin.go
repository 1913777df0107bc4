package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"openvibe.network/agentsandbox/internal/cli"
	"openvibe.network/agentsandbox/live"
)

// adminAction is one `ovlive admin NOUN VERB`: its synopsis and summary,
// how many positional arguments it takes, whether it only reads (then it
// never creates or migrates a database), and setup, which registers its
// flags and returns what to check before the store is opened (nil for
// nothing; its error is a usage error, printed with the usage, exit 2) and
// what to do with the store. do returns the one object to print.
type adminAction struct {
	noun, verb string
	synopsis   string
	summary    string
	positional int
	readOnly   bool
	setup      func(fs *flag.FlagSet) (check func(args []string) error, do adminDo)
}

type adminDo func(ctx context.Context, s live.Store, args []string) (any, error)

// adminActions are the admin commands, in the order the usage lists them.
func adminActions() []adminAction {
	return []adminAction{
		{"person", "add", "--name NAME", "create a person", 0, false, personAdd},
		{"person", "list", "", "list the persons", 0, true, personList},
		{"person", "delete", "PERSON_ID", "delete a person with their credentials and streams", 1, false, personDelete},
		{"stream", "add", "--owner PERSON_ID [--id ID]", "create an agent stream", 0, false, streamAdd},
		{"stream", "list", "", "list the streams", 0, true, streamList},
		{"stream", "delete", "STREAM_ID", "delete a stream with its records and history", 1, false, streamDelete},
		{"service", "add", "--name NAME [--first-party] [--capability CAP]...", "create a service principal", 0, false, serviceAdd},
		{"service", "list", "", "list the services", 0, true, serviceList},
		{"service", "delete", "SERVICE_ID", "delete a service with its tokens and the registrations it made", 1, false, serviceDelete},
		{"capability", "add", "--service SERVICE_ID CAP", "grant a service a capability", 1, false, capabilityAdd},
		{"capability", "remove", "--service SERVICE_ID CAP", "withdraw a capability from a service", 1, false, capabilityRemove},
		{"token", "issue", "--service ID | --person ID [--ttl DURATION]", "issue a service token (ovs_) or a person token (ovp_)", 0, false, tokenIssue},
		{"desk-ticket", "issue", "--person ID [--ttl DURATION]", "issue a desk ticket (ovd_)", 0, false, deskTicketIssue},
		{"session", "issue", "--person ID [--ttl DURATION]", "issue an owner's session (the ov_session cookie)", 0, false, sessionIssue},
		{"session", "link", "--person ID [--ttl DURATION] [--base-url URL]", "make a one-time sign-in link for a person", 0, false, sessionLink},
		{"session", "revoke", "--person ID", "revoke every session of a person", 0, false, sessionRevoke},
		{"credential", "revoke", "CREDENTIAL_ID", "revoke a credential", 1, false, credentialRevoke},
		{"credential", "list", "[--kind KIND]", "list credentials with their holders' names and last use", 0, true, credentialList},
	}
}

// adminOptions are the flags admin and every admin command share.
type adminOptions struct {
	db     dbFlags
	format string
	config string
}

// register adds the shared flags to fs, keeping o's values when set.
func (o *adminOptions) register(fs *flag.FlagSet) {
	o.db.register(fs)
	if o.format == "" {
		o.format = "json"
	}
	fs.StringVar(&o.format, "format", o.format, "print `FORMAT` json (one object) or table")
	fs.Lookup("format").DefValue = "json"
}

const adminHelp = `Each command prints one JSON object on stdout (or, with --format table,
the same as a table); refused requests (an unknown owner, a taken id, …)
exit 1 with a message on stderr that says what to fix. The commands that
only read (list) never create or migrate a database.

--db (required), --db-schema and --db-timeout may also come from the
environment (OVLIVE_DB, OVLIVE_DB_SCHEMA, OVLIVE_DB_TIMEOUT) or a config file
(--config FILE or OVLIVE_CONFIG), as for ovlive serve. A command gives up
within 30 s on a database that does not answer.`

func adminCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	var o adminOptions
	fs := cli.NewFlagSet("ovlive admin", "[--db DSN] [--format json|table] NOUN VERB [flags]", adminHelp+"\n\ncommands:\n"+adminList())
	fs.StringVar(&o.config, "config", "", "read --db and --db-schema from `FILE` (TOML, or JSON for *.json)")
	o.register(fs)
	if code, ok := cli.Parse(fs, args, 0, -1, stdout, stderr); !ok {
		return code
	}
	if err := applySettings(fs, o.config); err != nil {
		return cli.UsageError(fs, stderr, "%v", err)
	}
	if fs.NArg() == 0 {
		return cli.UsageError(fs, stderr, "name what to do, e.g. `person add`")
	}
	return adminProgram(&o, stderr).Run(ctx, fs.Args(), stdin, stdout, stderr)
}

// adminProgram dispatches NOUN VERB to the actions, with o's shared flags.
func adminProgram(o *adminOptions, stderr io.Writer) cli.Program {
	var nouns []cli.Command
	byNoun := map[string][]cli.Command{}
	for _, a := range adminActions() {
		if byNoun[a.noun] == nil {
			nouns = append(nouns, cli.Command{Name: a.noun})
		}
		byNoun[a.noun] = append(byNoun[a.noun], cli.Command{Name: a.verb, Summary: strings.TrimSpace(a.synopsis + "  " + a.summary), Run: a.runner(o)})
	}
	for i := range nouns {
		verbs := cli.Program{Name: "ovlive admin " + nouns[i].Name, Commands: byNoun[nouns[i].Name]}
		nouns[i].Summary = "(" + verbNames(verbs.Commands) + ")"
		nouns[i].Run = verbs.Run
	}
	return cli.Program{Name: "ovlive admin", Commands: nouns}
}

func verbNames(cmds []cli.Command) string {
	names := make([]string, len(cmds))
	for i, c := range cmds {
		names[i] = c.Name
	}
	return strings.Join(names, ", ")
}

// adminList is every admin command, one a line, for the usage.
func adminList() string {
	var b strings.Builder
	for _, a := range adminActions() {
		fmt.Fprintf(&b, "  %s\n      %s\n", strings.TrimSpace(a.noun+" "+a.verb+" "+a.synopsis), a.summary)
	}
	return strings.TrimRight(b.String(), "\n")
}

// runner parses the action's flags (which may repeat the shared ones),
// checks them, opens the store, runs the action and prints its object.
func (a adminAction) runner(o *adminOptions) func(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	return func(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
		name := a.noun + " " + a.verb
		fs := cli.NewFlagSet("ovlive admin "+name, a.synopsis, a.summary+".")
		o.register(fs) // the admin-level values stay unless repeated here
		check, do := a.setup(fs)
		if code, ok := cli.Parse(fs, args, a.positional, a.positional, stdout, stderr); !ok {
			return code
		}
		// The shared flags had their settings at the admin level.
		if err := applySettings(fs, o.config, "db", "db-schema", "db-timeout", "format"); err != nil {
			return cli.UsageError(fs, stderr, "%v", err)
		}
		if o.format != "json" && o.format != "table" {
			return cli.UsageError(fs, stderr, "--format %q: use json or table", o.format)
		}
		if check != nil {
			if err := check(fs.Args()); err != nil {
				return cli.UsageError(fs, stderr, "%s", err)
			}
		}
		if err := o.db.check(); err != nil {
			return cli.UsageError(fs, stderr, "%v", err)
		}
		// A database that accepts connections and never answers must not
		// keep an admin command waiting for ever.
		ctx, cancel := context.WithTimeout(ctx, openTimeout)
		defer cancel()
		store, err := openStore(ctx, o.db, a.readOnly)
		if err != nil {
			fmt.Fprintf(stderr, "ovlive admin %s: %v\n", name, timedOut(ctx, err))
			return 1
		}
		defer store.Close()
		out, err := do(ctx, store, fs.Args())
		if err != nil {
			msg := errorText(err)
			if t := timedOut(ctx, err); t != err {
				msg = t.Error()
			}
			fmt.Fprintf(stderr, "ovlive admin %s: %s\n", name, msg)
			return 1
		}
		if err := printResult(stdout, o.format, out); err != nil {
			fmt.Fprintf(stderr, "ovlive admin %s: %v\n", name, err)
			return 1
		}
		return 0
	}
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
