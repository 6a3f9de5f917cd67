package main

// sluice dlq list|show|replay|delete|export: a queue's dead letters (the
// messages its RedrivePolicy moved to its dead-letter queue). Every command
// takes the source queue, as the native API does.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	sclient "github.com/sluicemq/sluice/client"
)

var dlqCommands = map[string]command{
	"list":   {"list a queue's dead letters with their failure reasons", dlqList},
	"show":   {"show one dead letter in full", dlqShow},
	"replay": {"move dead letters back into the queue", dlqReplay},
	"delete": {"delete dead letters by id (or --all)", dlqDelete},
	"export": {"write dead letters as JSON lines, to archive them", dlqExport},
}

func init() {
	register("dlq", command{"list, replay, delete and export a queue's dead letters", func(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
		return group(ctx, "dlq", dlqCommands, args, env, stdout, stderr)
	}})
}

// replayPoll is how often dlq replay reads its task's progress;
// replayMissingPolls is how many polls in a row may miss the task before
// dlq replay stops following it (5 s).
const (
	replayPoll         = 100 * time.Millisecond
	replayMissingPolls = 50
)

func dlqList(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	c := newCLI(ctx, cmdSpec{name: "dlq list", args: "QUEUE",
		summary: "List QUEUE's dead letters, oldest first: id, receives, age, failure reason, attributes\nand body.",
		examples: []string{
			"sluice dlq list orders",
			"sluice dlq list orders --reason timeout --max 1000",
			"sluice dlq list orders --json | jq -r .id",
		}}, env, stdout, stderr)
	maxN := c.fs.Int("max", 100, "how many at most")
	reason := c.fs.String("reason", "", "only those whose failure reason contains this")
	pos, code, ok := c.parse(args, 1, 1)
	if !ok {
		return code
	}
	if *maxN < 1 {
		return c.usageErr("--max must be at least 1")
	}
	ds, err := c.deadLetters(pos[0], *maxN, *reason, nil)
	if err != nil {
		return c.fail(err)
	}
	if err := c.printMessages(ds, true, "no dead letters of "+pos[0]); err != nil {
		return c.fail(fmt.Errorf("printing the dead letters: %w", err))
	}
	return 0
}

// deadLetters pages through queue's dead letters.
func (c *cli) deadLetters(queue string, maxN int, reason string, onPage func(int)) ([]sclient.Delivery, error) {
	var base []sclient.BrowseOption
	if reason != "" {
		base = append(base, sclient.WithReason(reason))
	}
	return c.browseAll(maxN, onPage, func(o ...sclient.BrowseOption) (sclient.Page, error) {
		return c.c.DeadLetters(c.ctx, queue, append(base, o...)...)
	})
}

func dlqShow(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	c := newCLI(ctx, cmdSpec{name: "dlq show", args: "QUEUE ID",
		summary:  "Show one of QUEUE's dead letters in full: its body, attributes, failure reason, counts\nand times.",
		examples: []string{"sluice dlq show orders 5f0c7e53-4d0e-4b8e-9a43-0e8f2a2b3c1d"}}, env, stdout, stderr)
	pos, code, ok := c.parse(args, 2, 2)
	if !ok {
		return code
	}
	ds, err := c.deadLetters(pos[0], -1, "", nil)
	if err != nil {
		return c.fail(err)
	}
	for _, d := range ds {
		if d.ID != pos[1] {
			continue
		}
		if c.json {
			c.printJSON(toMessageJSON(d))
			return 0
		}
		rows := [][]string{
			{"source", d.DeadLetterSource}, {"reason", d.FailureReason},
			{"receives", fmt.Sprint(d.ReceiveCount)}, {"attempts", fmt.Sprint(d.Attempts)},
			{"created", d.CreatedAt.UTC().Format(time.RFC3339)},
		}
		if !d.FirstReceivedAt.IsZero() {
			rows = append(rows, []string{"first received", d.FirstReceivedAt.UTC().Format(time.RFC3339)},
				[]string{"last received", d.LastReceivedAt.UTC().Format(time.RFC3339)})
		}
		for k, v := range map[string]string{"correlation id": d.CorrelationID, "group": d.GroupID, "dedup id": d.DedupID, "trace context": d.TraceContext} {
			if v != "" {
				rows = append(rows, []string{k, v})
			}
		}
		m := toMessageJSON(d)
		for _, k := range sortedKeys(m.Attributes) {
			rows = append(rows, []string{"attribute " + k, m.Attributes[k].Type + " " + m.Attributes[k].Value})
		}
		table(stdout, []string{"DEAD LETTER", d.ID}, rows)
		fmt.Fprintf(stdout, "\n%s\n", d.Body)
		return 0
	}
	return c.fail(fmt.Errorf("no dead letter %s of %s: %w", pos[1], pos[0], sclient.ErrMessageNotFound))
}

func dlqReplay(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	c := newCLI(ctx, cmdSpec{name: "dlq replay", args: "QUEUE [ID ...]",
		summary: "Move QUEUE's dead letters back into it (every one, or the ids given), as a rate-limited\ntask, and follow its progress until it ends. A replayed message is new (a new id, its\nattempts reset) and keeps its attributes. --body replaces the body of the ids given.",
		examples: []string{
			"sluice dlq replay orders",
			"sluice dlq replay orders --rate 50",
			`sluice dlq replay orders 5f0c7e53-... --body '{"order": 44, "customer": 7}'`,
			"sluice dlq replay orders --no-wait",
		}}, env, stdout, stderr)
	rate := c.fs.Int("rate", 0, "at most this many a second, 1..500 (default 500)")
	body := c.fs.String("body", "", "with ids: replace each one's body (edit-and-replay)")
	noWait := c.fs.Bool("no-wait", false, "start the replay and return (follow it with sluice dlq replay --status)")
	status := c.fs.Bool("status", false, "print the queue's recent replays instead of starting one")
	pos, code, ok := c.parse(args, 1, 101)
	if !ok {
		return code
	}
	queue := pos[0]
	if *status {
		ts, err := c.c.Replays(ctx, queue, 10)
		if err != nil {
			return c.fail(err)
		}
		c.printTasks(ts)
		return 0
	}
	var opts []sclient.ReplayOption
	if len(pos) > 1 {
		opts = append(opts, sclient.ReplayIDs(pos[1:]...))
	}
	if *body != "" {
		if len(pos) == 1 {
			return c.usageErr("--body edits the dead letters named by id: give their ids")
		}
		opts = append(opts, sclient.EditBody(*body))
	}
	if *rate != 0 {
		opts = append(opts, sclient.MaxPerSecond(*rate))
	}
	task, err := c.c.Replay(ctx, queue, opts...)
	if err != nil {
		return c.fail(err)
	}
	if *noWait {
		c.printTasks([]sclient.ReplayTask{task})
		return 0
	}
	p := c.progress("replayed", "dead letter", task.ToMove)
	tick := time.NewTicker(replayPoll)
	defer tick.Stop()
	missing := 0 // polls in a row that did not find the task
	for !task.Done() {
		select {
		case <-ctx.Done():
			p.finish(" into " + queue)
			fmt.Fprintf(stderr, "sluice dlq replay: stopped following; the replay %s goes on in the broker (sluice dlq replay %s --status)\n", task.ID, queue)
			return 1
		case <-tick.C:
		}
		ts, err := c.c.Replays(ctx, queue, 10)
		if err != nil {
			if errors.Is(err, context.Canceled) {
				continue
			}
			return c.fail(err)
		}
		found := false
		for _, t := range ts {
			if t.ID == task.ID {
				task, found = t, true
			}
		}
		if !found {
			// The list holds the 10 newest: a task that fell out of it (or
			// that the broker no longer knows) would be followed forever.
			if missing++; missing >= replayMissingPolls {
				p.finish(" into " + queue)
				fmt.Fprintf(stderr, "sluice dlq replay: the replay %s is no longer among the queue's recent replays, so its end cannot be followed; see the queue's replays with sluice dlq replay %s --status and its dead letters with sluice dlq list %s\n", task.ID, queue, queue)
				return 1
			}
			continue
		}
		missing = 0
		p.set(task.Moved)
	}
	p.finish(" into " + queue)
	if c.json {
		c.printTasks([]sclient.ReplayTask{task})
	}
	if task.Skipped > 0 {
		fmt.Fprintf(stderr, "%s skipped: the edited form does not fit the queue; left in the dead-letter queue\n", plural(task.Skipped, "dead letter"))
	}
	if task.Status != "COMPLETED" {
		fmt.Fprintf(stderr, "sluice dlq replay: the replay ended %s: %s\n", task.Status, task.FailureReason)
		return 1
	}
	return 0
}

func (c *cli) printTasks(ts []sclient.ReplayTask) {
	if c.json {
		for _, t := range ts {
			c.printJSON(t)
		}
		return
	}
	rows := make([][]string, len(ts))
	for i, t := range ts {
		rows[i] = []string{t.ID, t.Status, fmt.Sprintf("%d/%d", t.Moved, t.ToMove), fmt.Sprint(t.Skipped),
			fmt.Sprint(t.MaxPerSecond), t.StartedAt.UTC().Format(time.RFC3339), t.FailureReason}
	}
	table(c.stdout, []string{"REPLAY", "STATUS", "MOVED", "SKIPPED", "RATE", "STARTED", "FAILURE"}, rows)
}

func dlqDelete(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	c := newCLI(ctx, cmdSpec{name: "dlq delete", args: "QUEUE ID ... | QUEUE --all | QUEUE --from-export FILE",
		summary: "Delete dead letters of QUEUE for good: the ids given, --all of them, or those of an\nexport file (--from-export: exactly the archived ones, not those that arrived since).",
		examples: []string{
			"sluice dlq delete orders 5f0c7e53-4d0e-4b8e-9a43-0e8f2a2b3c1d",
			"sluice dlq export orders --out orders-dead.jsonl && sluice dlq delete orders --from-export orders-dead.jsonl",
		}}, env, stdout, stderr)
	all := c.fs.Bool("all", false, "every dead letter of the queue")
	export := c.fs.String("from-export", "", "the ids of an export file (JSON lines of sluice dlq export)")
	pos, code, ok := c.parse(args, 1, -1)
	if !ok {
		return code
	}
	queue, ids := pos[0], pos[1:]
	given := 0
	for _, g := range []bool{*all, len(ids) > 0, *export != ""} {
		if g {
			given++
		}
	}
	switch {
	case given > 1:
		return c.usageErr("give one of ids, --all and --from-export")
	case given == 0:
		return c.usageErr("give the ids to delete (sluice dlq list %s shows them), --from-export FILE, or --all", queue)
	case *export != "":
		var err error
		if ids, err = exportIDs(*export); err != nil {
			return c.usageErr("--from-export: %v", err)
		}
	case *all:
		ds, err := c.deadLetters(queue, -1, "", nil)
		if err != nil {
			return c.fail(err)
		}
		for _, d := range ds {
			ids = append(ids, d.ID)
		}
	}
	deleted, missing := 0, 0
	for i := 0; i < len(ids); i += 100 {
		chunk := ids[i:min(i+100, len(ids))]
		found, err := c.c.DeleteDeadLetters(ctx, queue, chunk)
		if err != nil {
			return c.fail(err)
		}
		for j, ok := range found {
			if ok {
				deleted++
			} else {
				missing++
				fmt.Fprintf(stderr, "no dead letter %s\n", chunk[j])
			}
		}
	}
	if c.json {
		c.printJSON(map[string]int{"deleted": deleted, "notFound": missing})
	} else {
		fmt.Fprintf(stdout, "deleted %s of %s\n", plural(deleted, "dead letter"), queue)
	}
	if missing > 0 {
		fmt.Fprintf(stderr, "sluice dlq delete: %s not found: list them with sluice dlq list %s\n", plural(missing, "id"), queue)
		return 1
	}
	return 0
}

func dlqExport(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	c := newCLI(ctx, cmdSpec{name: "dlq export", args: "QUEUE",
		summary: "Write QUEUE's dead letters as JSON lines (id, body, attributes, reason, receive count,\nattempts, times, correlation id, group): an archive to keep before retention deletes\nthem. `sluice send QUEUE --from-export FILE` sends them back.",
		examples: []string{
			"sluice dlq export orders --out orders-dead.jsonl",
			"sluice dlq export orders --reason currency | gzip > currency.jsonl.gz",
		}}, env, stdout, stderr)
	out := c.fs.String("out", "", "write to this file (default: stdout)")
	reason := c.fs.String("reason", "", "only those whose failure reason contains this")
	pos, code, ok := c.parse(args, 1, 1)
	if !ok {
		return code
	}
	queue := pos[0]
	var total int64
	if s, err := c.c.Stats(ctx, queue); err != nil {
		return c.fail(err)
	} else if s.DeadLetters == nil {
		return c.fail(fmt.Errorf("queue %s has no dead-letter queue: %w", queue, sclient.ErrConflict))
	} else if *reason == "" {
		total = *s.DeadLetters
	}
	var w io.Writer = stdout
	var f *os.File
	if *out != "" {
		var err error
		if f, err = os.Create(*out); err != nil {
			return c.usageErr("--out: %v", err)
		}
		defer f.Close()
		w = f
	}
	bw := bufio.NewWriter(w)
	p := c.progress("exported", "dead letter", total)
	// Page by page, so that a large dead-letter queue is never held whole.
	written := 0
	var werr, err error
	cursor := ""
	for werr == nil {
		opts := []sclient.BrowseOption{sclient.Limit(100)}
		if *reason != "" {
			opts = append(opts, sclient.WithReason(*reason))
		}
		if cursor != "" {
			opts = append(opts, sclient.Cursor(cursor))
		}
		var page sclient.Page
		if page, err = c.c.DeadLetters(ctx, queue, opts...); err != nil {
			break
		}
		for _, d := range page.Messages {
			if werr = writeJSONLine(bw, toMessageJSON(d)); werr != nil {
				break
			}
			written++
		}
		p.set(int64(written))
		if cursor = page.Next; cursor == "" {
			break
		}
	}
	if werr == nil {
		werr = bw.Flush()
	}
	if werr == nil && f != nil {
		werr = f.Close()
	}
	p.done = int64(written)
	where := "stdout"
	if *out != "" {
		where = *out
	}
	p.finish(" of " + queue + " to " + where)
	if err != nil {
		return c.fail(err)
	}
	if werr != nil {
		return c.fail(fmt.Errorf("writing %s: %w", where, werr))
	}
	return 0
}

// writeJSONLine writes v as one line of JSON.
func writeJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// exportIDs reads the ids of an export file's lines.
func exportIDs(path string) ([]string, error) {
	f, err := openExport(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	var ids []string
	n := 0
	for sc.Scan() {
		n++
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var e struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.ID == "" {
			return nil, fmt.Errorf("line %d of %s is not a message of sluice dlq export (no id)", n, path)
		}
		ids = append(ids, e.ID)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("%s holds no message", path)
	}
	return ids, nil
}
