package main

// sluice send, recv and peek.

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	sclient "github.com/sluicemq/sluice/client"
)

// sendBatchSize is how many messages one request of a bulk send carries:
// the most a batch takes.
const sendBatchSize = 10

// maxLine bounds one line of stdin, --lines or an export: past the largest
// message (1 MiB), with room for an export line's JSON around it.
const maxLine = 4 << 20

func init() {
	register("send", command{"send messages: a body, a file, lines of stdin, or an export", sendCmd})
	register("recv", command{"receive messages (and delete them with --ack)", recvCmd})
	register("peek", command{"browse a queue's messages without receiving them", peekCmd})
}

func sendCmd(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	c := newCLI(ctx, cmdSpec{name: "send", args: "QUEUE [BODY]",
		summary: "Send a message to QUEUE: BODY, or the whole of --file. Without either, each line of\nstdin (or of --lines FILE) is a message, sent in batches of 10. --from-export FILE sends\nthe messages of a `sluice dlq export` back, with their attributes.",
		examples: []string{
			`sluice send orders '{"order": 41}' --attr kind=new-order --priority 10`,
			"sluice send orders --file order.json",
			"seq 1 10000 | sluice send orders",
			"sluice send events.fifo hello --group g1 --dedup d1",
			"sluice send orders --from-export orders-dead.jsonl",
		}}, env, stdout, stderr)
	file := c.fs.String("file", "", "send the file's whole content as one message")
	lines := c.fs.String("lines", "", "send each line of this file as a message ('-': stdin)")
	export := c.fs.String("from-export", "", "send the messages of an export file (JSON lines of sluice dlq export)")
	attrs := pairsFlag{}
	c.fs.Var(attrs, "attr", "a String attribute NAME=VALUE (repeat it)")
	var m sclient.Message
	c.fs.IntVar(&m.Priority, "priority", 0, "priority, -100..100 (standard queues)")
	c.fs.StringVar(&m.GroupID, "group", "", "message group (FIFO queues: required)")
	c.fs.StringVar(&m.DedupID, "dedup", "", "deduplication id (FIFO queues without content-based deduplication; on a standard queue an idempotency key); of lines: ID-LINENUMBER each")
	c.fs.StringVar(&m.CorrelationID, "correlation-id", "", "correlation id, kept through the dead-letter queue")
	c.fs.DurationVar(&m.Delay, "delay", 0, "deliver this much later (whole seconds)")
	c.fs.DurationVar(&m.TTL, "ttl", 0, "time to live: never deliver it after this long from the send (whole seconds; the queue's MessageTimeToLive without it)")
	pos, code, ok := c.parse(args, 1, 2)
	if !ok {
		return code
	}
	queue := pos[0]
	sources := 0
	for _, given := range []bool{len(pos) == 2, *file != "", *lines != "", *export != ""} {
		if given {
			sources++
		}
	}
	if sources > 1 {
		return c.usageErr("give one of BODY, --file, --lines and --from-export")
	}
	for k, v := range attrs {
		if m.Attributes == nil {
			m.Attributes = map[string]sclient.Attribute{}
		}
		m.Attributes[k] = sclient.String(v)
	}
	one := func(body string) int {
		m.Body = body
		res, err := c.c.Send(ctx, queue, m)
		if err != nil {
			return c.fail(err)
		}
		if c.json {
			c.printJSON(map[string]string{"id": res.ID, "sequenceNumber": res.SequenceNumber})
		} else {
			fmt.Fprintln(stdout, res.ID)
		}
		return 0
	}
	switch {
	case len(pos) == 2:
		return one(pos[1])
	case *file != "":
		b, err := os.ReadFile(*file)
		if err != nil {
			return c.usageErr("--file: %v", err)
		}
		return one(string(b))
	case *export != "":
		f, err := openExport(*export)
		if err != nil {
			return c.usageErr("--from-export: %v", err)
		}
		defer f.Close()
		return c.sendAll(queue, f, countLines(*export), func(line string, n int) (sclient.Message, error) { return fromExport(line, n) })
	}
	var in io.Reader = os.Stdin
	total := int64(0)
	if *lines != "" && *lines != "-" {
		total = countLines(*lines)
		f, err := os.Open(*lines)
		if err != nil {
			return c.usageErr("--lines: %v", err)
		}
		defer f.Close()
		in = f
	} else if isTerminal(stderr) && isTerminal(os.Stdin) {
		fmt.Fprintln(stderr, "reading messages from stdin, one a line (Ctrl-D ends)")
	}
	return c.sendAll(queue, in, total, func(line string, n int) (sclient.Message, error) {
		mm := m
		mm.Body = line
		if m.DedupID != "" {
			// One id for every line would store the first line only (a FIFO
			// queue drops the rest as duplicates): each line gets its own,
			// the same on a second run of the same input.
			mm.DedupID = fmt.Sprintf("%s-%d", m.DedupID, n)
		}
		return mm, nil
	})
}

// sendAll sends a message for each non-empty line of r (total of them, 0
// when unknown), in batches, with
// progress and a summary on stderr. A failed message is reported with its
// line number, and the rest go on; the exit code is then 1.
func (c *cli) sendAll(queue string, r io.Reader, total int64, msg func(line string, n int) (sclient.Message, error)) int {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	p := c.progress("sent", "message", total)
	var batch []sclient.Message
	var lineNos []int
	sent, failed, n := int64(0), 0, 0
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		res, err := c.c.SendBatch(c.ctx, queue, batch)
		if err != nil {
			// The batch may or may not be stored (the request failed, its
			// answer is unknown): say from which line to resume.
			return fmt.Errorf("%w\n  %s sent before line %d; the batch of lines %d..%d may or may not have been stored and no later line was sent: check the queue (sluice peek %s), then send again from line %d (e.g. tail -n +%d FILE)",
				err, plural(sent, "message"), lineNos[0], lineNos[0], lineNos[len(lineNos)-1], queue, lineNos[0], lineNos[0])
		}
		for i, r := range res {
			if r.Err != nil {
				failed++
				fmt.Fprintf(c.stderr, "line %d: not sent: %s\n", lineNos[i], describe(r.Err))
				continue
			}
			sent++
			if c.json {
				c.printJSON(map[string]any{"line": lineNos[i], "id": r.ID})
			}
		}
		batch, lineNos = batch[:0], lineNos[:0]
		p.set(sent)
		return nil
	}
	for sc.Scan() {
		n++
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			continue
		}
		m, err := msg(line, n)
		if err != nil {
			// Reported like a refused message: the lines around it go on
			// (stopping here would drop the batch pending before it).
			failed++
			fmt.Fprintf(c.stderr, "line %d: not sent: %v\n", n, err)
			continue
		}
		batch, lineNos = append(batch, m), append(lineNos, n)
		if len(batch) == sendBatchSize {
			if err := flush(); err != nil {
				p.finish(" to " + queue)
				return c.fail(err)
			}
		}
	}
	if err := sc.Err(); err != nil {
		p.finish(" to " + queue)
		return c.fail(fmt.Errorf("reading line %d: %w", n+1, err))
	}
	if err := flush(); err != nil {
		p.finish(" to " + queue)
		return c.fail(err)
	}
	p.finish(" to " + queue)
	if failed > 0 {
		fmt.Fprintf(c.stderr, "sluice send: %s not sent (above); fix them and send those lines again\n", plural(failed, "message"))
		return 1
	}
	return 0
}

// countLines counts the non-empty lines of a file, for the progress's ETA;
// 0 (no ETA) when it cannot be read.
func countLines(path string) int64 {
	f, err := openExport(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	n := int64(0)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) != "" {
			n++
		}
	}
	return n
}

// openExport opens an export file: plain JSON lines, or gzip-compressed
// ones (a file of the broker's archive, or an export piped to gzip), told
// apart by gzip's magic bytes.
func openExport(path string) (io.ReadCloser, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	br := bufio.NewReader(f)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			f.Close()
			return nil, err
		}
		return struct {
			io.Reader
			io.Closer
		}{zr, f}, nil
	}
	return struct {
		io.Reader
		io.Closer
	}{br, f}, nil
}

// fromExport is the message to send back for one line of an export: its
// body and attributes, and the fields an export keeps (priority, group,
// dedup id, correlation id, trace context) unless the attributes carry them.
func fromExport(line string, n int) (sclient.Message, error) {
	var e messageJSON
	dec := json.NewDecoder(strings.NewReader(line))
	if err := dec.Decode(&e); err != nil {
		return sclient.Message{}, fmt.Errorf("export line %d is not a message of sluice dlq export: %v", n, err)
	}
	if e.Body == "" {
		return sclient.Message{}, fmt.Errorf("export line %d has no body", n)
	}
	m := sclient.Message{Body: e.Body, GroupID: e.GroupID, DedupID: e.DedupID}
	if len(e.Attributes) > 0 {
		m.Attributes = map[string]sclient.Attribute{}
		for k, a := range e.Attributes {
			if strings.HasPrefix(a.Type, "Binary") {
				b, err := base64.StdEncoding.DecodeString(a.Value)
				if err != nil {
					return sclient.Message{}, fmt.Errorf("export line %d: attribute %s is Binary but not base64", n, k)
				}
				m.Attributes[k] = sclient.Attribute{Type: a.Type, Binary: b}
				continue
			}
			m.Attributes[k] = sclient.Attribute{Type: a.Type, Value: a.Value}
		}
	}
	if _, ok := m.Attributes["Sluice.Priority"]; !ok {
		m.Priority = e.Priority
	}
	if _, ok := m.Attributes["Sluice.CorrelationId"]; !ok {
		m.CorrelationID = e.CorrelationID
	}
	if _, ok := m.Attributes["traceparent"]; !ok {
		m.TraceContext = e.TraceContext
	}
	return m, nil
}

// printMessages prints deliveries: a table, or one JSON object a line; with
// none, and no --json, it says empty on stderr instead of a bare header. It
// returns the first error writing stdout (recv --ack then acks nothing: a
// message that was not printed was not handed to the reader).
// whyNoMessage says why a receive from queue got nothing, and what to do:
// a paused queue hands out nothing however many messages wait.
func (c *cli) whyNoMessage(queue string, waited bool) string {
	q, err := c.c.GetQueue(c.ctx, queue)
	if err != nil {
		return "no message in " + queue
	}
	s := q.Stats
	if q.Attributes["Paused"] == "true" {
		return fmt.Sprintf("no message handed out: %s is paused (%s, %d in flight, %d delayed); resume it with sluice queue resume %s",
			queue, plural(s.Visible, "message")+" visible", s.InFlight, s.Delayed, queue)
	}
	var held []string
	if s.InFlight > 0 {
		held = append(held, fmt.Sprintf("%d in flight", s.InFlight))
	}
	if s.Delayed > 0 {
		held = append(held, fmt.Sprintf("%d delayed or backing off", s.Delayed))
	}
	msg := "no message in " + queue
	if len(held) > 0 {
		msg = "no visible message in " + queue + " (" + strings.Join(held, ", ") + ")"
	}
	if !waited {
		msg += "; wait for one with --wait 20s"
	}
	return msg
}

func (c *cli) printMessages(ds []sclient.Delivery, dead bool, empty string) error {
	if len(ds) == 0 && !c.json {
		fmt.Fprintln(c.stderr, empty)
		return nil
	}
	ew := &errWriter{w: c.stdout}
	if c.json {
		for _, d := range ds {
			b, err := json.Marshal(toMessageJSON(d))
			if err != nil {
				return err
			}
			_, _ = ew.Write(append(b, '\n'))
		}
		return ew.err
	}
	now := time.Now()
	rows := make([][]string, len(ds))
	for i, d := range ds {
		switch {
		case dead:
			rows[i] = []string{d.ID, fmt.Sprint(d.ReceiveCount), age(now.Sub(d.CreatedAt)), cell(d.FailureReason), cell(attrsText(d.Attributes)), cell(d.Body)}
		case d.State != "":
			rows[i] = []string{d.ID, d.State, fmt.Sprint(d.ReceiveCount), age(now.Sub(d.CreatedAt)), cell(attrsText(d.Attributes)), cell(d.Body)}
		default:
			rows[i] = []string{d.ID, fmt.Sprint(d.ReceiveCount), age(now.Sub(d.CreatedAt)), cell(attrsText(d.Attributes)), cell(d.Body)}
		}
	}
	switch {
	case dead:
		table(ew, []string{"ID", "RECEIVES", "AGE", "REASON", "ATTRIBUTES", "BODY"}, rows)
	case len(ds) > 0 && ds[0].State != "":
		table(ew, []string{"ID", "STATE", "RECEIVES", "AGE", "ATTRIBUTES", "BODY"}, rows)
	default:
		table(ew, []string{"ID", "RECEIVES", "AGE", "ATTRIBUTES", "BODY"}, rows)
	}
	return ew.err
}

// errWriter keeps the first error of its writes (and refuses the rest).
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

func recvCmd(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	c := newCLI(ctx, cmdSpec{name: "recv", args: "QUEUE",
		summary: "Receive up to --max messages from QUEUE and print them. Without --ack they stay leased\nuntil their visibility timeout ends, then come back; --ack deletes them once printed.",
		examples: []string{
			"sluice recv orders",
			"sluice recv orders --max 100 --ack",
			"sluice recv orders --wait 20s --json | jq -r .body",
		}}, env, stdout, stderr)
	maxN := c.fs.Int("max", 1, "how many messages at most (received 10 a request)")
	wait := c.fs.Duration("wait", 0, "long poll: wait up to this long (at most 20s) for a first message")
	vis := c.fs.Duration("visibility", 0, "lease the messages this long instead of the queue's VisibilityTimeout")
	ack := c.fs.Bool("ack", false, "delete each message once printed")
	pos, code, ok := c.parse(args, 1, 1)
	if !ok {
		return code
	}
	if *maxN < 1 {
		return c.usageErr("--max must be at least 1")
	}
	queue := pos[0]
	var got []sclient.Delivery
	// recvErr is a receive that failed after others succeeded: what was
	// received is leased, so it is still printed (and acked with --ack).
	var recvErr error
	for len(got) < *maxN {
		opts := []sclient.ReceiveOption{sclient.MaxMessages(min(10, *maxN-len(got)))}
		if *wait > 0 && len(got) == 0 {
			opts = append(opts, sclient.WaitTime(*wait))
		}
		if *vis > 0 {
			opts = append(opts, sclient.VisibilityTimeout(*vis))
		}
		ds, err := c.c.Receive(ctx, queue, opts...)
		if err != nil {
			if len(got) == 0 {
				return c.fail(err)
			}
			if !errors.Is(err, context.Canceled) {
				recvErr = err
			}
			break
		}
		if len(ds) == 0 {
			break
		}
		got = append(got, ds...)
	}
	empty := ""
	if len(got) == 0 && !c.json {
		empty = c.whyNoMessage(queue, *wait > 0)
	}
	if err := c.printMessages(got, false, empty); err != nil {
		if *ack && len(got) > 0 {
			fmt.Fprintf(stderr, "sluice recv: %s received but not acked: printing them failed (%v); they come back after their visibility timeout\n", plural(len(got), "message"), err)
		} else {
			fmt.Fprintf(stderr, "sluice recv: printing the messages failed: %v\n", err)
		}
		return 1
	}
	if *ack && len(got) > 0 {
		receipts := make([]string, 0, len(got))
		for _, d := range got {
			receipts = append(receipts, d.Receipt)
		}
		acked := 0
		for i := 0; i < len(receipts); i += 10 {
			errs, err := c.c.AckBatch(context.WithoutCancel(ctx), queue, receipts[i:min(i+10, len(receipts))])
			if err != nil {
				return c.fail(fmt.Errorf("ack: %w (the messages not acked come back after their visibility timeout)", err))
			}
			for j, e := range errs {
				if e != nil {
					fmt.Fprintf(stderr, "ack %s: %s\n", got[i+j].ID, describe(e))
					continue
				}
				acked++
			}
		}
		fmt.Fprintf(stderr, "received %d, acked %d\n", len(got), acked)
		if acked != len(got) {
			return 1
		}
	}
	if recvErr != nil {
		fmt.Fprintf(stderr, "sluice recv: %s received and printed, then a receive failed:\n", plural(len(got), "message"))
		return c.fail(recvErr)
	}
	return 0
}

func peekCmd(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	c := newCLI(ctx, cmdSpec{name: "peek", args: "QUEUE",
		summary: "Browse QUEUE's messages without receiving them: nothing is leased, no receive count\nchanges. Each shows its state: visible, inflight or delayed.",
		examples: []string{
			"sluice peek orders",
			"sluice peek orders --max 1000 --newest",
			"sluice peek orders --attr kind=new-order --json",
		}}, env, stdout, stderr)
	maxN := c.fs.Int("max", 20, "how many messages at most")
	newest := c.fs.Bool("newest", false, "newest first (default: oldest first)")
	attr := c.fs.String("attr", "", "only messages with this attribute: NAME or NAME=VALUE")
	pos, code, ok := c.parse(args, 1, 1)
	if !ok {
		return code
	}
	if *maxN < 1 {
		return c.usageErr("--max must be at least 1")
	}
	var opts []sclient.BrowseOption
	if *newest {
		opts = append(opts, sclient.InOrder(sclient.Newest))
	}
	if k, v, hasV := strings.Cut(*attr, "="); hasV {
		opts = append(opts, sclient.WithAttributeValue(k, v))
	} else if *attr != "" {
		opts = append(opts, sclient.WithAttribute(k))
	}
	ds, err := c.browseAll(*maxN, nil, func(o ...sclient.BrowseOption) (sclient.Page, error) {
		return c.c.Browse(ctx, pos[0], append(opts, o...)...)
	})
	if err != nil {
		return c.fail(err)
	}
	if err := c.printMessages(ds, false, "no message in "+pos[0]); err != nil {
		return c.fail(fmt.Errorf("printing the messages: %w", err))
	}
	return 0
}

// browseAll pages through a browse until it has maxN messages (maxN < 0:
// all) or the pages end; each page's count goes to onPage.
func (c *cli) browseAll(maxN int, onPage func(int), page func(...sclient.BrowseOption) (sclient.Page, error)) ([]sclient.Delivery, error) {
	var out []sclient.Delivery
	cursor := ""
	for maxN < 0 || len(out) < maxN {
		limit := 100
		if maxN >= 0 {
			limit = min(100, maxN-len(out))
		}
		opts := []sclient.BrowseOption{sclient.Limit(limit)}
		if cursor != "" {
			opts = append(opts, sclient.Cursor(cursor))
		}
		p, err := page(opts...)
		if err != nil {
			return out, err
		}
		out = append(out, p.Messages...)
		if onPage != nil {
			onPage(len(out))
		}
		if p.Next == "" {
			break
		}
		cursor = p.Next
	}
	return out, nil
}
