package e2e

// PostgreSQL fault tests: a private PostgreSQL cluster per test (never the
// machine's shared one, which other tests use), a TCP proxy that can cut the
// brokers off it, and the mixed load of faults_load_test.go across three
// brokers.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/testutil"
)

// privatePG is a PostgreSQL cluster of the test's own, run as user postgres
// (initdb refuses root) from Debian's binaries.
type privatePG struct {
	t    *testing.T
	bin  string // directory of initdb, pg_ctl
	dir  string // parent of the data directory, readable by postgres
	port int
}

// startPrivatePG initdbs and starts a cluster on a free port, or skips the
// test with the reason (fails when SLUICE_REQUIRE names postgres).
func startPrivatePG(t *testing.T) *privatePG {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(bins) == 0 {
		testutil.Missing(t, "postgres", "no PostgreSQL server binaries under /usr/lib/postgresql/*/bin: apt-get install postgresql")
	}
	sort.Strings(bins)
	if _, err := exec.LookPath("runuser"); err != nil || os.Geteuid() != 0 {
		testutil.Missing(t, "postgres", "a private PostgreSQL cluster needs root (to run initdb as user postgres with runuser)")
	}
	dir, err := os.MkdirTemp("", "sluice-pg-")
	if err != nil {
		t.Fatal(err)
	}
	p := &privatePG{t: t, bin: filepath.Dir(bins[len(bins)-1]), dir: dir, port: freePort(t)}
	t.Cleanup(func() {
		_ = p.ctl("stop", "-m", "immediate")
		_ = os.RemoveAll(dir)
	})
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("chown", "postgres", dir).CombinedOutput(); err != nil {
		testutil.Missing(t, "postgres", fmt.Sprintf("chown postgres %s: %v: %s", dir, err, out))
	}
	if out, err := p.run("initdb", "-D", p.data(), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"); err != nil {
		testutil.Missing(t, "postgres", fmt.Sprintf("initdb as user postgres failed: %v: %s", err, lastLines(string(out), 5)))
	}
	p.start()
	return p
}

func (p *privatePG) data() string { return filepath.Join(p.dir, "data") }

// URL is the cluster's address, or through a proxy on port.
func (p *privatePG) URL(port int) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
}

func (p *privatePG) run(tool string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "runuser", append([]string{"-u", "postgres", "--", filepath.Join(p.bin, tool)}, args...)...)
	cmd.Dir = p.dir
	return cmd.CombinedOutput()
}

func (p *privatePG) ctl(args ...string) error {
	out, err := p.run("pg_ctl", append([]string{"-D", p.data(), "-w"}, args...)...)
	if err != nil {
		return fmt.Errorf("pg_ctl %s: %v: %s", strings.Join(args, " "), err, lastLines(string(out), 5))
	}
	return nil
}

func (p *privatePG) start() {
	p.t.Helper()
	opts := fmt.Sprintf("-p %d -c listen_addresses=127.0.0.1 -c unix_socket_directories=%s -c max_connections=200 -c fsync=on",
		p.port, p.dir)
	if err := p.ctl("start", "-l", filepath.Join(p.dir, "log"), "-o", opts); err != nil {
		p.t.Fatal(err)
	}
}

// crash stops the cluster as a crash would (immediate: no checkpoint,
// recovery from the WAL at the next start) and starts it again after down.
func (p *privatePG) crash(down time.Duration) {
	p.t.Helper()
	if err := p.ctl("stop", "-m", "immediate"); err != nil {
		p.t.Fatal(err)
	}
	time.Sleep(down) // the outage itself, not a wait for a condition
	p.start()
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// pgProxy forwards TCP connections to PostgreSQL; cut closes every open
// connection and refuses new ones until restore: the database unreachable.
type pgProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	conns  map[net.Conn]bool
}

func newPGProxy(t *testing.T, target string) *pgProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &pgProxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	t.Cleanup(func() { ln.Close(); p.setCut(true) })
	go p.serve()
	return p
}

func (p *pgProxy) Port() int { return p.ln.Addr().(*net.TCPAddr).Port }

func (p *pgProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.mu.Unlock()
		go p.forward(c)
	}
}

func (p *pgProxy) forward(c net.Conn) {
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.cut {
		p.mu.Unlock()
		c.Close()
		s.Close()
		return
	}
	p.conns[c], p.conns[s] = true, true
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(s, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, s); done <- struct{}{} }()
	<-done
	c.Close()
	s.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, s)
	p.mu.Unlock()
}

func (p *pgProxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for c := range p.conns {
			c.Close()
		}
	}
}

// outageProbe sends one message to queue through every broker with the
// query client and returns, per broker, the HTTP status (0: no answer) and
// how long the answer took.
func outageProbe(ctx context.Context, urls []string, queue string) ([]int, []time.Duration) {
	codes := make([]int, len(urls))
	took := make([]time.Duration, len(urls))
	var wg sync.WaitGroup
	for i, u := range urls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			start := time.Now()
			_, err := newQueryClient(u).Send(ctx, queue, []wireEntry{{Body: "probe"}})
			took[i] = time.Since(start)
			var qe *queryError
			switch {
			case err == nil:
				codes[i] = 200
			case errors.As(err, &qe):
				codes[i] = qe.Status
			}
		}()
	}
	wg.Wait()
	return codes, took
}

// startPGBrokers starts n brokers on url and registers them in live.
func startPGBrokers(t *testing.T, n int, url string, live *liveBrokers) []*brokerProc {
	var ps []*brokerProc
	for i := 0; i < n; i++ {
		p := startBroker(t, t.TempDir(), "--store", url)
		ps = append(ps, p)
		live.set(i, p.URL)
	}
	return ps
}

// pgOutageSeconds is how long TestSerialPostgresFaults cuts PostgreSQL off:
// SLUICE_PG_OUTAGE_SECONDS (at least 3: the probes run through all but its
// last 2 s), default 10. A duration, not a scale: SLUICE_SCALE leaves it.
func pgOutageSeconds(t *testing.T) int {
	s := os.Getenv("SLUICE_PG_OUTAGE_SECONDS")
	if s == "" {
		return 10
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 3 {
		t.Fatalf("SLUICE_PG_OUTAGE_SECONDS=%q: want a number of seconds, at least 3", s)
	}
	return n
}

// TestSerialPostgresFaults runs the mixed load through three brokers on a
// private PostgreSQL behind a TCP proxy, cuts the proxy for 10 s, then
// crashes and restarts PostgreSQL itself: during each outage every probe
// request is answered 503 ServiceUnavailable at once; after it the brokers
// serve again by themselves; and the history check finds nothing lost.
// SLUICE_PG_OUTAGE_SECONDS sets the outage (default 10).
func TestSerialPostgresFaults(t *testing.T) {
	serialOnly(t)
	pg := startPrivatePG(t)
	proxy := newPGProxy(t, fmt.Sprintf("127.0.0.1:%d", pg.port))
	outage := time.Duration(pgOutageSeconds(t)) * time.Second
	ctx := ctxT(t)
	live := &liveBrokers{}
	ps := startPGBrokers(t, 3, pg.URL(proxy.Port()), live)
	var urls []string
	for _, p := range ps {
		urls = append(urls, p.URL)
	}
	seed := uint64(time.Now().UnixNano())
	l := newFaultLoad(seed)
	l.createQueues(t, ctx, ps[0].URL)
	probeQ := urlPath(t, mustQueue(t, ctx, sqsClient(ps[0].URL), "fault-probe", nil))
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { l.run(runCtx, live.client); close(done) }()

	// outageAndBack checks the probes during an outage made by begin and
	// ended by end, then measures how long each broker takes to serve again.
	outageAndBack := func(what string, begin func(), end func(cutAt time.Time)) {
		before := l.sends.Load()
		testutil.Eventually(t, 60*time.Second, "load before "+what, func() bool { return l.sends.Load() >= before+200 })
		begin()
		cutAt := time.Now()
		probes, slow := 0, time.Duration(0)
		for time.Since(cutAt) < outage-2*time.Second {
			codes, took := outageProbe(ctx, urls, probeQ)
			for i, c := range codes {
				probes++
				slow = max(slow, took[i])
				if c != 503 {
					t.Errorf("%s: broker %d answered %d (want 503 ServiceUnavailable) after %v", what, i, c, took[i].Round(time.Millisecond))
				} else if took[i] > 3*time.Second {
					t.Errorf("%s: broker %d answered 503 only after %v (want at once)", what, i, took[i].Round(time.Millisecond))
				}
			}
			time.Sleep(200 * time.Millisecond) // pacing of the probes
		}
		end(cutAt)
		back := time.Now()
		var worst time.Duration
		for i, u := range urls {
			testutil.Eventually(t, 60*time.Second, fmt.Sprintf("broker %d serving after %s", i, what), func() bool {
				codes, _ := outageProbe(ctx, []string{u}, probeQ)
				return codes[0] == 200
			})
			worst = max(worst, time.Since(back))
		}
		t.Logf("%s: %d probes answered during the outage (slowest %v); all brokers serving %v after it ended",
			what, probes, slow.Round(time.Millisecond), worst.Round(time.Millisecond))
	}
	outageAndBack("proxy cut", func() { proxy.setCut(true) }, func(cutAt time.Time) {
		time.Sleep(time.Until(cutAt.Add(outage))) // the rest of the outage
		proxy.setCut(false)
	})
	outageAndBack("PostgreSQL crash", func() {
		if err := pg.ctl("stop", "-m", "immediate"); err != nil {
			t.Fatal(err)
		}
	}, func(time.Time) { pg.start() })
	before := l.sends.Load()
	testutil.Eventually(t, 60*time.Second, "load after the outages", func() bool { return l.sends.Load() >= before+200 })
	stop()
	<-done
	// The probe queue's messages are no part of the history.
	dead := l.drain(t, ctx, newJSONClient(ps[1].URL), 90*time.Second)
	t.Logf("drain took %d messages from the dead-letter queue", dead)
	l.report(t, "PostgreSQL faults")
}

// TestSerialCrashLoopPostgres runs the mixed load through three brokers on
// one private PostgreSQL, kill -9s them in turn at random moments (each
// restarted at once), and crashes and restarts PostgreSQL itself once,
// halfway; then drains and checks the history. SLUICE_CRASH_CYCLES sets the
// broker kills (default 2; 20 under SLUICE_SCALE=full).
func TestSerialCrashLoopPostgres(t *testing.T) {
	serialOnly(t)
	pg := startPrivatePG(t)
	url := pg.URL(pg.port)
	cycles := testutil.Scale(t, "SLUICE_CRASH_CYCLES", 2, 20, 1)
	ctx := ctxT(t)
	live := &liveBrokers{}
	ps := startPGBrokers(t, 3, url, live)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	l := newFaultLoad(seed)
	l.createQueues(t, ctx, ps[0].URL)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { l.run(runCtx, live.client); close(done) }()
	var pgCrashed atomic.Bool
	for cycle := 0; cycle < cycles; cycle++ {
		before := l.sends.Load()
		testutil.Eventually(t, 60*time.Second, "sends in this cycle", func() bool { return l.sends.Load() >= before+50 })
		time.Sleep(time.Duration(200+rng.IntN(1500)) * time.Millisecond) // the random kill moment, not a wait for a condition
		i := cycle % len(ps)
		ps[i].kill()
		live.set(i, "")
		if cycle == cycles/2 && !pgCrashed.Load() {
			pgCrashed.Store(true)
			pg.crash(time.Second)
			t.Logf("cycle %d: PostgreSQL crashed and restarted", cycle)
		}
		ps[i] = startBroker(t, t.TempDir(), "--store", url)
		live.set(i, ps[i].URL)
		t.Logf("cycle %d: broker %d killed and restarted; %d acked sends, %d received so far", cycle, i, l.sends.Load(), l.receives.Load())
	}
	stop()
	<-done
	dead := l.drain(t, ctx, newJSONClient(ps[0].URL), 90*time.Second)
	t.Logf("drain took %d messages from the dead-letter queue", dead)
	l.report(t, "PostgreSQL crash loop")
}
