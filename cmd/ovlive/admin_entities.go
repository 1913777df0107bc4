package main

import (
	"context"
	"errors"
	"flag"

	"openvibe.network/agentsandbox/live"
)

func personAdd(fs *flag.FlagSet) (func([]string) error, adminDo) {
	name := fs.String("name", "", "the person's `NAME` (required)")
	check := func([]string) error {
		if *name == "" {
			return errors.New("--name is required")
		}
		return nil
	}
	return check, func(ctx context.Context, s live.Store, _ []string) (any, error) {
		p, err := s.CreatePerson(ctx, live.Person{Name: *name})
		return idOut{p.ID}, err
	}
}

func personList(*flag.FlagSet) (func([]string) error, adminDo) {
	return nil, func(ctx context.Context, s live.Store, _ []string) (any, error) {
		return items(s.ListPersons(ctx))
	}
}

func streamAdd(fs *flag.FlagSet) (func([]string) error, adminDo) {
	owner := fs.String("owner", "", "the `PERSON_ID` of the stream's owner (required)")
	id := fs.String("id", "", "the stream's `ID` (default: a fresh str_… id)")
	check := func([]string) error {
		if *owner == "" {
			return errors.New("--owner is required: the id of the person who owns the stream (see `person list`)")
		}
		return nil
	}
	return check, func(ctx context.Context, s live.Store, _ []string) (any, error) {
		st, err := s.CreateStream(ctx, live.Stream{ID: *id, OwnerID: *owner})
		return idOut{st.ID}, err
	}
}

func streamList(*flag.FlagSet) (func([]string) error, adminDo) {
	return nil, func(ctx context.Context, s live.Store, _ []string) (any, error) {
		return items(s.ListStreams(ctx))
	}
}

func serviceAdd(fs *flag.FlagSet) (func([]string) error, adminDo) {
	name := fs.String("name", "", "the service's `NAME` (required)")
	firstParty := fs.Bool("first-party", false, "the service is OpenVibe's own (required to check in workers)")
	var caps stringList
	fs.Var(&caps, "capability", "a `CAP`ability the service holds (repeatable), e.g. "+live.CapabilityRegister)
	check := func([]string) error {
		if *name == "" {
			return errors.New("--name is required")
		}
		return nil
	}
	return check, func(ctx context.Context, s live.Store, _ []string) (any, error) {
		sv, err := s.CreateService(ctx, live.Service{Name: *name, FirstParty: *firstParty, Capabilities: caps})
		return idOut{sv.ID}, err
	}
}

func serviceList(*flag.FlagSet) (func([]string) error, adminDo) {
	return nil, func(ctx context.Context, s live.Store, _ []string) (any, error) {
		return items(s.ListServices(ctx))
	}
}

func personDelete(*flag.FlagSet) (func([]string) error, adminDo) {
	return nil, func(ctx context.Context, s live.Store, args []string) (any, error) {
		return s.DeletePerson(ctx, args[0])
	}
}

func streamDelete(*flag.FlagSet) (func([]string) error, adminDo) {
	return nil, func(ctx context.Context, s live.Store, args []string) (any, error) {
		return s.DeleteStream(ctx, args[0])
	}
}

func serviceDelete(*flag.FlagSet) (func([]string) error, adminDo) {
	return nil, func(ctx context.Context, s live.Store, args []string) (any, error) {
		return s.DeleteService(ctx, args[0])
	}
}

// capabilityOut is what capability add and remove print: the service's
// capabilities after the change.
type capabilityOut struct {
	ID           string   `json:"id"`
	Capabilities []string `json:"capabilities"`
}

func capabilityAdd(fs *flag.FlagSet) (func([]string) error, adminDo) { return capability(fs, true) }

func capabilityRemove(fs *flag.FlagSet) (func([]string) error, adminDo) { return capability(fs, false) }

func capability(fs *flag.FlagSet, held bool) (func([]string) error, adminDo) {
	service := fs.String("service", "", "the `SERVICE_ID` (required; see `service list`)")
	check := func(args []string) error {
		if *service == "" {
			return errors.New("--service is required")
		}
		if args[0] == "" {
			return errors.New("name the capability, e.g. " + live.CapabilityRegister)
		}
		return nil
	}
	return check, func(ctx context.Context, s live.Store, args []string) (any, error) {
		sv, err := s.SetCapability(ctx, *service, args[0], held)
		return capabilityOut{sv.ID, sv.Capabilities}, err
	}
}
