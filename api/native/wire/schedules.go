package wire

import "time"

// CreateScheduleRequest is the body of POST /v1/schedules: a schedule that
// sends Message to Queue at the instants of Schedule in TimeZone.
type CreateScheduleRequest struct {
	// Name is the schedule's name: 1 to 80 letters, digits, hyphens or
	// underscores. Required.
	Name string `json:"name"`
	// Queue is the queue every run sends to (it must exist). Required.
	Queue string `json:"queue"`
	// Schedule is when it runs: a cron expression of five fields (minute
	// hour day-of-month month day-of-week) or six (seconds first), a
	// descriptor (@hourly, @daily, @weekly, @monthly, @yearly), or
	// "@every" and an interval ("@every 5m", whole seconds). Required.
	Schedule string `json:"schedule"`
	// TimeZone is the IANA time zone of a cron expression's times
	// ("Europe/Berlin"); absent or "" is UTC.
	TimeZone string `json:"timeZone,omitempty"`
	// Missed is what happens to runs no broker sent within a minute of
	// their time (the brokers were down) or that fell due while the
	// schedule was paused: "skip" (the default) sends nothing for them,
	// "once" sends one message for them.
	Missed string `json:"missed,omitempty"`
	// Paused creates the schedule paused.
	Paused bool `json:"paused,omitempty"`
	// Message is what every run sends: an envelope with a body, and
	// optionally attributes, priority, maxAttempts, correlationId,
	// traceContext and groupId (required by a FIFO queue). A schedule's
	// message takes no delaySeconds, deliverAt or dedupId: each run's
	// message carries the run's own dedup id.
	Message Envelope `json:"message"`
}

// Schedule is a schedule: the answer of POST /v1/schedules, GET
// /v1/schedules/{schedule} and of its pause and resume.
type Schedule struct {
	// Name, Queue, Schedule, TimeZone and Missed are as created (TimeZone
	// "UTC" and Missed "skip" when not given).
	Name     string `json:"name"`
	Queue    string `json:"queue"`
	Schedule string `json:"schedule"`
	TimeZone string `json:"timeZone"`
	Missed   string `json:"missed"`
	// Paused says it sends nothing until resumed.
	Paused bool `json:"paused"`
	// Message is what every run sends.
	Message Envelope `json:"message"`
	// CreatedAt is when it was created.
	CreatedAt time.Time `json:"createdAt"`
	// NextRun is its next run; absent when it has none left.
	NextRun *time.Time `json:"nextRun,omitempty"`
	// LastRun is the time of the latest run whose message was stored, and
	// LastMessageID that message's id; absent before the first.
	LastRun       *time.Time `json:"lastRun,omitempty"`
	LastMessageID string     `json:"lastMessageId,omitempty"`
	// LastError says why the latest run's message was not stored (its
	// queue was gone, full, or refused it), and LastErrorAt is that run's
	// time; both absent when the latest run was stored.
	LastError   string     `json:"lastError,omitempty"`
	LastErrorAt *time.Time `json:"lastErrorAt,omitempty"`
	// Sent counts the messages its runs stored; MissedRuns the runs no
	// broker sent on time (with missed "once", one message stood for
	// them).
	Sent       int64 `json:"sent"`
	MissedRuns int64 `json:"missedRuns"`
}

// ScheduleList is a page of schedules in name order: the answer of GET
// /v1/schedules.
type ScheduleList struct {
	// Schedules are the page's schedules ([] when none).
	Schedules []Schedule `json:"schedules"`
	// Next is the after= of the next page (the page's last name); absent
	// after the last page.
	Next string `json:"next,omitempty"`
}
