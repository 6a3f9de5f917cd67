package model

import (
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The Sluice queue attributes: settings beyond SQS, accepted by CreateQueue
// and SetQueueAttributes like any attribute. GetQueueAttributes returns one
// asked for by name with its default when it is unset (SluiceAttributeDefault),
// and includes it in "All" only when it is set, so a plain queue reads exactly
// as an SQS queue does.
const (
	AttrRetryPolicy         = "RetryPolicy"
	AttrMaxDepth            = "MaxDepth"
	AttrLowPriorityMaxDepth = "LowPriorityMaxDepth"
	AttrPaused              = "Paused"
	AttrDeliveryMode        = "DeliveryMode"
	AttrDeadLetterWebhook   = "DeadLetterWebhook"
)

// The delivery modes (QueueConfig.DeliveryMode).
const (
	// DeliveryAtLeastOnce is SQS's: a message is leased, and comes back
	// when its lease ends without a delete.
	DeliveryAtLeastOnce = "at-least-once"
	// DeliveryAtMostOnce: a receive removes the message (durably, before
	// the answer); a delete of its receipt succeeds with no effect and a
	// visibility change answers MessageNotInflight. For metrics and logs,
	// where a loss is acceptable and a redelivery is not. Standard queues
	// only, never with a RedrivePolicy or a RetryPolicy.
	DeliveryAtMostOnce = "at-most-once"
)

// MaxQueueDepth bounds MaxDepth and LowPriorityMaxDepth.
const MaxQueueDepth = 1_000_000_000

var sluiceAttrs = map[string]bool{
	AttrRetryPolicy: true, AttrMaxDepth: true, AttrLowPriorityMaxDepth: true,
	AttrPaused: true, AttrDeliveryMode: true, AttrDeadLetterWebhook: true,
}

// IsSluiceAttribute reports whether name is one of the Sluice queue attributes.
func IsSluiceAttribute(name string) bool { return sluiceAttrs[name] }

// SluiceAttributeDefault is the value GetQueueAttributes returns for a Sluice
// attribute asked for by name on a queue where it is unset.
func SluiceAttributeDefault(name string) string {
	switch name {
	case AttrMaxDepth, AttrLowPriorityMaxDepth:
		return "0"
	case AttrPaused:
		return "false"
	case AttrDeliveryMode:
		return DeliveryAtLeastOnce
	}
	return "" // RetryPolicy, DeadLetterWebhook: none
}

func (c *QueueConfig) applySluice(name, v string) error {
	var err error
	switch name {
	case AttrRetryPolicy:
		c.Retry, err = ParseRetryPolicy(v)
	case AttrMaxDepth:
		c.MaxDepth, err = parseInt(name, v, 0, MaxQueueDepth)
	case AttrLowPriorityMaxDepth:
		c.LowPriorityMaxDepth, err = parseInt(name, v, 0, MaxQueueDepth)
	case AttrPaused:
		c.Paused, err = parseBool(name, v)
	case AttrDeliveryMode:
		switch v {
		case DeliveryAtLeastOnce, "":
			c.DeliveryMode = ""
		case DeliveryAtMostOnce:
			c.DeliveryMode = v
		default:
			err = Errorf(ErrInvalidAttributeValue, "Invalid value for the parameter DeliveryMode. Reason: must be %s or %s.", DeliveryAtLeastOnce, DeliveryAtMostOnce)
		}
	case AttrDeadLetterWebhook:
		c.DeadLetterWebhook, err = ParseWebhook(v)
	}
	return err
}

// checkSluice holds the cross-attribute rules of the Sluice settings, checked
// on the settings as they are after a CreateQueue or SetQueueAttributes.
func (c *QueueConfig) checkSluice() error {
	if c.MaxDepth > 0 && c.LowPriorityMaxDepth > c.MaxDepth {
		return Errorf(ErrInvalidAttributeValue, "Invalid value for the parameter LowPriorityMaxDepth. Reason: must not be greater than MaxDepth (%d).", c.MaxDepth)
	}
	if c.DeliveryMode == DeliveryAtMostOnce {
		switch {
		case c.Fifo:
			return Errorf(ErrInvalidAttributeValue, "Invalid value for the parameter DeliveryMode. Reason: at-most-once is for standard queues only.")
		case c.Redrive != nil:
			return Errorf(ErrInvalidAttributeValue, "Invalid value for the parameter DeliveryMode. Reason: an at-most-once queue cannot have a RedrivePolicy (a received message is gone: it cannot fail).")
		case c.Retry != nil:
			return Errorf(ErrInvalidAttributeValue, "Invalid value for the parameter DeliveryMode. Reason: an at-most-once queue cannot have a RetryPolicy (a received message is gone: it cannot be retried).")
		}
	}
	return nil
}

// sluiceAttributes adds the set Sluice settings to m (Attributes).
func (c QueueConfig) sluiceAttributes(m map[string]string) {
	if c.Retry != nil {
		m[AttrRetryPolicy] = c.Retry.String()
	}
	if c.MaxDepth > 0 {
		m[AttrMaxDepth] = strconv.FormatInt(c.MaxDepth, 10)
	}
	if c.LowPriorityMaxDepth > 0 {
		m[AttrLowPriorityMaxDepth] = strconv.FormatInt(c.LowPriorityMaxDepth, 10)
	}
	if c.Paused {
		m[AttrPaused] = "true"
	}
	if c.DeliveryMode != "" {
		m[AttrDeliveryMode] = c.DeliveryMode
	}
	if c.DeadLetterWebhook != "" {
		m[AttrDeadLetterWebhook] = c.DeadLetterWebhook
	}
}

// AtMostOnce reports whether a receive removes the message (DeliveryMode).
func (c QueueConfig) AtMostOnce() bool { return c.DeliveryMode == DeliveryAtMostOnce }

// parseWebhook accepts "" (none) or an absolute http or https URL without
// user information. Which hosts may be called is the operator's list, checked
// when the webhook is delivered, not here.
func ParseWebhook(v string) (string, error) {
	if v == "" {
		return "", nil
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || len(v) > 2048 {
		return "", Errorf(ErrInvalidAttributeValue, "Invalid value for the parameter DeadLetterWebhook. Reason: must be an http or https URL without user information, at most 2048 characters.")
	}
	return v, nil
}

// The jitter kinds of a RetryPolicy.
const (
	JitterFull  = "full"  // uniform in [0, d]
	JitterEqual = "equal" // d/2 plus uniform in [0, d/2]
	JitterNone  = "none"  // d exactly
)

// MaxRetrySeconds bounds RetryPolicy's baseSeconds and maxSeconds (12 hours,
// the longest visibility timeout).
const MaxRetrySeconds = 43200

// RetryPolicy is the parsed RetryPolicy attribute, JSON like RedrivePolicy:
// {"baseSeconds":2,"maxSeconds":300,"jitter":"full"}. After its n-th attempt
// failed, a message waits min(Base * 2^(n-1), Max), jittered (Backoff).
type RetryPolicy struct {
	// Base is the first backoff: 1..43200 s, whole seconds.
	Base time.Duration
	// Max caps the backoff: Base..43200 s, whole seconds.
	Max time.Duration
	// Jitter is JitterFull (the default), JitterEqual or JitterNone.
	Jitter string
}

// String renders the policy as its attribute value.
func (p RetryPolicy) String() string {
	b, _ := json.Marshal(struct {
		Base   int64  `json:"baseSeconds"`
		Max    int64  `json:"maxSeconds"`
		Jitter string `json:"jitter"`
	}{int64(p.Base / time.Second), int64(p.Max / time.Second), p.Jitter})
	return string(b)
}

// ParseRetryPolicy parses a RetryPolicy attribute value ("" = none). The
// integers may be JSON numbers or strings, as in RedrivePolicy. baseSeconds
// is required; maxSeconds defaults to 300 (the seed's cap) or baseSeconds if
// that is larger, and must not be less than baseSeconds; jitter defaults to
// "full".
func ParseRetryPolicy(v string) (*RetryPolicy, error) {
	if v == "" {
		return nil, nil
	}
	bad := func(reason string) error {
		return Errorf(ErrInvalidAttributeValue, "Value %s for parameter RetryPolicy is invalid. Reason: %s", v, reason)
	}
	var raw map[string]any
	if err := json.Unmarshal([]byte(v), &raw); err != nil {
		return nil, bad("Retry policy is not a valid JSON map.")
	}
	for k := range raw {
		if k != "baseSeconds" && k != "maxSeconds" && k != "jitter" {
			return nil, bad("Only following attributes are supported: [baseSeconds, maxSeconds, jitter].")
		}
	}
	seconds := func(key string) (int64, bool, error) {
		x, ok := raw[key]
		if !ok {
			return 0, false, nil
		}
		n, ok := jsonInt(x)
		if !ok || n < 1 || n > MaxRetrySeconds {
			return 0, true, bad("Invalid value for " + key + ": must be an integer from 1 to 43200.")
		}
		return n, true, nil
	}
	base, ok, err := seconds("baseSeconds")
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, bad("Retry policy does not contain mandatory attribute: baseSeconds.")
	}
	maxS, ok, err := seconds("maxSeconds")
	if err != nil {
		return nil, err
	}
	if !ok {
		maxS = max(base, 300)
	}
	if maxS < base {
		return nil, bad("maxSeconds must not be less than baseSeconds.")
	}
	p := &RetryPolicy{Base: time.Duration(base) * time.Second, Max: time.Duration(maxS) * time.Second, Jitter: JitterFull}
	if j, ok := raw["jitter"]; ok {
		s, _ := j.(string)
		switch s {
		case JitterFull, JitterEqual, JitterNone:
			p.Jitter = s
		default:
			return nil, bad("jitter must be full, equal or none.")
		}
	}
	return p, nil
}

// jsonInt reads a whole number given as a JSON number or a decimal string.
func jsonInt(x any) (int64, bool) {
	switch x := x.(type) {
	case float64:
		n := int64(x)
		return n, float64(n) == x
	case string:
		n, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64)
		return n, err == nil
	}
	return 0, false
}
