package e2e

// Two SQS clients behind one small interface for the fault tests: the AWS
// JSON 1.0 protocol through aws-sdk-go-v2, and the query protocol through a
// minimal client over net/http (form POST Action=..., XML answers), so that
// the load carries real wire traffic of both protocols.

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// wireEntry is one message to send.
type wireEntry struct{ Body, Group, Dedup string }

// wireMessage is one message received.
type wireMessage struct{ ID, Body, Receipt string }

// wireClient is what the fault load needs of an SQS client. queue is the
// queue's path (/account/name): each client puts its own broker in front.
type wireClient interface {
	// Send sends entries in one request (a batch when more than one) and
	// returns which were acknowledged.
	Send(ctx context.Context, queue string, entries []wireEntry) ([]bool, error)
	Receive(ctx context.Context, queue string, max, wait int) ([]wireMessage, error)
	Delete(ctx context.Context, queue, receipt string) error
	ChangeVisibility(ctx context.Context, queue, receipt string, seconds int) error
	Protocol() string
}

// jsonClient speaks AWS JSON 1.0 through aws-sdk-go-v2.
type jsonClient struct {
	base string
	c    *sqs.Client
}

func newJSONClient(base string) *jsonClient { return &jsonClient{base: base, c: sqsClient(base)} }

func (j *jsonClient) Protocol() string { return "json" }

func (j *jsonClient) Send(ctx context.Context, queue string, entries []wireEntry) ([]bool, error) {
	u := aws.String(j.base + queue)
	ok := make([]bool, len(entries))
	if len(entries) == 1 {
		e := entries[0]
		_, err := j.c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: u, MessageBody: &e.Body,
			MessageGroupId: optional(e.Group), MessageDeduplicationId: optional(e.Dedup)})
		ok[0] = err == nil
		return ok, err
	}
	var in []types.SendMessageBatchRequestEntry
	for i, e := range entries {
		in = append(in, types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(e.Body),
			MessageGroupId: optional(e.Group), MessageDeduplicationId: optional(e.Dedup)})
	}
	out, err := j.c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: u, Entries: in})
	if err != nil {
		return ok, err
	}
	for _, s := range out.Successful {
		i, _ := strconv.Atoi(*s.Id)
		ok[i] = true
	}
	return ok, nil
}

func (j *jsonClient) Receive(ctx context.Context, queue string, max, wait int) ([]wireMessage, error) {
	out, err := j.c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(j.base + queue),
		MaxNumberOfMessages: int32(max), WaitTimeSeconds: int32(wait)})
	if err != nil {
		return nil, err
	}
	var ms []wireMessage
	for _, m := range out.Messages {
		ms = append(ms, wireMessage{ID: aws.ToString(m.MessageId), Body: aws.ToString(m.Body), Receipt: aws.ToString(m.ReceiptHandle)})
	}
	return ms, nil
}

func (j *jsonClient) Delete(ctx context.Context, queue, receipt string) error {
	_, err := j.c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(j.base + queue), ReceiptHandle: &receipt})
	return err
}

func (j *jsonClient) ChangeVisibility(ctx context.Context, queue, receipt string, seconds int) error {
	_, err := j.c.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(j.base + queue),
		ReceiptHandle: &receipt, VisibilityTimeout: int32(seconds)})
	return err
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// queryClient speaks the SQS query protocol: form-encoded POSTs to the
// queue's URL, XML answers.
type queryClient struct {
	base string
	hc   *http.Client
}

func newQueryClient(base string) *queryClient {
	return &queryClient{base: base, hc: &http.Client{Timeout: 40 * time.Second}}
}

func (q *queryClient) Protocol() string { return "query" }

// queryError is an ErrorResponse of the query protocol.
type queryError struct {
	Status int
	Code   string `xml:"Error>Code"`
	Msg    string `xml:"Error>Message"`
}

func (e *queryError) Error() string { return fmt.Sprintf("HTTP %d %s: %s", e.Status, e.Code, e.Msg) }

// call posts action with params to the queue's URL and decodes the answer into out.
func (q *queryClient) call(ctx context.Context, queue, action string, params url.Values, out any) error {
	params.Set("Action", action)
	params.Set("Version", "2012-11-05")
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, q.base+queue, strings.NewReader(params.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
	resp, err := q.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		qe := &queryError{Status: resp.StatusCode}
		if xml.Unmarshal(body, qe) != nil {
			qe.Msg = string(body)
		}
		return qe
	}
	if out == nil {
		return nil
	}
	return xml.Unmarshal(body, out)
}

func (q *queryClient) Send(ctx context.Context, queue string, entries []wireEntry) ([]bool, error) {
	ok := make([]bool, len(entries))
	v := url.Values{}
	if len(entries) == 1 {
		e := entries[0]
		v.Set("MessageBody", e.Body)
		if e.Group != "" {
			v.Set("MessageGroupId", e.Group)
			v.Set("MessageDeduplicationId", e.Dedup)
		}
		var out struct {
			ID string `xml:"SendMessageResult>MessageId"`
		}
		err := q.call(ctx, queue, "SendMessage", v, &out)
		if err == nil && out.ID == "" {
			err = errors.New("SendMessage answered no MessageId")
		}
		ok[0] = err == nil
		return ok, err
	}
	for i, e := range entries {
		p := fmt.Sprintf("SendMessageBatchRequestEntry.%d.", i+1)
		v.Set(p+"Id", strconv.Itoa(i))
		v.Set(p+"MessageBody", e.Body)
		if e.Group != "" {
			v.Set(p+"MessageGroupId", e.Group)
			v.Set(p+"MessageDeduplicationId", e.Dedup)
		}
	}
	var out struct {
		OK []struct {
			ID string `xml:"Id"`
		} `xml:"SendMessageBatchResult>SendMessageBatchResultEntry"`
	}
	if err := q.call(ctx, queue, "SendMessageBatch", v, &out); err != nil {
		return ok, err
	}
	for _, s := range out.OK {
		if i, err := strconv.Atoi(s.ID); err == nil && i >= 0 && i < len(ok) {
			ok[i] = true
		}
	}
	return ok, nil
}

func (q *queryClient) Receive(ctx context.Context, queue string, max, wait int) ([]wireMessage, error) {
	v := url.Values{}
	v.Set("MaxNumberOfMessages", strconv.Itoa(max))
	v.Set("WaitTimeSeconds", strconv.Itoa(wait))
	var out struct {
		Messages []struct {
			ID      string `xml:"MessageId"`
			Receipt string `xml:"ReceiptHandle"`
			Body    string `xml:"Body"`
		} `xml:"ReceiveMessageResult>Message"`
	}
	if err := q.call(ctx, queue, "ReceiveMessage", v, &out); err != nil {
		return nil, err
	}
	var ms []wireMessage
	for _, m := range out.Messages {
		ms = append(ms, wireMessage{ID: m.ID, Body: m.Body, Receipt: m.Receipt})
	}
	return ms, nil
}

func (q *queryClient) Delete(ctx context.Context, queue, receipt string) error {
	v := url.Values{}
	v.Set("ReceiptHandle", receipt)
	return q.call(ctx, queue, "DeleteMessage", v, nil)
}

func (q *queryClient) ChangeVisibility(ctx context.Context, queue, receipt string, seconds int) error {
	v := url.Values{}
	v.Set("ReceiptHandle", receipt)
	v.Set("VisibilityTimeout", strconv.Itoa(seconds))
	return q.call(ctx, queue, "ChangeMessageVisibility", v, nil)
}
