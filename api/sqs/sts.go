package sqs

import (
	"strings"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/model"
)

// STS GetCallerIdentity on the SQS endpoint. Tools that check their
// credentials before they start (and other SQS emulators' users) call it on
// the same endpoint; it answers the broker's account, whatever the
// credentials (Sluice verifies no signature).
//
// STS speaks the query protocol (Action=GetCallerIdentity&Version=2011-06-15,
// an XML GetCallerIdentityResponse), which is what aws-sdk-go-v2, botocore
// and the aws CLI send. Some newer clients send AWS JSON instead
// (X-Amz-Target: AWSSecurityTokenServiceV20110615.GetCallerIdentity,
// application/x-amz-json-1.1 or 1.0); that form is answered in JSON.

const (
	stsGetCallerIdentity = "GetCallerIdentity"
	stsTargetPrefix      = "AWSSecurityTokenServiceV20110615."
	// stsNamespace is the XML namespace of STS replies.
	stsNamespace = "https://sts.amazonaws.com/doc/2011-06-15/"
)

// callerIdentity is GetCallerIdentity's result: the account's root user.
type callerIdentity struct {
	Arn     string `json:"Arn" xml:"Arn"`
	UserId  string `json:"UserId" xml:"UserId"`
	Account string `json:"Account" xml:"Account"`
}

func (h *Handler) callerIdentity(c *call) callerIdentity {
	if who := broker.CallerFrom(c.ctx); who.Authenticated {
		return callerIdentity{Arn: "arn:aws:iam::" + who.Account + ":user/" + who.AccessKey, UserId: who.AccessKey, Account: who.Account}
	}
	a := h.broker.AccountID()
	return callerIdentity{Arn: "arn:aws:iam::" + a + ":root", UserId: a, Account: a}
}

// serveSTSQuery answers Action=GetCallerIdentity in STS's XML.
func (h *Handler) serveSTSQuery(c *call) {
	out := h.callerIdentity(c)
	writeXMLIn(c, stsNamespace, &out)
}

// serveSTSJSON answers an STS operation in AWS JSON (only GetCallerIdentity
// is served).
func (h *Handler) serveSTSJSON(c *call, op string) {
	c.action = op
	if op != stsGetCallerIdentity {
		h.fail(c, model.Errorf(errUnknownOperation, "The STS operation %s is not served here; only GetCallerIdentity is.", op))
		return
	}
	if _, err := h.readBody(c); err != nil { // the input has no members
		h.fail(c, err)
		return
	}
	ct := "application/x-amz-json-1.1"
	if req, _, _ := strings.Cut(c.r.Header.Get("Content-Type"), ";"); strings.TrimSpace(req) == "application/x-amz-json-1.0" {
		ct = "application/x-amz-json-1.0"
	}
	out := h.callerIdentity(c)
	writeJSONAs(c, ct, &out)
}
