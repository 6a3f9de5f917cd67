package main

// sluice stats: a live, top-like view of the queues.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	sclient "github.com/sluicemq/sluice/client"
)

func init() {
	register("stats", command{"a live view of the queues: counts and rates, every second", statsCmd})
}

// statsSample is one read of the queues: their counts from the native API,
// and the broker's per-queue counters from /metrics when it serves them.
type statsSample struct {
	at       time.Time
	queues   []sclient.QueueSummary
	counters map[string]map[string]float64 // counter name -> queue -> total; nil without /metrics
}

// statsCounters are the /metrics counters stats turns into rates.
var statsCounters = map[string]string{
	"sluice_messages_sent_total":    "in",
	"sluice_messages_deleted_total": "out",
}

// statsRow is one queue's line of a frame (and its --json form).
type statsRow struct {
	Name             string   `json:"name"`
	Visible          int64    `json:"visible"`
	InFlight         int64    `json:"inFlight"`
	Delayed          int64    `json:"delayed"`
	Depth            int64    `json:"depth"`
	DeadLetters      *int64   `json:"deadLetters"`
	OldestAgeSeconds int64    `json:"oldestAgeSeconds"`
	Paused           bool     `json:"paused"`
	InPerSecond      *float64 `json:"inPerSecond"`    // sends a second (this broker's)
	OutPerSecond     *float64 `json:"outPerSecond"`   // acks a second (this broker's)
	DepthPerSecond   *float64 `json:"depthPerSecond"` // the depth's change a second
}

func statsCmd(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	c := newCLI(ctx, cmdSpec{name: "stats", args: "",
		summary: "A live view of the queues, redrawn every --interval until Ctrl-C: visible, in flight,\ndelayed, dead letters, the oldest message's age, and rates computed from successive\nreads: IN/s (sends) and OUT/s (acks) from the broker's /metrics counters (this broker's\nonly, on a shared PostgreSQL store), DEPTH/s from the depth's change. --once prints one\ntable (without rates) and exits.",
		examples: []string{
			"sluice stats",
			"sluice stats --prefix orders --sort depth",
			"sluice stats --once",
			"sluice stats --json --interval 10s >> queues.jsonl",
		}}, env, stdout, stderr)
	once := c.fs.Bool("once", false, "print one table and exit")
	interval := c.fs.Duration("interval", time.Second, "time between reads")
	prefix := c.fs.String("prefix", "", "only the queues whose name starts with this")
	sortBy := c.fs.String("sort", "name", "order of the rows: name, depth, dead, oldest or in")
	if _, code, ok := c.parse(args, 0, 0); !ok {
		return code
	}
	if *interval <= 0 {
		return c.usageErr("--interval must be positive")
	}
	switch *sortBy {
	case "name", "depth", "dead", "oldest", "in":
	default:
		return c.usageErr("--sort %q: use name, depth, dead, oldest or in", *sortBy)
	}
	hc := &http.Client{Timeout: 5 * time.Second}
	defer hc.CloseIdleConnections()
	metricsURL := strings.TrimSuffix(strings.TrimSuffix(c.url, "/"), "/v1") + "/metrics"
	tty := isTerminal(stdout)
	var prev *statsSample
	tick := time.NewTicker(*interval)
	defer tick.Stop()
	for frame := 0; ; frame++ {
		s, err := c.sample(hc, metricsURL, *prefix, !*once)
		if err != nil {
			if ctx.Err() != nil {
				return 0
			}
			return c.fail(err)
		}
		rows := statsRows(prev, s)
		sortRows(rows, *sortBy)
		switch {
		case c.json:
			c.printJSON(map[string]any{"time": s.at.UTC(), "queues": rows})
		default:
			if tty && !*once {
				fmt.Fprint(stdout, "\x1b[H\x1b[2J") // home, clear: redraw in place
			} else if frame > 0 {
				fmt.Fprintln(stdout)
			}
			if !*once {
				fmt.Fprintf(stdout, "sluice stats  %s  %s  %s  (Ctrl-C quits)\n\n", c.url, s.at.Format("15:04:05"), plural(len(rows), "queue"))
			}
			printStats(stdout, rows, !*once)
		}
		if *once {
			return 0
		}
		prev = s
		select {
		case <-ctx.Done():
			return 0
		case <-tick.C:
		}
	}
}

// sample reads the queues, and the counters of /metrics when withRates.
func (c *cli) sample(hc *http.Client, metricsURL, prefix string, withRates bool) (*statsSample, error) {
	qs, err := c.allQueues(prefix)
	if err != nil {
		return nil, err
	}
	s := &statsSample{at: time.Now(), queues: qs}
	if withRates {
		s.counters = readCounters(c.ctx, hc, metricsURL)
	}
	return s, nil
}

// readCounters reads statsCounters from a Prometheus text page; nil when
// the broker serves none (the rates then show "-").
func readCounters(ctx context.Context, hc *http.Client, url string) map[string]map[string]float64 {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil
	}
	out := map[string]map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// name{queue="q"} value
		line := sc.Text()
		name, rest, ok := strings.Cut(line, `{queue="`)
		if !ok {
			continue
		}
		key, wanted := statsCounters[name]
		if !wanted {
			continue
		}
		queue, val, ok := strings.Cut(rest, `"} `)
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil {
			continue
		}
		if out[key] == nil {
			out[key] = map[string]float64{}
		}
		out[key][queue] = v
	}
	return out
}

// statsRows is s's rows, with the rates since prev (nil: none yet).
func statsRows(prev, s *statsSample) []statsRow {
	var before map[string]sclient.QueueSummary
	var dt float64
	if prev != nil {
		dt = s.at.Sub(prev.at).Seconds()
		before = make(map[string]sclient.QueueSummary, len(prev.queues))
		for _, q := range prev.queues {
			before[q.Name] = q
		}
	}
	rate := func(key, queue string) *float64 {
		if prev == nil || prev.counters == nil || s.counters == nil || dt <= 0 {
			return nil
		}
		now, had := s.counters[key][queue], prev.counters[key][queue]
		r := max(now-had, 0) / dt // a restarted broker's counters start again
		return &r
	}
	rows := make([]statsRow, len(s.queues))
	for i, q := range s.queues {
		st := q.Stats
		r := statsRow{Name: q.Name, Visible: st.Visible, InFlight: st.InFlight, Delayed: st.Delayed, Depth: st.Depth,
			DeadLetters: st.DeadLetters, OldestAgeSeconds: int64(st.OldestAge / time.Second), Paused: q.Paused}
		if b, ok := before[q.Name]; ok && dt > 0 {
			d := float64(st.Depth-b.Stats.Depth) / dt
			r.DepthPerSecond = &d
			r.InPerSecond, r.OutPerSecond = rate("in", q.Name), rate("out", q.Name)
		}
		rows[i] = r
	}
	return rows
}

func sortRows(rows []statsRow, by string) {
	dead := func(r statsRow) int64 {
		if r.DeadLetters == nil {
			return -1
		}
		return *r.DeadLetters
	}
	in := func(r statsRow) float64 {
		if r.InPerSecond == nil {
			return -1
		}
		return *r.InPerSecond
	}
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		switch by {
		case "depth":
			return a.Depth > b.Depth
		case "dead":
			return dead(a) > dead(b)
		case "oldest":
			return a.OldestAgeSeconds > b.OldestAgeSeconds
		case "in":
			return in(a) > in(b)
		}
		return a.Name < b.Name
	})
}

func printStats(w io.Writer, rows []statsRow, rates bool) {
	f := func(p *float64) string {
		if p == nil {
			return "-"
		}
		return strconv.FormatFloat(*p, 'f', 1, 64)
	}
	header := []string{"QUEUE", "VISIBLE", "IN-FLIGHT", "DELAYED", "DEAD", "OLDEST"}
	if rates {
		header = append(header, "IN/s", "OUT/s", "DEPTH/s")
	}
	out := make([][]string, len(rows))
	for i, r := range rows {
		name := r.Name
		if r.Paused {
			name += " (paused)"
		}
		out[i] = []string{name, itoa(r.Visible), itoa(r.InFlight), itoa(r.Delayed), deadText(r.DeadLetters),
			oldestText(r.Visible+r.InFlight+r.Delayed, time.Duration(r.OldestAgeSeconds)*time.Second)}
		if rates {
			out[i] = append(out[i], f(r.InPerSecond), f(r.OutPerSecond), f(r.DepthPerSecond))
		}
	}
	table(w, header, out)
}
