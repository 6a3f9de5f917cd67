package model

import (
	"fmt"
	"regexp"
	"testing"
)

var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// TestNewMessageIDFormat: a version-4 UUID in canonical lowercase form, as
// the fmt-based formatting it replaced wrote it.
func TestNewMessageIDFormat(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := NewMessageID()
		if !uuidV4.MatchString(id) {
			t.Fatalf("NewMessageID() = %q, not a canonical version-4 UUID", id)
		}
		if seen[id] {
			t.Fatalf("NewMessageID() repeated %q", id)
		}
		seen[id] = true
	}
	var b [16]byte
	for i := range b {
		b[i] = byte(i * 17)
	}
	want := fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
	if got := FormatUUID(b); got != want {
		t.Fatalf("FormatUUID = %q, want %q", got, want)
	}
}

func BenchmarkNewMessageID(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = NewMessageID()
	}
}
