package sqs_test

import "testing"

// TestQueryBareListMember: kombu 5.2's asynchronous connection (and boto 2)
// send GetQueueAttributes with an unindexed AttributeName=All, as a presigned
// GET on the queue URL; it names a one-element list, not an empty one.
func TestQueryBareListMember(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.form("/", vals("Action", "CreateQueue", "QueueName", "bare", "Attribute.1.Name", "VisibilityTimeout", "Attribute.1.Value", "31"))
	for _, q := range []string{"AttributeName=All", "AttributeName=VisibilityTimeout"} {
		_, body := e.get("/000000000000/bare?Action=GetQueueAttributes&" + q)
		var got struct {
			Attributes []nameValue `xml:"GetQueueAttributesResult>Attribute"`
		}
		decode(t, body, "GetQueueAttributesResponse", &got)
		found := false
		for _, a := range got.Attributes {
			found = found || a == nameValue{"VisibilityTimeout", "31"}
		}
		if !found {
			t.Fatalf("%s: no VisibilityTimeout=31 in %s", q, body)
		}
	}
	// A bare empty member is still an empty list (botocore's "AttributeName=").
	_, body := e.get("/000000000000/bare?Action=GetQueueAttributes&AttributeName=")
	var got struct {
		Attributes []nameValue `xml:"GetQueueAttributesResult>Attribute"`
	}
	decode(t, body, "GetQueueAttributesResponse", &got)
	if len(got.Attributes) != 0 {
		t.Fatalf("AttributeName= answered %s", body)
	}
}
