package plan

import (
	"maps"
	"reflect"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/model"
)

func TestMoveWalkNext(t *testing.T) {
	t.Parallel()
	type step struct {
		it     MoveItem
		action MoveAction
		target string
	}
	live := map[string]bool{"src": true, "a": true, "b": true}
	for _, tc := range []struct {
		name        string
		dest        string
		blocked     map[string]bool // carried in from an earlier step
		noLive      bool            // Live == nil
		steps       []step
		wantBlocked map[string]bool
	}{
		{
			name: "gone items skip, even held ones, and block nothing",
			dest: "d",
			steps: []step{
				{MoveItem{Gone: true}, MoveSkip, ""},
				{MoveItem{Gone: true, Held: true, Group: "g"}, MoveSkip, ""},
				{MoveItem{Gone: true, DeadLetterSource: "a"}, MoveSkip, ""},
				{MoveItem{Group: "g"}, MoveOut, "d"},
			},
		},
		{
			name: "a held item blocks the later items of its group only",
			dest: "d",
			steps: []step{
				{MoveItem{Group: "g1"}, MoveOut, "d"},
				{MoveItem{Group: "g1", Held: true}, MoveHold, ""},
				{MoveItem{Group: "g2"}, MoveOut, "d"},
				{MoveItem{Group: "g1"}, MoveSkip, ""},
				{MoveItem{Group: "g1", Held: true}, MoveSkip, ""},
				{MoveItem{}, MoveOut, "d"},
				{MoveItem{Group: "g2"}, MoveOut, "d"},
			},
			wantBlocked: map[string]bool{"g1": true},
		},
		{
			name: "a held item without group blocks nothing",
			dest: "d",
			steps: []step{
				{MoveItem{Held: true}, MoveHold, ""},
				{MoveItem{}, MoveOut, "d"},
				{MoveItem{Group: "g"}, MoveOut, "d"},
			},
		},
		{
			name: "a fixed destination takes every live item, whatever its source",
			dest: "d",
			steps: []step{
				{MoveItem{DeadLetterSource: "a"}, MoveOut, "d"},
				{MoveItem{DeadLetterSource: ""}, MoveOut, "d"},
				{MoveItem{DeadLetterSource: "src"}, MoveOut, "d"},
				{MoveItem{DeadLetterSource: "deleted"}, MoveOut, "d"},
				{MoveItem{Group: "g", DeadLetterSource: "b"}, MoveOut, "d"},
			},
		},
		{
			name:   "a fixed destination needs no Live",
			dest:   "d",
			noLive: true,
			steps:  []step{{MoveItem{DeadLetterSource: "a"}, MoveOut, "d"}},
		},
		{
			name: "no destination: each item back to its live dead-letter source",
			steps: []step{
				{MoveItem{DeadLetterSource: "a"}, MoveOut, "a"},
				{MoveItem{DeadLetterSource: "b", Group: "g"}, MoveOut, "b"},
			},
		},
		{
			name:  "no destination: an empty source fails",
			steps: []step{{MoveItem{}, MoveFail, ""}},
		},
		{
			name:  "no destination: a source equal to the task's source fails",
			steps: []step{{MoveItem{DeadLetterSource: "src"}, MoveFail, ""}},
		},
		{
			name:  "no destination: a source that is not live fails",
			steps: []step{{MoveItem{DeadLetterSource: "deleted"}, MoveFail, ""}},
		},
		{
			name:   "no destination and no Live: fails",
			noLive: true,
			steps:  []step{{MoveItem{DeadLetterSource: "a"}, MoveFail, ""}},
		},
		{
			name: "no destination: held and blocked items stay before any target check",
			steps: []step{
				{MoveItem{Held: true, Group: "g", DeadLetterSource: "deleted"}, MoveHold, ""},
				{MoveItem{Group: "g", DeadLetterSource: "deleted"}, MoveSkip, ""},
				{MoveItem{Gone: true, DeadLetterSource: ""}, MoveSkip, ""},
			},
			wantBlocked: map[string]bool{"g": true},
		},
		{
			name:    "groups blocked by an earlier step stay blocked",
			dest:    "d",
			blocked: map[string]bool{"g1": true},
			steps: []step{
				{MoveItem{Group: "g1"}, MoveSkip, ""},
				{MoveItem{Group: "g2"}, MoveOut, "d"},
				{MoveItem{Group: "g2", Held: true}, MoveHold, ""},
				{MoveItem{Group: "g2"}, MoveSkip, ""},
			},
			wantBlocked: map[string]bool{"g1": true, "g2": true},
		},
		{
			name:    "a group blocked by an earlier step, no destination",
			blocked: map[string]bool{"g": true},
			steps: []step{
				{MoveItem{Group: "g", DeadLetterSource: "a"}, MoveSkip, ""},
				{MoveItem{Group: "h", DeadLetterSource: "a"}, MoveOut, "a"},
			},
			wantBlocked: map[string]bool{"g": true},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := MoveWalk{Source: "src", Destination: tc.dest, Blocked: maps.Clone(tc.blocked)}
			if !tc.noLive {
				w.Live = func(name string) bool {
					if tc.dest != "" {
						t.Errorf("Live(%q) asked with a fixed destination", name)
					}
					return live[name]
				}
			}
			for i, s := range tc.steps {
				action, target := w.Next(s.it)
				if action != s.action || target != s.target {
					t.Errorf("item %d %+v: Next = (%d, %q), want (%d, %q)", i, s.it, action, target, s.action, s.target)
				}
			}
			if !maps.Equal(w.Blocked, tc.wantBlocked) { // nil and empty are equal
				t.Errorf("Blocked = %v, want %v", w.Blocked, tc.wantBlocked)
			}
		})
	}
}

func TestMoveWalkWaitsForRoom(t *testing.T) {
	t.Parallel()
	cfgs := map[string]model.QueueConfig{
		"full": {MaxDepth: 2},
		"low":  {MaxDepth: 10, LowPriorityMaxDepth: 2},
		"free": {},
	}
	depth := map[string]int64{"full": 1, "low": 1, "free": 1000}
	w := MoveWalk{Source: "dlq", Live: func(string) bool { return true },
		Depth: func(target string) (model.QueueConfig, int64) { return cfgs[target], depth[target] }}
	next := func(it MoveItem, want MoveAction) {
		t.Helper()
		action, target := w.Next(it)
		wantTarget := it.DeadLetterSource
		if want == MoveSkip {
			wantTarget = ""
		}
		if action != want || target != wantTarget {
			t.Fatalf("Next(%+v) = (%d, %q), want (%d, %q)", it, action, target, want, wantTarget)
		}
		if action == MoveOut {
			depth[target]++ // what the backend's Depth reports after the move
		}
	}
	next(MoveItem{DeadLetterSource: "full"}, MoveOut)
	next(MoveItem{DeadLetterSource: "full"}, MoveWait)
	next(MoveItem{DeadLetterSource: "free"}, MoveOut)
	next(MoveItem{DeadLetterSource: "low", Low: true}, MoveOut)
	next(MoveItem{DeadLetterSource: "low", Low: true}, MoveWait)
	next(MoveItem{DeadLetterSource: "low"}, MoveOut)
	// Held, gone and blocked items are decided before any depth.
	next(MoveItem{DeadLetterSource: "full", Gone: true}, MoveSkip)

	fixed := MoveWalk{Source: "dlq", Destination: "d",
		Depth: func(string) (model.QueueConfig, int64) { return model.QueueConfig{MaxDepth: 1}, 1 }}
	if action, target := fixed.Next(MoveItem{}); action != MoveWait || target != "d" {
		t.Fatalf("fixed destination at MaxDepth: Next = (%d, %q), want MoveWait to d", action, target)
	}
}

func TestApplyEdit(t *testing.T) {
	t.Parallel()
	attrs := map[string]model.MessageAttribute{"k": {DataType: "String", StringValue: "v"}}
	opts := model.MessageOptions{Priority: 5, MaxAttempts: 3}
	c := model.QueueConfig{MaxMessageSize: 1024}
	if b, a, o, err := ApplyEdit(nil, c, "body", attrs, opts); err != nil || b != "body" || !reflect.DeepEqual(a, attrs) || o != opts {
		t.Fatalf("nil edit = %q %v %+v %v", b, a, o, err)
	}
	body := "new"
	b, a, o, err := ApplyEdit(&model.MessageEdit{Body: &body}, c, "body", attrs, opts)
	if err != nil || b != "new" || !reflect.DeepEqual(a, attrs) || o != opts {
		t.Fatalf("body edit = %q %v %+v %v", b, a, o, err)
	}
	na := map[string]model.MessageAttribute{model.MsgAttrPriority: {DataType: "Number", StringValue: "-7"}}
	b, a, o, err = ApplyEdit(&model.MessageEdit{Attributes: na}, c, "body", attrs, opts)
	if err != nil || b != "body" || !reflect.DeepEqual(a, na) || o != (model.MessageOptions{Priority: -7, PriorityGiven: true, Parsed: true}) {
		t.Fatalf("attribute edit = %q %v %+v %v", b, a, o, err)
	}
	// The correlation id travels unless the new attributes name one.
	withCID := map[string]model.MessageAttribute{"k": {DataType: "String", StringValue: "v"}, model.MsgAttrCorrelationID: {DataType: "String", StringValue: "c1"}}
	if _, a, _, err := ApplyEdit(&model.MessageEdit{Attributes: na}, c, "body", withCID, opts); err != nil || a[model.MsgAttrCorrelationID].StringValue != "c1" || len(a) != 2 || len(na) != 1 {
		t.Fatalf("attribute edit of a message with a correlation id = %v %v (edit now %v), want Sluice.Priority and the id kept, the edit untouched", a, err, na)
	}
	own := map[string]model.MessageAttribute{model.MsgAttrCorrelationID: {DataType: "String", StringValue: "c2"}}
	if _, a, _, err := ApplyEdit(&model.MessageEdit{Attributes: own}, c, "body", withCID, opts); err != nil || a[model.MsgAttrCorrelationID].StringValue != "c2" || len(a) != 1 {
		t.Fatalf("attribute edit naming its own correlation id = %v %v, want c2 only", a, err)
	}
	if p := EditedPriority(&model.MessageEdit{Attributes: na}, 5); p != -7 {
		t.Fatalf("EditedPriority = %d, want -7", p)
	}
	if p := EditedPriority(&model.MessageEdit{Attributes: attrs}, 5); p != 0 {
		t.Fatalf("EditedPriority without Sluice.Priority = %d, want 0", p)
	}
	if p := EditedPriority(&model.MessageEdit{Body: &body}, 5); p != 5 {
		t.Fatalf("EditedPriority of a body edit = %d, want 5", p)
	}
	big := string(make([]byte, 1025))
	if _, _, _, err := ApplyEdit(&model.MessageEdit{Body: &big}, c, "body", nil, opts); err == nil {
		t.Fatal("an edited body past MaximumMessageSize was accepted")
	}
	ma := map[string]model.MessageAttribute{model.MsgAttrMaxAttempts: {DataType: "Number", StringValue: "2"}}
	if _, _, _, err := ApplyEdit(&model.MessageEdit{Attributes: ma}, c, "body", nil, opts); err == nil {
		t.Fatal("Sluice.MaxAttempts on a queue without RedrivePolicy was accepted")
	}
}

func TestMovePace(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		rate, chunk int
		pace        time.Duration
	}{{1, 1, time.Second}, {10, 1, 100 * time.Millisecond}, {500, 50, 100 * time.Millisecond}, {0, 50, 100 * time.Millisecond}} {
		n := MoveChunk(c.rate)
		if n != c.chunk || MovePace(n, c.rate) != c.pace {
			t.Errorf("rate %d: chunk %d pace %v, want %d %v", c.rate, n, MovePace(n, c.rate), c.chunk, c.pace)
		}
	}
	if model.ValidateMoveRate(501) == nil || model.ValidateMoveRate(-1) == nil || model.ValidateMoveRate(0) != nil || model.ValidateMoveRate(500) != nil {
		t.Error("ValidateMoveRate bounds")
	}
}
