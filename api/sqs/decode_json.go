package sqs

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/sluicemq/sluice/api/apicommon"
	"github.com/sluicemq/sluice/broker/model"
)

// The JSON decoder's own rules: message contents are never changed on the
// way in, and a malformed request is answered in the SQS error shape, naming
// the parameter at fault.

// text is a member of a message's contents: a MessageBody, or the
// StringValue of a message attribute. From JSON it is taken exactly as sent:
// encoding/json would silently turn invalid UTF-8 and unpaired UTF-16
// surrogate escapes (a lone \ud800 or \udc00) into U+FFFD, storing a message
// the client never sent (and answering the MD5 of it). Instead such input is
// kept in a form no valid text has, so that the broker's character rule
// (model.ValidBodyChars) refuses that entry, as the query protocol refuses
// the same input: a batch's other entries are stored. A valid surrogate pair
// (\ud83d\ude00) is the character it encodes.
type text string

// UnmarshalJSON decodes the string literal itself (see unquoteText).
func (t *text) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		*t = text(unquoteText(b))
		return nil
	}
	var s string
	return json.Unmarshal(b, &s) // a wrong type: the caller adds the field's path
}

// unquoteText decodes lit, a JSON string literal (quotes included) whose
// syntax encoding/json has already checked, in one pass: escapes become their
// characters, a surrogate pair the character it encodes. What encoding/json
// would replace by U+FFFD is kept as bytes that are not UTF-8: a byte that is
// not UTF-8 stays as it is, and an unpaired surrogate escape becomes the
// surrogate's own 3-byte form (ED A0 80 for \ud800), which is no valid UTF-8
// either.
func unquoteText(lit []byte) string {
	end := len(lit) - 1 // the closing quote
	var sb strings.Builder
	sb.Grow(end)
	for i := 1; i < end; {
		if lit[i] != '\\' {
			j := i + 1
			for j < end && lit[j] != '\\' {
				j++
			}
			sb.Write(lit[i:j])
			i = j
			continue
		}
		c := lit[i+1]
		i += 2
		switch c {
		case 'b':
			sb.WriteByte('\b')
		case 'f':
			sb.WriteByte('\f')
		case 'n':
			sb.WriteByte('\n')
		case 'r':
			sb.WriteByte('\r')
		case 't':
			sb.WriteByte('\t')
		case 'u':
			r := hex4(lit[i : i+4])
			i += 4
			if utf16.IsSurrogate(r) && r < 0xDC00 && i+6 <= end && lit[i] == '\\' && lit[i+1] == 'u' {
				if pair := utf16.DecodeRune(r, hex4(lit[i+2:i+6])); pair != utf8.RuneError {
					sb.WriteRune(pair)
					i += 6
					continue
				}
			}
			if utf16.IsSurrogate(r) {
				sb.Write([]byte{0xE0 | byte(r>>12), 0x80 | byte(r>>6)&0x3F, 0x80 | byte(r)&0x3F})
				continue
			}
			sb.WriteRune(r)
		default: // '"', '\\', '/'
			sb.WriteByte(c)
		}
	}
	return sb.String()
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
// body in the SQS error shape: a value of the wrong JSON type as a
// SerializationException naming the parameter and the type it must have (as
// SQS does); a body that is not JSON (or bad base64) as InvalidParameterValue.
func decodeJSON(body []byte, in any) error {
	if err := apicommon.CheckJSONArrays(body); err != nil {
		return err
	}
	if err := checkMembers(body, reflect.TypeOf(in)); err != nil {
		return err
	}
	err := json.Unmarshal(body, in)
	if err == nil {
		return nil
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return wrongType(reflect.TypeOf(in).Elem(), te)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return model.Errorf(model.ErrInvalidParameterValue, "The request body is not valid JSON: %v (at byte %d).", se, se.Offset)
	}
	return model.Errorf(model.ErrInvalidParameterValue, "The request body is not valid JSON for this action: %v", err)
}

// wrongType is the SerializationException of a JSON value of the wrong type.
func wrongType(root reflect.Type, te *json.UnmarshalTypeError) error {
	got := jsonKind(te.Value)
	if te.Field == "" {
		return model.Errorf(errSerialization, "The request body must be a JSON object, not %s.", got)
	}
	path, field := memberPath(root, te.Field)
	want := typeName(te.Type)
	switch {
	case field != nil && field.Kind() == reflect.Map && field.Elem() == te.Type:
		return model.Errorf(errSerialization, "Each value of parameter %s must be %s, not %s.", path, want, got)
	case field != nil && field.Kind() == reflect.Slice && field.Elem() == te.Type:
		return model.Errorf(errSerialization, "Each member of parameter %s must be %s, not %s.", path, want, got)
	}
	return model.Errorf(errSerialization, "Parameter %s must be %s, not %s.", path, want, got)
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

// checkMembers reads body's JSON members against t, the input's type, for
// what encoding/json lets through silently: a member named twice in one
// object (encoding/json keeps the last value) and a member of a struct whose
// name differs from a field's only in case (encoding/json fills the field;
// SQS's member names are case-sensitive). Both are a SerializationException
// naming the member. Other unknown members are ignored, as SQS ignores them.
// A body that is not JSON is left to json.Unmarshal's error.
func checkMembers(body []byte, t reflect.Type) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	err := walkMembers(dec, t, "", 0)
	var se serializationErr
	switch {
	case errors.As(err, &se):
		return se.err
	case errors.Is(err, errTooDeep):
		return model.Errorf(errSerialization, "The request body nests more than %d levels deep; no SQS input nests more than four.", maxMemberDepth)
	}
	return nil
}

// serializationErr carries a member's error out of walkMembers, whose other
// errors are syntax errors that json.Unmarshal reports in its own words.
type serializationErr struct{ err error }

func (e serializationErr) Error() string { return e.err.Error() }

// maxMemberDepth is how deep a JSON body may nest: SQS's inputs nest four
// levels at most (Entries, an entry, MessageAttributes, a value), so a
// deeper body is refused (a SerializationException) rather than half
// checked.
const maxMemberDepth = 16

// errTooDeep stops walkMembers at maxMemberDepth: the body is refused.
var errTooDeep = errors.New("nested too deep for the member check")

// walkMembers reads one JSON value of type t (nil: not a field of the input,
// read for its objects' duplicates only), at path (the member names to it),
// depth levels down.
func walkMembers(dec *json.Decoder, t reflect.Type, path string, depth int) error {
	if depth > maxMemberDepth {
		return errTooDeep
	}
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil && (reflect.PointerTo(t).Implements(reflect.TypeFor[json.Unmarshaler]()) ||
		reflect.PointerTo(t).Implements(reflect.TypeFor[encoding.TextUnmarshaler]())) {
		t = nil // a value with its own decoding (text, number, blob): its objects, if any, for duplicates only
	}
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('['):
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for i := 1; dec.More(); i++ {
			if err := walkMembers(dec, elem, join(path, strconv.Itoa(i)), depth+1); err != nil {
				return err
			}
		}
		_, err = dec.Token()
		return err
	case json.Delim('{'):
		var fields map[string]reflect.Type // exact JSON names
		var folded map[string]string       // lower case -> the exact name
		var elem reflect.Type
		switch {
		case t != nil && t.Kind() == reflect.Struct:
			fields, folded = map[string]reflect.Type{}, map[string]string{}
			for _, f := range reflect.VisibleFields(t) {
				name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
				if f.Anonymous || !f.IsExported() || name == "-" {
					continue
				}
				if name == "" {
					name = f.Name
				}
				fields[name], folded[strings.ToLower(name)] = f.Type, name
			}
		case t != nil && t.Kind() == reflect.Map:
			elem = t.Elem()
		}
		seen := map[string]bool{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return err
			}
			key, _ := kt.(string)
			member := join(path, key)
			if seen[key] {
				return serializationErr{model.Errorf(errSerialization, "Member %s is given more than once.", member)}
			}
			seen[key] = true
			vt := elem
			if fields != nil {
				ft, ok := fields[key]
				if exact, near := folded[strings.ToLower(key)]; !ok && near {
					return serializationErr{model.Errorf(errSerialization, "Unknown member %s: member names are case-sensitive; did you mean %s?", member, join(path, exact))}
				}
				vt = ft
			}
			if err := walkMembers(dec, vt, member, depth+1); err != nil {
				return err
			}
		}
		_, err = dec.Token()
		return err
	}
	return nil
}

// join appends a member name to a path ("Entries.1" + "Id").
func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}
