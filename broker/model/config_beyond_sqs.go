package model

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
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
	AttrDeduplicationWindowSeconds: true, AttrDeduplicationUntil: true,
	AttrHealthDepth: true, AttrHealthAge: true,
	AttrMaxInFlight: true, AttrMaxReceivesPerSecond: true,
	AttrMessageTimeToLive: true, AttrExpiredMessageAction: true,
	AttrCompletedRetentionSeconds: true,
	AttrArchiveExpired:            true,
}

// IsSluiceAttribute reports whether name is one of the Sluice queue attributes.
func IsSluiceAttribute(name string) bool { return sluiceAttrs[name] }

// SluiceAttributeDefault is the value GetQueueAttributes returns for a Sluice
// attribute asked for by name on a queue where it is unset.
func SluiceAttributeDefault(name string) string {
	switch name {
	case AttrMaxDepth, AttrLowPriorityMaxDepth:
		return "0"
	case AttrPaused, AttrArchiveExpired:
		return "false"
	case AttrDeliveryMode:
		return DeliveryAtLeastOnce
	case AttrDeduplicationWindowSeconds:
		return strconv.FormatInt(int64(DefaultDedupWindow/time.Second), 10)
	case AttrDeduplicationUntil:
		return string(DedupUntilWindow)
	case AttrMessageTimeToLive, AttrCompletedRetentionSeconds:
		return "0"
	case AttrExpiredMessageAction:
		return string(ExpiredDrop) // on a queue without a RedrivePolicy (QueueConfig.DefaultOf)
	}
	return "" // RetryPolicy, DeadLetterWebhook, MaxInFlight, MaxReceivesPerSecond: none; HealthDepth, HealthAge: the broker's thresholds
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
	case AttrArchiveExpired:
		c.ArchiveExpired, err = parseBool(name, v)
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
	case AttrDeduplicationWindowSeconds, AttrDeduplicationUntil:
		err = c.applyDedup(name, v) // config_dedup.go
	case AttrHealthDepth, AttrHealthAge:
		err = c.applyHealth(name, v) // config_health.go
	case AttrMaxInFlight, AttrMaxReceivesPerSecond:
		err = c.applyLimits(name, v) // config_limits.go
	case AttrMessageTimeToLive, AttrExpiredMessageAction:
		err = c.applyTTL(name, v) // config_ttl.go
	case AttrCompletedRetentionSeconds:
		c.CompletedRetention, err = parseSeconds(name, v, 0, MaxCompletedRetention) // status.go
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
		if c.MaxInFlight > 0 {
			return Errorf(ErrInvalidAttributeValue, "Invalid value for the parameter MaxInFlight. Reason: an at-most-once queue has no messages in flight (a receive removes them); limit it with MaxReceivesPerSecond.")
		}
	}
	return c.checkTTL() // config_ttl.go
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
	if c.ArchiveExpired {
		m[AttrArchiveExpired] = "true"
	}
	if c.DeliveryMode != "" {
		m[AttrDeliveryMode] = c.DeliveryMode
	}
	if c.DeadLetterWebhook != "" {
		m[AttrDeadLetterWebhook] = c.DeadLetterWebhook
	}
	c.dedupAttributes(m)
	c.healthAttributes(m)
	c.limitsAttributes(m)
	c.ttlAttributes(m)
	if c.CompletedRetention > 0 {
		m[AttrCompletedRetentionSeconds] = secs(c.CompletedRetention)
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

// The jitter kinds of a RetryPolicy: how a scheduled delay d becomes the
// wait (Backoff draws it from the message id and attempt).
const (
	JitterFull  = "full"  // uniform in [0, d]
	JitterEqual = "equal" // d/2 plus uniform in [0, d/2]
	JitterNone  = "none"  // d exactly
	JitterUp    = "up"    // d plus uniform in [0, d/2]: d times a factor in [1, 1.5]
)

// MaxRetrySeconds bounds RetryPolicy's baseSeconds, maxSeconds and each of
// its delays (12 hours, the longest visibility timeout).
const MaxRetrySeconds = 43200

// MaxRetryDelays bounds the number of delays of a RetryPolicy's schedule.
const MaxRetryDelays = 25

// RetryPolicy is the parsed RetryPolicy attribute, JSON like RedrivePolicy,
// in one of two forms:
//   - exponential, {"baseSeconds":2,"maxSeconds":300,"jitter":"full"}: after
//     its n-th attempt failed, a message waits min(Base * 2^(n-1), Max),
//     jittered;
//   - a schedule, {"delays":[10,60,300],"jitter":"none"}: after its n-th
//     attempt failed, a message waits Delays[n-1], or the last delay once n
//     is past the list, jittered.
//
// Backoff (broker/internal/plan) computes the wait. Either form retries until
// maxReceiveCount or the message's Sluice.MaxAttempts dead-letters it.
type RetryPolicy struct {
	// Base is the first backoff: 1..43200 s, whole seconds (0 with Delays).
	Base time.Duration
	// Max caps the backoff: Base..43200 s, whole seconds (0 with Delays).
	Max time.Duration
	// Delays, when set, is the schedule: 1..MaxRetryDelays delays of
	// 1..43200 s each, whole seconds; Base and Max are then 0.
	Delays []time.Duration `json:",omitempty"`
	// Jitter is JitterFull, JitterEqual, JitterNone or JitterUp. Its
	// default is JitterFull for the exponential form and JitterNone for a
	// schedule (whose delays are meant as given).
	Jitter string
}

// Equal reports whether p and q are the same policy.
func (p RetryPolicy) Equal(q RetryPolicy) bool {
	return p.Base == q.Base && p.Max == q.Max && p.Jitter == q.Jitter && slices.Equal(p.Delays, q.Delays)
}

// String renders the policy as its attribute value, in one canonical form
// per policy: {"baseSeconds":2,"maxSeconds":300,"jitter":"full"} or
// {"delays":[10,60,300],"jitter":"none"}.
func (p RetryPolicy) String() string {
	var b []byte
	if len(p.Delays) > 0 {
		delays := make([]int64, len(p.Delays))
		for i, d := range p.Delays {
			delays[i] = int64(d / time.Second)
		}
		b, _ = json.Marshal(struct {
			Delays []int64 `json:"delays"`
			Jitter string  `json:"jitter"`
		}{delays, p.Jitter})
	} else {
		b, _ = json.Marshal(struct {
			Base   int64  `json:"baseSeconds"`
			Max    int64  `json:"maxSeconds"`
			Jitter string `json:"jitter"`
		}{int64(p.Base / time.Second), int64(p.Max / time.Second), p.Jitter})
	}
	return string(b)
}

// ParseRetryPolicy parses a RetryPolicy attribute value ("" = none). The
// integers may be JSON numbers or strings, as in RedrivePolicy. The
// exponential form needs baseSeconds; maxSeconds defaults to 300 (the seed's
// cap) or baseSeconds if that is larger, and must not be less than
// baseSeconds; its jitter defaults to "full". The schedule form is delays
// alone (never with baseSeconds or maxSeconds): 1 to 25 delays of 1 to 43200
// seconds; its jitter defaults to "none".
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
		switch k {
		case "baseSeconds", "maxSeconds", "delays", "jitter":
		default:
			return nil, bad("Only following attributes are supported: [baseSeconds, maxSeconds, delays, jitter].")
		}
	}
	// seconds reads a whole number of seconds, 1..MaxRetrySeconds.
	seconds := func(x any) (time.Duration, bool) {
		n, ok := jsonInt(x)
		return time.Duration(n) * time.Second, ok && n >= 1 && n <= MaxRetrySeconds
	}
	badSeconds := func(key string) error {
		return bad(fmt.Sprintf("Invalid value for %s: must be an integer from 1 to %d.", key, MaxRetrySeconds))
	}
	p := &RetryPolicy{}
	if x, ok := raw["delays"]; ok {
		_, hasBase := raw["baseSeconds"]
		_, hasMax := raw["maxSeconds"]
		if hasBase || hasMax {
			return nil, bad("delays cannot be given with baseSeconds or maxSeconds: give either delays or baseSeconds (and maxSeconds).")
		}
		list, ok := x.([]any)
		if !ok || len(list) < 1 || len(list) > MaxRetryDelays {
			return nil, bad(fmt.Sprintf("delays must be a list of 1 to %d integers.", MaxRetryDelays))
		}
		p.Delays = make([]time.Duration, len(list))
		for i, d := range list {
			if p.Delays[i], ok = seconds(d); !ok {
				return nil, bad(fmt.Sprintf("Invalid value for delays: each must be an integer from 1 to %d.", MaxRetrySeconds))
			}
		}
		p.Jitter = JitterNone
	} else {
		x, ok := raw["baseSeconds"]
		if !ok {
			return nil, bad("Retry policy does not contain mandatory attribute: baseSeconds or delays.")
		}
		if p.Base, ok = seconds(x); !ok {
			return nil, badSeconds("baseSeconds")
		}
		p.Max = max(p.Base, 300*time.Second)
		if x, ok := raw["maxSeconds"]; ok {
			if p.Max, ok = seconds(x); !ok {
				return nil, badSeconds("maxSeconds")
			}
		}
		if p.Max < p.Base {
			return nil, bad("maxSeconds must not be less than baseSeconds.")
		}
		p.Jitter = JitterFull
	}
	if j, ok := raw["jitter"]; ok {
		s, _ := j.(string)
		switch s {
		case JitterFull, JitterEqual, JitterNone, JitterUp:
			p.Jitter = s
		default:
			return nil, bad("jitter must be full, equal, none or up.")
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
