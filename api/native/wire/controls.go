package wire

// ControlFields are the fields of one consumer control on a leased
// message: the body of a single control (POST /v1/queues/{queue}/ack,
// nack, extend, snooze, release, dead-letter), and of each ControlEntry of
// a batch one. Every control takes Receipt; each takes only the other
// fields it names (nack: reason and delaySeconds; extend:
// visibilitySeconds; snooze: delaySeconds; dead-letter: reason; ack:
// result). Those are
// absent (nil, and left out) when not given.
type ControlFields struct {
	// Receipt is the receipt of the delivery (Message.Receipt), required.
	Receipt string `json:"receipt"`
	// Reason (up to 1024 bytes) is kept as the message's failure reason.
	Reason *string `json:"reason,omitempty"`
	// DelaySeconds is a nack's or snooze's: the seconds (0..43200) before
	// the message is visible again.
	DelaySeconds *int64 `json:"delaySeconds,omitempty"`
	// VisibilitySeconds is an extend's: the lease's new remaining time,
	// 1..43200 seconds.
	VisibilitySeconds *int64 `json:"visibilitySeconds,omitempty"`
	// Result is an ack's: the job's result (up to 65,536 bytes), kept with
	// the message's completed record when its queue keeps them
	// (CompletedRetentionSeconds) and shown by its status by id.
	Result *string `json:"result,omitempty"`
}

// ControlEntry is one entry of a batch control: its entry id and its
// ControlFields, side by side in one JSON object.
type ControlEntry struct {
	// ID is the entry's id: give every entry one, or none (it is left out
	// when ""); the results then echo it.
	ID string `json:"id,omitempty"`
	ControlFields
}

// ControlRequest is the body of a control route as the broker reads it:
// one control's fields, or Entries for a batch of up to 10, not both.
// ControlFields is a pointer so that a batch encodes as {"entries": [...]}
// alone (nil). (The client sends a single control as a bare ControlFields;
// a ControlRequest holding one encodes its fields and "entries": null,
// which the broker reads as the same single control.)
type ControlRequest struct {
	*ControlFields
	// Entries are a batch's entries; absent (nil) for a single control.
	Entries []ControlEntry `json:"entries"`
}
