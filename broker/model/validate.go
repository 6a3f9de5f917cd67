package model

import (
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// ValidateQueueName checks 1..80 characters of [A-Za-z0-9_-], plus ".fifo" at
// the end for a FIFO queue (the suffix counts toward the 80).
func ValidateQueueName(name string) error {
	base := strings.TrimSuffix(name, ".fifo")
	if len(name) == 0 || len(name) > 80 || base == "" || !isIDChars(base) {
		return Errorf(ErrInvalidParameterValue, "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length")
	}
	return nil
}

func isIDChars(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// The request-entry shapes of the three batch actions, as their errors name them.
const (
	SendBatchEntry       = "SendMessageBatchRequestEntry"
	DeleteBatchEntry     = "DeleteMessageBatchRequestEntry"
	VisibilityBatchEntry = "ChangeMessageVisibilityBatchRequestEntry"
)

// ValidateBatchIDs checks a batch's entry count (1..10) and ids (distinct,
// 1..80 characters of [A-Za-z0-9_-]). entry is the batch's request-entry
// shape (SendBatchEntry, DeleteBatchEntry or VisibilityBatchEntry), which the
// empty-batch error names.
func ValidateBatchIDs(entry string, ids []string) error {
	if len(ids) == 0 {
		return Errorf(ErrEmptyBatch, "There should be at least one %s in the request.", entry)
	}
	if len(ids) > MaxBatchEntries {
		return Errorf(ErrTooManyEntries, "Maximum number of entries per request are %d. You have sent %d.", MaxBatchEntries, len(ids))
	}
	// At most MaxBatchEntries ids: comparing each with those before it is
	// cheaper than a map.
	for i, id := range ids {
		if id == "" || len(id) > 80 || !isIDChars(id) {
			return Errorf(ErrInvalidBatchEntryID, "A batch entry id can only contain alphanumeric characters, hyphens and underscores. It can be at most 80 letters long.")
		}
		if slices.Contains(ids[:i], id) {
			return Errorf(ErrBatchIDsNotDistinct, "Id %s repeated.", id)
		}
	}
	return nil
}

// ValidBodyChars reports whether s holds only XML 1.0 characters:
// #x9 | #xA | #xD | #x20-#xD7FF | #xE000-#xFFFD | #x10000-#x10FFFF.
func ValidBodyChars(s string) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 && c != 0x9 && c != 0xA && c != 0xD {
				return false
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			return false
		}
		if !(r >= 0x20 && r <= 0xD7FF || r >= 0xE000 && r <= 0xFFFD || r >= 0x10000 && r <= 0x10FFFF) {
			return false
		}
		i += n
	}
	return true
}

// validCharacters is the character set of message contents, as SQS words it.
const ValidCharacters = "Valid unicode characters are #x9 | #xA | #xD | #x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF"

// MessageSize is the size SQS counts against MaximumMessageSize: the body plus
// each user attribute's name, data type and value.
func MessageSize(body string, attrs map[string]MessageAttribute) int {
	n := len(body)
	for k, a := range attrs {
		n += len(k) + len(a.DataType) + len(a.StringValue) + len(a.BinaryValue)
	}
	return n
}

// ValidateSendEntry checks one message against its queue's settings and the
// SQS rules: body presence, characters and size, delay range (and that FIFO
// queues take no per-message delay), attributes, the format of the group and
// dedup ids (fifo.go; their presence is ValidateSendGroupParams). A FIFO
// queue accepts DelaySeconds=0 (as SQS does; MessageDelay ignores it) and
// refuses any other per-message delay.
func ValidateSendEntry(c QueueConfig, e *SendEntry) error {
	if e.Body == "" {
		return Errorf(ErrMissingParameter, "The request must contain the parameter MessageBody.")
	}
	if !ValidBodyChars(e.Body) {
		return Errorf(ErrInvalidMessageContents, "Invalid characters found. %s", ValidCharacters)
	}
	if err := ValidateMessageAttributes(e.Attributes); err != nil {
		return err
	}
	for k, a := range e.SystemAttributes {
		if k != "AWSTraceHeader" {
			return Errorf(ErrInvalidParameterValue, "Message system attribute name '%s' is invalid.", k)
		}
		if a.DataType != "String" || a.StringValue == "" {
			return Errorf(ErrInvalidParameterValue, "Message system attribute 'AWSTraceHeader' must contain a non-empty value of type 'String'.")
		}
	}
	if size := MessageSize(e.Body, e.Attributes); size > c.MaxMessageSize {
		return Errorf(ErrInvalidParameterValue, "One or more parameters are invalid. Reason: Message must be shorter than %d bytes.", c.MaxMessageSize)
	}
	if e.Delay != nil {
		switch {
		case e.LongDelay && !c.Fifo:
			// The native API: any delivery time within the retention period.
			if *e.Delay < 0 || *e.Delay >= c.Retention {
				return InvalidParameterError(int64(*e.Delay/time.Second), "DelaySeconds",
					fmt.Sprintf("must be >= 0 and less than the queue's MessageRetentionPeriod (%d).", int64(c.Retention/time.Second)))
			}
		case *e.Delay < 0 || *e.Delay > MaxDelay || *e.Delay%time.Second != 0:
			return InvalidParameterError(int64(*e.Delay/time.Second), "DelaySeconds", "must be >= 0 and <= 900.")
		}
		if c.Fifo && *e.Delay != 0 {
			return InvalidParameterError(int64(*e.Delay/time.Second), "DelaySeconds", "The request include parameter that is not valid for this queue type.")
		}
	}
	return validateGroupFields(c, e)
}

// MessageDelay is how long a valid send (ValidateSendEntry) stays delayed:
// its own DelaySeconds on a standard queue, else the queue's DelaySeconds. On
// a FIFO queue the queue's delay always applies (the only per-message delay it
// accepts is 0, which SQS takes as "not set").
func MessageDelay(c QueueConfig, e *SendEntry) time.Duration {
	if e.Delay != nil && !c.Fifo {
		return *e.Delay
	}
	return c.Delay
}

// ValidateMessageAttributes checks user message attributes: at most 10, names
// of [A-Za-z0-9_.-] up to 256 characters (no "AWS."/"Amazon." prefix, no
// leading, trailing or double dot), a String/Number/Binary data type with an
// optional ".label", and a non-empty value of the right kind.
func ValidateMessageAttributes(attrs map[string]MessageAttribute) error {
	if len(attrs) > MaxMessageAttributes {
		return Errorf(ErrInvalidParameterValue, "Number of message attributes [%d] exceeds the allowed maximum [%d].", len(attrs), MaxMessageAttributes)
	}
	for name, a := range attrs {
		if err := validateAttrName(name); err != nil {
			return err
		}
		switch BaseType(a.DataType) {
		case "String", "Number":
			if a.StringValue == "" {
				return Errorf(ErrInvalidParameterValue, "Message (user) attribute '%s' must contain a non-empty value of type '%s'.", name, BaseType(a.DataType))
			}
			if !ValidBodyChars(a.StringValue) {
				return Errorf(ErrInvalidParameterValue, "Message (user) attribute '%s' contains invalid characters.", name)
			}
			if BaseType(a.DataType) == "Number" && !isNumber(a.StringValue) {
				return Errorf(ErrInvalidParameterValue, "Could not cast message attribute '%s' value to number.", name)
			}
		case "Binary":
			if len(a.BinaryValue) == 0 {
				return Errorf(ErrInvalidParameterValue, "Message (user) attribute '%s' must contain a non-empty value of type 'Binary'.", name)
			}
		default:
			return Errorf(ErrInvalidParameterValue, "The type of message (user) attribute '%s' is invalid. You must use only the following supported type prefixes: Binary, Number, String.", name)
		}
		if len(a.DataType) > 256 {
			return Errorf(ErrInvalidParameterValue, "Message (user) attribute '%s' data type is too long.", name)
		}
	}
	return nil
}

func validateAttrName(name string) error {
	bad := name == "" || len(name) > 256 || strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".") ||
		strings.Contains(name, "..")
	l := strings.ToLower(name)
	if strings.HasPrefix(l, "aws.") || strings.HasPrefix(l, "amazon.") {
		bad = true
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			bad = true // ASCII only: a byte of a multi-byte character is refused too
		}
	}
	if bad {
		return Errorf(ErrInvalidParameterValue, "Message (user) attribute name '%s' is invalid.", name)
	}
	return nil
}

// BaseType is a message attribute's data type without its ".label":
// "String", "Number" or "Binary" for a valid one.
func BaseType(t string) string {
	if i := strings.IndexByte(t, '.'); i >= 0 {
		return t[:i]
	}
	return t
}

func isNumber(s string) bool {
	digits := 0
	for i, c := range s {
		switch {
		case c >= '0' && c <= '9':
			digits++
		case (c == '-' || c == '+') && (i == 0 || s[i-1] == 'e' || s[i-1] == 'E'):
		case c == '.' || c == 'e' || c == 'E':
		default:
			return false
		}
	}
	return digits > 0 && len(s) <= 100
}

// ValidateVisibility checks a ChangeMessageVisibility timeout (0..12 h).
func ValidateVisibility(d time.Duration) error {
	if d < 0 || d > MaxVisibilityTimeout {
		return InvalidParameterError(int64(d/time.Second), "VisibilityTimeout", "Must be >= 0 and <= 43200, if provided.")
	}
	return nil
}

// FilterAttributes returns the attributes selected by names, as in
// ReceiveMessage's MessageAttributeNames: exact names, "All", ".*", or a
// prefix such as "bar.*". It returns nil when nothing is selected.
func FilterAttributes(attrs map[string]MessageAttribute, names []string) map[string]MessageAttribute {
	if len(attrs) == 0 || len(names) == 0 {
		return nil
	}
	out := map[string]MessageAttribute{}
	for k, v := range attrs {
		for _, n := range names {
			if n == "All" || n == ".*" || n == k || strings.HasSuffix(n, ".*") && strings.HasPrefix(k, strings.TrimSuffix(n, "*")) {
				out[k] = v
				break
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// isPlainCall reports whether the entries of a batch method are a plain
// (non-batch) call: a single entry with an empty id.
func isPlainCall[E any](entries []E, id func(E) string) bool {
	return len(entries) == 1 && id(entries[0]) == ""
}

// batchEntryName is the request-entry shape of a batch of E.
func batchEntryName[E any]() string {
	var zero E
	switch any(zero).(type) {
	case DeleteEntry:
		return DeleteBatchEntry
	case VisibilityEntry, LeaseEntry:
		return VisibilityBatchEntry
	}
	return SendBatchEntry
}

// ValidateBatch checks the entry ids of a batch call with ValidateBatchIDs,
// naming the entry shape of E (SendEntry, DeleteEntry or VisibilityEntry) in
// the empty-batch error. A single entry with an empty id is a plain
// (non-batch) call and is fine.
func ValidateBatch[E any](entries []E, id func(E) string) error {
	if isPlainCall(entries, id) {
		return nil
	}
	ids := make([]string, len(entries))
	for i, e := range entries {
		ids[i] = id(e)
	}
	return ValidateBatchIDs(batchEntryName[E](), ids)
}

// ValidateSendBatch checks what concerns a send call as a whole: the entry
// ids (ValidateBatch) and, for a batch, the total size of its entries (at
// most MaxBatchBytes, else ErrBatchRequestTooLong), also when the batch has a
// single entry. A plain send (one entry without an id) that is too long is
// not a batch error: it fails with its own size error from ValidateSendEntry,
// as does a batch entry longer than its queue's MaximumMessageSize within a
// batch that fits.
func ValidateSendBatch(entries []SendEntry) error {
	id := func(e SendEntry) string { return e.ID }
	if err := ValidateBatch(entries, id); err != nil {
		return err
	}
	if isPlainCall(entries, id) {
		return nil
	}
	total := 0
	for i := range entries {
		total += MessageSize(entries[i].Body, entries[i].Attributes)
	}
	if total > MaxBatchBytes {
		return Errorf(ErrBatchRequestTooLong,
			"Batch requests cannot be longer than %d bytes. You have sent %d bytes.", MaxBatchBytes, total)
	}
	return nil
}
