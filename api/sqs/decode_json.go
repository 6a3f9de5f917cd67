package sqs

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"unicode/utf8"

	"github.com/sluicemq/sluice/broker"
)

// The JSON decoder's own rules: message contents are never changed on the
// way in, and a malformed request is answered in the SQS error shape, naming
// the parameter at fault.

// text is a member of a message's contents: a MessageBody, or the
// StringValue of a message attribute. From JSON it is taken exactly as sent
// or refused: encoding/json would silently turn invalid UTF-8 and unpaired
// UTF-16 surrogate escapes (a lone \ud800 or \udc00) into U+FFFD, storing a
// message the client never sent (and answering the MD5 of it). A valid
// surrogate pair (\ud83d\ude00) is the character it encodes.
type text string

// UnmarshalJSON checks the raw string literal before decoding it.
func (t *text) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		if what, bad := invalidJSONText(b); bad {
			return broker.InvalidTextError(what)
		}
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err // a wrong type: the caller adds the field's path
	}
	*t = text(s)
	return nil
}

// invalidJSONText reports what in lit, a syntactically valid JSON string
// literal (quotes included), would not survive decoding unchanged: a byte
// that is not UTF-8, or an escaped UTF-16 surrogate without its partner.
func invalidJSONText(lit []byte) (string, bool) {
	end := len(lit) - 1 // the closing quote
	for i := 1; i < end; {
		c := lit[i]
		switch {
		case c == '\\':
			if lit[i+1] != 'u' {
				i += 2
				continue
			}
			r := hex4(lit[i+2 : i+6])
			switch {
			case r >= 0xD800 && r < 0xDC00:
				if i+12 <= end && lit[i+6] == '\\' && lit[i+7] == 'u' {
					if low := hex4(lit[i+8 : i+12]); low >= 0xDC00 && low < 0xE000 {
						i += 12
						continue
					}
				}
				return fmt.Sprintf(`a high surrogate \u%04x without a low surrogate after it`, r), true
			case r >= 0xDC00 && r < 0xE000:
				return fmt.Sprintf(`a low surrogate \u%04x without a high surrogate before it`, r), true
			}
			i += 6
		case c < utf8.RuneSelf:
			i++
		default:
			r, n := utf8.DecodeRune(lit[i:end])
			if r == utf8.RuneError && n == 1 {
				return fmt.Sprintf("the byte 0x%02x, which is not UTF-8", c), true
			}
			i += n
		}
	}
	return "", false
}

// hex4 decodes the 4 hex digits of a \u escape (the JSON scanner has
// checked they are hex digits).
func hex4(b []byte) rune {
	var r rune
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		}
	}
	return r
}

// decodeJSON decodes an action's JSON input into in, answering a malformed
// body in the SQS error shape: the broker's own errors (message contents,
// base64) as they are; a value of the wrong JSON type as a
// SerializationException naming the parameter and the type it must have (as
// SQS does); a body that is not JSON as InvalidParameterValue.
func decodeJSON(body []byte, in any) error {
	err := json.Unmarshal(body, in)
	if err == nil {
		return nil
	}
	var be *broker.Error
	if errors.As(err, &be) {
		return err
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return wrongType(reflect.TypeOf(in).Elem(), te)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return broker.Errorf(broker.ErrInvalidParameterValue, "The request body is not valid JSON: %v (at byte %d).", se, se.Offset)
	}
	return broker.Errorf(broker.ErrInvalidParameterValue, "The request body is not valid JSON for this action: %v", err)
}

// wrongType is the SerializationException of a JSON value of the wrong type.
func wrongType(root reflect.Type, te *json.UnmarshalTypeError) error {
	got := jsonKind(te.Value)
	if te.Field == "" {
		return broker.Errorf(errSerialization, "The request body must be a JSON object, not %s.", got)
	}
	path, field := memberPath(root, te.Field)
	want := typeName(te.Type)
	switch {
	case field != nil && field.Kind() == reflect.Map && field.Elem() == te.Type:
		return broker.Errorf(errSerialization, "Each value of parameter %s must be %s, not %s.", path, want, got)
	case field != nil && field.Kind() == reflect.Slice && field.Elem() == te.Type:
		return broker.Errorf(errSerialization, "Each member of parameter %s must be %s, not %s.", path, want, got)
	}
	return broker.Errorf(errSerialization, "Parameter %s must be %s, not %s.", path, want, got)
}

// memberPath turns the Go field path of an UnmarshalTypeError
// ("sendEntry.MessageBody", "Entries.MessageAttributes.StringValue") into the
// parameter's path of JSON member names, and returns the type of the last
// member (nil when the path cannot be followed).
func memberPath(root reflect.Type, goPath string) (string, reflect.Type) {
	var names []string
	t := root
	for _, seg := range strings.Split(goPath, ".") {
		for t != nil && (t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map) {
			t = t.Elem()
		}
		var f reflect.StructField
		ok := false
		if t != nil && t.Kind() == reflect.Struct {
			f, ok = t.FieldByName(seg)
			if !ok {
				f, ok = fieldByJSONName(t, seg)
			}
		}
		if !ok {
			names = append(names, seg)
			t = nil
			continue
		}
		t = f.Type
		if f.Anonymous {
			continue // an embedded struct (queueRef, sendEntry): no JSON member of its own
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" {
			name = f.Name
		}
		names = append(names, name)
	}
	return strings.Join(names, "."), t
}

func fieldByJSONName(t reflect.Type, name string) (reflect.StructField, bool) {
	return t.FieldByNameFunc(func(n string) bool {
		f, _ := t.FieldByName(n)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		return tag == name
	})
}

// typeName is the SQS-model word for a Go type of the input structs.
func typeName(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return "a base64 string"
		}
		if t.Elem().Kind() == reflect.String {
			return "a list of strings"
		}
		return "a list"
	case reflect.Map:
		if t.Elem().Kind() == reflect.String {
			return "a map of string to string"
		}
		return "a map"
	}
	return "an object"
}

// jsonKind words the JSON value kind an UnmarshalTypeError reports.
func jsonKind(v string) string {
	kind, _, _ := strings.Cut(v, " ") // "number 1e400"
	switch kind {
	case "string":
		return "a string"
	case "number":
		return "a number"
	case "bool":
		return "a boolean"
	case "array":
		return "a list"
	case "object":
		return "an object"
	}
	return v
}
