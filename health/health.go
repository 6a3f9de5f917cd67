// Package health turns a queue's figures into its health state: ok,
// warning or critical, with the reasons. It is the one place that decides
// it: the dashboard's sampler (package live, GET /v1/stats) and the
// Prometheus metrics (package metrics, sluice_queue_health, which the
// shipped alert rules read) both call Thresholds.Assess on the same
// AllStats read, so the two always agree.
//
// What a queue is decides how it is judged:
//
//   - A dead-letter queue (some queue's RedrivePolicy names it) is judged
//     by its count only: its messages wait there on purpose, for days, and
//     their age is no sign of trouble. Defaults: warning at 1, critical at
//     100 (DLQDepthWarning, DLQDepthCritical; its HealthDepth attribute in
//     their place).
//   - Any other queue is judged by its depth (visible + in flight +
//     delayed) and by how long its longest-visible message has waited for a
//     consumer (model.QueueStats.OldestVisibleSince): delayed, backing-off
//     and in-flight messages are not waiting, so a queue of delayed
//     messages only is never old. Its HealthDepth and HealthAge attributes
//     take the place of the broker's thresholds.
//   - A queue with a RedrivePolicy whose dead-letter queue holds messages
//     gets DeadLetters' state (default warning).
package health

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sluicemq/sluice/broker/model"
)

// Health is a queue's health state.
type Health string

// The health states, from best to worst.
const (
	HealthOK       Health = "ok"
	HealthWarning  Health = "warning"
	HealthCritical Health = "critical"
)

// Level orders the states: 0 ok, 1 warning, 2 critical (the value of the
// sluice_queue_health gauge).
func (h Health) Level() int {
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

// Check names one figure a queue is judged by (the label check of the
// sluice_queue_health_check gauge).
type Check string

// The checks, in the order of the reasons.
const (
	// CheckDepth: a queue's depth (not a dead-letter queue's).
	CheckDepth Check = "depth"
	// CheckAge: how long a queue's longest-visible message has waited (not
	// a dead-letter queue's).
	CheckAge Check = "age"
	// CheckDeadLetters: a dead-letter queue's own count.
	CheckDeadLetters Check = "dead_letters"
	// CheckDeadLetterQueue: a source queue whose dead-letter queue holds
	// messages.
	CheckDeadLetterQueue Check = "dead_letter_queue"
)

// Checks are every check, in order.
var Checks = []Check{CheckDepth, CheckAge, CheckDeadLetters, CheckDeadLetterQueue}

// Thresholds are the broker's thresholds (the sluice serve flags), which
// a queue's HealthDepth and HealthAge attributes override. A figure at or
// past a critical threshold makes the queue critical, else one at or past a
// warning threshold makes it warning, else it is ok. A threshold of 0 is
// off.
type Thresholds struct {
	// DepthWarning and DepthCritical are depths (visible + in flight +
	// delayed: what MaxDepth limits). Default 1,000 and 10,000; 0 (off) or
	// at least 1; DepthCritical >= DepthWarning when both are on.
	DepthWarning  int64
	DepthCritical int64
	// AgeWarning and AgeCritical are how long the longest-visible message
	// has waited. Default 1 min and 5 min; 0 (off) or at least 1 s;
	// AgeCritical >= AgeWarning when both are on.
	AgeWarning  time.Duration
	AgeCritical time.Duration
	// DLQDepthWarning and DLQDepthCritical are the counts of a dead-letter
	// queue. Default 1 and 100; 0 (off) or at least 1; DLQDepthCritical >=
	// DLQDepthWarning when both are on.
	DLQDepthWarning  int64
	DLQDepthCritical int64
	// DeadLetters is the state of a queue whose dead-letter queue is not
	// empty. Default warning.
	DeadLetters DeadLetterLevel
}

// DefaultThresholds are the defaults: depth 1,000 / 10,000, age 1 min /
// 5 min, a dead-letter queue's count 1 / 100, a queue whose dead-letter
// queue is not empty a warning.
func DefaultThresholds() Thresholds {
	return Thresholds{
		DepthWarning:     1000,
		DepthCritical:    10000,
		AgeWarning:       time.Minute,
		AgeCritical:      5 * time.Minute,
		DLQDepthWarning:  1,
		DLQDepthCritical: 100,
		DeadLetters:      DeadLettersWarning,
	}
}

// Validate reports the first threshold out of range.
func (t Thresholds) Validate() error {
	for _, p := range []struct {
		name string
		w, c int64
	}{{"Depth", t.DepthWarning, t.DepthCritical}, {"DLQDepth", t.DLQDepthWarning, t.DLQDepthCritical}} {
		if p.w < 0 || p.c < 0 {
			return fmt.Errorf("health: %s thresholds %d, %d must not be negative (0 turns one off)", p.name, p.w, p.c)
		}
		if p.w > 0 && p.c > 0 && p.c < p.w {
			return fmt.Errorf("health: %sCritical %d is below %sWarning %d", p.name, p.c, p.name, p.w)
		}
	}
	for _, d := range []time.Duration{t.AgeWarning, t.AgeCritical} {
		if d != 0 && d < time.Second {
			return fmt.Errorf("health: age threshold %v must be 0 (off) or at least 1s", d)
		}
	}
	if t.AgeWarning > 0 && t.AgeCritical > 0 && t.AgeCritical < t.AgeWarning {
		return fmt.Errorf("health: AgeCritical %v is below AgeWarning %v", t.AgeCritical, t.AgeWarning)
	}
	if _, err := ParseDeadLetterLevel(string(t.DeadLetters)); err != nil {
		return fmt.Errorf("health: DeadLetters: %v", err)
	}
	return nil
}

// Limits are the thresholds that judged one queue: the broker's, or its
// own attributes'. An age of 0 is off (a dead-letter queue's always is).
type Limits struct {
	DepthWarning  int64
	DepthCritical int64
	AgeWarning    time.Duration
	AgeCritical   time.Duration
}

// Queue is one queue's assessment, with the figures it judged.
type Queue struct {
	Name string
	// DeadLetterQueue is the queue's redrive target ("" when none).
	DeadLetterQueue string
	// DeadLetters is the depth of DeadLetterQueue: nil when the queue has
	// no RedrivePolicy or its target does not exist, 0 when it is empty.
	DeadLetters *int64
	// IsDeadLetterQueue: some queue's RedrivePolicy names this one.
	IsDeadLetterQueue bool
	// Depth is visible + in flight + delayed.
	Depth int64
	// OldestAge is the age of the oldest message, whatever its state (0
	// when empty); VisibleAge how long the longest-visible message has
	// waited (0 when none is visible). Health judges VisibleAge.
	OldestAge  time.Duration
	VisibleAge time.Duration
	// Limits are the thresholds used.
	Limits Limits
	// Health is the worst of Checks; Reasons say why, one per check not ok.
	Health  Health
	Reasons []string
	// Checks holds the state of each check that applies to the queue (the
	// depth and age of a queue, the count of a dead-letter queue, the
	// dead-letter queue of a source).
	Checks map[Check]Health
}

// Assess judges every queue of one AllStats read at now, in the read's
// order.
func (t Thresholds) Assess(all []model.QueueInfo, now time.Time) []Queue {
	depth := make(map[string]int64, len(all))
	isDLQ := make(map[string]bool)
	for _, q := range all {
		depth[q.Name] = q.Stats.Depth()
		if r := q.Config.Redrive; r != nil && r.DeadLetterQueue != q.Name {
			isDLQ[r.DeadLetterQueue] = true
		}
	}
	out := make([]Queue, len(all))
	for i, q := range all {
		a := Queue{Name: q.Name, IsDeadLetterQueue: isDLQ[q.Name], Depth: q.Stats.Depth()}
		if r := q.Config.Redrive; r != nil {
			a.DeadLetterQueue = r.DeadLetterQueue
			if d, ok := depth[r.DeadLetterQueue]; ok {
				a.DeadLetters = &d
			}
		}
		if s := q.Stats.OldestSentAt; !s.IsZero() {
			a.OldestAge = max(0, now.Sub(s))
		}
		if s := q.Stats.OldestVisibleSince; !s.IsZero() {
			a.VisibleAge = max(0, now.Sub(s))
		}
		t.judge(&a, q.Config)
		out[i] = a
	}
	return out
}

// judge fills a's Limits, Health, Reasons and Checks from its figures and
// the queue's settings.
func (t Thresholds) judge(a *Queue, cfg model.QueueConfig) {
	a.Health, a.Reasons, a.Checks = HealthOK, []string{}, map[Check]Health{}
	set := func(c Check, h Health, reason string) {
		a.Checks[c] = h
		if h.Level() > a.Health.Level() {
			a.Health = h
		}
		if h != HealthOK {
			a.Reasons = append(a.Reasons, reason)
		}
	}
	if a.IsDeadLetterQueue {
		a.Limits = Limits{DepthWarning: t.DLQDepthWarning, DepthCritical: t.DLQDepthCritical}
		if h := cfg.HealthDepth; h != nil {
			a.Limits.DepthWarning, a.Limits.DepthCritical = h.Warning, h.Critical
		}
		h, limit := level(a.Depth, a.Limits.DepthWarning, a.Limits.DepthCritical)
		set(CheckDeadLetters, h, group(a.Depth)+" "+plural(a.Depth, "dead letter")+" ≥ "+group(limit))
	} else {
		a.Limits = Limits{DepthWarning: t.DepthWarning, DepthCritical: t.DepthCritical, AgeWarning: t.AgeWarning, AgeCritical: t.AgeCritical}
		if h := cfg.HealthDepth; h != nil {
			a.Limits.DepthWarning, a.Limits.DepthCritical = h.Warning, h.Critical
		}
		if h := cfg.HealthAge; h != nil {
			a.Limits.AgeWarning, a.Limits.AgeCritical = time.Duration(h.Warning)*time.Second, time.Duration(h.Critical)*time.Second
		}
		h, limit := level(a.Depth, a.Limits.DepthWarning, a.Limits.DepthCritical)
		set(CheckDepth, h, "depth "+group(a.Depth)+" ≥ "+group(limit))
		h, limit = level(int64(a.VisibleAge), int64(a.Limits.AgeWarning), int64(a.Limits.AgeCritical))
		set(CheckAge, h, "oldest visible message "+a.VisibleAge.Truncate(time.Second).String()+" ≥ "+time.Duration(limit).String())
	}
	if a.DeadLetters != nil {
		h := HealthOK
		if n := *a.DeadLetters; n > 0 && t.DeadLetters != DeadLettersIgnore && t.DeadLetters != "" {
			h = Health(t.DeadLetters)
		}
		set(CheckDeadLetterQueue, h, group(*a.DeadLetters)+" "+plural(*a.DeadLetters, "dead letter")+" in "+a.DeadLetterQueue)
	}
}

// level is the state of figure v against warning w and critical c (0 is
// off), with the threshold it reached.
func level(v, w, c int64) (Health, int64) {
	switch {
	case c > 0 && v >= c:
		return HealthCritical, c
	case w > 0 && v >= w:
		return HealthWarning, w
	}
	return HealthOK, 0
}

func plural(n int64, noun string) string {
	if n == 1 {
		return noun
	}
	return noun + "s"
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

// SortedChecks returns the checks of a in Checks' order.
func (a Queue) SortedChecks() []Check {
	out := make([]Check, 0, len(a.Checks))
	for c := range a.Checks {
		out = append(out, c)
	}
	rank := map[Check]int{}
	for i, c := range Checks {
		rank[c] = i
	}
	sort.Slice(out, func(i, j int) bool { return rank[out[i]] < rank[out[j]] })
	return out
}

// parsePair parses "WARNING,CRITICAL" with parse, each 0 (off) or more.
func parsePair[T int64 | time.Duration](s, what, example string, parse func(string) (T, error)) (T, T, error) {
	w, c, ok := strings.Cut(s, ",")
	if !ok {
		return 0, 0, fmt.Errorf("%s thresholds %q: give two, warning then critical, e.g. %s (0 turns one off)", what, s, example)
	}
	wn, err1 := parse(strings.TrimSpace(w))
	cn, err2 := parse(strings.TrimSpace(c))
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("%s thresholds %q: %v", what, s, firstErr(err1, err2))
	}
	if wn > 0 && cn > 0 && cn < wn {
		return 0, 0, fmt.Errorf("%s thresholds %q: the critical %s %v is below the warning %s %v", what, s, what, cn, what, wn)
	}
	return wn, cn, nil
}

func firstErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func parseCount(s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("both must be whole numbers ≥ 0")
	}
	return n, nil
}

func parseAge(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("both must be durations such as 30s, 1m or 1h30m")
	}
	if d != 0 && d < time.Second {
		return 0, fmt.Errorf("each must be 0 (off) or at least 1s")
	}
	return d, nil
}

// ParseDepthThresholds parses "WARNING,CRITICAL" depths (e.g. "1000,10000";
// 0 turns one off) into t.
func (t *Thresholds) ParseDepthThresholds(s string) error {
	w, c, err := parsePair(s, "depth", "1000,10000", parseCount)
	if err == nil {
		t.DepthWarning, t.DepthCritical = w, c
	}
	return err
}

// ParseDLQDepthThresholds parses "WARNING,CRITICAL" counts of a
// dead-letter queue (e.g. "1,100"; 0 turns one off) into t.
func (t *Thresholds) ParseDLQDepthThresholds(s string) error {
	w, c, err := parsePair(s, "depth", "1,100", parseCount)
	if err == nil {
		t.DLQDepthWarning, t.DLQDepthCritical = w, c
	}
	return err
}

// ParseAgeThresholds parses "WARNING,CRITICAL" waits of the longest-visible
// message (Go durations, e.g. "1m,5m"; 0 turns one off) into t.
func (t *Thresholds) ParseAgeThresholds(s string) error {
	w, c, err := parsePair(s, "age", "1m,5m", parseAge)
	if err == nil {
		t.AgeWarning, t.AgeCritical = w, c
	}
	return err
}
