package wire

import (
	"encoding/json"
	"errors"
	"testing"
)

// TestAttributeValue: a value decodes from a JSON string or a JSON number
// (kept as its literal), encodes as a JSON string, and refuses the other
// JSON types with an *AttributeValueError.
func TestAttributeValue(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]AttributeValue{
		`{"type":"String","value":"a\u00e9"}`: "aé",
		`{"type":"Number","value":129.90}`:    "129.90",
		`{"type":"Number","value":-1e3}`:      "-1e3",
		`{"type":"Number","value":"42"}`:      "42",
		`{"type":"String","value":null}`:      "",
	} {
		var a Attribute
		if err := json.Unmarshal([]byte(in), &a); err != nil || a.Value != want {
			t.Errorf("%s: %q, %v; want %q", in, a.Value, err, want)
		}
	}
	for _, in := range []string{`{"value":true}`, `{"value":{}}`, `{"value":[1]}`} {
		var a Attribute
		var ave *AttributeValueError
		if err := json.Unmarshal([]byte(in), &a); !errors.As(err, &ave) {
			t.Errorf("%s: %v, want an *AttributeValueError", in, err)
		}
	}
	b, err := json.Marshal(Attribute{Type: "Number", Value: "7"})
	if err != nil || string(b) != `{"type":"Number","value":"7"}` {
		t.Errorf("Marshal: %s, %v", b, err)
	}
}
