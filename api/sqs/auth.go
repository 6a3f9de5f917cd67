package sqs

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/sluicemq/sluice/broker/model"
)

// What the server's authentication (package auth, before any handler) needs
// of the SQS API: the action a request asks for, to check it against the
// key's allow list, and its errors written in the request's own protocol.

// WriteError answers err in r's protocol (AWS JSON or query XML), with the
// code and status of the one error table. The server uses it for the
// authentication errors (model.ErrMissingAuthenticationToken, …), which
// it raises before the request reaches a Handler.
func WriteError(w http.ResponseWriter, r *http.Request, err error) {
	c := &call{ctx: r.Context(), r: r, requestID: model.NewMessageID(), proto: protoQuery}
	c.sw.ResponseWriter = w
	c.w = &c.sw
	if r.Header.Get("X-Amz-Target") != "" && !isForm(r) {
		c.proto = protoJSON
	}
	(&Handler{}).fail(c, err)
}

// Action is the action r asks for, decided as ServeHTTP decides it: the
// operation of its X-Amz-Target (AWS JSON; SQS's or STS's), else the Action
// parameter of its query or, for a POST or PUT, of its form body (the body,
// already read by the caller). "" when it names none.
func Action(r *http.Request, body []byte) string {
	if target := r.Header.Get("X-Amz-Target"); target != "" && !isForm(r) {
		if op, ok := strings.CutPrefix(target, stsTargetPrefix); ok {
			return op
		}
		if op, ok := strings.CutPrefix(target, "AmazonSQS."); ok {
			return op
		}
		return target
	}
	var form url.Values
	if r.Method == http.MethodPost || r.Method == http.MethodPut {
		form, _ = url.ParseQuery(string(body))
	}
	return newParams(urlQuery(r), form).str("Action")
}
