package main

// sluice queue create|list|show|delete|purge|pause|resume|set|consumers.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/sluicemq/sluice/api/native/wire"
	sclient "github.com/sluicemq/sluice/client"
)

var queueCommands = map[string]command{
	"create":    {"create a queue (attributes as NAME=VALUE)", queueCreate},
	"list":      {"list the queues with their counts", queueList},
	"show":      {"show a queue's settings and counts", queueShow},
	"delete":    {"delete a queue and its messages", queueDelete},
	"purge":     {"delete every message of a queue", queuePurge},
	"pause":     {"stop a queue's deliveries (sends go on)", queuePause},
	"resume":    {"resume a paused queue's deliveries", queueResume},
	"set":       {"change a queue's attributes (NAME=VALUE)", queueSet},
	"consumers": {"list the consumer streams open on a queue", queueConsumers},
}

func init() {
	register("queue", command{"create, list, show, change and delete queues; list their consumers", func(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
		return group(ctx, "queue", queueCommands, args, env, stdout, stderr)
	}})
}

// queueJSON is a queue as --json prints it.
type queueJSON struct {
	Name            string            `json:"name"`
	ARN             string            `json:"arn,omitempty"`
	Fifo            bool              `json:"fifo"`
	Paused          bool              `json:"paused"`
	DeadLetterQueue string            `json:"deadLetterQueue,omitempty"`
	CreatedAt       *time.Time        `json:"createdAt,omitempty"`
	ModifiedAt      *time.Time        `json:"modifiedAt,omitempty"`
	Attributes      map[string]string `json:"attributes,omitempty"`
	Tags            map[string]string `json:"tags,omitempty"`
	Stats           statsJSON         `json:"stats"`
}

// statsJSON is a queue's counts as --json prints them.
type statsJSON struct {
	Visible          int64            `json:"visible"`
	InFlight         int64            `json:"inFlight"`
	Delayed          int64            `json:"delayed"`
	Depth            int64            `json:"depth"`
	OldestAgeSeconds int64            `json:"oldestAgeSeconds"`
	DeadLetters      *int64           `json:"deadLetters"`
	Refused          map[string]int64 `json:"refused,omitempty"`
}

func toStatsJSON(s sclient.Stats) statsJSON {
	return statsJSON{Visible: s.Visible, InFlight: s.InFlight, Delayed: s.Delayed, Depth: s.Depth,
		OldestAgeSeconds: int64(s.OldestAge / time.Second), DeadLetters: s.DeadLetters, Refused: s.Refused}
}

func toQueueJSON(q sclient.Queue) queueJSON {
	return queueJSON{Name: q.Name, ARN: q.ARN, Fifo: q.Fifo, Paused: q.Attributes["Paused"] == "true",
		DeadLetterQueue: q.DeadLetterQueue, CreatedAt: &q.CreatedAt, ModifiedAt: &q.ModifiedAt,
		Attributes: q.Attributes, Tags: q.Tags, Stats: toStatsJSON(q.Stats)}
}

// deadText is a dead-letter count for a table: "-" when the queue has no
// dead-letter queue.
func deadText(n *int64) string {
	if n == nil {
		return "-"
	}
	return strconv.FormatInt(*n, 10)
}

// settingFlags are the flags create and set share: shorthands for the
// attributes that are awkward to write by hand.
type settingFlags struct {
	dlq         string
	maxReceives int
	// maxReceivesGiven: --max-receives was on the command line (its default
	// goes with --dlq only).
	maxReceivesGiven bool
	visibility       time.Duration
	retention        time.Duration
	ttl              time.Duration
	// completed is --completed-retention as given (nil: not given).
	completed *time.Duration
	maxDepth  int64
	// maxInFlight and rate are --max-in-flight and
	// --max-receives-per-second as given (nil: not given); the broker
	// checks them.
	maxInFlight, rate *string
	// archive is --archive-expired, applied when given (=false turns it off).
	archive bool
}

func (f *settingFlags) add(c *cli) {
	c.fs.StringVar(&f.dlq, "dlq", "", "the dead-letter queue (it must exist): sets RedrivePolicy")
	c.fs.IntVar(&f.maxReceives, "max-receives", 5, "receives before a message becomes a dead letter (RedrivePolicy's maxReceiveCount): with --dlq, or alone on queue set to change it")
	c.fs.DurationVar(&f.visibility, "visibility", 0, "VisibilityTimeout, in whole seconds (30s, 5m)")
	c.fs.DurationVar(&f.retention, "retention", 0, "MessageRetentionPeriod, in whole seconds (96h)")
	c.fs.DurationVar(&f.ttl, "ttl", 0, "MessageTimeToLive: the time to live of the messages sent without their own, in whole seconds (1h)")
	c.fs.Func("completed-retention", "CompletedRetentionSeconds: keep a record of each deleted message (its status `D`, with its ack's result) this long, in whole seconds (1h; 0: none)", func(v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d%time.Second != 0 {
			return errors.New("give a duration in whole seconds, such as 1h or 90s")
		}
		f.completed = &d
		return nil
	})
	c.fs.Int64Var(&f.maxDepth, "max-depth", -1, "MaxDepth: sends past this depth are refused (0: no limit)")
	c.fs.BoolVar(&f.archive, "archive-expired", false, "ArchiveExpired: write the messages whose retention ends to the broker's archive before removing them (--archive-expired=false turns it off)")
	c.fs.Func("max-in-flight", "MaxInFlight: at most `N` messages in flight; receives past it wait (0: no limit)", func(v string) error {
		f.maxInFlight = &v
		return nil
	})
	c.fs.Func("max-receives-per-second", "MaxReceivesPerSecond: at most `R` messages handed out per second, e.g. 0.5 or 20 (0: no limit)", func(v string) error {
		f.rate = &v
		return nil
	})
}

// apply adds the flags' attributes to attrs; it reads the dead-letter
// queue's ARN from the broker. queue is the queue being changed ("" when it
// is being created): --max-receives alone changes its RedrivePolicy's
// maxReceiveCount.
func (f *settingFlags) apply(c *cli, queue string, attrs map[string]string) error {
	c.fs.Visit(func(fl *flag.Flag) {
		f.maxReceivesGiven = f.maxReceivesGiven || fl.Name == "max-receives"
		if fl.Name == "archive-expired" {
			attrs["ArchiveExpired"] = strconv.FormatBool(f.archive)
		}
	})
	if f.maxReceivesGiven && f.dlq == "" {
		if queue == "" {
			return errUsage("--max-receives needs --dlq: it is how many receives a message gets before it moves to that dead-letter queue (e.g. --dlq NAME-dlq --max-receives %d)", f.maxReceives)
		}
		q, err := c.c.GetQueue(c.ctx, queue)
		if err != nil {
			return err
		}
		var rp map[string]any
		if err := json.Unmarshal([]byte(q.Attributes["RedrivePolicy"]), &rp); err != nil || rp["deadLetterTargetArn"] == nil {
			return errUsage("%s has no dead-letter queue, so --max-receives has nothing to change: give one with --dlq NAME", queue)
		}
		rp["maxReceiveCount"] = f.maxReceives
		b, _ := json.Marshal(rp)
		attrs["RedrivePolicy"] = string(b)
	}
	if f.dlq != "" {
		q, err := c.c.GetQueue(c.ctx, f.dlq)
		if err != nil {
			return fmt.Errorf("dead-letter queue %s: %w", f.dlq, err)
		}
		receives := f.maxReceives
		if !f.maxReceivesGiven && queue != "" {
			// queue set --dlq alone keeps the queue's maxReceiveCount.
			if cur, err := c.c.GetQueue(c.ctx, queue); err == nil {
				var rp struct {
					MaxReceiveCount json.Number `json:"maxReceiveCount"`
				}
				if json.Unmarshal([]byte(cur.Attributes["RedrivePolicy"]), &rp) == nil {
					if n, err := rp.MaxReceiveCount.Int64(); err == nil && n > 0 {
						receives = int(n)
					}
				}
			}
		}
		b, _ := json.Marshal(map[string]any{"deadLetterTargetArn": q.ARN, "maxReceiveCount": receives})
		attrs["RedrivePolicy"] = string(b)
	}
	if f.visibility > 0 {
		attrs["VisibilityTimeout"] = strconv.Itoa(int(f.visibility / time.Second))
	}
	if f.retention > 0 {
		attrs["MessageRetentionPeriod"] = strconv.Itoa(int(f.retention / time.Second))
	}
	if f.ttl > 0 {
		attrs["MessageTimeToLive"] = strconv.Itoa(int(f.ttl / time.Second))
	}
	if f.completed != nil {
		attrs["CompletedRetentionSeconds"] = strconv.Itoa(int(*f.completed / time.Second))
	}
	if f.maxDepth >= 0 {
		attrs["MaxDepth"] = strconv.FormatInt(f.maxDepth, 10)
	}
	// 0 removes a limit, as with --max-depth: the attributes themselves
	// take "" for that.
	for name, v := range map[string]*string{"MaxInFlight": f.maxInFlight, "MaxReceivesPerSecond": f.rate} {
		if v != nil {
			attrs[name] = strings.TrimSpace(*v)
			if attrs[name] == "0" {
				attrs[name] = ""
			}
		}
	}
	return nil
}

func queueCreate(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	c := newCLI(ctx, cmdSpec{name: "queue create", args: "NAME [ATTRIBUTE=VALUE ...]",
		summary: "Create a queue. Attributes are SQS's (VisibilityTimeout=30) and Sluice's (MaxDepth=1000,\nRetryPolicy=...); docs/api.md lists them. Creating an existing queue with the same\nattributes answers it unchanged.",
		examples: []string{
			"sluice queue create orders-dlq",
			"sluice queue create orders --dlq orders-dlq --max-receives 3 --visibility 1m",
			"sluice queue create events.fifo --fifo ContentBasedDeduplication=true",
			`sluice queue create jobs 'RetryPolicy={"baseSeconds":2,"maxSeconds":300,"jitter":"full"}' --tag team=shop`,
			`sluice queue create payments --dlq payments-dlq --max-receives 4 'RetryPolicy={"delays":[10,60,300]}'`,
		}}, env, stdout, stderr)
	var sf settingFlags
	sf.add(c)
	fifo := c.fs.Bool("fifo", false, "a FIFO queue (its name ends in .fifo)")
	tags := pairsFlag{}
	c.fs.Var(tags, "tag", "a tag NAME=VALUE (repeat it)")
	pos, code, ok := c.parse(args, 1, -1)
	if !ok {
		return code
	}
	name := pos[0]
	attrs, err := pairs(pos[1:])
	if err != nil {
		return c.usageErr("%v", err)
	}
	switch {
	case *fifo && !strings.HasSuffix(name, ".fifo"):
		return c.usageErr("a FIFO queue's name ends in .fifo: use %s.fifo", name)
	case *fifo:
		attrs["FifoQueue"] = "true"
	case strings.HasSuffix(name, ".fifo") && attrs["FifoQueue"] == "":
		return c.usageErr("a name ending in .fifo is a FIFO queue's: add --fifo (or drop .fifo for a standard queue)")
	}
	if err := sf.apply(c, "", attrs); err != nil {
		return c.failOrUsage(err)
	}
	var opts []sclient.QueueOption
	if len(tags) > 0 {
		opts = append(opts, sclient.Tags(tags))
	}
	// Creating an existing queue with its own settings answers it unchanged
	// (as SQS does): say so rather than "created".
	_, getErr := c.c.GetQueue(ctx, name)
	existed := getErr == nil
	q, err := c.c.CreateQueue(ctx, name, attrs, opts...)
	if err != nil {
		return c.fail(err)
	}
	if c.json {
		c.printJSON(toQueueJSON(q))
		return 0
	}
	if existed {
		fmt.Fprintf(stdout, "queue %s exists with these settings, unchanged (%s)\n", q.Name, q.ARN)
		return 0
	}
	fmt.Fprintf(stdout, "created queue %s (%s)\n", q.Name, q.ARN)
	return 0
}

// allQueues pages through the queue list.
func (c *cli) allQueues(prefix string) ([]sclient.QueueSummary, error) {
	var out []sclient.QueueSummary
	after := ""
	for {
		opts := []sclient.ListOption{sclient.PageSize(1000)}
		if prefix != "" {
			opts = append(opts, sclient.Prefix(prefix))
		}
		if after != "" {
			opts = append(opts, sclient.After(after))
		}
		page, err := c.c.ListQueues(c.ctx, opts...)
		if err != nil {
			return nil, err
		}
		out = append(out, page.Queues...)
		if page.Next == "" {
			return out, nil
		}
		after = page.Next
	}
}

func queueList(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	c := newCLI(ctx, cmdSpec{name: "queue list", args: "",
		summary: "List the queues in name order with their counts: visible, in flight, delayed, dead\nletters (- when the queue has no dead-letter queue) and the oldest message's age.",
		examples: []string{
			"sluice queue list",
			"sluice queue list --prefix orders",
			"sluice queue list --names   # one name a line",
			"sluice queue list --json | jq -r '.[] | select(.stats.deadLetters > 0) | .name'",
		}}, env, stdout, stderr)
	prefix := c.fs.String("prefix", "", "only the queues whose name starts with this")
	names := c.fs.Bool("names", false, "print only the names, one a line")
	if _, code, ok := c.parse(args, 0, 0); !ok {
		return code
	}
	qs, err := c.allQueues(*prefix)
	if err != nil {
		return c.fail(err)
	}
	switch {
	case *names:
		for _, q := range qs {
			fmt.Fprintln(stdout, q.Name)
		}
	case c.json:
		out := make([]queueJSON, len(qs))
		for i, q := range qs {
			out[i] = queueJSON{Name: q.Name, Fifo: q.Fifo, Paused: q.Paused, Stats: toStatsJSON(q.Stats)}
		}
		c.printJSON(out)
	default:
		if len(qs) == 0 {
			fmt.Fprintln(stderr, "no queues; create one with `sluice queue create NAME`")
			return 0
		}
		rows := make([][]string, len(qs))
		for i, q := range qs {
			typ, state := "standard", "active"
			if q.Fifo {
				typ = "fifo"
			}
			if q.Paused {
				state = "paused"
			}
			s := q.Stats
			rows[i] = []string{q.Name, typ, state, itoa(s.Visible), itoa(s.InFlight), itoa(s.Delayed), deadText(s.DeadLetters), oldestText(s.Depth, s.OldestAge)}
		}
		table(stdout, []string{"NAME", "TYPE", "STATE", "VISIBLE", "IN-FLIGHT", "DELAYED", "DEAD", "OLDEST"}, rows)
	}
	return 0
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func queueShow(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	c := newCLI(ctx, cmdSpec{name: "queue show", args: "NAME",
		summary:  "Show a queue: its ARN, type, dead-letter queue, times, every attribute, tags and counts.",
		examples: []string{"sluice queue show orders", "sluice queue show orders --json | jq .attributes"}}, env, stdout, stderr)
	pos, code, ok := c.parse(args, 1, 1)
	if !ok {
		return code
	}
	q, err := c.c.GetQueue(ctx, pos[0])
	if err != nil {
		return c.fail(err)
	}
	if c.json {
		c.printJSON(toQueueJSON(q))
		return 0
	}
	printQueue(stdout, q)
	return 0
}

func printQueue(w io.Writer, q sclient.Queue) {
	typ := "standard"
	if q.Fifo {
		typ = "fifo"
	}
	dlq := q.DeadLetterQueue
	if dlq == "" {
		dlq = "-"
	}
	s := q.Stats
	rows := [][]string{
		{"arn", q.ARN}, {"type", typ}, {"dead-letter queue", dlq},
		{"created", q.CreatedAt.UTC().Format(time.RFC3339)}, {"modified", q.ModifiedAt.UTC().Format(time.RFC3339)},
		{"visible", itoa(s.Visible)}, {"in flight", itoa(s.InFlight)}, {"delayed", itoa(s.Delayed)},
		{"dead letters", deadText(s.DeadLetters)}, {"oldest message", oldestText(s.Depth, s.OldestAge)},
	}
	for _, k := range sortedKeys(s.Refused) {
		rows = append(rows, []string{"refused " + k, itoa(s.Refused[k])})
	}
	for _, k := range sortedKeys(q.Attributes) {
		rows = append(rows, []string{k, q.Attributes[k]})
	}
	for _, k := range sortedKeys(q.Tags) {
		rows = append(rows, []string{"tag " + k, q.Tags[k]})
	}
	table(w, []string{"QUEUE", q.Name}, rows)
}

// simple is a command that takes one queue name and does one call.
func simple(name, summary string, examples []string, do func(c *cli, queue string) (string, *sclient.Queue, error)) func(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	return func(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
		c := newCLI(ctx, cmdSpec{name: name, args: "NAME", summary: summary, examples: examples}, env, stdout, stderr)
		pos, code, ok := c.parse(args, 1, 1)
		if !ok {
			return code
		}
		msg, q, err := do(c, pos[0])
		if err != nil {
			return c.fail(err)
		}
		if c.json {
			if q != nil {
				c.printJSON(toQueueJSON(*q))
			} else {
				c.printJSON(map[string]any{"queue": pos[0], "ok": true})
			}
			return 0
		}
		fmt.Fprintln(stdout, msg)
		return 0
	}
}

var (
	queueDelete = simple("queue delete", "Delete a queue and every message in it (its dead-letter queue stays).",
		[]string{"sluice queue delete orders"},
		func(c *cli, q string) (string, *sclient.Queue, error) {
			return "deleted queue " + q, nil, c.c.DeleteQueue(c.ctx, q)
		})
	queuePurge = simple("queue purge", "Delete every message of a queue: visible, delayed and in flight. Its dead letters\nstay (see sluice dlq delete).",
		[]string{"sluice queue purge orders"},
		func(c *cli, q string) (string, *sclient.Queue, error) {
			return "purged queue " + q, nil, c.c.PurgeQueue(c.ctx, q)
		})
	queuePause = simple("queue pause", "Stop a queue's deliveries: receives get nothing, while sends, acks, browsing and\nreplays go on.",
		[]string{"sluice queue pause orders"},
		func(c *cli, q string) (string, *sclient.Queue, error) {
			qq, err := c.c.Pause(c.ctx, q)
			return "paused queue " + q + " (sluice queue resume " + q + " resumes it)", &qq, err
		})
	queueResume = simple("queue resume", "Resume a paused queue's deliveries.",
		[]string{"sluice queue resume orders"},
		func(c *cli, q string) (string, *sclient.Queue, error) {
			qq, err := c.c.Resume(c.ctx, q)
			return "resumed queue " + q, &qq, err
		})
)

func queueSet(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	c := newCLI(ctx, cmdSpec{name: "queue set", args: "NAME ATTRIBUTE=VALUE ...",
		summary: "Change a queue's attributes (only the ones given). An empty value (RedrivePolicy=)\nremoves an optional one.",
		examples: []string{
			"sluice queue set orders VisibilityTimeout=60 MaxDepth=100000",
			"sluice queue set orders --dlq orders-dlq --max-receives 5",
			"sluice queue set orders --max-in-flight 50 --max-receives-per-second 20",
			"sluice queue set orders RedrivePolicy=   # no dead-letter queue any more",
		}}, env, stdout, stderr)
	var sf settingFlags
	sf.add(c)
	pos, code, ok := c.parse(args, 1, -1)
	if !ok {
		return code
	}
	attrs, err := pairs(pos[1:])
	if err != nil {
		return c.usageErr("%v", err)
	}
	if err := sf.apply(c, pos[0], attrs); err != nil {
		return c.failOrUsage(err)
	}
	if len(attrs) == 0 {
		return c.usageErr("give at least one ATTRIBUTE=VALUE or setting flag")
	}
	q, err := c.c.UpdateQueue(ctx, pos[0], attrs)
	if err != nil {
		return c.fail(err)
	}
	if c.json {
		c.printJSON(toQueueJSON(q))
		return 0
	}
	for _, k := range sortedKeys(attrs) {
		fmt.Fprintf(stdout, "%s: %s = %s\n", q.Name, k, q.Attributes[k])
	}
	return 0
}

// noConsumers is what queue consumers prints for a queue without one.
func noConsumers(queue string) string {
	return "no consumer is connected to " + queue + ": consumers are listed while they hold a stream open on it " +
		"(the stream API on the broker's port: a Go program opens one with package worker, or with client/stream's Dial and Consume); " +
		"receives over HTTP or SQS hold none"
}

func queueConsumers(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	c := newCLI(ctx, cmdSpec{name: "queue consumers", args: "NAME",
		summary: "List the consumer streams open on a queue, in the order they opened: the client's name\n" +
			"and address, its credit (how many unsettled messages it may hold), the messages it holds,\n" +
			"its acks per second over the last ten seconds and in all, when it connected, how long ago\n" +
			"it last got or settled a message, and the broker that serves it. Consumers that receive\n" +
			"over HTTP or SQS hold no stream and are not listed. With several brokers on one\n" +
			"PostgreSQL store, every broker lists them all (the others' as of their latest record,\n" +
			"every 5 s).",
		examples: []string{
			"sluice queue consumers orders",
			"sluice queue consumers orders --json | jq '[.[].held] | add'",
		}}, env, stdout, stderr)
	pos, code, ok := c.parse(args, 1, 1)
	if !ok {
		return code
	}
	cs, err := c.c.Consumers(ctx, pos[0])
	if err != nil {
		return c.fail(err)
	}
	if c.json {
		out := make([]wire.Consumer, len(cs)) // the native API's names
		for i, x := range cs {
			out[i] = wire.Consumer{ID: x.ID, Broker: x.Broker, ClientName: x.ClientName, RemoteAddress: x.RemoteAddress,
				Credit: x.Credit, Held: x.Held, Acked: x.Acked, AckedPerSecond: x.AckedPerSecond,
				LeaseSeconds: int64(x.Lease / time.Second), MaxHoldSeconds: int64(x.MaxHold / time.Second),
				ConnectedAt: x.ConnectedAt.UTC(), LastActiveAt: x.LastActiveAt.UTC()}
		}
		c.printJSON(out)
		return 0
	}
	if len(cs) == 0 {
		fmt.Fprintln(stderr, noConsumers(pos[0]))
		return 0
	}
	now := time.Now()
	rows := make([][]string, len(cs))
	for i, x := range cs {
		name := x.ClientName
		if name == "" {
			name = "-"
		}
		rows[i] = []string{x.ID, cell(name), x.RemoteAddress, strconv.Itoa(x.Credit), strconv.Itoa(x.Held),
			strconv.FormatFloat(x.AckedPerSecond, 'f', 1, 64), itoa(x.Acked),
			x.ConnectedAt.UTC().Format(time.RFC3339), age(now.Sub(x.LastActiveAt)) + " ago", x.Broker}
	}
	table(stdout, []string{"ID", "CLIENT", "ADDRESS", "CREDIT", "HELD", "ACKS/S", "ACKED", "CONNECTED", "LAST-ACTIVE", "BROKER"}, rows)
	return 0
}
