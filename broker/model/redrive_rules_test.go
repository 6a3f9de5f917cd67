package model

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestTaskHandleRoundTrip(t *testing.T) {
	t.Parallel()
	arn := "arn:aws:sqs:us-east-1:000000000000:dlq"
	h := EncodeTaskHandle("6f0c8f6e-1b1a-4c1e-9a0e-2f3d4c5b6a79", arn)
	raw, err := base64.StdEncoding.DecodeString(h)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]string
	if err := json.Unmarshal(raw, &m); err != nil || m["taskId"] == "" || m["sourceArn"] != arn || len(m) != 2 {
		t.Fatalf("handle JSON = %s (%v)", raw, err)
	}
	id, src, err := DecodeTaskHandle(h)
	if err != nil || id != m["taskId"] || src != arn {
		t.Fatalf("DecodeTaskHandle = %q %q %v", id, src, err)
	}
	for _, bad := range []string{"", "garbage", base64.StdEncoding.EncodeToString([]byte(`{"taskId":"x"}`)), strings.Repeat("A", 4000)} {
		_, _, err := DecodeTaskHandle(bad)
		if !errors.Is(err, ErrInvalidParameterValue) || ErrorMessage(err) != "Value for parameter TaskHandle is invalid." {
			t.Errorf("DecodeTaskHandle(%.20q) = %v", bad, err)
		}
	}
}

func TestValidateTags(t *testing.T) {
	t.Parallel()
	ok := map[string]string{"team": "x", strings.Repeat("k", 128): strings.Repeat("v", 256)}
	if err := ValidateTags("q", ok); err != nil {
		t.Fatal(err)
	}
	many := map[string]string{}
	for i := 0; i < 51; i++ {
		many[strings.Repeat("k", i+1)] = ""
	}
	for name, tags := range map[string]map[string]string{
		"empty key": {"": "v"}, "long key": {strings.Repeat("k", 129): ""},
		"long value": {"k": strings.Repeat("v", 257)}, "aws prefix": {"aws:x": "v"}, "AWS prefix": {"AWS:x": "v"},
		"51 tags": many,
	} {
		if err := ValidateTags("q", tags); !errors.Is(err, ErrInvalidParameterValue) {
			t.Errorf("%s: %v", name, err)
		}
	}
	got := MergeTags(map[string]string{"a": "1", "b": "2"}, map[string]string{"b": "3", "c": "4"}, nil)
	if len(got) != 3 || got["b"] != "3" {
		t.Errorf("merge = %v", got)
	}
	if got := MergeTags(got, nil, []string{"a", "b", "c", "zz"}); got != nil {
		t.Errorf("untag all = %v", got)
	}
}

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

func TestSSEAttributes(t *testing.T) {
	t.Parallel()
	c := DefaultQueueConfig(false)
	c, err := ApplyAttributes(c, map[string]string{AttrKmsMasterKeyId: "alias/aws/sqs", AttrKmsDataKeyReusePeriodSeconds: "600"})
	if err != nil {
		t.Fatal(err)
	}
	a := c.Attributes()
	if a[AttrSqsManagedSseEnabled] != "false" || a[AttrKmsMasterKeyId] != "alias/aws/sqs" || a[AttrKmsDataKeyReusePeriodSeconds] != "600" {
		t.Fatalf("after KMS: %v", a)
	}
	for _, bad := range []map[string]string{{AttrKmsDataKeyReusePeriodSeconds: "59"}, {AttrKmsDataKeyReusePeriodSeconds: "86401"}, {AttrSqsManagedSseEnabled: "yes"}} {
		if _, err := ApplyAttributes(c, bad); !errors.Is(err, ErrInvalidAttributeValue) {
			t.Errorf("%v: %v", bad, err)
		}
	}
	c, err = ApplyAttributes(c, map[string]string{AttrSqsManagedSseEnabled: "true"})
	if err != nil {
		t.Fatal(err)
	}
	if a := c.Attributes(); a[AttrSqsManagedSseEnabled] != "true" || a[AttrKmsMasterKeyId] != "" || a[AttrKmsDataKeyReusePeriodSeconds] != "" {
		t.Fatalf("after SSE-SQS: %v", a)
	}
	if _, err := ApplyAttributes(c, map[string]string{AttrRedriveAllowPolicy: `{"redrivePermission":"byQueue","sourceQueueArns":["arn:aws:sqs:us-east-1:1:src"]}`}); err != nil {
		t.Fatal(err)
	}
}
