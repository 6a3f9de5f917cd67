package native

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/sluicemq/sluice/api/apicommon"
	"github.com/sluicemq/sluice/api/native/wire"
	"github.com/sluicemq/sluice/broker/model"
)

// Decoding requests. A body is one JSON object, read whole up to
// Config.MaxBodyBytes; a member the route does not take is refused (naming
// it), as is one of the wrong type (naming it and the type it needs). Message
// contents are taken exactly: a body that is not valid UTF-8, or that holds
// an unpaired UTF-16 surrogate escape, is refused rather than stored with
// U+FFFD in place of what was sent (encoding/json would replace it).

// decode reads the request body into v. An empty body is {} when optional,
// else refused.
func (h *Handler) decode(c *call, v any, optional bool) error {
	body, err := io.ReadAll(http.MaxBytesReader(c.w, c.r.Body, h.cfg.MaxBodyBytes))
	if err != nil {
		return normalize(err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		if optional {
			return nil
		}
		return errorf(errMalformed, "The request needs a JSON object as its body.")
	}
	return decodeJSON(body, v)
}

// decodeJSON decodes one JSON value into v, strictly.
func decodeJSON(body []byte, v any) error {
	if !utf8.Valid(body) {
		return errorf(errMalformed, "The request body is not valid UTF-8.")
	}
	if at := unpairedSurrogate(body); at >= 0 {
		return errorf(errMalformed, "The request body has an unpaired UTF-16 surrogate escape at byte %d: text must be valid Unicode.", at)
	}
	if err := apicommon.CheckJSONArrays(body); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errorf(errMalformed, "The request body holds more than one JSON value.")
	}
	return nil
}

// jsonError turns an encoding/json error into this API's error, naming the
// member at fault.
func jsonError(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var valueErr *wire.AttributeValueError
	switch {
	case errors.As(err, &valueErr):
		return errorf(errBadRequest, "An attribute's value must be a string (or a number, for a Number attribute), not %s.", valueErr.Value)
	case errors.As(err, &syn):
		return errorf(errMalformed, "The request body is not valid JSON at byte %d: %s.", syn.Offset, strings.TrimPrefix(syn.Error(), "json: "))
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			return errorf(errBadRequest, "The request body must be a JSON object.")
		}
		return errorf(errBadRequest, "Field %s must be %s, not a JSON %s.", fieldPath(field), jsonType(typ.Type.Kind().String()), typ.Value)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return errorf(errMalformed, "The request body ends before its JSON value does.")
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return errorf(errUnknownField, "Unknown field %s: see GET /v1/openapi.json for the fields this route takes.", name)
	}
	return errorf(errBadRequest, "The request body does not decode: %s.", strings.TrimPrefix(err.Error(), "json: "))
}

// fieldPath is a type error's path to the member at fault. encoding/json
// puts the Go name of an embedded struct in it (entries.ControlFields.receipt
// for the receipt of a batch control's entry); the answers have named the
// embedded structs by the names they had before they moved to package wire
// (envelope, controlFields), and still do.
func fieldPath(path string) string {
	parts := strings.Split(path, ".")
	for i, p := range parts {
		switch p {
		case "Envelope":
			parts[i] = "envelope"
		case "ControlFields":
			parts[i] = "controlFields"
		}
	}
	return strings.Join(parts, ".")
}

// jsonType names a Go kind as the JSON type a member must have.
func jsonType(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return "an integer"
	case "float32", "float64":
		return "a number"
	case "slice", "array":
		return "an array"
	case "map", "struct", "ptr":
		return "an object"
	}
	return "of another type"
}

// unpairedSurrogate returns the offset of the first \uD800-\uDFFF escape
// that is not a high surrogate followed by a low one, or -1. A backslash
// occurs in valid JSON only inside a string, so no string tracking is
// needed; a malformed escape is left to the JSON decoder.
func unpairedSurrogate(b []byte) int {
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		if i+1 >= len(b) || b[i+1] != 'u' {
			i++ // a two-character escape, \\ among them
			continue
		}
		r, ok := hex4(b, i+2)
		if !ok {
			return -1 // the decoder reports the syntax error
		}
		switch {
		case r >= 0xD800 && r <= 0xDBFF:
			if i+11 < len(b) && b[i+6] == '\\' && b[i+7] == 'u' {
				if lo, ok := hex4(b, i+8); ok && lo >= 0xDC00 && lo <= 0xDFFF {
					i += 11
					continue
				}
			}
			return i
		case r >= 0xDC00 && r <= 0xDFFF:
			return i
		}
		i += 5
	}
	return -1
}

// hex4 reads four hex digits at b[at:].
func hex4(b []byte, at int) (rune, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(b[at:at+4]), 16, 16)
	return rune(n), err == nil
}

// query reads a request's query parameters: only the names allowed, each at
// most once.
type query struct {
	values map[string][]string
}

// queryOf checks the query's names against allowed.
func queryOf(r *http.Request, allowed ...string) (query, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return query{}, errorf(errBadRequest, "The query string does not decode: %s.", err)
	}
	for name, vs := range q {
		if !contains(allowed, name) {
			if len(allowed) == 0 {
				return query{}, errorf(errUnknownField, "Unknown query parameter %q: this route takes none.", name)
			}
			return query{}, errorf(errUnknownField, "Unknown query parameter %q: this route takes %s.", name, strings.Join(allowed, ", "))
		}
		if len(vs) > 1 {
			return query{}, errorf(errBadRequest, "Query parameter %q is given %d times; give it once.", name, len(vs))
		}
	}
	return query{values: q}, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// get returns a parameter's value ("" when absent).
func (q query) get(name string) string {
	if vs := q.values[name]; len(vs) > 0 {
		return vs[0]
	}
	return ""
}

// int reads an integer parameter in lo..hi; dflt when absent.
func (q query) int(name string, lo, hi, dflt int) (int, error) {
	v := q.get(name)
	if v == "" {
		return dflt, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, errorf(model.ErrInvalidParameterValue, "Query parameter %s must be an integer from %d to %d, not %q.", name, lo, hi, v)
	}
	return n, nil
}
