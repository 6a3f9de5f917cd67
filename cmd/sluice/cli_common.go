package main

// The plumbing every client command shares: its flags (--url, --json),
// parsing with flags anywhere among the arguments, --help with examples,
// errors that say what to do next, tables, JSON output and progress.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluicemq/sluice/broker/model"
	sclient "github.com/sluicemq/sluice/client"
)

// defaultURL is the broker a client command talks to without --url or
// SLUICE_URL: sluice serve's default address.
const defaultURL = "http://127.0.0.1:9324"

// cli is one run of a client command.
type cli struct {
	ctx            context.Context
	name           string // "queue create": for messages
	stdout, stderr io.Writer
	fs             *flag.FlagSet
	url            string
	caFile         string // --ca-file: a private CA for an https --url (cli_tls.go)
	json           bool
	c              *sclient.Client
	// key is the access key (cli_auth.go); env reads the environment.
	key cliKey
	env func(string) string
}

// cmdSpec describes a client command for its --help.
type cmdSpec struct {
	name     string // "queue create"
	args     string // "NAME [ATTRIBUTE=VALUE ...]"
	summary  string // one line
	examples []string
}

// newCLI makes a command's flag set with the shared flags; the command adds
// its own before calling parse.
func newCLI(ctx context.Context, spec cmdSpec, env func(string) string, stdout, stderr io.Writer) *cli {
	c := &cli{ctx: ctx, name: spec.name, stdout: stdout, stderr: stderr, env: env}
	c.fs = flag.NewFlagSet("sluice "+spec.name, flag.ContinueOnError)
	c.fs.SetOutput(stderr)
	def := defaultURL
	if v := env("SLUICE_URL"); v != "" {
		def = v
	}
	c.fs.StringVar(&c.url, "url", def, "the broker's base URL (env SLUICE_URL)")
	c.fs.BoolVar(&c.json, "json", false, "print JSON (for scripts) instead of tables")
	c.key.add(c.fs)
	c.fs.StringVar(&c.caFile, "ca-file", env("SLUICE_CA_FILE"), "PEM file of the certificate authority that signed an https broker's certificate, besides the system's (env SLUICE_CA_FILE)")
	c.fs.Usage = func() {
		w := c.fs.Output()
		fmt.Fprintf(w, "usage: sluice %s [flags] %s\n\n%s\n", spec.name, spec.args, spec.summary)
		if len(spec.examples) > 0 {
			fmt.Fprintln(w, "\nexamples:")
			for _, e := range spec.examples {
				fmt.Fprintf(w, "  %s\n", e)
			}
		}
		fmt.Fprintln(w, "\nflags:")
		c.fs.PrintDefaults()
	}
	return c
}

// parse parses args, flags anywhere among them ("--" ends the flags), checks
// the positional count (min..max, max < 0 for no limit), and connects the
// sclient. ok false means: return code.
func (c *cli) parse(args []string, min, max int) (pos []string, code int, ok bool) {
	c.fs.SetOutput(helpOut(args, c.stdout, c.stderr))
	for {
		if err := c.fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, 0, false
			}
			return nil, 2, false // the flag package printed the error and the usage
		}
		rest := c.fs.Args()
		if len(rest) == 0 {
			break
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	if len(pos) < min || max >= 0 && len(pos) > max {
		want := fmt.Sprintf("%d", min)
		switch {
		case max < 0:
			want = fmt.Sprintf("at least %d", min)
		case max != min:
			want = fmt.Sprintf("%d to %d", min, max)
		}
		fmt.Fprintf(c.stderr, "sluice %s: takes %s argument(s), got %d; see sluice %s --help\n", c.name, want, len(pos), c.name)
		return nil, 2, false
	}
	opts, err := c.tlsOptions()
	if err != nil {
		fmt.Fprintf(c.stderr, "sluice %s: %v\n", c.name, err)
		return nil, 2, false
	}
	if o, err := c.key.option(c.env); err != nil {
		fmt.Fprintf(c.stderr, "sluice %s: %v\n", c.name, err)
		return nil, 2, false
	} else if o != nil {
		opts = append(opts, o)
	}
	cl, err := sclient.New(c.url, opts...)
	if err != nil {
		fmt.Fprintf(c.stderr, "sluice %s: --url %q is not a broker URL: give one like %s (flag --url or env SLUICE_URL)\n", c.name, c.url, defaultURL)
		return nil, 2, false
	}
	c.c = cl
	return pos, 0, true
}

// usageError is a wrong use of a command found after its flags were parsed
// (errUsage): failOrUsage reports it as usageErr does.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func errUsage(format string, a ...any) error { return usageError{fmt.Sprintf(format, a...)} }

// failOrUsage is usageErr for a usageError, fail for any other error.
func (c *cli) failOrUsage(err error) int {
	var ue usageError
	if errors.As(err, &ue) {
		return c.usageErr("%s", ue.msg)
	}
	return c.fail(err)
}

// usageErr reports a wrong use of the command and returns exit code 2.
func (c *cli) usageErr(format string, a ...any) int {
	fmt.Fprintf(c.stderr, "sluice %s: %s; see sluice %s --help\n", c.name, fmt.Sprintf(format, a...), c.name)
	return 2
}

// fail reports err with what to do next and returns exit code 1.
func (c *cli) fail(err error) int {
	fmt.Fprintf(c.stderr, "sluice %s: %s\n", c.name, describe(err))
	if h := c.hint(err); h != "" {
		fmt.Fprintf(c.stderr, "  %s\n", h)
	}
	return 1
}

// describe is err's text without the client's "sluice: " prefix.
func describe(err error) string {
	var ce *sclient.Error
	if errors.As(err, &ce) {
		// The broker's message and code, after any context wrapped around it.
		return strings.Replace(err.Error(), ce.Error(), ce.Message+" ("+ce.Code+")", 1)
	}
	return strings.TrimPrefix(err.Error(), "sluice: ")
}

// hint says what to do next after err.
func (c *cli) hint(err error) string {
	if h := scheduleHint(c.name, err); h != "" {
		return h
	}
	if h := jobHint(c.name, err); h != "" {
		return h
	}
	var ue *url.Error
	var ne net.Error
	switch {
	case errors.Is(err, context.Canceled):
		return "interrupted."
	case errors.Is(err, sclient.ErrQueueNotFound):
		return "list the queues with `sluice queue list`, or create it with `sluice queue create NAME`."
	case errors.Is(err, sclient.ErrQueueExists):
		return "change its settings with `sluice queue set NAME ATTRIBUTE=VALUE`, or use another name."
	case errors.Is(err, sclient.ErrQueueDeletedRecently):
		return "the queue was deleted moments ago: wait a minute, then create it again."
	case errors.Is(err, sclient.ErrPurgeInProgress):
		return "the broker allows one purge per queue per 60 s (--strict-purge): wait, then retry."
	case errors.Is(err, sclient.ErrConflict):
		return "a queue's dead letters need a RedrivePolicy: `sluice queue set NAME --dlq DLQ`; to replay a shared dead-letter queue, name the ids."
	case errors.Is(err, sclient.ErrQueueFull):
		return "the queue is at its MaxDepth: let consumers drain it, or raise it with `sluice queue set NAME MaxDepth=N`."
	case errors.Is(err, sclient.ErrMessageNotFound), errors.Is(err, sclient.ErrNotFound):
		return "the id is not in the queue: list them with `sluice peek` or `sluice dlq list`."
	case errors.Is(err, sclient.ErrInvalidParameter), errors.Is(err, sclient.ErrTooLarge):
		return fmt.Sprintf("fix what the message names; `sluice %s --help` lists the flags.", c.name)
	case errors.Is(err, sclient.ErrUnsupported):
		return "the broker does not offer this: upgrade it, or check that --url names a Sluice broker."
	case errors.Is(err, sclient.ErrUnavailable), errors.Is(err, sclient.ErrThrottled), errors.Is(err, sclient.ErrOverLimit):
		return "the broker is busy or shutting down: retry in a moment."
	case errors.Is(err, sclient.ErrUnauthenticated):
		return "the broker has access keys: give one with --access-key and --secret-key, or SLUICE_TOKEN=ID:SECRET (docs/security.md)."
	case errors.Is(err, sclient.ErrAccessDenied):
		return "this key's allow list (in the broker's keys file) does not include this command: use another key."
	case errors.Is(err, sclient.ErrInternal):
		return "the broker's log has the details."
	case untrustedCert(err):
		return "the broker's certificate is not signed by an authority this machine trusts: give the one that signed it with --ca-file (or SLUICE_CA_FILE)."
	case errors.As(err, &ue), errors.As(err, &ne):
		return fmt.Sprintf("cannot reach the broker at %s: is `sluice serve` running? set --url or SLUICE_URL.", c.url)
	}
	return ""
}

// table writes rows aligned in columns.
func table(w io.Writer, header []string, rows [][]string) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	tw.Flush()
}

// printJSON writes v as one line of JSON.
func (c *cli) printJSON(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // our own types always marshal
	}
	fmt.Fprintf(c.stdout, "%s\n", b)
}

// pairs parses NAME=VALUE arguments.
func pairs(args []string) (map[string]string, error) {
	m := map[string]string{}
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%q is not NAME=VALUE", a)
		}
		m[k] = v
	}
	return m, nil
}

// pairsFlag is a repeatable NAME=VALUE flag.
type pairsFlag map[string]string

func (p pairsFlag) String() string { return "" }
func (p pairsFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("%q is not NAME=VALUE", s)
	}
	p[k] = v
	return nil
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// attrJSON is a message attribute in JSON: Binary values in base64, as the
// native API has them.
type attrJSON = model.ExportAttribute

// messageJSON is a message as recv, peek and dlq print it with --json, and
// the line format of dlq export (which send --from-export reads back): the
// broker's archive writes the same lines (model.ExportLine).
type messageJSON = model.ExportLine

func toMessageJSON(d sclient.Delivery) messageJSON {
	m := messageJSON{
		ID: d.ID, Body: d.Body, Priority: d.Priority, ReceiveCount: d.ReceiveCount, Attempts: d.Attempts,
		CreatedAt: d.CreatedAt, CorrelationID: d.CorrelationID, TraceContext: d.TraceContext,
		GroupID: d.GroupID, DedupID: d.DedupID, SequenceNumber: d.SequenceNumber, Receipt: d.Receipt,
		State: d.State, DeadLetterSource: d.DeadLetterSource, Reason: d.FailureReason,
	}
	if len(d.Attributes) > 0 {
		m.Attributes = map[string]attrJSON{}
		for k, a := range d.Attributes {
			v := a.Value
			if strings.HasPrefix(a.Type, "Binary") {
				v = base64.StdEncoding.EncodeToString(a.Binary)
			}
			m.Attributes[k] = attrJSON{Type: a.Type, Value: v}
		}
	}
	return m
}

// attrsText is a message's attributes as "k=v k=v" for a table.
func attrsText(attrs map[string]sclient.Attribute) string {
	var parts []string
	for _, k := range sortedKeys(attrs) {
		a := attrs[k]
		v := a.Value
		if strings.HasPrefix(a.Type, "Binary") {
			v = base64.StdEncoding.EncodeToString(a.Binary)
		}
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, " ")
}

// cell makes a body fit a table cell: one line, at most 60 characters
// (--json prints it whole).
func cell(s string) string {
	if strings.ContainsAny(s, "\n\r\t") {
		s = strings.Trim(fmt.Sprintf("%q", s), `"`)
	}
	if r := []rune(s); len(r) > 60 {
		s = string(r[:59]) + "…"
	}
	return s
}

// age is a duration for a table: "0s", "42s", "3m5s", "2h10m".
// oldestText is a queue's oldest message's age for a table: "-" when the
// queue holds no message (as the dashboard shows an empty queue's), not 0s.
func oldestText(depth int64, d time.Duration) string {
	if depth == 0 {
		return "-"
	}
	return age(d)
}

func age(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Hour:
		return d.Truncate(time.Second).String()
	default:
		return d.Truncate(time.Minute).String()
	}
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// progress reports long work on stderr: a line redrawn at most every
// 200 ms with the count, rate and ETA when stderr is a terminal, and a
// summary line at the end always.
type progress struct {
	w     io.Writer
	tty   bool
	verb  string // "sent", "replayed", "exported"
	noun  string // "message", "dead letter": counted with plural
	total int64  // 0 when unknown
	done  int64
	start time.Time
	drawn time.Time
}

func (c *cli) progress(verb, noun string, total int64) *progress {
	return &progress{w: c.stderr, tty: isTerminal(c.stderr), verb: verb, noun: noun, total: total, start: time.Now()}
}

// set records the count done so far and redraws the line if due.
func (p *progress) set(done int64) {
	p.done = done
	if !p.tty || time.Since(p.drawn) < 200*time.Millisecond {
		return
	}
	p.drawn = time.Now()
	el := time.Since(p.start).Seconds()
	rate := float64(done) / max(el, 1e-9)
	line := fmt.Sprintf("%s %d", p.verb, done)
	if p.total > 0 {
		line += fmt.Sprintf("/%d (%d%%)", p.total, done*100/p.total)
	}
	line += fmt.Sprintf("  %.0f/s", rate)
	if p.total > 0 && rate > 0 && done < p.total {
		eta := time.Duration(float64(p.total-done) / rate * float64(time.Second))
		line += "  ETA " + age(eta)
	}
	fmt.Fprintf(p.w, "\r\x1b[K%s", line)
}

// finish prints the summary line: what was done ("replayed 2 dead letters"
// and where, e.g. " into orders"), in how long, how fast.
func (p *progress) finish(where string) {
	if p.tty {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
	el := time.Since(p.start)
	fmt.Fprintf(p.w, "%s %s%s in %s (%.0f/s)\n", p.verb, plural(p.done, p.noun), where,
		el.Round(time.Millisecond), float64(p.done)/max(el.Seconds(), 1e-9))
}

// group runs a command group ("queue", "dlq"): its first argument names the
// subcommand.
func group(ctx context.Context, name string, subs map[string]command, args []string, env func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		w := stdout // asked for: on stdout, so that | less shows it
		if len(args) == 0 {
			w = stderr
		}
		fmt.Fprintf(w, "usage: sluice %s <command> [flags] [arguments]\n\ncommands:\n", name)
		width := 8
		for n := range subs {
			width = max(width, len(n))
		}
		for _, n := range sortedKeys(subs) {
			fmt.Fprintf(w, "  %-*s %s\n", width, n, subs[n].summary)
		}
		fmt.Fprintf(w, "\nRun 'sluice %s <command> --help' for its flags and examples.\n", name)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	sub, ok := subs[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "sluice %s: unknown command %q%s. Run 'sluice %s --help' for the list.\n", name, args[0], didYouMean(args[0], sortedKeys(subs), "sluice "+name+" "), name)
		return 2
	}
	return sub.run(ctx, args[1:], env, stdout, stderr)
}

// asksHelp reports whether args ask for a command's help: -h, -help or
// --help before any "--".
func asksHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--help":
			return true
		}
	}
	return false
}

// helpOut is where a command's flag set prints: stdout when args ask for
// help (so that `sluice serve --help | less` shows it), stderr otherwise
// (the usage printed after a bad flag goes with its error).
func helpOut(args []string, stdout, stderr io.Writer) io.Writer {
	if asksHelp(args) {
		return stdout
	}
	return stderr
}

// plural counts n of noun: "1 message", "2 messages", "0 dead letters".
func plural[N int | int64](n N, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// didYouMean is `: did you mean "sluice send"?` for a mistyped name (an
// edit or two from one of names, or a prefix of just one), else "". prefix
// is what comes before a name in the suggestion ("sluice ").
func didYouMean(typed string, names []string, prefix string) string {
	best, bestD := "", 0
	var prefixed []string
	for _, n := range names {
		if d := editDistance(typed, n); best == "" || d < bestD {
			best, bestD = n, d
		}
		if len(typed) >= 2 && strings.HasPrefix(n, typed) {
			prefixed = append(prefixed, n)
		}
	}
	switch {
	case best != "" && bestD <= min(2, max(1, len(typed)/2)):
	case len(prefixed) == 1:
		best = prefixed[0]
	default:
		return ""
	}
	return fmt.Sprintf(": did you mean %q?", prefix+best)
}

// editDistance is the Damerau-Levenshtein (optimal string alignment)
// distance between a and b: insertions, deletions, substitutions and swaps
// of two neighbours each count one ("sned" is one from "send").
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}
