package broker

import (
	"errors"
	"fmt"
	"github.com/sluicemq/sluice/broker/model"
	"log/slog"
	"strings"
)

// Options are the settings of the front (Broker) and, for Clock and Logger,
// of every backend.
type Options struct {
	// Clock drives leases, delays, retention and move-task pacing. Default
	// RealClock. A backend and the front it serves share one clock.
	Clock model.Clock
	// Logger receives structured logs. Default: discard (slog.Default() is
	// never used).
	Logger *slog.Logger
	// MaxInFlight caps leased messages per queue: a standard-queue receive
	// past it gets ErrOverLimit, a FIFO receive gets no messages. The front
	// applies it. Default DefaultMaxInFlight (120,000); 0 means the default;
	// must not be negative.
	MaxInFlight int
	// StrictPurge enforces AWS's one purge per queue per 60 s. The front
	// applies it. Default off.
	StrictPurge bool
	// WebhookHosts are the hosts a DeadLetterWebhook may call. The front
	// asks it when a CreateQueue or SetQueueAttributes sets the attribute,
	// and refuses the URL (InvalidAttributeValue) when its host is not
	// allowed. Default nil: dead-letter webhooks are off, and every URL is
	// refused (an operator turns them on with a secret and allowed hosts;
	// see package webhook, whose *HostList implements it).
	WebhookHosts WebhookHosts
	// Observer, when not nil, is told what the front and the backend did
	// (counts per queue, refusals, store syncs), for metrics. Default nil.
	Observer model.Observer
	// BackupDir is the directory under which Broker.Backup writes backups
	// (each in a new directory of its own name). Default "": backups are
	// refused.
	BackupDir string
	// AccountID is the broker's own account id: the account in its queue
	// URLs and ARNs, the one unauthenticated requests act as, and whose
	// queues are stored under QueueRef.Account "". Default
	// DefaultAccountID; 1..64 characters without '/', ':', '?', '#' or
	// spaces (an AWS account id is 12 digits). The server's Config.AccountID
	// should be the same (Broker.ServeAccount aligns them).
	AccountID string
}

// DefaultAccountID is Options.AccountID's default.
const DefaultAccountID = "000000000000"

// validateAccountID checks an account id as Options.AccountID documents.
func validateAccountID(id string) error {
	if id == "" || len(id) > 64 || strings.ContainsAny(id, "/:?# \t\n") {
		return fmt.Errorf("broker: AccountID %q must be 1..64 characters without '/', ':', '?', '#' or spaces", id)
	}
	return nil
}

// WithDefaults returns o with zero fields set to their defaults.
func (o Options) WithDefaults() Options {
	if o.Clock == nil {
		o.Clock = model.RealClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MaxInFlight == 0 {
		o.MaxInFlight = model.DefaultMaxInFlight
	}
	if o.AccountID == "" {
		o.AccountID = DefaultAccountID
	}
	return o
}

// Validate refuses what the field comments refuse.
func (o Options) Validate() error {
	if o.MaxInFlight < 0 {
		return fmt.Errorf("broker: Options.MaxInFlight %d: must be 0 (the default, %d) or more", o.MaxInFlight, model.DefaultMaxInFlight)
	}
	if o.AccountID != "" {
		return validateAccountID(o.AccountID)
	}
	return nil
}

// errNilBackend is New's error for a nil backend.
var errNilBackend = errors.New("broker: New needs a backend")

// errNoReceiptCodec is New's error for a backend without a receipt codec.
var errNoReceiptCodec = errors.New("broker: the backend has no receipt codec (Backend.Receipts returned nil)")
