package model

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"maps"
	"strconv"
	"time"
)

// Schedules: durable schedules that send a message to a queue of their
// account on a cron spec or an interval (broker.Broker.CreateSchedule).
// The spec and its time zone are parsed, and the runs computed, by package
// broker/internal/cron; the runner's decisions are the planners'
// (plan.ScheduleStep, plan.ScheduleResume), made inside a backend's atomic
// step; the values and value rules are here.

// MissedPolicy says what a schedule does with the runs that no broker sent
// on time (within ScheduleGrace of their instant): the brokers were down,
// or the schedule was paused.
type MissedPolicy string

const (
	// MissedSkip (the default) sends nothing for missed runs: the
	// schedule goes on with its next run.
	MissedSkip MissedPolicy = "skip"
	// MissedOnce sends one message for all the runs missed in a row (the
	// earliest one's), then goes on with the next run.
	MissedOnce MissedPolicy = "once"
)

// ScheduleGrace is how late a run may still be sent as itself: a broker
// that finds a run at most this old (it was busy, or restarted) sends it;
// an older run is missed, and the schedule's MissedPolicy applies.
const ScheduleGrace = time.Minute

// MaxListSchedules is the most schedules one list answers.
const MaxListSchedules = 1000

// ParseMissedPolicy reads a missed-runs policy: "skip" (or "", the
// default) or "once".
func ParseMissedPolicy(s string) (MissedPolicy, error) {
	switch MissedPolicy(s) {
	case "", MissedSkip:
		return MissedSkip, nil
	case MissedOnce:
		return MissedOnce, nil
	}
	return "", InvalidParameterError(strconv.Quote(s), "Missed", `must be "skip" (send nothing for runs missed while no broker was up, the default) or "once" (send one message for them).`)
}

// ScheduleRef names a schedule: its account ("" is the broker's own, as in
// QueueRef) and its name.
type ScheduleRef struct {
	Account, Name string
}

// String is the name, prefixed by the account and "/" for another account
// than the broker's own.
func (r ScheduleRef) String() string { return QueueRef(r).String() }

// ScheduleMessage is what every run of a schedule sends: a body, message
// attributes (the Sluice options among them, as a send carries them) and a
// message group id (required by a FIFO queue; a standard queue's tenant).
type ScheduleMessage struct {
	Body       string
	Attributes map[string]MessageAttribute
	GroupID    string
	// SenderID is the SenderId of the messages: the account that created
	// the schedule.
	SenderID string
}

// Schedule is a stored schedule.
type Schedule struct {
	// ID is the schedule's own id, new each time a name is created: a
	// run's key (ScheduleRunKey) names it, so a schedule deleted and
	// created again never repeats a run of the old one.
	ID      string
	Account string
	Name    string
	// Queue is the queue of Account the runs send to.
	Queue string
	// Spec is the cron spec or "@every <interval>"; TimeZone its IANA time
	// zone ("UTC" by default).
	Spec     string
	TimeZone string
	Missed   MissedPolicy
	Message  ScheduleMessage
	// Paused schedules send nothing; their runs pass while they are paused
	// and are missed runs when they are resumed.
	Paused    bool
	CreatedAt time.Time
	// NextRun is the instant of the next run (zero: the spec has no run
	// left within five years). The runner compares and sets it: a run is
	// sent by the one step that moves NextRun past it.
	NextRun time.Time
	// LastRun is the instant of the latest run whose message was stored,
	// and LastMessageID that message's id; zero and "" before the first.
	LastRun       time.Time
	LastMessageID string
	// LastError is why the latest run whose message could not be stored
	// was refused (the queue is gone, full, or refuses the message), at
	// LastErrorAt (the run's instant); "" when the latest run was stored.
	LastError   string
	LastErrorAt time.Time
	// Sent counts the messages the schedule stored; Missed the runs that
	// no broker sent on time (with MissedOnce, one message stood for them).
	Sent, MissedRuns int64
}

// Ref is the schedule's account and name.
func (s Schedule) Ref() ScheduleRef { return ScheduleRef{Account: s.Account, Name: s.Name} }

// QueueRef is the queue the schedule sends to.
func (s Schedule) QueueRef() QueueRef { return QueueRef{Account: s.Account, Name: s.Queue} }

// Clone returns a copy of s that shares no map with it.
func (s Schedule) Clone() Schedule {
	s.Message.Attributes = maps.Clone(s.Message.Attributes)
	return s
}

// ConflictingSetting names the first setting of want that differs from s
// ("" when none does): a CreateSchedule on an existing name answers the
// schedule when it asks for the same one, ErrConflict otherwise.
func (s Schedule) ConflictingSetting(want Schedule) string {
	switch {
	case s.Queue != want.Queue:
		return "queue"
	case s.Spec != want.Spec:
		return "schedule"
	case s.TimeZone != want.TimeZone:
		return "timeZone"
	case s.Missed != want.Missed:
		return "missed"
	case s.Message.Body != want.Message.Body:
		return "body"
	case s.Message.GroupID != want.Message.GroupID:
		return "groupId"
	case !maps.EqualFunc(s.Message.Attributes, want.Message.Attributes, func(a, b MessageAttribute) bool {
		return a.DataType == b.DataType && a.StringValue == b.StringValue && bytes.Equal(a.BinaryValue, b.BinaryValue)
	}):
		return "attributes"
	}
	return ""
}

// ScheduleRunKey is the key of the run of schedule id at instant at: the
// MessageDeduplicationId of its message, which the queue's deduplication
// window keeps besides the runner's compare-and-set.
func ScheduleRunKey(id string, at time.Time) string {
	return id + "@" + strconv.FormatInt(at.Unix(), 10)
}

// ScheduleRunMessageID is the message id of the run of schedule id at
// instant at: derived from its key, so that the same run always makes the
// same id (a duplicate could not hide behind a new one).
func ScheduleRunMessageID(id string, at time.Time) string {
	sum := sha256.Sum256([]byte(ScheduleRunKey(id, at)))
	var b [16]byte
	copy(b[:], sum[:16])
	b[6] = b[6]&0x0f | 0x80 // version 8: a UUID of a custom kind
	b[8] = b[8]&0x3f | 0x80
	return FormatUUID(b)
}

// RunEntry is the send of the run at instant at: the schedule's message,
// with the run's key as its dedup id and the run's message id.
func (s Schedule) RunEntry(at time.Time) SendEntry {
	attrs := maps.Clone(s.Message.Attributes)
	return SendEntry{
		Body: s.Message.Body, Attributes: attrs, GroupID: s.Message.GroupID, SenderID: s.Message.SenderID,
		DedupID: ScheduleRunKey(s.ID, at), MessageID: ScheduleRunMessageID(s.ID, at),
		Options: ParseMessageOptions(attrs),
	}
}

// ValidateScheduleName checks a schedule name: 1 to 80 alphanumeric
// characters, hyphens or underscores (a queue's rule, without ".fifo").
func ValidateScheduleName(name string) error {
	if len(name) == 0 || len(name) > 80 || !isIDChars(name) {
		return InvalidParameterError(strconv.Quote(name), "Name", "A schedule name can only include alphanumeric characters, hyphens, or underscores, 1 to 80 in length.")
	}
	return nil
}

// ScheduleNotFoundError: no schedule of that name in the account.
func ScheduleNotFoundError(name string) error {
	return Errorf(ErrResourceNotFound, "The schedule %s does not exist.", strconv.Quote(name))
}

// ScheduleExistsError: a CreateSchedule on an existing name that asks for
// another setting.
func ScheduleExistsError(name, setting string) error {
	return Errorf(ErrConflict, "A schedule named %s already exists with a different %s: delete it first, or give another name.", strconv.Quote(name), setting)
}

// ScheduleRunError is LastError's text for a run refused with err.
func ScheduleRunError(err error) string {
	return fmt.Sprintf("the message was not stored: %s", ErrorMessage(err))
}
