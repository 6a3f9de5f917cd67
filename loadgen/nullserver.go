package loadgen

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// NullServer is an SQS endpoint (AWS JSON 1.0) that stores nothing: it
// accepts every send, answers every receive at once with as many synthetic
// messages as asked for (bodies in the generator's format, stamped with the
// time of the receive, so end-to-end latency reads as about zero), and
// accepts every delete. Driving it shows the cost of a client alone: the
// ceiling an SQS client can reach on this machine. It answers only the
// actions the generator uses, plus GetQueueUrl and DeleteQueue.
type NullServer struct {
	// BodySize is the synthetic bodies' size. Default 256.
	BodySize int
	// Now is the clock stamped into bodies; default time.Now.
	Now func() time.Time

	seq atomic.Uint64
}

// ServeHTTP answers one SQS JSON request.
func (s *NullServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	action, ok := strings.CutPrefix(r.Header.Get("X-Amz-Target"), "AmazonSQS.")
	body, err := io.ReadAll(io.LimitReader(r.Body, 2<<20))
	if !ok || err != nil || r.Method != http.MethodPost {
		nullError(w, "InvalidAction", "the null server speaks AWS JSON 1.0 POSTs only")
		return
	}
	var in struct {
		QueueName           string
		QueueUrl            string
		MessageBody         string
		MaxNumberOfMessages int
		Entries             []struct{ Id, MessageBody string }
	}
	if err := json.Unmarshal(body, &in); err != nil {
		nullError(w, "InvalidParameterValue", err.Error())
		return
	}
	out := map[string]any{}
	switch action {
	case "CreateQueue", "GetQueueUrl":
		out["QueueUrl"] = "http://" + r.Host + "/000000000000/" + in.QueueName
	case "DeleteQueue", "DeleteMessage":
	case "SendMessage":
		out["MessageId"] = s.id()
		out["MD5OfMessageBody"] = md5Hex(in.MessageBody)
	case "SendMessageBatch":
		ok := make([]map[string]string, len(in.Entries))
		for i, e := range in.Entries {
			ok[i] = map[string]string{"Id": e.Id, "MessageId": s.id(), "MD5OfMessageBody": md5Hex(e.MessageBody)}
		}
		out["Successful"], out["Failed"] = ok, []any{}
	case "DeleteMessageBatch":
		ok := make([]map[string]string, len(in.Entries))
		for i, e := range in.Entries {
			ok[i] = map[string]string{"Id": e.Id}
		}
		out["Successful"], out["Failed"] = ok, []any{}
	case "ReceiveMessage":
		n := min(max(in.MaxNumberOfMessages, 1), 10)
		now := time.Now
		if s.Now != nil {
			now = s.Now
		}
		size := s.BodySize
		if size == 0 {
			size = 256
		}
		t := now()
		msgs := make([]map[string]string, n)
		for i := range msgs {
			n := s.seq.Add(1)
			b := string(AppendBody(nil, MessageID(foreignProducer, n), t, size))
			msgs[i] = map[string]string{"MessageId": s.id(), "ReceiptHandle": "null-" + strconv.FormatUint(n, 10),
				"MD5OfBody": md5Hex(b), "Body": b}
		}
		out["Messages"] = msgs
	default:
		nullError(w, "InvalidAction", "the null server does not answer "+action)
		return
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	_ = json.NewEncoder(w).Encode(out)
}

func (s *NullServer) id() string {
	return "00000000-0000-4000-8000-" + strconv.FormatUint(1e11+s.seq.Add(1), 10)[:12]
}

func md5Hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

func nullError(w http.ResponseWriter, code, msg string) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.WriteHeader(http.StatusBadRequest)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": "com.amazonaws.sqs#" + code, "message": msg})
}
