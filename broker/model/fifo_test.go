package model

import (
	"errors"
	"strings"
	"testing"
)

func TestValidFifoID(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]bool{
		"a": true, strings.Repeat("x", 128): true, "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~": true, "Az09": true,
		"": false, strings.Repeat("x", 129): false, "a b": false, "é": false, "a\tb": false, "a\x00": false,
	} {
		if got := ValidFifoID(s); got != want {
			t.Errorf("ValidFifoID(%q) = %v", s, got)
		}
	}
	err := ValidateFifoID("MessageGroupId", "group 123")
	if !errors.Is(err, ErrInvalidParameterValue) || ErrorMessage(err) !=
		"Value group 123 for parameter MessageGroupId is invalid. Reason: MessageGroupId can only include alphanumeric and punctuation characters. 1 to 128 in length." {
		t.Errorf("ValidateFifoID: %v", err)
	}
}
