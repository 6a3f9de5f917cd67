package sqs

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/sluicemq/sluice/broker/model"
)

// operation is one SQS action: how each protocol decodes its input and what
// it does. run returns the output struct, or nil for an action without output.
type operation struct {
	// accountLevel actions are refused on a queue path in the query protocol.
	accountLevel bool
	fromJSON     func(body []byte) (any, error)
	fromQuery    func(p params) (any, error)
	run          func(h *Handler, c *call, in any) (any, error)
}

func op[I any](accountLevel bool, q func(params) (*I, error), run func(*Handler, *call, *I) (any, error)) operation {
	return operation{
		accountLevel: accountLevel,
		fromJSON: func(body []byte) (any, error) {
			in := new(I)
			if len(bytes.TrimSpace(body)) == 0 {
				return in, nil
			}
			if decodeJSONFast(body, in) {
				return in, nil
			}
			*in = *new(I) // the fast path may have filled part of it
			if err := decodeJSON(body, in); err != nil {
				return nil, err
			}
			return in, nil
		},
		fromQuery: func(p params) (any, error) { return q(p) },
		run:       func(h *Handler, c *call, in any) (any, error) { return run(h, c, in.(*I)) },
	}
}

// operations are the implemented actions.
var operations map[string]operation

func init() {
	operations = map[string]operation{
		"CreateQueue":                  op(true, queryCreateQueue, (*Handler).createQueue),
		"GetQueueUrl":                  op(false, queryGetQueueURL, (*Handler).getQueueURL),
		"ListQueues":                   op(true, queryListQueues, (*Handler).listQueues),
		"DeleteQueue":                  op(false, queryQueueOnly, (*Handler).deleteQueue),
		"PurgeQueue":                   op(false, queryQueueOnly, (*Handler).purgeQueue),
		"GetQueueAttributes":           op(false, queryGetQueueAttributes, (*Handler).getQueueAttributes),
		"SetQueueAttributes":           op(false, querySetQueueAttributes, (*Handler).setQueueAttributes),
		"SendMessage":                  op(false, querySendMessage, (*Handler).sendMessage),
		"SendMessageBatch":             op(false, querySendMessageBatch, (*Handler).sendMessageBatch),
		"ReceiveMessage":               op(false, queryReceiveMessage, (*Handler).receiveMessage),
		"DeleteMessage":                op(false, queryDeleteMessage, (*Handler).deleteMessage),
		"DeleteMessageBatch":           op(false, queryDeleteMessageBatch, (*Handler).deleteMessageBatch),
		"ChangeMessageVisibility":      op(false, queryChangeVisibility, (*Handler).changeVisibility),
		"ChangeMessageVisibilityBatch": op(false, queryChangeVisibilityBatch, (*Handler).changeVisibilityBatch),
		// actions_tags.go
		"TagQueue":         op(false, queryTagQueue, (*Handler).tagQueue),
		"UntagQueue":       op(false, queryUntagQueue, (*Handler).untagQueue),
		"ListQueueTags":    op(false, queryQueueOnly, (*Handler).listQueueTags),
		"AddPermission":    op(false, queryAddPermission, (*Handler).addPermission),
		"RemovePermission": op(false, queryRemovePermission, (*Handler).removePermission),
		// actions_redrive.go
		"ListDeadLetterSourceQueues": op(false, queryListDeadLetterSourceQueues, (*Handler).listDeadLetterSourceQueues),
		"StartMessageMoveTask":       op(false, queryStartMoveTask, (*Handler).startMoveTask),
		"ListMessageMoveTasks":       op(false, queryListMoveTasks, (*Handler).listMoveTasks),
		"CancelMessageMoveTask":      op(false, queryCancelMoveTask, (*Handler).cancelMoveTask),
	}
}

// unsupported are SQS actions Sluice knows but does not serve yet: they
// answer UnsupportedOperation rather than InvalidAction. (Every SQS action is
// served now; an action that needs an optional backend capability answers
// UnsupportedOperation itself when the backend lacks it.)
var unsupported = map[string]bool{}

// lookup finds an action, or the error to answer.
func lookup(action string, proto protocol) (operation, error) {
	if o, ok := operations[action]; ok {
		return o, nil
	}
	if unsupported[action] {
		return operation{}, model.Errorf(model.ErrUnsupportedOperation, "The action %s is not supported by this broker yet.", action)
	}
	if proto == protoJSON {
		return operation{}, model.Errorf(errUnknownOperation, "The operation %s is not known.", action)
	}
	return operation{}, model.Errorf(errInvalidAction, "The action %s is not valid for this endpoint.", action)
}

// serveJSON serves an AWS JSON 1.0 request.
func (h *Handler) serveJSON(c *call, target string) {
	action, ok := strings.CutPrefix(target, "AmazonSQS.")
	c.action = action
	if !ok || action == "" {
		h.fail(c, model.Errorf(errUnknownOperation, "The X-Amz-Target %q names no SQS operation.", target))
		return
	}
	o, err := lookup(action, protoJSON)
	if err != nil {
		h.fail(c, err)
		return
	}
	body, err := h.readBody(c)
	if err != nil {
		h.fail(c, err)
		return
	}
	in, err := o.fromJSON(body)
	if err != nil {
		h.fail(c, err)
		return
	}
	out, err := o.run(h, c, in)
	if err != nil {
		h.fail(c, err)
		return
	}
	writeJSON(c, out)
}

// serveQuery serves a query-protocol request (GET or POST, on / or a queue path).
func (h *Handler) serveQuery(c *call) {
	var form url.Values
	if c.r.Method == http.MethodPost || c.r.Method == http.MethodPut {
		body, err := h.readBody(c)
		if err != nil {
			h.fail(c, err)
			return
		}
		form, err = url.ParseQuery(string(body))
		if err != nil {
			h.fail(c, model.Errorf(model.ErrInvalidParameterValue, "The request body is not a valid form: %v", err))
			return
		}
	}
	p := newParams(urlQuery(c.r), form)
	c.action = p.str("Action")
	if c.action == "" {
		// Real SQS answers a bare GET on a queue URL with 404 UnknownOperationException.
		err := model.Errorf(errUnknownOperation, "The request names no Action.")
		k := kindOf(err)
		k.status = http.StatusNotFound
		writeQueryError(c, k, model.ErrorMessage(err))
		return
	}
	if c.action == stsGetCallerIdentity {
		h.serveSTSQuery(c)
		return
	}
	o, err := lookup(c.action, protoQuery)
	if err != nil {
		h.fail(c, err)
		return
	}
	if o.accountLevel && c.pathQueue != "" {
		h.fail(c, model.Errorf(errInvalidAction, "The action %s is not valid for this endpoint.", c.action))
		return
	}
	in, err := o.fromQuery(p)
	if err != nil {
		h.fail(c, err)
		return
	}
	out, err := o.run(h, c, in)
	if err != nil {
		h.fail(c, err)
		return
	}
	writeXML(c, out)
}

// Namespace is the XML namespace of query-protocol replies.
const Namespace = "http://queue.amazonaws.com/doc/2012-11-05/"

func writeJSON(c *call, out any) { writeJSONAs(c, "application/x-amz-json-1.0", out) }

// writeJSONAs writes out as a 200 answer of content type ct (an AWS JSON
// version: SQS speaks 1.0, STS answers in the version it was asked in).
func writeJSONAs(c *call, ct string, out any) {
	if out == nil {
		// Actions without output answer 200 with an empty body, as SQS does.
		setAnswerHeaders(c.w.Header(), ct, c.requestID, 0)
		c.w.WriteHeader(http.StatusOK)
		return
	}
	var body []byte
	if a, ok := out.(jsonAppender); ok {
		body = appendJSONAnswer(a)
	} else {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(out); err != nil {
			writeJSONError(c, kindOf(errInternal), "We encountered an internal error. Please try again.")
			return
		}
		body = buf.Bytes()
	}
	setAnswerHeaders(c.w.Header(), ct, c.requestID, len(body))
	c.w.WriteHeader(http.StatusOK)
	_, _ = c.w.Write(body)
}

// setAnswerHeaders sets the headers every answer has (Content-Type,
// X-Amzn-Requestid, Content-Length) with one allocation for their values
// where Header.Set takes one for each. The keys are in canonical form.
func setAnswerHeaders(h http.Header, ct, requestID string, length int) {
	v := &[3]string{ct, requestID, strconv.Itoa(length)}
	h["Content-Type"] = v[0:1:1]
	h["X-Amzn-Requestid"] = v[1:2:2]
	h["Content-Length"] = v[2:3:3]
}

func writeJSONError(c *call, k errorKind, msg string) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(struct {
		Type    string `json:"__type"`
		Message string `json:"message"`
	}{k.shape, msg})
	body := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	h := c.w.Header()
	setAnswerHeaders(h, "application/x-amz-json-1.0", c.requestID, len(body))
	h.Set("X-Amzn-Query-Error", k.code+";"+fault(k))
	c.w.WriteHeader(k.status)
	_, _ = c.w.Write(body)
}

func fault(k errorKind) string {
	if k.status >= 500 {
		return "Receiver"
	}
	return "Sender"
}

// responseMetadata is the query protocol's <ResponseMetadata>.
type responseMetadata struct {
	RequestID string `xml:"RequestId"`
}

// writeXML writes <ActionResponse><ActionResult>…</ActionResult><ResponseMetadata/></ActionResponse>.
// encoding/xml escapes CR in text as &#xD;, so bodies with \r survive the
// client's XML parser and match their MD5.
func writeXML(c *call, out any) { writeXMLIn(c, Namespace, out) }

// writeXMLIn is writeXML with the XML namespace of another service (STS).
func writeXMLIn(c *call, namespace string, out any) {
	var buf bytes.Buffer
	buf.WriteString(xml.Header)
	enc := xml.NewEncoder(&buf)
	root := xml.StartElement{Name: xml.Name{Local: c.action + "Response"}, Attr: []xml.Attr{{Name: xml.Name{Local: "xmlns"}, Value: namespace}}}
	err := enc.EncodeToken(root)
	if err == nil && out != nil {
		err = enc.EncodeElement(out, xml.StartElement{Name: xml.Name{Local: c.action + "Result"}})
	}
	if err == nil {
		err = enc.EncodeElement(responseMetadata{c.requestID}, xml.StartElement{Name: xml.Name{Local: "ResponseMetadata"}})
	}
	if err == nil {
		err = enc.EncodeToken(root.End())
	}
	if err == nil {
		err = enc.Flush()
	}
	if err != nil {
		writeQueryError(c, kindOf(errInternal), "We encountered an internal error. Please try again.")
		return
	}
	writeXMLBytes(c, http.StatusOK, buf.Bytes())
}

func writeXMLBytes(c *call, status int, body []byte) {
	setAnswerHeaders(c.w.Header(), "text/xml", c.requestID, len(body))
	c.w.WriteHeader(status)
	_, _ = c.w.Write(body)
}

type queryError struct {
	XMLName   xml.Name `xml:"ErrorResponse"`
	Xmlns     string   `xml:"xmlns,attr"`
	Type      string   `xml:"Error>Type"`
	Code      string   `xml:"Error>Code"`
	Message   string   `xml:"Error>Message"`
	Detail    string   `xml:"Error>Detail"`
	RequestID string   `xml:"RequestId"`
}

func writeQueryError(c *call, k errorKind, msg string) {
	body, err := xml.Marshal(queryError{Xmlns: Namespace, Type: fault(k), Code: k.code, Message: msg, RequestID: c.requestID})
	if err != nil {
		body = []byte("<ErrorResponse/>")
	}
	writeXMLBytes(c, k.status, append([]byte(xml.Header), body...))
}
