package plan

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/model"
)

func dur(d time.Duration) *time.Duration { return &d }

// sha256("hello"), lower-case hex.
const helloSHA256 = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"

func TestPlanSendWholeCallErrors(t *testing.T) {
	t.Parallel()
	fifo := model.DefaultQueueConfig(true)
	for _, tc := range []struct {
		name    string
		c       model.QueueConfig
		entries []model.SendEntry
		want    error
	}{
		{"FIFO entry without group", fifo, []model.SendEntry{{ID: "a", Body: "x", GroupID: "g", DedupID: "d"}, {ID: "b", Body: "y", DedupID: "e"}}, model.ErrMissingParameter},
		{"FIFO entry without group and a bad body", fifo, []model.SendEntry{{ID: "a", Body: "x\x00", DedupID: "d"}}, model.ErrMissingParameter},
		{"FIFO entry without dedup id or content-based dedup", fifo, []model.SendEntry{{ID: "a", Body: "x", GroupID: "g"}}, model.ErrInvalidParameterValue},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			plans, err := sendParsed(tc.c, "q", 0, tc.entries)
			if !errors.Is(err, tc.want) || plans != nil {
				t.Errorf("PlanSend = %v, %v; want nil, an error matching %v", plans, err, tc.want)
			}
		})
	}
}

func TestPlanSend(t *testing.T) {
	t.Parallel()
	std := model.DefaultQueueConfig(false)
	std.Delay = 5 * time.Second
	fifo := model.DefaultQueueConfig(true)
	fifo.Delay = 5 * time.Second
	cbd := fifo
	cbd.ContentBasedDedup = true
	perGroup := cbd
	perGroup.DedupScope = model.DedupScopeMessageGroup
	type want struct {
		err              error // nil: the entry plans
		delay            time.Duration
		dedupID, dedupKy string
	}
	for _, tc := range []struct {
		name    string
		c       model.QueueConfig
		entries []model.SendEntry
		want    []want
	}{
		{
			name: "standard queue: per-entry errors and delays",
			c:    std,
			entries: []model.SendEntry{
				{ID: "default", Body: "a"},
				{ID: "empty", Body: ""},
				{ID: "own", Body: "b", Delay: dur(7 * time.Second)},
				{ID: "badchars", Body: "c\x00"},
				{ID: "zero", Body: "d", Delay: dur(0)},
				{ID: "baddelay", Body: "e", Delay: dur(model.MaxDelay + time.Second)},
				{ID: "dedup", Body: "f", DedupID: "x"},
				{ID: "max", Body: "g", Delay: dur(model.MaxDelay), GroupID: "fair"},
				{ID: "baddedup", Body: "h", DedupID: "bad id"},
			},
			want: []want{
				{delay: 5 * time.Second},
				{err: model.ErrMissingParameter},
				{delay: 7 * time.Second},
				{err: model.ErrInvalidMessageContents},
				{delay: 0},
				{err: model.ErrInvalidParameterValue},
				{delay: 5 * time.Second, dedupID: "x", dedupKy: "x"}, // an idempotent send (config_dedup.go)
				{delay: model.MaxDelay},
				{err: model.ErrInvalidParameterValue}, // a malformed dedup id, as on a FIFO queue
			},
		},
		{
			name: "FIFO queue: the queue's delay, explicit dedup ids, queue scope",
			c:    fifo,
			entries: []model.SendEntry{
				{ID: "a", Body: "x", GroupID: "g1", DedupID: "d1"},
				{ID: "b", Body: "x", GroupID: "g2", DedupID: "d1"},
				{ID: "own", Body: "y", GroupID: "g1", DedupID: "d2", Delay: dur(7 * time.Second)},
				{ID: "badgroup", Body: "z", GroupID: "g 1", DedupID: "d4"},
				{ID: "baddedup", Body: "z", GroupID: "g1", DedupID: strings.Repeat("d", model.MaxFifoIDLength+1)},
			},
			want: []want{
				{delay: 5 * time.Second, dedupID: "d1", dedupKy: "d1"},
				{delay: 5 * time.Second, dedupID: "d1", dedupKy: "d1"},
				{err: model.ErrInvalidParameterValue}, // a FIFO queue has only its own delay
				{err: model.ErrInvalidParameterValue},
				{err: model.ErrInvalidParameterValue},
			},
		},
		{
			name: "FIFO queue: content-based dedup, the explicit id wins",
			c:    cbd,
			entries: []model.SendEntry{
				{ID: "a", Body: "hello", GroupID: "g1"},
				{ID: "b", Body: "hello", GroupID: "g2", Attributes: map[string]model.MessageAttribute{"k": {DataType: "String", StringValue: "v"}}},
				{ID: "c", Body: "hello", GroupID: "g1", DedupID: "mine"},
			},
			want: []want{
				{delay: 5 * time.Second, dedupID: helloSHA256, dedupKy: helloSHA256},
				{delay: 5 * time.Second, dedupID: helloSHA256, dedupKy: helloSHA256},
				{delay: 5 * time.Second, dedupID: "mine", dedupKy: "mine"},
			},
		},
		{
			name: "FIFO queue: messageGroup scope keys by group and id",
			c:    perGroup,
			entries: []model.SendEntry{
				{ID: "a", Body: "hello", GroupID: "g1"},
				{ID: "b", Body: "hello", GroupID: "g2"},
				{ID: "c", Body: "x", GroupID: "g1", DedupID: "d"},
			},
			want: []want{
				{delay: 5 * time.Second, dedupID: helloSHA256, dedupKy: "g1\x00" + helloSHA256},
				{delay: 5 * time.Second, dedupID: helloSHA256, dedupKy: "g2\x00" + helloSHA256},
				{delay: 5 * time.Second, dedupID: "d", dedupKy: "g1\x00d"},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			plans, err := sendParsed(tc.c, "q", 0, tc.entries)
			if err != nil {
				t.Fatalf("PlanSend: %v", err)
			}
			if len(plans) != len(tc.entries) {
				t.Fatalf("%d plans for %d entries", len(plans), len(tc.entries))
			}
			for i, p := range plans {
				w := tc.want[i]
				id := tc.entries[i].ID
				if w.err != nil {
					if !errors.Is(p.Err, w.err) {
						t.Errorf("entry %s: Err = %v, want %v", id, p.Err, w.err)
					}
					if p.MessageID != "" || p.Delay != 0 || p.DedupID != "" || p.DedupKey != "" {
						t.Errorf("entry %s failed but has a plan: %+v", id, p)
					}
					continue
				}
				if p.Err != nil {
					t.Errorf("entry %s: Err = %v", id, p.Err)
					continue
				}
				if p.Delay != w.delay || p.DedupID != w.dedupID || p.DedupKey != w.dedupKy {
					t.Errorf("entry %s: (delay, dedup id, key) = (%v, %q, %q), want (%v, %q, %q)",
						id, p.Delay, p.DedupID, p.DedupKey, w.delay, w.dedupID, w.dedupKy)
				}
			}
		})
	}
}

func TestPlanSendMessageIDs(t *testing.T) {
	t.Parallel()
	uuid4 := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	for _, c := range []model.QueueConfig{model.DefaultQueueConfig(false), model.DefaultQueueConfig(true)} {
		entries := make([]model.SendEntry, model.MaxBatchEntries)
		for i := range entries {
			// The same body and ids: ids are not derived from the content.
			entries[i] = model.SendEntry{ID: string(rune('a' + i)), Body: "same"}
			if c.Fifo {
				entries[i].GroupID, entries[i].DedupID = "g", "d"
			}
		}
		seen := map[string]bool{}
		for round := 0; round < 2; round++ {
			plans, err := sendParsed(c, "q", 0, entries)
			if err != nil {
				t.Fatalf("fifo=%v: PlanSend: %v", c.Fifo, err)
			}
			for _, p := range plans {
				if !uuid4.MatchString(p.MessageID) {
					t.Errorf("fifo=%v: MessageID %q is not a version 4 UUID", c.Fifo, p.MessageID)
				}
				if seen[p.MessageID] {
					t.Errorf("fifo=%v: MessageID %q planned twice", c.Fifo, p.MessageID)
				}
				seen[p.MessageID] = true
			}
		}
	}
}

func TestPlanReceive(t *testing.T) {
	t.Parallel()
	std := model.DefaultQueueConfig(false)
	std.VisibilityTimeout, std.ReceiveWaitTime = 45*time.Second, 7*time.Second
	fifo := model.DefaultQueueConfig(true)
	fifo.VisibilityTimeout, fifo.ReceiveWaitTime = 45*time.Second, 7*time.Second
	long := strings.Repeat("a", model.MaxFifoIDLength)
	for _, tc := range []struct {
		name    string
		c       model.QueueConfig
		req     model.ReceiveRequest
		want    ReceivePlan
		wantErr error
	}{
		{name: "queue defaults", c: std, req: model.ReceiveRequest{},
			want: ReceivePlan{Max: 1, Visibility: 45 * time.Second, Wait: 7 * time.Second}},
		{name: "overrides", c: std, req: model.ReceiveRequest{MaxMessages: 10, Visibility: dur(2 * time.Minute), WaitTime: dur(20 * time.Second)},
			want: ReceivePlan{Max: 10, Visibility: 2 * time.Minute, Wait: 20 * time.Second}},
		{name: "explicit zeros override", c: std, req: model.ReceiveRequest{MaxMessages: 1, Visibility: dur(0), WaitTime: dur(0)},
			want: ReceivePlan{Max: 1}},
		{name: "upper bounds", c: std, req: model.ReceiveRequest{MaxMessages: model.MaxReceiveMessages, Visibility: dur(model.MaxVisibilityTimeout), WaitTime: dur(model.MaxWaitTime)},
			want: ReceivePlan{Max: model.MaxReceiveMessages, Visibility: model.MaxVisibilityTimeout, Wait: model.MaxWaitTime}},
		{name: "max above 10", c: std, req: model.ReceiveRequest{MaxMessages: 11}, wantErr: model.ErrInvalidParameterValue},
		{name: "max negative", c: std, req: model.ReceiveRequest{MaxMessages: -1}, wantErr: model.ErrInvalidParameterValue},
		{name: "visibility negative", c: std, req: model.ReceiveRequest{Visibility: dur(-time.Second)}, wantErr: model.ErrInvalidParameterValue},
		{name: "visibility above 12h", c: std, req: model.ReceiveRequest{Visibility: dur(model.MaxVisibilityTimeout + time.Second)}, wantErr: model.ErrInvalidParameterValue},
		{name: "wait negative", c: std, req: model.ReceiveRequest{WaitTime: dur(-time.Second)}, wantErr: model.ErrInvalidParameterValue},
		{name: "wait above 20s", c: std, req: model.ReceiveRequest{WaitTime: dur(model.MaxWaitTime + time.Second)}, wantErr: model.ErrInvalidParameterValue},
		{name: "FIFO keeps a valid attempt id", c: fifo, req: model.ReceiveRequest{AttemptID: long},
			want: ReceivePlan{Max: 1, Visibility: 45 * time.Second, Wait: 7 * time.Second, AttemptID: long}},
		{name: "FIFO without attempt id", c: fifo, req: model.ReceiveRequest{MaxMessages: 3},
			want: ReceivePlan{Max: 3, Visibility: 45 * time.Second, Wait: 7 * time.Second}},
		{name: "FIFO refuses a malformed attempt id", c: fifo, req: model.ReceiveRequest{AttemptID: "a b"}, wantErr: model.ErrInvalidParameterValue},
		{name: "FIFO refuses a too long attempt id", c: fifo, req: model.ReceiveRequest{AttemptID: long + "a"}, wantErr: model.ErrInvalidParameterValue},
		{name: "FIFO range error before the attempt id", c: fifo, req: model.ReceiveRequest{MaxMessages: 11, AttemptID: "ok"}, wantErr: model.ErrInvalidParameterValue},
		{name: "standard drops a valid attempt id", c: std, req: model.ReceiveRequest{AttemptID: "ok"},
			want: ReceivePlan{Max: 1, Visibility: 45 * time.Second, Wait: 7 * time.Second}},
		{name: "standard drops a malformed attempt id", c: std, req: model.ReceiveRequest{AttemptID: "a b\x00" + long},
			want: ReceivePlan{Max: 1, Visibility: 45 * time.Second, Wait: 7 * time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := Receive(tc.c, tc.req)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || got != (ReceivePlan{}) {
					t.Errorf("PlanReceive = %+v, %v; want a zero plan and an error matching %v", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("PlanReceive = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestDeadLetterRule(t *testing.T) {
	t.Parallel()
	sent, now := time.Unix(100, 0), time.Unix(500, 0)
	if got := DeadLetter("m1", sent, false, now); got != (DeadLetterPlan{SentAt: sent}) {
		t.Fatalf("into a standard queue: %+v, want SentAt kept and nothing else", got)
	}
	if got := DeadLetter("m1", sent, true, now); got != (DeadLetterPlan{DedupID: "m1", NewSequence: true, SentAt: now}) {
		t.Fatalf("into a FIFO queue: %+v, want dedup id = message id, a new sequence number, SentAt now", got)
	}
	r := &model.RedrivePolicy{MaxReceiveCount: 3}
	for n, want := range map[int]bool{0: false, 2: false, 3: true, 4: true} {
		if got := ShouldDeadLetterOnReceive(r, n, 0); got != want {
			t.Errorf("ShouldDeadLetterOnReceive(max 3, attempts %d) = %v, want %v", n, got, want)
		}
	}
	if !ShouldDeadLetterOnReceive(r, 1, 1) || ShouldDeadLetterOnReceive(r, 3, 5) {
		t.Error("a message's own MaxAttempts does not override the queue's maxReceiveCount")
	}
	if ShouldDeadLetterOnReceive(nil, 100, 2) {
		t.Error("a queue without a RedrivePolicy dead-letters")
	}
}

// sendParsed is Send after the front's parse of the entries' Sluice options
// (SendEntry.Options).
func sendParsed(c model.QueueConfig, queue string, depth int64, entries []model.SendEntry) ([]SendPlan, error) {
	for i := range entries {
		entries[i].Options = model.ParseMessageOptions(entries[i].Attributes)
	}
	return Send(c, queue, depth, entries)
}

// TestSendParsesUnparsedOptions: a send whose options the front did not
// parse (a direct caller of a backend) gets the same rules as one it did.
func TestSendParsesUnparsedOptions(t *testing.T) {
	t.Parallel()
	c := model.QueueConfig{MaxMessageSize: model.MaxMessageBytes, Retention: model.MaxRetention}
	plans, err := Send(c, "q", 0, []model.SendEntry{
		{Body: "bad", Attributes: map[string]model.MessageAttribute{model.MsgAttrPriority: {DataType: "Number", StringValue: "999"}}},
		{Body: "good", Attributes: map[string]model.MessageAttribute{model.MsgAttrPriority: {DataType: "Number", StringValue: "7"}}},
	})
	if err != nil || !errors.Is(plans[0].Err, model.ErrInvalidParameterValue) || plans[1].Err != nil || plans[1].Priority != 7 {
		t.Fatalf("Send of unparsed options = %+v, %v; want the first refused, the second at priority 7", plans, err)
	}
}
