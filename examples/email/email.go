// Command email is the smallest useful producer and consumer: a web handler
// that takes a signup, enqueues the welcome email and answers at once, and a
// worker that sends the email later. The web request never waits on the mail
// server; a slow or failing mail server delays the email, not the page.
//
// Run it against a broker (go run ./cmd/sluice serve):
//
//	go run ./examples/email -broker http://127.0.0.1:9324 -listen 127.0.0.1:8080 -out emails.log
//	curl -d email=ada@example.com http://127.0.0.1:8080/signup
//
// The "sent" emails are lines in -out (standard output by default): the sink
// stands in for a mail server.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/mail"
	"sync"
	"time"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/worker"
)

// Queue is the queue of emails to send.
const Queue = "email-welcome"

// Welcome is the message the signup handler enqueues: one email to send.
type Welcome struct {
	To string `json:"to"`
}

// Signup is the web handler: POST /signup with a form field "email". It
// checks the address, enqueues a Welcome and answers 202 Accepted: the email
// is sent by the worker, after the answer.
type Signup struct {
	Client *client.Client
}

func (h Signup) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "use POST with a form field email", http.StatusMethodNotAllowed)
		return
	}
	addr, err := mail.ParseAddress(r.FormValue("email"))
	if err != nil {
		http.Error(w, "the form field email is not an email address: "+err.Error(), http.StatusBadRequest)
		return
	}
	body, _ := json.Marshal(Welcome{To: addr.Address})
	// The idempotency key is the work itself: a signup retried by the
	// browser enqueues a second message with the same key, and a worker that
	// records keys sends once.
	_, err = h.Client.Send(r.Context(), Queue, client.Message{Body: string(body),
		Attributes: map[string]client.Attribute{"IdempotencyKey": client.String("welcome/" + addr.Address)}})
	if err != nil {
		http.Error(w, "could not queue the welcome email, try again: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusAccepted)
	fmt.Fprintf(w, "welcome email to %s queued\n", addr.Address)
}

// Mailer sends an email. The example's is a sink (LogMailer); a real one
// talks to a mail server.
type Mailer interface {
	Send(ctx context.Context, to, subject, body string) error
}

// LogMailer "sends" an email by writing one line to W. Safe for concurrent
// use.
type LogMailer struct {
	mu sync.Mutex
	W  io.Writer
}

// Send writes "<time> to=<to> subject=<subject>" to W.
func (m *LogMailer) Send(ctx context.Context, to, subject, body string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, err := fmt.Fprintf(m.W, "%s to=%s subject=%q\n", time.Now().UTC().Format(time.RFC3339Nano), to, subject)
	return err
}

// SendWelcome is the worker's handler: it sends the welcome email of each
// message. An error from the mailer nacks the message, and the queue's retry
// policy tries it again later.
func SendWelcome(m Mailer) worker.Handler {
	return worker.JSON(func(ctx context.Context, _ *worker.Message, w Welcome) error {
		return m.Send(ctx, w.To, "Welcome!", "Hello, and welcome.")
	})
}
