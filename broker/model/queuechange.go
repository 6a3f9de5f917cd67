package model

// QueueChange is one change of a queue's settings or tags, as the front
// hands it to the backend's UpdateQueue; exactly one of its parts is set.
// The backend applies it inside its atomic step with the planner
// plan.QueueUpdate.Apply, which holds the rules and their errors.
type QueueChange struct {
	// Attributes are SetQueueAttributes' (ApplyAttributes' rules; the
	// change moves LastModifiedTimestamp).
	Attributes map[string]string
	// AddTags are TagQueue's tags (the merged set must pass ValidateTags);
	// RemoveTags are UntagQueue's keys (unknown keys are ignored). Tags are
	// not attributes: LastModifiedTimestamp stays.
	AddTags    map[string]string
	RemoveTags []string
	// AddPermission adds a statement to the Policy attribute
	// (AddPolicyStatement); RemovePermission removes the statement with
	// that label (RemovePolicyStatement). The Policy is an attribute:
	// LastModifiedTimestamp moves.
	AddPermission    *Permission
	RemovePermission string
}
