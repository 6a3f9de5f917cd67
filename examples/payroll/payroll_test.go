package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/internal/pgtest"
	"github.com/sluicemq/sluice/internal/testutil"
)

var (
	full       = flag.Bool("payroll.full", false, "run the payroll at full scale (200,000 payments; also SLUICE_PAYROLL_FULL=1)")
	payrollBin = &testutil.Binary{Pkg: "."}
	sluiceBin  = &testutil.Binary{Pkg: "../../cmd/sluice"}
)

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	payrollBin.Remove()
	sluiceBin.Remove()
	os.Exit(code)
}

// payments is the run's size: 5,000 by default (the CI scale), the seed's
// 200,000 with SLUICE_SCALE=full (or -payroll.full, or
// SLUICE_PAYROLL_FULL=1), or SLUICE_PAYROLL_PAYMENTS.
func payments(t *testing.T) int {
	if os.Getenv("SLUICE_PAYROLL_PAYMENTS") == "" && (*full || os.Getenv("SLUICE_PAYROLL_FULL") == "1") {
		return 200_000
	}
	return testutil.Scale(t, "SLUICE_PAYROLL_PAYMENTS", 5_000, 200_000, 100)
}

// proc is a child process whose output goes to the test's log and to out.
type proc struct {
	cmd  *exec.Cmd
	out  *testutil.Buffer
	done chan error
}

func start(t *testing.T, name, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(bin, args...), out: &testutil.Buffer{}, done: make(chan error, 1)}
	w := io.MultiWriter(p.out, testutil.Writer(t, name+": "))
	p.cmd.Stdout, p.cmd.Stderr = w, w
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
		p.done <- nil // for a later kill9 or wait
	})
	return p
}

// kill9 kills the process with SIGKILL and waits for it.
func (p *proc) kill9(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.done
	p.done <- nil
}

// protocol is how the worker takes its messages: "stream" (the default, a
// consumer stream) or, with SLUICE_PAYROLL_PROTOCOL=http, long polls of
// the native API.
func protocol(t *testing.T) string {
	switch p := os.Getenv("SLUICE_PAYROLL_PROTOCOL"); p {
	case "", "stream":
		return "stream"
	case "http":
		return p
	default:
		t.Fatalf("SLUICE_PAYROLL_PROTOCOL=%q: want stream or http", p)
		return ""
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// The seed's outage: a payroll run whose worker is killed (kill -9) at a
// random point between 30 % and 70 % paid and started again, and whose
// broker is killed and restarted once before that. Every employee is paid
// exactly once: the exact count, no duplicate, the right amounts; the
// restarted worker says where it resumed. The workers take their messages
// over a consumer stream (the worker package's default): the broker lists
// each worker's stream, with the credit of its 32 handlers and 16
// prefetched, and the first worker's stream again once the restarted
// broker serves.
func TestPayrollSurvivesCrashes(t *testing.T) {
	t.Parallel()
	n := payments(t)
	proto := protocol(t)
	dbURL := pgtest.Database(t)
	sluice, payroll := sluiceBin.Path(t), payrollBin.Path(t)
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	t.Logf("payments %d, seed %d, over %s", n, seed, proto)

	addr := freeAddr(t)
	brokerURL := "http://" + addr
	hc := &http.Client{Timeout: 5 * time.Second}
	startBroker := func() *proc {
		b := start(t, "broker", sluice, "serve", "--addr", addr, "--store", dbURL, "--log-level", "warn")
		testutil.Eventually(t, 60*time.Second, "the broker ready", func() bool {
			resp, err := hc.Get(brokerURL + "/readyz")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		})
		return b
	}
	broker := startBroker()

	ctx := context.Background()
	began := time.Now()
	out, err := exec.Command(payroll, "enqueue", "-broker", brokerURL, "-db", dbURL, "-n", strconv.Itoa(n)).CombinedOutput()
	if err != nil {
		t.Fatalf("payroll enqueue: %v\n%s", err, out)
	}
	enqueued := strings.TrimSpace(string(out))
	t.Log(enqueued)

	db, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close(context.Background()) })
	paid := func() int {
		var k int
		if err := db.QueryRow(ctx, `SELECT count(*) FROM payments`).Scan(&k); err != nil {
			t.Fatal(err)
		}
		return k
	}
	workArgs := []string{"work", "-broker", brokerURL, "-db", dbURL, "-n", strconv.Itoa(n),
		"-lease", "3s", "-progress", "1s", "-concurrency", "32", "-protocol", proto}
	timeout := time.Duration(n/100+60) * time.Second // 100/s at the slowest
	c, err := client.New(brokerURL, client.WithRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	// streaming waits until the broker lists the stream of the worker pid,
	// with the credit of its 32 handlers and 16 prefetched.
	streaming := func(what string, pid int) {
		t.Helper()
		if proto != "stream" {
			return
		}
		name := fmt.Sprintf("payroll worker %d", pid)
		testutil.Eventually(t, 60*time.Second, what, func() bool {
			cs, err := c.Consumers(ctx, Queue)
			for _, s := range cs {
				if err == nil && s.ClientName == name && s.Credit == 48 {
					return true
				}
			}
			return false
		})
	}
	worker := start(t, "worker", payroll, workArgs...)
	firstPID := worker.cmd.Process.Pid
	streaming("the first worker's stream", firstPID)

	// The broker dies once while the worker pays: its receives and acks fail
	// until the new one serves; acks lost then bring messages back.
	brokerAt := n * (10 + rng.IntN(10)) / 100
	testutil.Eventually(t, timeout, fmt.Sprintf("%d paid", brokerAt), func() bool { return paid() >= brokerAt })
	broker.kill9(t)
	down := time.Now()
	startBroker() // stopped by its cleanup
	downtime := time.Since(down)
	t.Logf("broker killed at %d paid and back after %v", brokerAt, downtime)
	streaming("the first worker's stream open again on the new broker", firstPID)

	// The worker dies between 30 % and 70 %.
	killAt := n * (30 + rng.IntN(41)) / 100
	testutil.Eventually(t, timeout, fmt.Sprintf("%d paid", killAt), func() bool { return paid() >= killAt })
	worker.kill9(t)
	killed := paid()
	firstOut := worker.out.String()
	t.Logf("worker killed at %d paid (aimed at %d)", killed, killAt)

	worker = start(t, "worker", payroll, workArgs...)
	streaming("the second worker's stream", worker.cmd.Process.Pid)
	select {
	case err := <-worker.done:
		worker.done <- nil
		if err != nil {
			t.Fatalf("the restarted worker failed: %v", err)
		}
	case <-time.After(timeout):
		t.Fatalf("the restarted worker did not finish within %v", timeout)
	}
	total := time.Since(began)

	m := regexp.MustCompile(`resuming at (\d+) of (\d+) paid`).FindStringSubmatch(worker.out.String())
	if m == nil {
		t.Fatalf("the restarted worker did not say where it resumed:\n%s", worker.out.String())
	}
	resumed, _ := strconv.Atoi(m[1])
	if resumed < killed || m[2] != strconv.Itoa(n) {
		t.Fatalf("resumed at %s of %s, want at least %d of %d", m[1], m[2], killed, n)
	}

	// Exactly once: n payments, n employees, every due employee paid the
	// amount due.
	var rows, employees, wrong int
	if err := db.QueryRow(ctx, `SELECT count(*), count(DISTINCT employee) FROM payments`).Scan(&rows, &employees); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(ctx, `SELECT count(*) FROM payroll_due d
		LEFT JOIN payments p USING (employee) WHERE p.employee IS NULL OR p.cents <> d.cents`).Scan(&wrong); err != nil {
		t.Fatal(err)
	}
	if rows != n || employees != n || wrong != 0 {
		var dups []string
		r, _ := db.Query(ctx, `SELECT employee::text FROM payments GROUP BY employee HAVING count(*) > 1 LIMIT 5`)
		for r.Next() {
			var e string
			_ = r.Scan(&e)
			dups = append(dups, e)
		}
		r.Close()
		t.Fatalf("%d payments to %d employees, %d due employees unpaid or paid wrong; want %d, %d, 0 (paid twice, e.g.: %v)",
			rows, employees, wrong, n, n, dups)
	}
	var byFirst, bySecond int
	if err := db.QueryRow(ctx, `SELECT count(*) FILTER (WHERE worker_pid = $1), count(*) FILTER (WHERE worker_pid = $2) FROM payments`,
		firstPID, worker.cmd.Process.Pid).Scan(&byFirst, &bySecond); err != nil {
		t.Fatal(err)
	}
	if byFirst == 0 || bySecond == 0 || byFirst+bySecond != n {
		t.Fatalf("the first worker paid %d, the second %d; want both some, %d in all", byFirst, bySecond, n)
	}
	skipped := regexp.MustCompile(`skipped (\d+) redeliveries in (\S+) \((\d+)/s\)`).FindStringSubmatch(worker.out.String())
	if skipped == nil {
		t.Fatalf("the restarted worker did not print its end:\n%s", worker.out.String())
	}
	if pid := worker1PID(firstOut); pid != firstPID {
		t.Fatalf("the first worker said it was %d, not %d", pid, firstPID)
	}
	t.Logf("figures (over %s): %s; broker killed at %d paid, down %v; worker killed at %d paid (%.1f %%), resumed at %d; "+
		"the second worker paid %d and skipped %d redeliveries; total %v (%.0f payments/s)",
		proto, enqueued, brokerAt, downtime.Round(time.Millisecond), killed, 100*float64(killed)/float64(n), resumed,
		bySecond, atoiOr0(skipped[1]), total.Round(time.Millisecond), float64(n)/total.Seconds())
}

func worker1PID(out string) int {
	m := regexp.MustCompile(`worker (\d+): starting`).FindStringSubmatch(out)
	if m == nil {
		return -1
	}
	return atoiOr0(m[1])
}

func atoiOr0(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
