package sqs_test

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/worker/sqssource"
)

// STS GetCallerIdentity on the SQS endpoint: the configured account's root.

func TestSTSGetCallerIdentitySDK(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *broker.Config) { c.AccountID = "123456789012" })
	client := sts.New(sts.Options{
		Region:           "us-east-1",
		BaseEndpoint:     aws.String(e.URL),
		Credentials:      credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
		HTTPClient:       &http.Client{Timeout: 10 * time.Second, Transport: sqssource.Transport(nil)},
		RetryMaxAttempts: 1,
	})
	out, err := client.GetCallerIdentity(context.Background(), &sts.GetCallerIdentityInput{})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(out.Account) != "123456789012" || aws.ToString(out.Arn) != "arn:aws:iam::123456789012:root" ||
		aws.ToString(out.UserId) != "123456789012" {
		t.Fatalf("GetCallerIdentity = account %q, arn %q, user %q", aws.ToString(out.Account), aws.ToString(out.Arn), aws.ToString(out.UserId))
	}
}

func TestSTSGetCallerIdentityWire(t *testing.T) {
	t.Parallel()
	e := setup(t)

	// Query protocol, as STS documents it.
	resp, body := e.form("/", vals("Action", "GetCallerIdentity", "Version", "2011-06-15"))
	var got struct {
		XMLName   struct{} `xml:"https://sts.amazonaws.com/doc/2011-06-15/ GetCallerIdentityResponse"`
		Arn       string   `xml:"GetCallerIdentityResult>Arn"`
		UserID    string   `xml:"GetCallerIdentityResult>UserId"`
		Account   string   `xml:"GetCallerIdentityResult>Account"`
		RequestID string   `xml:"ResponseMetadata>RequestId"`
	}
	if err := xml.Unmarshal([]byte(body), &got); err != nil {
		t.Fatalf("query GetCallerIdentity: %v\n%s", err, body)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/xml" || got.Account != "000000000000" ||
		got.Arn != "arn:aws:iam::000000000000:root" || got.UserID != "000000000000" || got.RequestID == "" {
		t.Fatalf("query GetCallerIdentity: %d %+v\n%s", resp.StatusCode, got, body)
	}
	// As a GET too (presigned-style).
	resp, body = e.get("/?Action=GetCallerIdentity&Version=2011-06-15")
	if resp.StatusCode != 200 || xml.Unmarshal([]byte(body), &got) != nil || got.Account != "000000000000" {
		t.Fatalf("GET GetCallerIdentity: %d %s", resp.StatusCode, body)
	}

	// AWS JSON, 1.1 and 1.0: the reply is in the content type of the request.
	for _, ct := range []string{"application/x-amz-json-1.1", "application/x-amz-json-1.0"} {
		resp, body := e.post("/", ct, "AWSSecurityTokenServiceV20110615.GetCallerIdentity", "{}")
		var id struct{ Account, Arn, UserId string }
		if err := json.Unmarshal([]byte(body), &id); err != nil || resp.StatusCode != 200 || resp.Header.Get("Content-Type") != ct ||
			resp.Header.Get("X-Amzn-Requestid") == "" || id.Account != "000000000000" || id.Arn != "arn:aws:iam::000000000000:root" || id.UserId != "000000000000" {
			t.Fatalf("JSON GetCallerIdentity (%s): %d %q %s (%v)", ct, resp.StatusCode, resp.Header.Get("Content-Type"), body, err)
		}
	}
	// Other STS operations are not served.
	resp, body = e.post("/", "application/x-amz-json-1.1", "AWSSecurityTokenServiceV20110615.AssumeRole", "{}")
	if resp.StatusCode != 400 {
		t.Fatalf("JSON AssumeRole: %d %s", resp.StatusCode, body)
	}
	resp, body = e.form("/", vals("Action", "AssumeRole", "Version", "2011-06-15"))
	expectError(t, resp, body, 400, "InvalidAction")
}
