package broker

import (
	"maps"
	"testing"
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
