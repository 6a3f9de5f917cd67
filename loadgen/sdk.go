package loadgen

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/sluicemq/sluice/worker/sqssource"
)

// sdkDriver drives SQS through aws-sdk-go-v2's sqs client with its whole
// middleware stack (retries, MD5 checks, signing), sharing the pooled HTTP
// client's transport, under sqssource.Transport (without which the SDK
// loses an answer now and then on a fast endpoint, and a lost receive's
// messages stay leased until their visibility timeout). The client is built
// from sqs.Options directly: the HTTP client is set there, never through
// config.WithHTTPClient.
type sdkDriver struct {
	cfg      SQSConfig
	hc       *http.Client
	c        *sqs.Client
	queueURL *string
}

func newSDKDriver(cfg SQSConfig, hc *http.Client) *sdkDriver {
	c := sqs.New(sqs.Options{
		Region:       cfg.Region,
		BaseEndpoint: aws.String(cfg.Endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider(orTest(cfg.AccessKey), orTest(cfg.SecretKey), ""),
		HTTPClient:   &http.Client{Transport: sqssource.Transport(hc.Transport), Timeout: hc.Timeout},
	})
	return &sdkDriver{cfg: cfg, hc: hc, c: c}
}

func (d *sdkDriver) Describe() string {
	return fmt.Sprintf("SQS JSON (aws-sdk-go-v2 sqs client) at %s", d.cfg.Endpoint)
}

func (d *sdkDriver) Setup(ctx context.Context) error {
	out, err := d.c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(d.cfg.Queue)})
	if err != nil {
		return err
	}
	d.queueURL = out.QueueUrl
	return nil
}

func (d *sdkDriver) Close() error {
	defer d.hc.CloseIdleConnections()
	if d.cfg.Keep || d.queueURL == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := d.c.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: d.queueURL})
	return err
}

func (d *sdkDriver) NewProducer(context.Context, int) (Producer, error) { return sdkConn{d: d}, nil }
func (d *sdkDriver) NewConsumer(context.Context, int) (Consumer, error) { return sdkConn{d: d}, nil }

type sdkConn struct {
	nopCloser
	d *sdkDriver
}

func (c sdkConn) Send(ctx context.Context, bodies [][]byte) ([]bool, error) {
	if len(bodies) == 1 {
		_, err := c.d.c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: c.d.queueURL, MessageBody: aws.String(string(bodies[0]))})
		if err != nil {
			return nil, err
		}
		return okAll(1), nil
	}
	entries := make([]types.SendMessageBatchRequestEntry, len(bodies))
	for i, b := range bodies {
		entries[i] = types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(string(b))}
	}
	out, err := c.d.c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: c.d.queueURL, Entries: entries})
	if err != nil {
		return nil, err
	}
	acc := make([]bool, len(bodies))
	for _, s := range out.Successful {
		if i, err := strconv.Atoi(aws.ToString(s.Id)); err == nil && i >= 0 && i < len(acc) {
			acc[i] = true
		}
	}
	return acc, nil
}

func (c sdkConn) Receive(ctx context.Context, max int, wait time.Duration) ([]Received, error) {
	out, err := c.d.c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: c.d.queueURL,
		MaxNumberOfMessages: int32(max), WaitTimeSeconds: int32(wait / time.Second)})
	if err != nil {
		return nil, err
	}
	msgs := make([]Received, len(out.Messages))
	for i, m := range out.Messages {
		msgs[i] = Received{Body: aws.ToString(m.Body), Handle: aws.ToString(m.ReceiptHandle)}
	}
	return msgs, nil
}

func (c sdkConn) Delete(ctx context.Context, msgs []Received) error {
	if len(msgs) == 1 {
		_, err := c.d.c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: c.d.queueURL, ReceiptHandle: aws.String(msgs[0].Handle.(string))})
		return err
	}
	entries := make([]types.DeleteMessageBatchRequestEntry, len(msgs))
	for i, m := range msgs {
		entries[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(m.Handle.(string))}
	}
	out, err := c.d.c.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: c.d.queueURL, Entries: entries})
	if err != nil {
		return err
	}
	if len(out.Failed) > 0 {
		return fmt.Errorf("DeleteMessageBatch: %d failed: %s", len(out.Failed), aws.ToString(out.Failed[0].Code))
	}
	return nil
}

// orTest is s, or "test" when s is empty: the SDK signs every request and
// needs some credentials.
func orTest(s string) string {
	if s == "" {
		return "test"
	}
	return s
}
