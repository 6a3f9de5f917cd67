package broker

import (
	"encoding/json"
	"fmt"
	"strings"
)

// The Policy attribute as AddPermission and RemovePermission edit it. Sluice
// stores and returns the policy; it does not enforce it (every client may do
// everything), like the rest of SQS's access control (SigV4 is not checked).

// Policy limits, as AWS documents them for SQS queue policies.
const (
	MaxPolicyBytes      = 8192
	MaxPolicyStatements = 20
	MaxLabelLength      = 80
	// MaxPermissionActions is the most actions one AddPermission call may
	// grant; past it SQS answers OverLimit.
	MaxPermissionActions = 7
)

// Permission is one AddPermission grant: a statement of the queue's policy.
type Permission struct {
	// Label is the statement id (Sid): 1..80 of [A-Za-z0-9_-], unique in the policy.
	Label string
	// AccountIDs are the AWS account ids granted (at least one).
	AccountIDs []string
	// Actions are the SQS action names granted ("*" for all; at least one).
	Actions []string
	// Resource is the queue's ARN.
	Resource string
}

// permissionActions are the action names AddPermission accepts.
var permissionActions = map[string]bool{
	"*": true, "SendMessage": true, "ReceiveMessage": true, "DeleteMessage": true,
	"ChangeMessageVisibility": true, "GetQueueAttributes": true, "GetQueueUrl": true,
	"ListDeadLetterSourceQueues": true, "PurgeQueue": true, "ListQueueTags": true,
}

// ValidateLabel checks a permission label: 1..80 of [A-Za-z0-9_-].
func ValidateLabel(label string) error {
	if label == "" {
		return Errorf(ErrMissingParameter, "The request must contain the parameter Label.")
	}
	if len(label) > MaxLabelLength || !isBatchIDChars(label) {
		return invalidParam(label, "Label", "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length.")
	}
	return nil
}

func isBatchIDChars(s string) bool {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// ValidatePermission checks an AddPermission request: a label
// (ValidateLabel), at least one account id, and 1..MaxPermissionActions
// queue actions (more gives ErrOverLimit).
func ValidatePermission(p Permission) error {
	if err := ValidateLabel(p.Label); err != nil {
		return err
	}
	if len(p.AccountIDs) == 0 {
		return Errorf(ErrMissingParameter, "The request must contain the parameter AWSAccountIds.")
	}
	for _, a := range p.AccountIDs {
		if a == "" || strings.ContainsAny(a, ":/ ") {
			return invalidParam(a, "AWSAccountIds", "Value must be an AWS account id.")
		}
	}
	if len(p.Actions) == 0 {
		return Errorf(ErrMissingParameter, "The request must contain the parameter Actions.")
	}
	if len(p.Actions) > MaxPermissionActions {
		return Errorf(ErrOverLimit, "%d actions exceed the limit of %d actions in one AddPermission call.", len(p.Actions), MaxPermissionActions)
	}
	for _, a := range p.Actions {
		if !permissionActions[strings.TrimPrefix(a, "SQS:")] {
			return invalidParam(a, "ActionName", "Only the queue actions may be granted (SendMessage, ReceiveMessage, DeleteMessage, ChangeMessageVisibility, GetQueueAttributes, GetQueueUrl, ListDeadLetterSourceQueues, PurgeQueue, ListQueueTags or *).")
		}
	}
	return nil
}

// policyDoc is a policy document: its top-level members, of which the
// statements are parsed and the rest kept as they were.
type policyDoc struct {
	members    map[string]json.RawMessage
	statements []map[string]json.RawMessage
}

func parsePolicy(policy string) (*policyDoc, error) {
	d := &policyDoc{members: map[string]json.RawMessage{}}
	if policy == "" {
		return d, nil
	}
	bad := Errorf(ErrInvalidParameterValue, "The queue's Policy attribute is not a policy document that AddPermission and RemovePermission can edit.")
	if json.Unmarshal([]byte(policy), &d.members) != nil {
		return nil, bad
	}
	raw, ok := d.members["Statement"]
	if !ok {
		return d, nil
	}
	// Statement is a list of statements, or one statement on its own.
	if json.Unmarshal(raw, &d.statements) != nil {
		var one map[string]json.RawMessage
		if json.Unmarshal(raw, &one) != nil {
			return nil, bad
		}
		d.statements = []map[string]json.RawMessage{one}
	}
	return d, nil
}

func sid(st map[string]json.RawMessage) string {
	var s string
	_ = json.Unmarshal(st["Sid"], &s)
	return s
}

func (d *policyDoc) render() string {
	if len(d.statements) == 0 {
		return "" // no statement left: the queue has no policy
	}
	d.members["Statement"], _ = json.Marshal(d.statements)
	b, _ := json.Marshal(d.members)
	return string(b)
}

// AddPolicyStatement returns policy (the Policy attribute, "" for none) with
// a statement for p added:
//
//	{"Sid":label,"Effect":"Allow","Principal":{"AWS":["arn:aws:iam::<acct>:root",…]},
//	 "Action":["SQS:<Action>",…],"Resource":<queue ARN>}
//
// A new policy gets Version 2012-10-17 and Id <queue ARN>/SQSDefaultPolicy.
// A label already used gives ErrInvalidParameterValue; a policy past 20
// statements or 8192 bytes gives ErrOverLimit.
func AddPolicyStatement(policy string, p Permission) (string, error) {
	if err := ValidatePermission(p); err != nil {
		return "", err
	}
	d, err := parsePolicy(policy)
	if err != nil {
		return "", err
	}
	for _, st := range d.statements {
		if sid(st) == p.Label {
			return "", invalidParam(p.Label, "Label", "Already exists.")
		}
	}
	if len(d.statements) >= MaxPolicyStatements {
		return "", Errorf(ErrOverLimit, "A policy may have at most %d statements.", MaxPolicyStatements)
	}
	if len(d.members) == 0 {
		d.members["Version"] = json.RawMessage(`"2012-10-17"`)
		d.members["Id"], _ = json.Marshal(p.Resource + "/SQSDefaultPolicy")
	}
	principals := make([]string, len(p.AccountIDs))
	for i, a := range p.AccountIDs {
		principals[i] = fmt.Sprintf("arn:aws:iam::%s:root", a)
	}
	actions := make([]string, len(p.Actions))
	for i, a := range p.Actions {
		actions[i] = "SQS:" + strings.TrimPrefix(a, "SQS:")
	}
	st := map[string]json.RawMessage{}
	st["Sid"], _ = json.Marshal(p.Label)
	st["Effect"] = json.RawMessage(`"Allow"`)
	st["Principal"], _ = json.Marshal(map[string][]string{"AWS": principals})
	st["Action"], _ = json.Marshal(actions)
	st["Resource"], _ = json.Marshal(p.Resource)
	d.statements = append(d.statements, st)
	out := d.render()
	if len(out) > MaxPolicyBytes {
		return "", Errorf(ErrOverLimit, "The policy would be longer than %d bytes.", MaxPolicyBytes)
	}
	return out, nil
}

// RemovePolicyStatement returns policy without the statement whose Sid is
// label ("" when none is left). An unknown label gives ErrInvalidParameterValue.
func RemovePolicyStatement(policy, label string) (string, error) {
	if err := ValidateLabel(label); err != nil {
		return "", err
	}
	d, err := parsePolicy(policy)
	if err != nil {
		return "", err
	}
	for i, st := range d.statements {
		if sid(st) == label {
			d.statements = append(d.statements[:i], d.statements[i+1:]...)
			return d.render(), nil
		}
	}
	return "", invalidParam(label, "Label", "can't be found.")
}
