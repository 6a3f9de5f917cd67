package sqs

import (
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/sluicemq/sluice/broker"
)

// The JSON decoder's own rules: message contents are never changed on the way in.

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

// decodeJSON decodes an action's JSON input into in. The broker's own errors
// (message contents, base64) are answered as they are.
func decodeJSON(body []byte, in any) error {
	err := json.Unmarshal(body, in)
	if err == nil {
		return nil
	}
	var be *broker.Error
	if errors.As(err, &be) {
		return err
	}
	return broker.Errorf(broker.ErrInvalidParameterValue, "The request body is not valid JSON for this action: %v", err)
}
