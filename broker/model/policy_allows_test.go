package model

import "testing"

func TestPolicyAllows(t *testing.T) {
	t.Parallel()
	const b = "222222222222"
	added, err := AddPolicyStatement("", Permission{Label: "s", AccountIDs: []string{"111111111111", b}, Actions: []string{"SendMessage", "GetQueueUrl"}, Resource: "arn:aws:sqs:us-east-1:000000000000:q"})
	if err != nil {
		t.Fatal(err)
	}
	all, err := AddPolicyStatement("", Permission{Label: "all", AccountIDs: []string{b}, Actions: []string{"*"}, Resource: "arn"})
	if err != nil {
		t.Fatal(err)
	}
	stmt := func(s string) string { return `{"Version":"2012-10-17","Statement":[` + s + `]}` }
	for _, c := range []struct {
		name, policy string
		act          Action
		want         bool
	}{
		{"no policy", "", ActionSendMessage, false},
		{"AddPermission grant", added, ActionSendMessage, true},
		{"AddPermission grant, other action", added, ActionReceiveMessage, false},
		{"AddPermission grant, second action", added, ActionGetQueueURL, true},
		{"AddPermission *", all, ActionPurgeQueue, true},
		{"bare account principal, one action string", stmt(`{"Effect":"Allow","Principal":{"AWS":"` + b + `"},"Action":"sqs:ReceiveMessage"}`), ActionReceiveMessage, true},
		{"action case-insensitive", stmt(`{"Effect":"Allow","Principal":{"AWS":["arn:aws:iam::` + b + `:root"]},"Action":["SQS:RECEIVEMESSAGE"]}`), ActionReceiveMessage, true},
		{"sqs:*", stmt(`{"Effect":"Allow","Principal":{"AWS":"` + b + `"},"Action":"sqs:*"}`), ActionDeleteMessage, true},
		{"another account", stmt(`{"Effect":"Allow","Principal":{"AWS":"999999999999"},"Action":"*"}`), ActionSendMessage, false},
		{"Principal * is not enforced", stmt(`{"Effect":"Allow","Principal":"*","Action":"*"}`), ActionSendMessage, false},
		{"AWS * is not enforced", stmt(`{"Effect":"Allow","Principal":{"AWS":"*"},"Action":"*"}`), ActionSendMessage, false},
		{"a Condition grants nothing", stmt(`{"Effect":"Allow","Principal":{"AWS":"` + b + `"},"Action":"*","Condition":{"ArnEquals":{"aws:SourceArn":"x"}}}`), ActionSendMessage, false},
		{"NotAction grants nothing", stmt(`{"Effect":"Allow","Principal":{"AWS":"` + b + `"},"NotAction":"sqs:DeleteQueue"}`), ActionSendMessage, false},
		{"a user ARN grants nothing", stmt(`{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::` + b + `:user/x"},"Action":"*"}`), ActionSendMessage, false},
		{"Deny wins", stmt(`{"Effect":"Allow","Principal":{"AWS":"` + b + `"},"Action":"*"},{"Effect":"Deny","Principal":{"AWS":"` + b + `"},"Action":"sqs:SendMessage"}`), ActionSendMessage, false},
		{"Deny of another action", stmt(`{"Effect":"Allow","Principal":{"AWS":"` + b + `"},"Action":"*"},{"Effect":"Deny","Principal":"*","Action":"sqs:PurgeQueue"}`), ActionSendMessage, true},
		{"Deny * with a Condition still refuses", stmt(`{"Effect":"Allow","Principal":{"AWS":"` + b + `"},"Action":"*"},{"Effect":"Deny","Principal":"*","Action":"*","Condition":{"Bool":{"aws:SecureTransport":"false"}}}`), ActionSendMessage, false},
		{"one statement, not a list", `{"Statement":{"Effect":"Allow","Principal":{"AWS":"` + b + `"},"Action":"*"}}`, ActionSendMessage, true},
		{"not JSON", `{"Statement":`, ActionSendMessage, false},
	} {
		if got := PolicyAllows(c.policy, b, c.act); got != c.want {
			t.Errorf("%s: PolicyAllows = %v, want %v (policy %s)", c.name, got, c.want, c.policy)
		}
	}
	if PolicyAllows(all, "", ActionSendMessage) {
		t.Error("PolicyAllows for no account")
	}
}
