package main

import (
	"flag"
	"fmt"
	"strings"

	sclient "github.com/sluicemq/sluice/client"
)

// The access key of the client commands (docs/security.md): --access-key and
// --secret-key, else SLUICE_TOKEN (ID:SECRET), else AWS_ACCESS_KEY_ID and
// AWS_SECRET_ACCESS_KEY. The commands send it as a bearer token. The
// variables are read after parsing, never shown as a flag's default.
type cliKey struct {
	id, secret string
}

func (k *cliKey) add(fs *flag.FlagSet) {
	fs.StringVar(&k.id, "access-key", "", "access key id, for a broker with keys (else env SLUICE_TOKEN=ID:SECRET, or AWS_ACCESS_KEY_ID)")
	fs.StringVar(&k.secret, "secret-key", "", "its secret (else env SLUICE_TOKEN or AWS_SECRET_ACCESS_KEY); prefer the variable: a flag shows in ps")
}

// option returns the client option for the key, nil without one.
func (k *cliKey) option(env func(string) string) (sclient.Option, error) {
	id, secret, err := k.resolve(env)
	if err != nil || id == "" {
		return nil, err
	}
	return sclient.WithToken(id, secret), nil
}

// resolve returns the key's id and secret from the flags or the variables,
// both empty without a key.
func (k *cliKey) resolve(env func(string) string) (id, secret string, err error) {
	id, secret = k.id, k.secret
	if id == "" && secret == "" {
		if tok := env("SLUICE_TOKEN"); tok != "" {
			var ok bool
			id, secret, ok = strings.Cut(tok, ":")
			if !ok || id == "" || secret == "" {
				return "", "", fmt.Errorf("SLUICE_TOKEN must be ACCESS_KEY_ID:SECRET")
			}
		} else {
			id, secret = env("AWS_ACCESS_KEY_ID"), env("AWS_SECRET_ACCESS_KEY")
		}
	}
	if secret == "" && id != "" {
		secret = env("AWS_SECRET_ACCESS_KEY")
	}
	if (id == "") != (secret == "") {
		return "", "", fmt.Errorf("--access-key and --secret-key go together")
	}
	return id, secret, nil
}
