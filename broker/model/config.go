package model

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// QueueConfig is a queue's settings, parsed from and rendered to SQS queue
// attributes (ParseAttributes, ApplyAttributes, Attributes).
type QueueConfig struct {
	// VisibilityTimeout is the default lease length. Default 30 s; 0..12 h.
	VisibilityTimeout time.Duration
	// Delay is the default delay of new messages. Default 0; 0..15 min.
	Delay time.Duration
	// Retention is how long a message is kept after it was sent. Default 4 days; 1 min..14 days.
	Retention time.Duration
	// MaxMessageSize is the largest body plus attributes, in bytes. Default and max 1 MiB; min 1024.
	MaxMessageSize int
	// ReceiveWaitTime is the default long-poll wait. Default 0; 0..20 s.
	ReceiveWaitTime time.Duration
	// Redrive, when set, moves a message to a dead-letter queue on the receive
	// that would exceed MaxReceiveCount.
	Redrive *RedrivePolicy
	// RedriveAllow is the raw RedriveAllowPolicy JSON (empty: allowAll).
	RedriveAllow string
	// Fifo marks a FIFO queue (name ends in ".fifo"); set at creation only.
	Fifo bool
	// ContentBasedDedup, DedupScope and ThroughputLimit are FIFO settings
	// (empty on a standard queue).
	ContentBasedDedup bool
	DedupScope        DedupScope
	ThroughputLimit   ThroughputLimit
	// Policy is the raw IAM policy document (stored and returned, not enforced).
	Policy string
	// Extra holds other accepted attributes that Sluice stores and returns
	// without acting on them (the KMS and SSE settings).
	Extra map[string]string

	// The Sluice settings (config_beyond_sqs.go): beyond SQS, all off by default,
	// so a queue without them behaves as an SQS queue.

	// Retry, when set, delays a message after a failure (a nack without a
	// delay, an expired lease) by an exponential backoff or a schedule of
	// delays (Backoff).
	Retry *RetryPolicy `json:",omitempty"`
	// MaxDepth refuses sends that would take the queue's depth (visible +
	// in flight + delayed) past it (AdmitSend); 0 = no limit.
	MaxDepth int64 `json:",omitempty"`
	// LowPriorityMaxDepth (<= MaxDepth when both are set) refuses sends
	// holding a message of priority < 0 past it; 0 = no limit.
	LowPriorityMaxDepth int64 `json:",omitempty"`
	// Paused stops deliveries; everything else goes on.
	Paused bool `json:",omitempty"`
	// DeliveryMode is DeliveryAtLeastOnce ("", the default) or
	// DeliveryAtMostOnce (a receive removes the message).
	DeliveryMode string `json:",omitempty"`
	// DeadLetterWebhook is a URL called when a message lands in this
	// queue's dead-letter queue ("" = none).
	DeadLetterWebhook string `json:",omitempty"`
	// DedupWindow is a standard queue's DeduplicationWindowSeconds: how long
	// a MessageDeduplicationId is remembered after its send; 0 = the default
	// (DefaultDedupWindow); 1 min..24 h. FIFO queues: always 0 (DedupWindowOf).
	DedupWindow time.Duration `json:",omitempty"`
	// DedupUntil is a standard queue's DeduplicationUntil: "" (window, the
	// default) or DedupUntilSettled (config_dedup.go).
	DedupUntil DedupUntil `json:",omitempty"`
	// HealthDepth and HealthAge are the queue's own health thresholds
	// (config_health.go); nil = the broker's.
	HealthDepth *HealthLevels `json:",omitempty"`
	HealthAge   *HealthLevels `json:",omitempty"`
	// MaxInFlight is the queue's own in-flight cap (config_limits.go):
	// receives past it get nothing and wait; 0 = none (the broker's cap
	// still applies); 1..DefaultMaxInFlight.
	MaxInFlight int64 `json:",omitempty"`
	// ReceiveRate is MaxReceivesPerSecond, the messages handed out per
	// second (config_limits.go); 0 = no limit.
	ReceiveRate Rate `json:",omitempty"`
	// TimeToLive is the queue's MessageTimeToLive: the time to live of the
	// messages sent without their own Sluice.TimeToLive; 0 = none;
	// 1 s..MaxTimeToLive, never longer than Retention and always longer
	// than Delay (config_ttl.go).
	TimeToLive time.Duration `json:",omitempty"`
	// ExpiredAction is the queue's ExpiredMessageAction: "" (the default,
	// ExpiredActionOf), ExpiredDeadLetter (needs Redrive) or ExpiredDrop.
	ExpiredAction ExpiredAction `json:",omitempty"`
	// CompletedRetention is CompletedRetentionSeconds (status.go): how long
	// the queue keeps a record of a message deleted by a consumer (and of
	// one expired or replayed), which its status by id reads; 0 (the
	// default) keeps none; at most MaxCompletedRetention.
	CompletedRetention time.Duration `json:",omitempty"`
	// ArchiveExpired writes the messages its retention ends to the broker's
	// archive before they are removed (archive.go); default false.
	ArchiveExpired bool `json:",omitempty"`
}

// RedrivePolicy is the parsed RedrivePolicy attribute.
type RedrivePolicy struct {
	// DeadLetterTargetARN is the ARN as given; DeadLetterQueue its queue name.
	DeadLetterTargetARN string
	DeadLetterQueue     string
	// MaxReceiveCount is 1..1000 (default 10).
	MaxReceiveCount int
}

// DefaultQueueConfig returns the settings of a new queue with no attributes.
func DefaultQueueConfig(fifo bool) QueueConfig {
	c := QueueConfig{
		VisibilityTimeout: 30 * time.Second,
		Retention:         4 * 24 * time.Hour,
		MaxMessageSize:    MaxMessageBytes,
		Fifo:              fifo,
		Extra:             map[string]string{"SqsManagedSseEnabled": "true"},
	}
	if fifo {
		c.DedupScope = DedupScopeQueue
		c.ThroughputLimit = ThroughputPerQueue
	}
	return c
}

// Queue attribute names.
const (
	AttrVisibilityTimeout             = "VisibilityTimeout"
	AttrDelaySeconds                  = "DelaySeconds"
	AttrMessageRetentionPeriod        = "MessageRetentionPeriod"
	AttrMaximumMessageSize            = "MaximumMessageSize"
	AttrReceiveMessageWaitTimeSeconds = "ReceiveMessageWaitTimeSeconds"
	AttrRedrivePolicy                 = "RedrivePolicy"
	AttrRedriveAllowPolicy            = "RedriveAllowPolicy"
	AttrFifoQueue                     = "FifoQueue"
	AttrContentBasedDeduplication     = "ContentBasedDeduplication"
	AttrDeduplicationScope            = "DeduplicationScope"
	AttrFifoThroughputLimit           = "FifoThroughputLimit"
	AttrPolicy                        = "Policy"
	AttrQueueArn                      = "QueueArn"
	AttrCreatedTimestamp              = "CreatedTimestamp"
	AttrLastModifiedTimestamp         = "LastModifiedTimestamp"
	AttrApproxMessages                = "ApproximateNumberOfMessages"
	AttrApproxNotVisible              = "ApproximateNumberOfMessagesNotVisible"
	AttrApproxDelayed                 = "ApproximateNumberOfMessagesDelayed"
)

// readOnlyAttrs can be read but not set.
var readOnlyAttrs = map[string]bool{
	AttrQueueArn: true, AttrCreatedTimestamp: true, AttrLastModifiedTimestamp: true,
	AttrApproxMessages: true, AttrApproxNotVisible: true, AttrApproxDelayed: true,
}

// extraAttrs are stored and returned as given.
var extraAttrs = map[string]bool{
	"KmsMasterKeyId": true, "KmsDataKeyReusePeriodSeconds": true, "SqsManagedSseEnabled": true,
}

var fifoOnlyAttrs = map[string]bool{
	AttrContentBasedDeduplication: true, AttrDeduplicationScope: true, AttrFifoThroughputLimit: true,
}

// IsQueueAttributeName reports whether name can be asked for in GetQueueAttributes.
func IsQueueAttributeName(name string) bool {
	switch name {
	case AttrVisibilityTimeout, AttrDelaySeconds, AttrMessageRetentionPeriod, AttrMaximumMessageSize,
		AttrReceiveMessageWaitTimeSeconds, AttrRedrivePolicy, AttrRedriveAllowPolicy, AttrFifoQueue,
		AttrContentBasedDeduplication, AttrDeduplicationScope, AttrFifoThroughputLimit, AttrPolicy, "All":
		return true
	}
	return readOnlyAttrs[name] || extraAttrs[name] || sluiceAttrs[name]
}

// ParseAttributes returns the config of a new queue named name with the given
// CreateQueue attributes.
func ParseAttributes(name string, attrs map[string]string) (QueueConfig, error) {
	fifo := strings.HasSuffix(name, ".fifo")
	if v, ok := attrs[AttrFifoQueue]; ok {
		b, err := parseBool(AttrFifoQueue, v)
		if err != nil {
			return QueueConfig{}, err
		}
		if b != fifo {
			if b {
				return QueueConfig{}, Errorf(ErrInvalidParameterValue, "The name of a FIFO queue can only include alphanumeric characters, hyphens, or underscores, must end with .fifo suffix and be 1 to 80 in length.")
			}
			return QueueConfig{}, Errorf(ErrInvalidParameterValue, "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length")
		}
	} else if fifo {
		return QueueConfig{}, Errorf(ErrInvalidParameterValue, "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length")
	}
	c := DefaultQueueConfig(fifo)
	return c, c.apply(attrs, true)
}

// ApplyAttributes returns c changed by SetQueueAttributes attrs.
func ApplyAttributes(c QueueConfig, attrs map[string]string) (QueueConfig, error) {
	c = c.Clone()
	return c, c.apply(attrs, false)
}

// Clone returns a deep copy of c: its maps and policies are its own, so a
// change of the copy never shows in c (a backend hands configurations out
// and changes them under its lock).
func (c QueueConfig) Clone() QueueConfig {
	extra := make(map[string]string, len(c.Extra))
	for k, v := range c.Extra {
		extra[k] = v
	}
	c.Extra = extra
	if c.Redrive != nil {
		r := *c.Redrive
		c.Redrive = &r
	}
	if c.Retry != nil {
		r := *c.Retry
		r.Delays = slices.Clone(r.Delays)
		c.Retry = &r
	}
	if c.HealthDepth != nil {
		h := *c.HealthDepth
		c.HealthDepth = &h
	}
	if c.HealthAge != nil {
		h := *c.HealthAge
		c.HealthAge = &h
	}
	return c
}

func (c *QueueConfig) apply(attrs map[string]string, create bool) error {
	names := make([]string, 0, len(attrs))
	for k := range attrs {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, name := range names {
		v := attrs[name]
		var err error
		switch {
		case name == AttrVisibilityTimeout:
			c.VisibilityTimeout, err = parseSeconds(name, v, 0, MaxVisibilityTimeout)
		case name == AttrDelaySeconds:
			c.Delay, err = parseSeconds(name, v, 0, MaxDelay)
		case name == AttrMessageRetentionPeriod:
			c.Retention, err = parseSeconds(name, v, MinRetention, MaxRetention)
		case name == AttrReceiveMessageWaitTimeSeconds:
			c.ReceiveWaitTime, err = parseSeconds(name, v, 0, MaxWaitTime)
		case name == AttrMaximumMessageSize:
			var n int64
			n, err = parseInt(name, v, MinMessageBytes, MaxMessageBytes)
			c.MaxMessageSize = int(n)
		case name == AttrRedrivePolicy:
			c.Redrive, err = parseRedrive(v)
		case name == AttrRedriveAllowPolicy:
			c.RedriveAllow, err = parseRedriveAllow(v)
		case name == AttrPolicy:
			if v != "" && !json.Valid([]byte(v)) {
				err = Errorf(ErrInvalidAttributeValue, "Invalid value for the parameter Policy.")
			}
			c.Policy = v
		case name == AttrFifoQueue:
			if !create {
				if !c.Fifo {
					return Errorf(ErrInvalidAttributeName, "Unknown Attribute FifoQueue.")
				}
				return Errorf(ErrInvalidAttributeValue, "Invalid value for the parameter FifoQueue. Reason: Modifying queue type is not supported.")
			}
		case fifoOnlyAttrs[name] && !c.Fifo:
			if name == AttrContentBasedDeduplication {
				return Errorf(ErrInvalidAttributeName, "Unknown Attribute %s.", name)
			}
			return Errorf(ErrInvalidAttributeName, "You can specify the %s only when FifoQueue is set to true.", name)
		case name == AttrContentBasedDeduplication:
			c.ContentBasedDedup, err = parseBool(name, v)
		case name == AttrDeduplicationScope:
			if s := DedupScope(v); s != DedupScopeQueue && s != DedupScopeMessageGroup {
				err = Errorf(ErrInvalidAttributeValue, "Invalid value for the parameter DeduplicationScope.")
			}
			c.DedupScope = DedupScope(v)
		case name == AttrFifoThroughputLimit:
			if l := ThroughputLimit(v); l != ThroughputPerQueue && l != ThroughputPerMessageGroupID {
				err = Errorf(ErrInvalidAttributeValue, "Invalid value for the parameter FifoThroughputLimit.")
			}
			c.ThroughputLimit = ThroughputLimit(v)
		case extraAttrs[name]:
			err = c.applyExtra(name, v) // sse.go
		case sluiceAttrs[name]:
			err = c.applySluice(name, v) // config_beyond_sqs.go
		default:
			return Errorf(ErrInvalidAttributeName, "Unknown Attribute %s.", name)
		}
		if err != nil {
			return err
		}
	}
	if c.Fifo && c.ThroughputLimit == ThroughputPerMessageGroupID && c.DedupScope != DedupScopeMessageGroup {
		return Errorf(ErrInvalidAttributeValue, "Invalid value for the parameter FifoThroughputLimit. Reason: perMessageGroupId is allowed only when DeduplicationScope is messageGroup.")
	}
	return c.checkSluice()
}

func parseBool(name, v string) (bool, error) {
	switch strings.ToLower(v) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, Errorf(ErrInvalidAttributeValue, "Invalid value for the parameter %s.", name)
}

func parseInt(name, v string, lo, hi int64) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, Errorf(ErrInvalidAttributeValue, "Invalid value for the parameter %s. Reason: must be an integer between %d and %d.", name, lo, hi)
	}
	return n, nil
}

func parseSeconds(name, v string, lo, hi time.Duration) (time.Duration, error) {
	n, err := parseInt(name, v, int64(lo/time.Second), int64(hi/time.Second))
	return time.Duration(n) * time.Second, err
}

func parseRedrive(v string) (*RedrivePolicy, error) {
	if v == "" {
		return nil, nil
	}
	var raw map[string]any
	bad := func(reason string) error {
		return Errorf(ErrInvalidAttributeValue, "Value %s for parameter RedrivePolicy is invalid. Reason: %s", v, reason)
	}
	if err := json.Unmarshal([]byte(v), &raw); err != nil {
		return nil, bad("Redrive policy is not a valid JSON map.")
	}
	arn, _ := raw["deadLetterTargetArn"].(string)
	if arn == "" {
		return nil, bad("Redrive policy does not contain mandatory attribute: deadLetterTargetArn.")
	}
	name, ok := QueueNameFromARN(arn)
	if !ok {
		return nil, bad("Invalid value for deadLetterTargetArn.")
	}
	p := &RedrivePolicy{DeadLetterTargetARN: arn, DeadLetterQueue: name, MaxReceiveCount: 10}
	if m, ok := raw["maxReceiveCount"]; ok {
		var n int64
		var err error
		switch x := m.(type) {
		case float64:
			n = int64(x)
			if float64(n) != x {
				err = fmt.Errorf("not an integer")
			}
		case string:
			n, err = strconv.ParseInt(x, 10, 64)
		default:
			err = fmt.Errorf("bad type")
		}
		if err != nil || n < 1 || n > 1000 {
			return nil, bad("Invalid value for maxReceiveCount: must be an integer from 1 to 1000.")
		}
		p.MaxReceiveCount = int(n)
	}
	for k := range raw {
		if k != "deadLetterTargetArn" && k != "maxReceiveCount" {
			return nil, bad("Only following attributes are supported: [deadLetterTargetArn, maxReceiveCount].")
		}
	}
	return p, nil
}

func parseRedriveAllow(v string) (string, error) {
	if v == "" {
		return "", nil
	}
	var p struct {
		RedrivePermission string   `json:"redrivePermission"`
		SourceQueueArns   []string `json:"sourceQueueArns"`
	}
	bad := func(reason string) error {
		return Errorf(ErrInvalidAttributeValue, "Value %s for parameter RedriveAllowPolicy is invalid. Reason: %s", v, reason)
	}
	if err := json.Unmarshal([]byte(v), &p); err != nil {
		return "", bad("Redrive allow policy is not a valid JSON map.")
	}
	switch p.RedrivePermission {
	case "allowAll", "denyAll":
		if len(p.SourceQueueArns) > 0 {
			return "", bad("Only byQueue permission allows sourceQueueArns.")
		}
	case "byQueue":
		if len(p.SourceQueueArns) == 0 || len(p.SourceQueueArns) > 10 {
			return "", bad("byQueue needs 1 to 10 sourceQueueArns.")
		}
		for _, a := range p.SourceQueueArns {
			if _, ok := QueueNameFromARN(a); !ok {
				return "", bad("Invalid value for sourceQueueArns.")
			}
		}
	default:
		return "", bad("redrivePermission must be allowAll, denyAll or byQueue.")
	}
	return v, nil
}

// AllowsSource reports whether the RedriveAllowPolicy of a dead-letter queue
// lets queue source use it.
func (c QueueConfig) AllowsSource(source string) bool {
	if c.RedriveAllow == "" {
		return true
	}
	var p struct {
		RedrivePermission string   `json:"redrivePermission"`
		SourceQueueArns   []string `json:"sourceQueueArns"`
	}
	if json.Unmarshal([]byte(c.RedriveAllow), &p) != nil {
		return true
	}
	switch p.RedrivePermission {
	case "denyAll":
		return false
	case "byQueue":
		for _, a := range p.SourceQueueArns {
			if n, _ := QueueNameFromARN(a); n == source {
				return true
			}
		}
		return false
	}
	return true
}

// Attributes renders the settable attributes of c as SQS strings.
func (c QueueConfig) Attributes() map[string]string {
	m := map[string]string{
		AttrVisibilityTimeout:             secs(c.VisibilityTimeout),
		AttrDelaySeconds:                  secs(c.Delay),
		AttrMessageRetentionPeriod:        secs(c.Retention),
		AttrMaximumMessageSize:            strconv.Itoa(c.MaxMessageSize),
		AttrReceiveMessageWaitTimeSeconds: secs(c.ReceiveWaitTime),
	}
	if c.Redrive != nil {
		b, _ := json.Marshal(struct {
			A string `json:"deadLetterTargetArn"`
			N int    `json:"maxReceiveCount"`
		}{c.Redrive.DeadLetterTargetARN, c.Redrive.MaxReceiveCount})
		m[AttrRedrivePolicy] = string(b)
	}
	if c.RedriveAllow != "" {
		m[AttrRedriveAllowPolicy] = c.RedriveAllow
	}
	if c.Policy != "" {
		m[AttrPolicy] = c.Policy
	}
	if c.Fifo {
		m[AttrFifoQueue] = "true"
		m[AttrContentBasedDeduplication] = strconv.FormatBool(c.ContentBasedDedup)
		m[AttrDeduplicationScope] = string(c.DedupScope)
		m[AttrFifoThroughputLimit] = string(c.ThroughputLimit)
	}
	for k, v := range c.Extra {
		m[k] = v
	}
	c.sluiceAttributes(m)
	return m
}

// ConflictingAttribute returns the first attribute of attrs (CreateQueue input)
// whose value differs from c, or "" when they all match. Values are compared
// after parsing, so "30" and " 30" or equivalent JSON policies match.
func (c QueueConfig) ConflictingAttribute(name string, attrs map[string]string) string {
	want, err := ParseAttributes(name, attrs)
	if err != nil {
		return ""
	}
	have, wantA := c.Attributes(), want.Attributes()
	names := make([]string, 0, len(attrs))
	for k := range attrs {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if have[k] != wantA[k] {
			return k
		}
	}
	return ""
}

func secs(d time.Duration) string { return strconv.FormatInt(int64(d/time.Second), 10) }

// QueueAttributes returns the GetQueueAttributes view of a queue: its settings,
// its counts and the computed attributes, given its ARN.
func QueueAttributes(q QueueInfo, arn string) map[string]string {
	m := q.Config.Attributes()
	m[AttrQueueArn] = arn
	m[AttrCreatedTimestamp] = strconv.FormatInt(q.CreatedAt.Unix(), 10)
	m[AttrLastModifiedTimestamp] = strconv.FormatInt(q.ModifiedAt.Unix(), 10)
	m[AttrApproxMessages] = strconv.FormatInt(q.Stats.Visible, 10)
	m[AttrApproxNotVisible] = strconv.FormatInt(q.Stats.InFlight, 10)
	m[AttrApproxDelayed] = strconv.FormatInt(q.Stats.Delayed, 10)
	return m
}

// ARN returns the queue ARN arn:aws:sqs:<region>:<account>:<name>.
func ARN(region, account, name string) string {
	return "arn:aws:sqs:" + region + ":" + account + ":" + name
}

// QueueNameFromARN returns the queue name of an SQS queue ARN.
func QueueNameFromARN(arn string) (string, bool) {
	parts := strings.Split(arn, ":")
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "sqs" || ValidateQueueName(parts[5]) != nil {
		return "", false
	}
	return parts[5], true
}
