package model

import (
	"errors"
	"testing"
)

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
