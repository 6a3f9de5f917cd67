package apicommon

import (
	"github.com/sluicemq/sluice/broker/model"
)

// MaxJSONArray is the most elements any JSON array of a request body may
// hold. The largest list a request takes is far smaller (10 batch entries,
// 100 message ids, a few dozen attribute names); the bound is checked before
// decoding, because a decoder fills a large struct for every element, however
// small its JSON: a 3 MiB body of "{}," batch entries (a million of them)
// took ~400 MiB to decode before this check.
const MaxJSONArray = 1000

// maxScanDepth is the nesting past which CheckJSONArrays stops counting:
// encoding/json refuses bodies nested deeper than 10000 anyway.
const maxScanDepth = 10000

// CheckJSONArrays refuses a body holding a JSON array of more than
// MaxJSONArray elements (model.ErrInvalidRequest, which both APIs answer
// with a 400 in their own shape). It reads body once and allocates at most a
// counter per level of nesting; it is no validator: a body it passes may
// still be malformed, and the decoder says so.
func CheckJSONArrays(body []byte) error {
	// counts[d] is the number of commas seen at depth d when it is an
	// array, -1 when it is an object.
	var stack [64]int
	counts := stack[:0]
	inString, escaped := false, false
	for _, c := range body {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '[', '{':
			if len(counts) >= maxScanDepth {
				return nil
			}
			n := 0
			if c == '{' {
				n = -1
			}
			counts = append(counts, n)
		case ']', '}':
			if len(counts) > 0 {
				counts = counts[:len(counts)-1]
			}
		case ',':
			if d := len(counts) - 1; d >= 0 && counts[d] >= 0 {
				counts[d]++
				if counts[d] >= MaxJSONArray {
					return model.Errorf(model.ErrInvalidRequest,
						"The request body has a JSON array of more than %d elements.", MaxJSONArray)
				}
			}
		}
	}
	return nil
}
