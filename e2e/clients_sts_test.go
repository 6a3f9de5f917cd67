package e2e

import (
	"encoding/json"
	"testing"
	"time"
)

// TestClientSTSGetCallerIdentity: tools that check their credentials first
// run `aws sts get-caller-identity` against the same endpoint; Debian's aws
// CLI (STS in the query protocol) gets the broker's --account-id back.
func TestClientSTSGetCallerIdentity(t *testing.T) {
	t.Parallel()
	needClient(t, requireDebian, "the aws CLI (Debian awscli at "+awsCLIPath+")", awsCLIMissing(), aptInstall)
	b := startBroker(t, t.TempDir(), "--account-id", "123456789012")
	out := runClient(t, 90*time.Second, "", clientEnv(t), awsCLIPath, "--endpoint-url", b.URL, "--region", "us-east-1",
		"--output", "json", "--cli-read-timeout", "20", "--cli-connect-timeout", "5", "sts", "get-caller-identity")
	var id struct{ Account, Arn, UserId string }
	if err := json.Unmarshal([]byte(out), &id); err != nil {
		t.Fatalf("aws sts get-caller-identity: %v\n%s", err, out)
	}
	if id.Account != "123456789012" || id.Arn != "arn:aws:iam::123456789012:root" || id.UserId != "123456789012" {
		t.Fatalf("aws sts get-caller-identity = %+v", id)
	}
}
