package loadgen

import (
	"context"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// queryDriver speaks the SQS query protocol: form-encoded POSTs to the
// queue's URL, XML answers.
type queryDriver struct{ *lean }

func (d *queryDriver) Describe() string { return d.describe("query") }

// queryError is the query protocol's error body.
type queryError struct {
	Code    string `xml:"Error>Code"`
	Message string `xml:"Error>Message"`
}

func (d *queryDriver) call(ctx context.Context, target string, form url.Values, out any) error {
	form.Set("Version", "2012-11-05")
	body := []byte(form.Encode())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, strings.NewReader(string(body)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	status, b, err := d.do(ctx, req, body)
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		var e queryError
		_ = xml.Unmarshal(b, &e)
		return fmt.Errorf("%s: HTTP %d %s: %s", form.Get("Action"), status, e.Code, e.Message)
	}
	if out == nil {
		return nil
	}
	return xml.Unmarshal(b, out)
}

func (d *queryDriver) Setup(ctx context.Context) error {
	var out struct {
		URL string `xml:"CreateQueueResult>QueueUrl"`
	}
	if err := d.call(ctx, d.cfg.Endpoint+"/", url.Values{"Action": {"CreateQueue"}, "QueueName": {d.cfg.Queue}}, &out); err != nil {
		return err
	}
	d.queueURL = out.URL
	return nil
}

func (d *queryDriver) Close() error {
	defer d.close()
	if d.cfg.Keep || d.queueURL == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return d.call(ctx, d.queueURL, url.Values{"Action": {"DeleteQueue"}}, nil)
}

func (d *queryDriver) NewProducer(context.Context, int) (Producer, error) {
	return queryConn{d: d}, nil
}
func (d *queryDriver) NewConsumer(context.Context, int) (Consumer, error) {
	return queryConn{d: d}, nil
}

type queryConn struct {
	nopCloser
	d *queryDriver
}

type sendBatchXML struct {
	Result struct {
		Entries []struct {
			ID string `xml:"Id"`
		} `xml:"SendMessageBatchResultEntry"`
		Errors []struct {
			ID, Code, Message string
		} `xml:"BatchResultErrorEntry"`
	} `xml:"SendMessageBatchResult"`
}

func (c queryConn) Send(ctx context.Context, bodies [][]byte) ([]bool, error) {
	if len(bodies) == 1 {
		if err := c.d.call(ctx, c.d.queueURL, url.Values{"Action": {"SendMessage"}, "MessageBody": {string(bodies[0])}}, nil); err != nil {
			return nil, err
		}
		return okAll(1), nil
	}
	f := url.Values{"Action": {"SendMessageBatch"}}
	for i, b := range bodies {
		k := "SendMessageBatchRequestEntry." + strconv.Itoa(i+1) + "."
		f.Set(k+"Id", strconv.Itoa(i))
		f.Set(k+"MessageBody", string(b))
	}
	var out sendBatchXML
	if err := c.d.call(ctx, c.d.queueURL, f, &out); err != nil {
		return nil, err
	}
	acc := make([]bool, len(bodies))
	for _, e := range out.Result.Entries {
		if i, err := strconv.Atoi(e.ID); err == nil && i >= 0 && i < len(acc) {
			acc[i] = true
		}
	}
	return acc, nil
}

func (c queryConn) Receive(ctx context.Context, max int, wait time.Duration) ([]Received, error) {
	var out struct {
		Messages []struct {
			Body          string `xml:"Body"`
			ReceiptHandle string `xml:"ReceiptHandle"`
		} `xml:"ReceiveMessageResult>Message"`
	}
	f := url.Values{"Action": {"ReceiveMessage"}, "MaxNumberOfMessages": {strconv.Itoa(max)},
		"WaitTimeSeconds": {strconv.Itoa(int(wait / time.Second))}}
	if err := c.d.call(ctx, c.d.queueURL, f, &out); err != nil {
		return nil, err
	}
	msgs := make([]Received, len(out.Messages))
	for i, m := range out.Messages {
		msgs[i] = Received{Body: m.Body, Handle: m.ReceiptHandle}
	}
	return msgs, nil
}

func (c queryConn) Delete(ctx context.Context, msgs []Received) error {
	if len(msgs) == 1 {
		return c.d.call(ctx, c.d.queueURL, url.Values{"Action": {"DeleteMessage"}, "ReceiptHandle": {msgs[0].Handle.(string)}}, nil)
	}
	f := url.Values{"Action": {"DeleteMessageBatch"}}
	for i, m := range msgs {
		k := "DeleteMessageBatchRequestEntry." + strconv.Itoa(i+1) + "."
		f.Set(k+"Id", strconv.Itoa(i))
		f.Set(k+"ReceiptHandle", m.Handle.(string))
	}
	var out struct {
		Errors []struct{ Id, Code, Message string } `xml:"DeleteMessageBatchResult>BatchResultErrorEntry"`
	}
	if err := c.d.call(ctx, c.d.queueURL, f, &out); err != nil {
		return err
	}
	if len(out.Errors) > 0 {
		return fmt.Errorf("DeleteMessageBatch: %d failed: %s %s", len(out.Errors), out.Errors[0].Code, out.Errors[0].Message)
	}
	return nil
}
