package model

import (
	"sort"
	"strings"
	"unicode/utf8"
)

// Queue tags (SQS's TagQueue, UntagQueue, ListQueueTags; CreateQueue's tags).

// Tag limits, as AWS documents them for SQS queue tags.
const (
	MaxTagKeyLength   = 128 // characters
	MaxTagValueLength = 256 // characters
	MaxQueueTags      = 50  // tags per queue
	// ReservedTagPrefix starts tag keys that only AWS may set.
	ReservedTagPrefix = "aws:"
)

// ValidateTagKey checks one tag key: 1..128 characters, not starting with "aws:".
func ValidateTagKey(k string) error {
	if n := utf8.RuneCountInString(k); n < 1 || n > MaxTagKeyLength {
		return Errorf(ErrInvalidParameterValue, "Tag keys must be between 1 and %d characters in length.", MaxTagKeyLength)
	}
	if strings.HasPrefix(strings.ToLower(k), ReservedTagPrefix) {
		return Errorf(ErrInvalidParameterValue, "Tag keys may not begin with the reserved prefix %q: %s", ReservedTagPrefix, k)
	}
	return nil
}

// ValidateTags checks the tags a queue would have: each key (ValidateTagKey),
// each value (at most 256 characters) and their number (at most 50). queue
// names the queue in the message.
func ValidateTags(queue string, tags map[string]string) error {
	for _, k := range sortedMapKeys(tags) {
		if err := ValidateTagKey(k); err != nil {
			return err
		}
		if utf8.RuneCountInString(tags[k]) > MaxTagValueLength {
			return Errorf(ErrInvalidParameterValue, "Tag values may only be up to %d characters in length: the value of %s is too long.", MaxTagValueLength, k)
		}
	}
	if len(tags) > MaxQueueTags {
		return Errorf(ErrInvalidParameterValue, "Too many tags added for queue %s: a queue may have at most %d tags.", queue, MaxQueueTags)
	}
	return nil
}

// MergeTags returns the tags of a queue that had have, after TagQueue(add)
// (add != nil) or UntagQueue(remove). The result is a new map; nil when empty.
func MergeTags(have, add map[string]string, remove []string) map[string]string {
	out := make(map[string]string, len(have)+len(add))
	for k, v := range have {
		out[k] = v
	}
	for k, v := range add {
		out[k] = v
	}
	for _, k := range remove {
		delete(out, k)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func sortedMapKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
