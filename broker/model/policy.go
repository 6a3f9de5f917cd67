package model

import (
	"encoding/json"
	"fmt"
	"strings"
)

// The Policy attribute as AddPermission and RemovePermission edit it, and the
// part of it the access rule enforces (PolicyAllows): which other accounts
// may take which actions on the queue. The rest of a policy is stored and
// returned, not enforced.

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
		return InvalidParameterError(label, "Label", "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length.")
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
			return InvalidParameterError(a, "AWSAccountIds", "Value must be an AWS account id.")
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
			return InvalidParameterError(a, "ActionName", "Only the queue actions may be granted (SendMessage, ReceiveMessage, DeleteMessage, ChangeMessageVisibility, GetQueueAttributes, GetQueueUrl, ListDeadLetterSourceQueues, PurgeQueue, ListQueueTags or *).")
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
			return "", InvalidParameterError(p.Label, "Label", "Already exists.")
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
	return "", InvalidParameterError(label, "Label", "can't be found.")
}

// PolicyAllows reports whether a queue's Policy attribute lets account take
// action act on the queue: the access rule's grant (access.go), a pure
// function of the policy text.
//
// What is enforced is what AddPermission writes: an "Allow" statement grants
// when its Principal names the account ({"AWS": "arn:aws:iam::<id>:root" or
// "<id>", one or a list}) and its Action names act ("SQS:<act>", "SQS:*" or
// "*", one or a list; case-insensitive). A statement with any other element
// (Condition, NotPrincipal, NotAction, NotResource) or another Principal
// form ("*", a service, a user or role ARN) grants nothing: it is stored,
// not enforced. Resource is not compared (the policy is the queue's own).
// A "Deny" statement whose Principal and Action match (a "*" Principal
// matches every account) refuses, whatever its other elements: Sluice errs
// on the side of refusing. A policy that does not parse grants nothing.
func PolicyAllows(policy, account string, act Action) bool {
	if policy == "" || account == "" {
		return false
	}
	d, err := parsePolicy(policy)
	if err != nil {
		return false
	}
	allowed := false
	for _, st := range d.statements {
		var effect string
		_ = json.Unmarshal(st["Effect"], &effect)
		switch effect {
		case "Deny":
			if principalMatches(st["Principal"], account, true) && actionMatches(st["Action"], act) {
				return false
			}
		case "Allow":
			if allowed || !plainStatement(st) {
				continue
			}
			allowed = principalMatches(st["Principal"], account, false) && actionMatches(st["Action"], act)
		}
	}
	return allowed
}

// plainStatement reports whether st has only the elements AddPermission
// writes (Sid, Effect, Principal, Action, Resource).
func plainStatement(st map[string]json.RawMessage) bool {
	for k := range st {
		switch k {
		case "Sid", "Effect", "Principal", "Action", "Resource":
		default:
			return false
		}
	}
	return true
}

// stringOrList decodes a policy value that is one string or a list of them.
func stringOrList(raw json.RawMessage) []string {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}
	}
	var list []string
	_ = json.Unmarshal(raw, &list)
	return list
}

// principalMatches reports whether a Principal names account; a "*"
// Principal (bare or as {"AWS": "*"}) matches only when star is true.
func principalMatches(raw json.RawMessage, account string, star bool) bool {
	var whole string
	if json.Unmarshal(raw, &whole) == nil {
		return star && whole == "*"
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return false
	}
	for _, p := range stringOrList(m["AWS"]) {
		if p == account || p == "arn:aws:iam::"+account+":root" || star && p == "*" {
			return true
		}
	}
	return false
}

// actionMatches reports whether an Action names act.
func actionMatches(raw json.RawMessage, act Action) bool {
	for _, a := range stringOrList(raw) {
		a = strings.ToLower(a)
		if a == "*" || a == "sqs:*" || a == "sqs:"+strings.ToLower(string(act)) {
			return true
		}
	}
	return false
}
