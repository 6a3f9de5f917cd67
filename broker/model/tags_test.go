package model

import (
	"errors"
	"strings"
	"testing"
)

func TestValidateTags(t *testing.T) {
	t.Parallel()
	ok := map[string]string{"team": "x", strings.Repeat("k", 128): strings.Repeat("v", 256)}
	if err := ValidateTags("q", ok); err != nil {
		t.Fatal(err)
	}
	many := map[string]string{}
	for i := 0; i < 51; i++ {
		many[strings.Repeat("k", i+1)] = ""
	}
	for name, tags := range map[string]map[string]string{
		"empty key": {"": "v"}, "long key": {strings.Repeat("k", 129): ""},
		"long value": {"k": strings.Repeat("v", 257)}, "aws prefix": {"aws:x": "v"}, "AWS prefix": {"AWS:x": "v"},
		"51 tags": many,
	} {
		if err := ValidateTags("q", tags); !errors.Is(err, ErrInvalidParameterValue) {
			t.Errorf("%s: %v", name, err)
		}
	}
	got := MergeTags(map[string]string{"a": "1", "b": "2"}, map[string]string{"b": "3", "c": "4"}, nil)
	if len(got) != 3 || got["b"] != "3" {
		t.Errorf("merge = %v", got)
	}
	if got := MergeTags(got, nil, []string{"a", "b", "c", "zz"}); got != nil {
		t.Errorf("untag all = %v", got)
	}
}
