package embedded

import (
	"encoding/hex"
	"testing"

	"github.com/sluicemq/sluice/broker/model"
)

// parseMsgIDSlow is parseMsgID as first written (encoding/hex), the
// reference the table-driven one is checked against.
func parseMsgIDSlow(s string) (id msgID, ok bool) {
	if len(s) != 36 {
		return id, false
	}
	var digits []byte
	for i := 0; i < 36; i++ {
		c := s[i]
		if i == 8 || i == 13 || i == 18 || i == 23 {
			if c != '-' {
				return id, false
			}
			continue
		}
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return id, false
		}
		digits = append(digits, c)
	}
	if _, err := hex.Decode(id[:], digits); err != nil {
		return id, false
	}
	return id, true
}

// TestParseMsgID checks parseMsgID against the reference on canonical ids,
// on every position of one changed to each byte, and on other lengths.
func TestParseMsgID(t *testing.T) {
	check := func(s string) {
		t.Helper()
		want, wantOK := parseMsgIDSlow(s)
		got, ok := parseMsgID(s)
		gotB, okB := parseMsgID([]byte(s))
		if ok != wantOK || got != want || okB != ok || gotB != got {
			t.Fatalf("parseMsgID(%q) = %x %v (bytes: %x %v), want %x %v", s, got, ok, gotB, okB, want, wantOK)
		}
		if ok && got.String() != s {
			t.Fatalf("parseMsgID(%q).String() = %q", s, got.String())
		}
	}
	for range 200 {
		check(model.NewMessageID())
	}
	id := []byte(model.NewMessageID())
	for i := range id {
		orig := id[i]
		for c := 0; c < 256; c++ {
			id[i] = byte(c)
			check(string(id))
		}
		id[i] = orig
	}
	for _, s := range []string{"", "x", string(id[:35]), string(id) + "0", "00000000-0000-0000-0000-000000000000"} {
		check(s)
	}
}
