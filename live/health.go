package live

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Health is a queue's health state.
type Health string

// The health states, from best to worst.
const (
	HealthOK       Health = "ok"
	HealthWarning  Health = "warning"
	HealthCritical Health = "critical"
)

// rank orders the states (worse is higher).
func (h Health) rank() int {
	switch h {
	case HealthWarning:
		return 1
	case HealthCritical:
		return 2
	}
	return 0
}

// DeadLetterLevel is the health state a queue gets while its dead-letter
// queue holds messages.
type DeadLetterLevel string

// The dead-letter levels.
const (
	DeadLettersWarning  DeadLetterLevel = "warning"
	DeadLettersCritical DeadLetterLevel = "critical"
	DeadLettersIgnore   DeadLetterLevel = "ignore"
)

// ParseDeadLetterLevel parses warning, critical or ignore.
func ParseDeadLetterLevel(s string) (DeadLetterLevel, error) {
	switch l := DeadLetterLevel(strings.TrimSpace(s)); l {
	case DeadLettersWarning, DeadLettersCritical, DeadLettersIgnore:
		return l, nil
	}
	return "", fmt.Errorf("dead-letter level %q: use warning, critical or ignore", s)
}

// Thresholds turn a queue's counts into its health state. A queue is
// critical when any figure reaches its critical threshold, else warning
// when any reaches its warning threshold, else ok:
//
//   - depth is visible + in flight + delayed (what MaxDepth limits: every
//     message the queue holds, whether or not a consumer has it);
//   - age is the age of the queue's oldest message;
//   - dead letters: a queue whose dead-letter queue holds any message gets
//     DeadLetters' state (nothing when it is ignore).
//
// A threshold of 0 is off.
type Thresholds struct {
	// DepthWarning and DepthCritical are depths. Default 1,000 and 10,000;
	// 0 (off) or at least 1; DepthCritical >= DepthWarning when both are on.
	DepthWarning  int64 `json:"depthWarning"`
	DepthCritical int64 `json:"depthCritical"`
	// AgeWarning and AgeCritical are ages of the oldest message. Default
	// 1 min and 5 min; 0 (off) or at least 1 s; AgeCritical >= AgeWarning
	// when both are on.
	AgeWarning  time.Duration `json:"-"`
	AgeCritical time.Duration `json:"-"`
	// DeadLetters is the state of a queue whose dead-letter queue is not
	// empty. Default warning.
	DeadLetters DeadLetterLevel `json:"deadLetters"`
}

// DefaultThresholds are the defaults: depth 1,000 / 10,000, age 1 min /
// 5 min, any dead letter a warning.
func DefaultThresholds() Thresholds {
	return Thresholds{
		DepthWarning:  1000,
		DepthCritical: 10000,
		AgeWarning:    time.Minute,
		AgeCritical:   5 * time.Minute,
		DeadLetters:   DeadLettersWarning,
	}
}

// Validate reports the first threshold out of range.
func (t Thresholds) Validate() error {
	if t.DepthWarning < 0 || t.DepthCritical < 0 {
		return fmt.Errorf("live: depth thresholds %d, %d must not be negative (0 turns one off)", t.DepthWarning, t.DepthCritical)
	}
	if t.DepthWarning > 0 && t.DepthCritical > 0 && t.DepthCritical < t.DepthWarning {
		return fmt.Errorf("live: DepthCritical %d is below DepthWarning %d", t.DepthCritical, t.DepthWarning)
	}
	for _, d := range []time.Duration{t.AgeWarning, t.AgeCritical} {
		if d != 0 && d < time.Second {
			return fmt.Errorf("live: age threshold %v must be 0 (off) or at least 1s", d)
		}
	}
	if t.AgeWarning > 0 && t.AgeCritical > 0 && t.AgeCritical < t.AgeWarning {
		return fmt.Errorf("live: AgeCritical %v is below AgeWarning %v", t.AgeCritical, t.AgeWarning)
	}
	if _, err := ParseDeadLetterLevel(string(t.DeadLetters)); err != nil {
		return fmt.Errorf("live: DeadLetters: %v", err)
	}
	return nil
}

// thresholdsJSON is Thresholds as /v1/stats shows them.
type thresholdsJSON struct {
	DepthWarning       int64           `json:"depthWarning"`
	DepthCritical      int64           `json:"depthCritical"`
	AgeWarningSeconds  float64         `json:"ageWarningSeconds"`
	AgeCriticalSeconds float64         `json:"ageCriticalSeconds"`
	DeadLetters        DeadLetterLevel `json:"deadLetters"`
}

func (t Thresholds) json() thresholdsJSON {
	return thresholdsJSON{
		DepthWarning:       t.DepthWarning,
		DepthCritical:      t.DepthCritical,
		AgeWarningSeconds:  t.AgeWarning.Seconds(),
		AgeCriticalSeconds: t.AgeCritical.Seconds(),
		DeadLetters:        t.DeadLetters,
	}
}

// Assess returns the health state of a queue with this depth, oldest-message
// age and dead-letter count, and one reason per threshold reached (in the
// order depth, age, dead letters), e.g. "depth 1,200 ≥ 1,000".
func (t Thresholds) Assess(depth int64, age time.Duration, deadLetters int64) (Health, []string) {
	h := HealthOK
	var reasons []string
	raise := func(to Health, reason string) {
		if to.rank() > h.rank() {
			h = to
		}
		reasons = append(reasons, reason)
	}
	switch {
	case t.DepthCritical > 0 && depth >= t.DepthCritical:
		raise(HealthCritical, "depth "+group(depth)+" ≥ "+group(t.DepthCritical))
	case t.DepthWarning > 0 && depth >= t.DepthWarning:
		raise(HealthWarning, "depth "+group(depth)+" ≥ "+group(t.DepthWarning))
	}
	switch {
	case t.AgeCritical > 0 && age >= t.AgeCritical:
		raise(HealthCritical, "oldest message "+age.Truncate(time.Second).String()+" ≥ "+t.AgeCritical.String())
	case t.AgeWarning > 0 && age >= t.AgeWarning:
		raise(HealthWarning, "oldest message "+age.Truncate(time.Second).String()+" ≥ "+t.AgeWarning.String())
	}
	if deadLetters > 0 && t.DeadLetters != DeadLettersIgnore && t.DeadLetters != "" {
		noun := "dead letters"
		if deadLetters == 1 {
			noun = "dead letter"
		}
		raise(Health(t.DeadLetters), group(deadLetters)+" "+noun)
	}
	return h, reasons
}

// group writes n with thousands separators: 1200 -> "1,200".
func group(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// ParseDepthThresholds parses "WARNING,CRITICAL" depths (e.g. "1000,10000";
// 0 turns one off) into t.
func (t *Thresholds) ParseDepthThresholds(s string) error {
	w, c, ok := strings.Cut(s, ",")
	if !ok {
		return fmt.Errorf("depth thresholds %q: give two depths, warning then critical, e.g. 1000,10000 (0 turns one off)", s)
	}
	wn, err1 := strconv.ParseInt(strings.TrimSpace(w), 10, 64)
	cn, err2 := strconv.ParseInt(strings.TrimSpace(c), 10, 64)
	if err1 != nil || err2 != nil || wn < 0 || cn < 0 {
		return fmt.Errorf("depth thresholds %q: both must be whole numbers ≥ 0, e.g. 1000,10000", s)
	}
	if wn > 0 && cn > 0 && cn < wn {
		return fmt.Errorf("depth thresholds %q: the critical depth %d is below the warning depth %d", s, cn, wn)
	}
	t.DepthWarning, t.DepthCritical = wn, cn
	return nil
}

// ParseAgeThresholds parses "WARNING,CRITICAL" ages of the oldest message
// (Go durations, e.g. "1m,5m"; 0 turns one off) into t.
func (t *Thresholds) ParseAgeThresholds(s string) error {
	w, c, ok := strings.Cut(s, ",")
	if !ok {
		return fmt.Errorf("age thresholds %q: give two durations, warning then critical, e.g. 1m,5m (0 turns one off)", s)
	}
	wd, err1 := time.ParseDuration(strings.TrimSpace(w))
	cd, err2 := time.ParseDuration(strings.TrimSpace(c))
	if err1 != nil || err2 != nil {
		return fmt.Errorf("age thresholds %q: both must be durations such as 30s, 1m or 1h30m, e.g. 1m,5m", s)
	}
	for _, d := range []time.Duration{wd, cd} {
		if d != 0 && d < time.Second {
			return fmt.Errorf("age thresholds %q: each must be 0 (off) or at least 1s", s)
		}
	}
	if wd > 0 && cd > 0 && cd < wd {
		return fmt.Errorf("age thresholds %q: the critical age %v is below the warning age %v", s, cd, wd)
	}
	t.AgeWarning, t.AgeCritical = wd, cd
	return nil
}
