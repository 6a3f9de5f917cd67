package model

import (
	"strconv"
	"strings"
)

// The health attributes: a queue's own thresholds for the health states of
// /v1/stats, the dashboard and /metrics (sluice_queue_health), in place of
// the broker's (the sluice serve flags --health-depth, --health-age and, on
// a dead-letter queue, --health-dlq-depth). They change no behaviour of the
// queue: the broker only reports them.
const (
	// AttrHealthDepth is "WARNING,CRITICAL" depths (visible + in flight +
	// delayed), e.g. "1000,10000". On a dead-letter queue it takes the
	// place of --health-dlq-depth.
	AttrHealthDepth = "HealthDepth"
	// AttrHealthAge is "WARNING,CRITICAL" ages in seconds of the queue's
	// oldest visible message, e.g. "60,300". A dead-letter queue is never
	// judged by age.
	AttrHealthAge = "HealthAge"
)

// MaxHealthAgeSeconds bounds HealthAge's ages: 14 days, the longest
// retention.
const MaxHealthAgeSeconds = int64(MaxRetention / 1e9)

// HealthLevels is a pair of thresholds, warning then critical (a depth in
// messages, or an age in seconds). 0 turns one off; when both are on,
// Critical >= Warning.
type HealthLevels struct {
	Warning  int64 `json:"w"`
	Critical int64 `json:"c"`
}

// String renders the pair as its attribute value: "WARNING,CRITICAL".
func (h HealthLevels) String() string {
	return strconv.FormatInt(h.Warning, 10) + "," + strconv.FormatInt(h.Critical, 10)
}

// ParseHealthLevels parses the value of attribute name (HealthDepth or
// HealthAge): "" (unset: the broker's thresholds apply) or two whole
// numbers "WARNING,CRITICAL", each 0 (off) or 1..hi, the critical one not
// below the warning one when both are on.
func ParseHealthLevels(name, v string, hi int64) (*HealthLevels, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	unit, example := "depths", "1000,10000"
	if name == AttrHealthAge {
		unit, example = "ages in seconds", "60,300"
	}
	bad := func(reason string) error {
		return Errorf(ErrInvalidAttributeValue, "Invalid value for the parameter %s. Reason: %s", name, reason)
	}
	w, c, ok := strings.Cut(v, ",")
	if !ok {
		return nil, bad("give two " + unit + ", warning then critical, e.g. " + example + " (0 turns one off).")
	}
	wn, err1 := strconv.ParseInt(strings.TrimSpace(w), 10, 64)
	cn, err2 := strconv.ParseInt(strings.TrimSpace(c), 10, 64)
	if err1 != nil || err2 != nil || wn < 0 || cn < 0 || wn > hi || cn > hi {
		return nil, bad("both must be whole numbers between 0 and " + strconv.FormatInt(hi, 10) + ", e.g. " + example + " (0 turns one off).")
	}
	if wn > 0 && cn > 0 && cn < wn {
		return nil, bad("the critical value " + strconv.FormatInt(cn, 10) + " is below the warning value " + strconv.FormatInt(wn, 10) + ".")
	}
	return &HealthLevels{Warning: wn, Critical: cn}, nil
}

// applyHealth sets a health attribute (applySluice calls it).
func (c *QueueConfig) applyHealth(name, v string) (err error) {
	switch name {
	case AttrHealthDepth:
		c.HealthDepth, err = ParseHealthLevels(name, v, MaxQueueDepth)
	case AttrHealthAge:
		c.HealthAge, err = ParseHealthLevels(name, v, MaxHealthAgeSeconds)
	}
	return err
}

// healthAttributes adds the set health attributes to m (sluiceAttributes
// calls it).
func (c QueueConfig) healthAttributes(m map[string]string) {
	if c.HealthDepth != nil {
		m[AttrHealthDepth] = c.HealthDepth.String()
	}
	if c.HealthAge != nil {
		m[AttrHealthAge] = c.HealthAge.String()
	}
}
