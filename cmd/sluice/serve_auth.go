package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/sluicemq/sluice/auth"
)

// authFlags are the authentication settings of `sluice serve`
// (docs/security.md).
type authFlags struct {
	// keysFile is the keys file (--keys, SLUICE_KEYS_FILE): authentication
	// is on when it is set.
	keysFile string
	// insecureNoAuth allows a non-loopback --addr without keys.
	insecureNoAuth bool
}

// add registers the flags on fs, their defaults from env.
func (a *authFlags) add(fs *flag.FlagSet, env func(string) string) error {
	fs.StringVar(&a.keysFile, "keys", env("SLUICE_KEYS_FILE"),
		"a keys file (JSON list of accessKeyId, secretAccessKey, account, allow): turns authentication on; SIGHUP reloads it (env SLUICE_KEYS_FILE)")
	def := false
	if v := env("SLUICE_INSECURE_NO_AUTH"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("SLUICE_INSECURE_NO_AUTH=%q is not a boolean (use 1 or 0)", v)
		}
		def = b
	}
	fs.BoolVar(&a.insecureNoAuth, "insecure-no-auth", def,
		"listen on a non-loopback --addr without keys: anyone who reaches the port can do anything (env SLUICE_INSECURE_NO_AUTH)")
	return nil
}

// load reads the keys file (nil, nil without one).
func (a authFlags) load() (*auth.Keys, error) {
	if a.keysFile == "" {
		return nil, nil
	}
	k, err := auth.LoadKeys(a.keysFile)
	if err != nil {
		return nil, fmt.Errorf("--keys: %w", err)
	}
	return k, nil
}

// reloadKeysOnHUP reloads keys on each SIGHUP until ctx ends; a bad file
// keeps the keys in use and logs why. It returns a stop function that
// waits for its goroutine.
func reloadKeysOnHUP(ctx context.Context, keys *auth.Keys, log *slog.Logger) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				if err := keys.Reload(); err != nil {
					log.Error("keys file not reloaded; the keys in use stay", "err", err)
					continue
				}
				log.Info("keys file reloaded", "path", keys.Path(), "keys", keys.Len())
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		cancel()
		<-done
	}
}
