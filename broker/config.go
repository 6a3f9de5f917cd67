package broker

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"unicode"

	"github.com/sluicemq/sluice/broker/model"
)

// Config is the front's settings. DefaultConfig returns the defaults; a zero
// field takes its default in New, which refuses what Validate refuses. The
// store's own settings (its clock, logger and observer) are the backend's
// (storage.Options); the front uses the backend's clock.
type Config struct {
	// Logger receives the front's structured logs (the audit lines among
	// them). Default: discard (slog.Default() is never used).
	Logger *slog.Logger
	// AccountID is the broker's own account id, and the one place it is
	// set: the account in its queue URLs and ARNs (the APIs and the server
	// read it with Broker.AccountID), the one unauthenticated requests act
	// as, and whose queues are stored under QueueRef.Account "". Default
	// DefaultAccountID; 1..64 characters without '/', ':', '?', '#', white
	// space or control characters (an AWS account id is 12 digits).
	AccountID string
	// MaxInFlight caps leased messages per queue: a standard-queue receive
	// past it gets ErrOverLimit, a FIFO receive gets no messages
	// (plan.ClaimRoom). Default model.DefaultMaxInFlight (120,000); 0 means
	// the default; must not be negative.
	MaxInFlight int
	// StrictPurge enforces AWS's one purge per queue per 60 s
	// (plan.AllowPurge). Default off.
	StrictPurge bool
	// WebhookHosts are the hosts a DeadLetterWebhook may call. The front
	// asks it when a CreateQueue or SetQueueAttributes sets the attribute,
	// and refuses the URL (InvalidAttributeValue) when its host is not
	// allowed. Default nil: dead-letter webhooks are off, and every URL is
	// refused (an operator turns them on with a secret and allowed hosts;
	// see package webhook, whose *HostList implements it).
	WebhookHosts WebhookHosts
	// Observer, when not nil, is told what the front did (counts per
	// queue, refusals), for metrics. Default nil. Give the backend the same
	// observer (storage.Options.Observer): it reports what only it sees.
	Observer model.Observer
	// BackupDir is the directory under which Broker.Backup writes backups
	// (each in a new directory of its own name). Default "": backups are
	// refused.
	BackupDir string
}

// DefaultAccountID is Config.AccountID's default.
const DefaultAccountID = "000000000000"

// DefaultConfig returns the front's default settings.
func DefaultConfig() Config {
	return Config{
		Logger:      slog.New(slog.DiscardHandler),
		AccountID:   DefaultAccountID,
		MaxInFlight: model.DefaultMaxInFlight,
	}
}

// withDefaults returns c with zero fields set to their defaults.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.Logger == nil {
		c.Logger = d.Logger
	}
	if c.AccountID == "" {
		c.AccountID = d.AccountID
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = d.MaxInFlight
	}
	return c
}

// Validate refuses what the field comments refuse, naming the field.
func (c Config) Validate() error {
	if c.MaxInFlight < 0 {
		return fmt.Errorf("broker: Config.MaxInFlight %d: must be 0 (the default, %d) or more", c.MaxInFlight, model.DefaultMaxInFlight)
	}
	if c.AccountID != "" && (len(c.AccountID) > 64 || strings.IndexFunc(c.AccountID, badAccountRune) >= 0) {
		return fmt.Errorf("broker: Config.AccountID %q: must be 1..64 characters without '/', ':', '?', '#', white space or control characters", c.AccountID)
	}
	return nil
}

// badAccountRune reports whether r may not appear in an account id: a
// separator of queue URLs and ARNs, white space, or a control character.
func badAccountRune(r rune) bool {
	return strings.ContainsRune("/:?#", r) || r <= ' ' || r == 0x7f || unicode.IsSpace(r) || unicode.IsControl(r)
}

// errNilBackend is New's error for a nil backend.
var errNilBackend = errors.New("broker: New needs a backend")

// errNoReceiptCodec is New's error for a backend without a receipt codec.
var errNoReceiptCodec = errors.New("broker: the backend has no receipt codec (Backend.Receipts returned nil)")
