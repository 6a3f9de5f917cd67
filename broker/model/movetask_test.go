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
