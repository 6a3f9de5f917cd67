package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// jsonDriver speaks the SQS AWS JSON 1.0 protocol with hand-built request
// bodies over the pooled client: no SDK middleware.
type jsonDriver struct{ *lean }

func (d *jsonDriver) Describe() string { return d.describe("JSON") }

// awsError is the AWS JSON protocol's error body.
type awsError struct {
	Type    string `json:"__type"`
	Message string `json:"message"`
}

func (d *jsonDriver) call(ctx context.Context, action string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.cfg.Endpoint+"/", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	req.Header.Set("X-Amz-Target", "AmazonSQS."+action)
	status, b, err := d.do(ctx, req, body)
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		var e awsError
		_ = json.Unmarshal(b, &e)
		return fmt.Errorf("%s: HTTP %d %s: %s", action, status, e.Type, e.Message)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(b, out)
}

// appendJSONString appends s as a JSON string (UTF-8 passes through).
func appendJSONString(dst []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, '"')
}

func (d *jsonDriver) Setup(ctx context.Context) error {
	body := []byte(`{"QueueName":` + string(appendJSONString(nil, d.cfg.Queue)) + `}`)
	var out struct{ QueueUrl string }
	if err := d.call(ctx, "CreateQueue", body, &out); err != nil {
		return err
	}
	d.queueURL = out.QueueUrl
	return nil
}

func (d *jsonDriver) Close() error {
	defer d.close()
	if d.cfg.Keep || d.queueURL == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return d.call(ctx, "DeleteQueue", d.queueHead(nil, '}'), nil)
}

// queueHead starts a request body with the queue URL, then c.
func (d *jsonDriver) queueHead(dst []byte, c byte) []byte {
	dst = append(dst, `{"QueueUrl":`...)
	dst = appendJSONString(dst, d.queueURL)
	return append(dst, c)
}

func (d *jsonDriver) NewProducer(context.Context, int) (Producer, error) {
	return &jsonConn{d: d}, nil
}

func (d *jsonDriver) NewConsumer(context.Context, int) (Consumer, error) {
	return &jsonConn{d: d}, nil
}

// jsonConn is one producer or consumer; buf is its reused request buffer.
type jsonConn struct {
	nopCloser
	d   *jsonDriver
	buf []byte
}

type batchOut struct {
	Successful []struct{ Id string }
	Failed     []struct{ Id, Code, Message string }
}

func (b *batchOut) accepted(n int) []bool {
	acc := make([]bool, n)
	for _, s := range b.Successful {
		if i, err := strconv.Atoi(s.Id); err == nil && i >= 0 && i < n {
			acc[i] = true
		}
	}
	return acc
}

func (c *jsonConn) Send(ctx context.Context, bodies [][]byte) ([]bool, error) {
	b := c.d.queueHead(c.buf[:0], ',')
	if len(bodies) == 1 {
		b = append(b, `"MessageBody":`...)
		b = appendJSONString(b, string(bodies[0]))
		b = append(b, '}')
		c.buf = b
		if err := c.d.call(ctx, "SendMessage", b, nil); err != nil {
			return nil, err
		}
		return okAll(1), nil
	}
	b = append(b, `"Entries":[`...)
	for i, body := range bodies {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"Id":"`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `","MessageBody":`...)
		b = appendJSONString(b, string(body))
		b = append(b, '}')
	}
	b = append(b, "]}"...)
	c.buf = b
	var out batchOut
	if err := c.d.call(ctx, "SendMessageBatch", b, &out); err != nil {
		return nil, err
	}
	return out.accepted(len(bodies)), nil
}

func (c *jsonConn) Receive(ctx context.Context, max int, wait time.Duration) ([]Received, error) {
	b := c.d.queueHead(c.buf[:0], ',')
	b = append(b, `"MaxNumberOfMessages":`...)
	b = strconv.AppendInt(b, int64(max), 10)
	b = append(b, `,"WaitTimeSeconds":`...)
	b = strconv.AppendInt(b, int64(wait/time.Second), 10)
	b = append(b, '}')
	c.buf = b
	var out struct {
		Messages []struct{ Body, ReceiptHandle string }
	}
	if err := c.d.call(ctx, "ReceiveMessage", b, &out); err != nil {
		return nil, err
	}
	msgs := make([]Received, len(out.Messages))
	for i, m := range out.Messages {
		msgs[i] = Received{Body: m.Body, Handle: m.ReceiptHandle}
	}
	return msgs, nil
}

func (c *jsonConn) Delete(ctx context.Context, msgs []Received) error {
	b := c.d.queueHead(c.buf[:0], ',')
	if len(msgs) == 1 {
		b = append(b, `"ReceiptHandle":`...)
		b = appendJSONString(b, msgs[0].Handle.(string))
		b = append(b, '}')
		c.buf = b
		return c.d.call(ctx, "DeleteMessage", b, nil)
	}
	b = append(b, `"Entries":[`...)
	for i, m := range msgs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"Id":"`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `","ReceiptHandle":`...)
		b = appendJSONString(b, m.Handle.(string))
		b = append(b, '}')
	}
	b = append(b, "]}"...)
	c.buf = b
	var out batchOut
	if err := c.d.call(ctx, "DeleteMessageBatch", b, &out); err != nil {
		return err
	}
	if len(out.Failed) > 0 {
		return fmt.Errorf("DeleteMessageBatch: %d failed: %s %s", len(out.Failed), out.Failed[0].Code, out.Failed[0].Message)
	}
	return nil
}
