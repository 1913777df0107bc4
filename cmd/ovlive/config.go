package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// envPrefix starts the name of the environment variable of every flag:
// --shutdown-timeout is OVLIVE_SHUTDOWN_TIMEOUT.
const envPrefix = "OVLIVE_"

// configKeys are the keys a config file may hold: the flags of serve and
// of admin (each command applies those it has; a key neither has is an
// error, so that a typo does not pass unseen).
var configKeys = map[string]bool{
	"listen": true, "addr-file": true, "db": true, "db-schema": true, "db-timeout": true, "shutdown-timeout": true, "log-level": true,
	"tls-cert": true, "tls-key": true, "session-ttl": true, "secure-cookies": true, "max-conns": true, "max-conns-per-client": true,
	"trusted-proxy": true, "base-url": true, "format": true,
}

// checkEnv fails on a variable that starts with OVLIVE_ but names no
// setting (a typo would otherwise pass unseen, as an unknown key in a
// config file would not).
func checkEnv(environ []string) error {
	known := map[string]bool{envName("config"): true}
	for k := range configKeys {
		known[envName(k)] = true
	}
	var unknown []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, envPrefix) && !known[name] {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	names := make([]string, 0, len(configKeys))
	for k := range configKeys {
		names = append(names, envName(k))
	}
	slices.Sort(names)
	slices.Sort(unknown)
	return fmt.Errorf("unknown variable %s in the environment: the variables are %s and OVLIVE_CONFIG", strings.Join(unknown, ", "), strings.Join(names, ", "))
}

// envName is the environment variable of flag name.
func envName(name string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// applySettings gives every flag of fs that the command line did not set
// (and that skip does not name) its value from the environment
// (OVLIVE_NAME) or else from the config file (--config FILE, or
// OVLIVE_CONFIG), in that order of precedence. Its error says which
// variable or key has a bad value; it is a usage error.
func applySettings(fs *flag.FlagSet, configFile string, skip ...string) error {
	if err := checkEnv(os.Environ()); err != nil {
		return err
	}
	set := map[string]bool{}
	for _, name := range skip {
		set[name] = true
	}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if configFile == "" {
		configFile = os.Getenv(envName("config"))
	}
	file, err := readConfig(configFile)
	if err != nil {
		return err
	}
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || f.Name == "config" {
			return
		}
		if v, ok := os.LookupEnv(envName(f.Name)); ok {
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %w", envName(f.Name), v, valueError(f, err)))
			}
			return
		}
		if v, ok := file[f.Name]; ok {
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("%s: %s = %q: %w", configFile, f.Name, v, valueError(f, err)))
			}
		}
	})
	return errors.Join(errs...)
}

// valueError says what a flag's value must be when the flag package's
// own words do not (a boolean's "parse error").
func valueError(f *flag.Flag, err error) error {
	if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
		return errors.New("not a boolean: write true or false")
	}
	if g, ok := f.Value.(flag.Getter); ok {
		if _, ok := g.Get().(int); ok {
			return errors.New("not a whole number")
		}
	}
	return err
}

// readConfig reads a config file of flag names and values: TOML, or JSON
// when the name ends in .json. "" reads nothing.
func readConfig(path string) (map[string]string, error) {
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	raw := map[string]any{}
	if strings.EqualFold(filepath.Ext(path), ".json") {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("config %s: not a JSON object of settings: %w", path, err)
		}
	} else if _, err := toml.Decode(string(data), &raw); err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	out := make(map[string]string, len(raw))
	for k, v := range raw {
		if !configKeys[k] {
			return nil, fmt.Errorf("config %s: unknown setting %q (settings are flag names, such as listen, db, log-level)", path, k)
		}
		s, err := settingValue(v)
		if err != nil {
			return nil, fmt.Errorf("config %s: %s: %w", path, k, err)
		}
		out[k] = s
	}
	return out, nil
}

// settingValue is a config value as a flag's text.
func settingValue(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case bool:
		return strconv.FormatBool(x), nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64), nil
	case json.Number:
		return x.String(), nil
	case []any: // a list, such as trusted-proxy = ["10.0.0.5", "10.0.1.0/24"]
		parts := make([]string, len(x))
		for i, e := range x {
			s, ok := e.(string)
			if !ok {
				return "", fmt.Errorf("want a list of strings, not %T in it", e)
			}
			parts[i] = s
		}
		return strings.Join(parts, ","), nil
	}
	return "", fmt.Errorf("want a string, a number or a boolean, not %T", v)
}
