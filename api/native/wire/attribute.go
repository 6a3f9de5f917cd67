package wire

import (
	"bytes"
	"encoding/json"
	"strings"
)

// Attribute is one user message attribute: {"type": ..., "value": ...}, in
// the envelope of a send (Envelope), a replay's edit (ReplayRequest) and a
// message answered (Message).
type Attribute struct {
	// Type is String, Number or Binary, optionally followed by a ".label"
	// ("Number.float").
	Type string `json:"type"`
	// Value is the value as text: a String's text, a Number's digits, a
	// Binary's bytes in base64 (standard alphabet, padded; see IsBinary).
	Value AttributeValue `json:"value"`
}

// IsBinary reports whether an attribute of type typ is Binary (with or
// without a ".label"): its Value is then base64.
func IsBinary(typ string) bool {
	base, _, _ := strings.Cut(typ, ".")
	return base == "Binary"
}

// AttributeValue is an attribute's value as text. It encodes as a JSON
// string; it decodes from a JSON string, or from a JSON number (a request
// may give a Number attribute's value so), which it keeps as the number's
// literal text, exactly as sent ("129.90", "1e3"). Answers always give a
// string.
type AttributeValue string

// UnmarshalJSON takes a JSON string or a JSON number; anything else is an
// *AttributeValueError. A JSON null leaves the value as it was.
func (v *AttributeValue) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*v = AttributeValue(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return &AttributeValueError{Value: string(b)}
	}
	*v = AttributeValue(n)
	return nil
}

// AttributeValueError is the error of an attribute value that is neither a
// JSON string nor a JSON number (an object, an array, true or false).
type AttributeValueError struct {
	// Value is the JSON text given.
	Value string
}

// Error says what the value must be, and quotes the one given.
func (e *AttributeValueError) Error() string {
	return "an attribute's value must be a string (or a number, for a Number attribute), not " + e.Value
}
