package sqs_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// A RedrivePolicy naming the queue itself is refused by SetQueueAttributes
// as by CreateQueue (such a message would never move), in both protocols.
func TestRedrivePolicyNamingItselfRefused(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	policy := fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":3}`, qarn("selfish"))
	const want = "InvalidParameterValue"

	// JSON protocol, through the SDK.
	_, err := e.client.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("selfish"),
		Attributes: map[string]string{"RedrivePolicy": policy}})
	apiErr(t, "CreateQueue naming itself", err, want, "")
	url := e.queue("selfish", nil)
	_, err = e.client.SetQueueAttributes(ctx, &awssqs.SetQueueAttributesInput{QueueUrl: &url,
		Attributes: map[string]string{"RedrivePolicy": policy}})
	apiErr(t, "SetQueueAttributes naming itself", err, want, "")

	// Query protocol, raw.
	path := "/" + acct + "/selfish"
	resp, body := e.form(path, vals("Action", "SetQueueAttributes", "Attribute.1.Name", "RedrivePolicy", "Attribute.1.Value", policy))
	expectError(t, resp, body, 400, want)
	resp, body = e.form("/", vals("Action", "CreateQueue", "QueueName", "selfish2", "Attribute.1.Name", "RedrivePolicy",
		"Attribute.1.Value", fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":3}`, qarn("selfish2"))))
	expectError(t, resp, body, 400, want)

	attrs, err := e.client.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: &url,
		AttributeNames: []types.QueueAttributeName{"RedrivePolicy"}})
	if err != nil || attrs.Attributes["RedrivePolicy"] != "" {
		t.Fatalf("RedrivePolicy after the refusals = %q, %v; want none", attrs.Attributes["RedrivePolicy"], err)
	}
}
