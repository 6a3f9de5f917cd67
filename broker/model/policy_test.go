package model

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestPolicyStatements(t *testing.T) {
	t.Parallel()
	arn := "arn:aws:sqs:us-east-1:000000000000:q"
	p, err := AddPolicyStatement("", Permission{Label: "l1", AccountIDs: []string{"111122223333"}, Actions: []string{"SendMessage"}, Resource: arn})
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Version, Id string
		Statement   []struct {
			Sid, Effect, Resource string
			Principal             struct{ AWS []string }
			Action                []string
		}
	}
	if err := json.Unmarshal([]byte(p), &doc); err != nil || doc.Version != "2012-10-17" || len(doc.Statement) != 1 {
		t.Fatalf("policy %s (%v)", p, err)
	}
	st := doc.Statement[0]
	if st.Sid != "l1" || st.Effect != "Allow" || st.Resource != arn || st.Principal.AWS[0] != "arn:aws:iam::111122223333:root" || st.Action[0] != "SQS:SendMessage" {
		t.Fatalf("statement %+v", st)
	}
	if _, err := AddPolicyStatement(p, Permission{Label: "l1", AccountIDs: []string{"1"}, Actions: []string{"*"}, Resource: arn}); !errors.Is(err, ErrInvalidParameterValue) {
		t.Fatalf("duplicate label: %v", err)
	}
	p2, err := AddPolicyStatement(p, Permission{Label: "l2", AccountIDs: []string{"1", "2"}, Actions: []string{"ReceiveMessage", "DeleteMessage"}, Resource: arn})
	if err != nil || strings.Count(p2, `"Sid"`) != 2 {
		t.Fatalf("second statement: %s %v", p2, err)
	}
	p3, err := RemovePolicyStatement(p2, "l1")
	if err != nil || strings.Contains(p3, `"l1"`) || !strings.Contains(p3, `"l2"`) {
		t.Fatalf("remove: %s %v", p3, err)
	}
	if _, err := RemovePolicyStatement(p3, "nope"); !errors.Is(err, ErrInvalidParameterValue) {
		t.Fatalf("remove unknown: %v", err)
	}
	if p4, err := RemovePolicyStatement(p3, "l2"); err != nil || p4 != "" {
		t.Fatalf("remove last: %q %v", p4, err)
	}
	for _, bad := range []Permission{
		{Label: "", AccountIDs: []string{"1"}, Actions: []string{"*"}},
		{Label: strings.Repeat("a", 81), AccountIDs: []string{"1"}, Actions: []string{"*"}},
		{Label: "a b", AccountIDs: []string{"1"}, Actions: []string{"*"}},
		{Label: "a", Actions: []string{"*"}},
		{Label: "a", AccountIDs: []string{"1"}},
		{Label: "a", AccountIDs: []string{"1"}, Actions: []string{"CreateQueue"}},
	} {
		if err := ValidatePermission(bad); err == nil {
			t.Errorf("ValidatePermission(%+v) = nil", bad)
		}
	}
}
