package main

// sluice job show.

import (
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"time"

	sclient "github.com/sluicemq/sluice/client"
)

var jobCommands = map[string]command{
	"show": {"show a message's status by id: delayed, ready, in flight, backing off, dead-lettered, completed", jobShow},
}

func init() {
	register("job", command{"show a message's status by id (a job's state, attempts, last failure, result)", func(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
		return group(ctx, "job", jobCommands, args, env, stdout, stderr)
	}})
}

// jobJSON is a status as --json prints it: the native API's shape.
type jobJSON struct {
	ID               string     `json:"id"`
	Queue            string     `json:"queue"`
	State            string     `json:"state"`
	Attempts         int        `json:"attempts"`
	ReceiveCount     int        `json:"receiveCount,omitempty"`
	VisibleAt        *time.Time `json:"visibleAt,omitempty"`
	LeaseEndsAt      *time.Time `json:"leaseEndsAt,omitempty"`
	DeadLetterQueue  string     `json:"deadLetterQueue,omitempty"`
	DeadLetterSource string     `json:"deadLetterSource,omitempty"`
	Reason           string     `json:"reason,omitempty"`
	Failures         []failJSON `json:"failures,omitempty"`
	FailureCount     int        `json:"failureCount,omitempty"`
	CompletedAt      *time.Time `json:"completedAt,omitempty"`
	Result           *string    `json:"result,omitempty"`
	ExpiredAt        *time.Time `json:"expiredAt,omitempty"`
	ReplayedAs       string     `json:"replayedAs,omitempty"`
}

// failJSON is one failure of a status as --json prints it.
type failJSON struct {
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

func jobShow(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	c := newCLI(ctx, cmdSpec{name: "job show", args: "QUEUE ID",
		summary: "Show a message's status by id, without receiving it: delayed, ready, inFlight (until its\n" +
			"lease ends), backingOff (until its next attempt), deadLettered (asked on its queue or its\n" +
			"dead-letter queue), or completed (with its ack's result) while the queue keeps completed\n" +
			"records (CompletedRetentionSeconds: sluice queue set QUEUE --completed-retention 1h).",
		examples: []string{"sluice job show orders 3b9e4c2a-5f1d-4e8b-9a7c-2d6e8f0a1b3c",
			"sluice job show orders 3b9e4c2a-5f1d-4e8b-9a7c-2d6e8f0a1b3c --json | jq -r .state"}}, env, stdout, stderr)
	pos, code, ok := c.parse(args, 2, 2)
	if !ok {
		return code
	}
	st, err := c.c.MessageStatus(ctx, pos[0], pos[1])
	if err != nil {
		return c.fail(err) // its hint: jobHint
	}
	at := func(t time.Time) *time.Time {
		if t.IsZero() {
			return nil
		}
		u := t.UTC()
		return &u
	}
	if c.json {
		var failures []failJSON
		for _, f := range st.Failures {
			failures = append(failures, failJSON{Reason: f.Reason, At: f.At.UTC()})
		}
		c.printJSON(jobJSON{ID: st.ID, Queue: st.Queue, State: st.State, Attempts: st.Attempts, ReceiveCount: st.ReceiveCount,
			VisibleAt: at(st.VisibleAt), LeaseEndsAt: at(st.LeaseEndsAt), DeadLetterQueue: st.DeadLetterQueue,
			DeadLetterSource: st.DeadLetterSource, Reason: st.Reason, Failures: failures, FailureCount: st.FailureCount,
			CompletedAt: at(st.CompletedAt), Result: st.Result, ExpiredAt: at(st.ExpiredAt), ReplayedAs: st.ReplayedAs})
		return 0
	}
	when := func(t time.Time) string { return t.UTC().Format(time.RFC3339) }
	rows := [][]string{{"queue", st.Queue}, {"state", st.State}, {"attempts", strconv.Itoa(st.Attempts)}}
	for _, f := range []struct {
		k string
		t time.Time
	}{{"visible at", st.VisibleAt}, {"lease ends", st.LeaseEndsAt}, {"completed", st.CompletedAt}, {"expired", st.ExpiredAt}} {
		if !f.t.IsZero() {
			rows = append(rows, []string{f.k, when(f.t)})
		}
	}
	for _, f := range []struct{ k, v string }{
		{"dead-letter queue", st.DeadLetterQueue}, {"came from", st.DeadLetterSource}, {"last failure", st.Reason},
		{"replayed as", st.ReplayedAs},
	} {
		if f.v != "" {
			rows = append(rows, []string{f.k, f.v})
		}
	}
	if len(st.Failures) > 0 {
		// The history, oldest first: one row per failure, after a row
		// that tells how many failures the message had in all (the
		// broker keeps the last ones only).
		n := strconv.Itoa(st.FailureCount)
		if st.FailureCount > len(st.Failures) {
			n += " (the last " + strconv.Itoa(len(st.Failures)) + " below)"
		}
		rows = append(rows, []string{"failures", n})
		for _, f := range st.Failures {
			r := f.Reason
			if len(r) > 200 || strings.ContainsAny(r, "\n\r") {
				r = strconv.Quote(truncate(r, 200))
			}
			rows = append(rows, []string{"  " + when(f.At), r})
		}
	}
	if st.Result != nil {
		r := *st.Result
		if len(r) > 200 || strings.ContainsAny(r, "\n\r") {
			r = strconv.Quote(truncate(r, 200))
		}
		rows = append(rows, []string{"result", r})
	}
	table(stdout, []string{"MESSAGE", st.ID}, rows)
	return 0
}

// jobHint says what to do next after a job command's err ("" to fall back
// on the common hints).
func jobHint(name string, err error) string {
	if strings.HasPrefix(name, "job") && errors.Is(err, sclient.ErrMessageNotFound) {
		return "the queue never held that id, or the message was deleted and the queue keeps no record of it (keep them with `sluice queue set QUEUE --completed-retention 1h`); list its messages with `sluice peek QUEUE`."
	}
	return ""
}

// truncate cuts s to at most n bytes, at a UTF-8 boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8Start(s[n]) {
		n--
	}
	return s[:n] + "..."
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }
