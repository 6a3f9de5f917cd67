package e2e

// PostgreSQL high availability: a primary and a synchronous standby managed
// by Patroni (Debian's patroni, with a one-member etcd as its store), each
// its own cluster on its own port, and three brokers that reach whichever is
// writable through a multi-host connection string
// (target_session_attrs=read-write). The primary's Patroni and postmaster
// are killed with kill -9 under load; the standby takes over.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/testutil"
)

// haCluster is an etcd and two Patroni nodes, all of the test's own.
type haCluster struct {
	t     *testing.T
	dir   string // owned by postgres
	bin   string // PostgreSQL's bin directory
	cred  *syscall.Credential
	etcd  *exec.Cmd
	nodes []*haNode
}

// haNode is one Patroni and the PostgreSQL it runs.
type haNode struct {
	name     string
	dir      string
	port     int // PostgreSQL
	api      int // Patroni's REST API
	config   string
	patroni  *exec.Cmd
	finished chan struct{}
}

// startHACluster starts etcd and two Patroni nodes, and returns once one is
// the primary and the other its synchronous standby. It skips (fails under
// SLUICE_REQUIRE=patroni) without patroni, etcd, PostgreSQL's binaries or
// root.
func startHACluster(t *testing.T) *haCluster {
	t.Helper()
	for _, prog := range []string{"patroni", "etcd"} {
		if _, err := exec.LookPath(prog); err != nil {
			testutil.Missing(t, "patroni", prog+" is not installed: apt-get install patroni etcd-server python3-etcd")
		}
	}
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	if len(bins) == 0 {
		testutil.Missing(t, "patroni", "no PostgreSQL server binaries under /usr/lib/postgresql/*/bin: apt-get install postgresql")
	}
	sort.Strings(bins)
	if os.Geteuid() != 0 {
		testutil.Missing(t, "patroni", "Patroni's PostgreSQL runs as user postgres: the test needs root to start it so")
	}
	pu, err := user.Lookup("postgres")
	if err != nil {
		testutil.Missing(t, "patroni", "no user postgres: "+err.Error())
	}
	uid, _ := strconv.Atoi(pu.Uid)
	gid, _ := strconv.Atoi(pu.Gid)
	reapHAClusters()
	dir, err := os.MkdirTemp("", "sluice-ha-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "owner"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		t.Fatal(err)
	}
	c := &haCluster{t: t, dir: dir, bin: filepath.Dir(bins[len(bins)-1]),
		cred: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	t.Cleanup(c.stop)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}

	// etcd, one member: Patroni's store of the leader key.
	etcdClient, etcdPeer := freePort(t), freePort(t)
	etcdLog, err := os.Create(filepath.Join(dir, "etcd.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer etcdLog.Close()
	cu := fmt.Sprintf("http://127.0.0.1:%d", etcdClient)
	pu2 := fmt.Sprintf("http://127.0.0.1:%d", etcdPeer)
	c.etcd = exec.Command("etcd", "--name", "ha", "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", cu, "--advertise-client-urls", cu,
		"--listen-peer-urls", pu2, "--initial-advertise-peer-urls", pu2,
		"--initial-cluster", "ha="+pu2)
	c.etcd.Stdout, c.etcd.Stderr = etcdLog, etcdLog
	c.etcd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // also when go test's -timeout ends the test
	if err := c.etcd.Start(); err != nil {
		testutil.Missing(t, "patroni", "etcd did not start: "+err.Error())
	}
	testutil.Eventually(t, 30*time.Second, "etcd healthy", func() bool { return httpStatus(cu+"/health") == 200 })

	scope := fmt.Sprintf("sluice-ha-%d", os.Getpid())
	for i := 0; i < 2; i++ {
		n := &haNode{name: fmt.Sprint("node", i), port: freePort(t), api: freePort(t)}
		n.dir = filepath.Join(dir, n.name)
		if err := os.Mkdir(n.dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(n.dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		n.config = filepath.Join(n.dir, "patroni.yml")
		if err := os.WriteFile(n.config, []byte(c.patroniConfig(scope, n, etcdClient)), 0o644); err != nil {
			t.Fatal(err)
		}
		c.nodes = append(c.nodes, n)
	}
	// node0 bootstraps the cluster; node1 then clones it and becomes the
	// synchronous standby.
	c.startNode(c.nodes[0])
	testutil.Eventually(t, 90*time.Second, "node0 primary", func() bool { return c.nodes[0].is("primary") })
	c.startNode(c.nodes[1])
	testutil.Eventually(t, 90*time.Second, "node1 synchronous standby", func() bool { return c.nodes[1].is("sync") })
	return c
}

// patroniConfig is node n's patroni.yml. Synchronous mode makes Patroni
// keep the standby in synchronous_standby_names and promote only a node
// that was synchronous; ttl 10 s bounds how long a dead primary holds the
// leader key (the outage's main part). Not strict: with the standby gone,
// the primary goes on alone rather than refusing every write.
func (c *haCluster) patroniConfig(scope string, n *haNode, etcdPort int) string {
	return fmt.Sprintf(`scope: %s
name: %s
log:
  level: INFO
restapi:
  listen: 127.0.0.1:%d
  connect_address: 127.0.0.1:%d
etcd3:
  hosts: 127.0.0.1:%d
bootstrap:
  dcs:
    ttl: 10
    loop_wait: 1
    retry_timeout: 3
    maximum_lag_on_failover: 1048576
    synchronous_mode: true
    synchronous_mode_strict: false
    postgresql:
      use_pg_rewind: true
      parameters:
        synchronous_commit: "on"
        wal_log_hints: "on"
        max_connections: 200
        max_wal_senders: 5
        max_replication_slots: 5
  initdb:
  - encoding: UTF8
  - auth: trust
  pg_hba:
  - host replication postgres 127.0.0.1/32 trust
  - host all all 127.0.0.1/32 trust
postgresql:
  listen: 127.0.0.1:%d
  connect_address: 127.0.0.1:%d
  data_dir: %s
  bin_dir: %s
  pgpass: %s
  authentication:
    superuser:
      username: postgres
    replication:
      username: postgres
    rewind:
      username: postgres
  parameters:
    unix_socket_directories: %s
`, scope, n.name, n.api, n.api, etcdPort, n.port, n.port,
		filepath.Join(n.dir, "data"), c.bin, filepath.Join(n.dir, "pgpass"), n.dir)
}

// startNode starts n's Patroni as user postgres (so that kill -9 of its
// process is Patroni's death, not a wrapper's).
func (c *haCluster) startNode(n *haNode) {
	c.t.Helper()
	logf, err := os.OpenFile(filepath.Join(n.dir, "patroni.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command("patroni", n.config)
	cmd.Dir = n.dir
	cmd.Env = append(os.Environ(), "HOME="+n.dir)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		testutil.Missing(c.t, "patroni", "patroni did not start: "+err.Error())
	}
	n.patroni, n.finished = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); close(n.finished) }()
}

// is asks n's REST API whether it is the primary ("primary") or a
// synchronous standby ("sync").
func (n *haNode) is(role string) bool {
	return httpStatus(fmt.Sprintf("http://127.0.0.1:%d/%s", n.api, role)) == 200
}

// postmaster is the pid in n's postmaster.pid, or 0.
func (n *haNode) postmaster() int {
	b, err := os.ReadFile(filepath.Join(n.dir, "data", "postmaster.pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	return pid
}

// kill9 kills n's Patroni, then its postmaster, with SIGKILL (Patroni
// first: alive, it would start a killed postmaster again in place).
func (c *haCluster) kill9(n *haNode) {
	c.t.Helper()
	pm := n.postmaster()
	_ = n.patroni.Process.Signal(syscall.SIGKILL)
	<-n.finished
	if pm > 0 {
		_ = syscall.Kill(pm, syscall.SIGKILL)
	}
}

// switchover asks Patroni to hand the primary's role to standby: it
// demotes primary (stops it, which ends every session, and starts it again
// as a standby) and promotes standby.
func (c *haCluster) switchover(primary, standby *haNode) {
	body := fmt.Sprintf(`{"leader":%q,"candidate":%q}`, primary.name, standby.name)
	resp, err := http.Post(fmt.Sprintf("http://127.0.0.1:%d/switchover", standby.api), "application/json", strings.NewReader(body))
	if err != nil {
		c.t.Errorf("switchover: %v", err)
		return
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		c.t.Errorf("switchover: %d %s", resp.StatusCode, b)
	}
}

// URL is the multi-host connection string of both nodes: pgx tries them in
// turn and keeps the one that accepts writes.
func (c *haCluster) URL() string {
	var hosts []string
	for _, n := range c.nodes {
		hosts = append(hosts, fmt.Sprintf("127.0.0.1:%d", n.port))
	}
	return "postgres://postgres@" + strings.Join(hosts, ",") + "/postgres?sslmode=disable&target_session_attrs=read-write"
}

// dumpSessions logs, for each node that answers, its replication settings
// and its sessions other than idle ones (on failure).
func (c *haCluster) dumpSessions() {
	for _, n := range c.nodes {
		for _, q := range []string{
			"select pg_is_in_recovery(), current_setting('synchronous_standby_names'), current_setting('synchronous_commit')",
			"select application_name, state, sync_state, flush_lsn from pg_stat_replication",
			"select pid, application_name, state, wait_event_type, wait_event, now() - xact_start as xact_age, left(query, 120) from pg_stat_activity where state <> 'idle' and pid <> pg_backend_pid()",
		} {
			out, err := exec.Command("psql", "-h", "127.0.0.1", "-p", strconv.Itoa(n.port), "-U", "postgres", "-d", "postgres", "-X", "-c", q).CombinedOutput()
			c.t.Logf("%s: %s\n%s%v", n.name, q, out, err)
		}
	}
}

// logTail logs the last lines of every node's Patroni log (on failure).
func (c *haCluster) logTail() {
	for _, n := range c.nodes {
		b, _ := os.ReadFile(filepath.Join(n.dir, "patroni.log"))
		c.t.Logf("%s patroni.log:\n%s", n.name, lastLines(string(b), 60))
	}
}

// stop kills the Patronis, then every process that names the cluster's
// directory (killDir): the postmasters, which Patroni starts in a session
// of their own, so that they outlive it, and a pg_basebackup or pg_rewind
// under way. A postmaster.pid read before Patroni's death would miss the
// postmaster Patroni was starting (after a demotion, a rejoin), and a
// stale one (a node killed and not started again) names a process that
// may be another's now.
func (c *haCluster) stop() {
	if c.t.Failed() {
		c.logTail()
	}
	for _, n := range c.nodes {
		if n.patroni != nil {
			_ = n.patroni.Process.Signal(syscall.SIGKILL)
			<-n.finished
		}
	}
	if c.etcd != nil && c.etcd.Process != nil {
		_ = c.etcd.Process.Signal(syscall.SIGKILL)
		_ = c.etcd.Wait()
	}
	killDir(c.dir)
	// The killed postmasters' backends exit when they notice their
	// parent's death; until then they hold files open, which RemoveAll
	// tolerates on Linux.
	_ = os.RemoveAll(c.dir)
}

// killDir SIGKILLs every process whose command line names a path under
// dir, until a look finds none (a process Patroni's start helper was
// spawning shows up on a later look).
func killDir(dir string) {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		found := false
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == os.Getpid() {
				continue
			}
			b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			if err == nil && bytes.Contains(b, []byte(dir+"/")) {
				found = true
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		if !found {
			return
		}
		time.Sleep(100 * time.Millisecond) // the killed processes' exit
	}
}

// reapHAClusters kills the processes of the clusters whose test ended
// without its cleanup (go test's -timeout exits at once: etcd and Patroni
// die with it, the postmasters do not) and removes their directories: a
// directory whose owner file names a process that no longer exists.
func reapHAClusters() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "sluice-ha-*"))
	for _, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, "owner"))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 || syscall.Kill(pid, 0) != syscall.ESRCH {
			continue // its test still runs
		}
		killDir(dir)
		_ = os.RemoveAll(dir)
	}
}

// httpStatus is the status of a GET of u, or 0 without an answer.
func httpStatus(u string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestSerialPostgresFailover runs the mixed load of the fault tests through
// three brokers on a Patroni pair (primary and synchronous standby), and
// kill -9s the primary's Patroni and postmaster when the load has sent its
// share of the messages: the standby takes over, the brokers reconnect by
// themselves, requests meanwhile answer 503 within the store's answer
// deadline, and the final drain and history check find every acknowledged
// send received and no acknowledged delete come back. It logs each outage:
// from the kill to Patroni's promotion, and to every broker serving. After
// each failover the killed node's Patroni starts again and the node rejoins
// as the synchronous standby (pg_rewind when its WAL went past the new
// primary's); after the last, a switchover (Patroni's REST API) demotes the
// primary the brokers are connected to, and the same checks hold.
// SLUICE_HA_MESSAGES sets the acknowledged sends (default 3,000; 20,000
// under SLUICE_SCALE=full), SLUICE_HA_FAILOVERS the failovers (default 1;
// 3 under SLUICE_SCALE=full).
func TestSerialPostgresFailover(t *testing.T) {
	serialOnly(t)
	began := time.Now()
	c := startHACluster(t)
	messages := testutil.Scale(t, "SLUICE_HA_MESSAGES", 3000, 20000, 200)
	failovers := testutil.Scale(t, "SLUICE_HA_FAILOVERS", 1, 3, 1)
	// Not ctxT's 5 minutes: the full scale runs longer. Every wait below
	// has its own bound; go test's -timeout bounds the whole.
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	live := &liveBrokers{}
	ps := startPGBrokers(t, 3, c.URL(), live)
	var urls []string
	for _, p := range ps {
		urls = append(urls, p.URL)
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("cluster and brokers up in %v; seed %d; %d messages, %d failovers; connection string %s",
		time.Since(began).Round(100*time.Millisecond), seed, messages, failovers, c.URL())
	l := newFaultLoad(seed)
	l.createQueues(t, ctx, ps[0].URL)
	probeQ := urlPath(t, mustQueue(t, ctx, sqsClient(ps[0].URL), "ha-probe", nil))
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan struct{})
	go func() { l.run(runCtx, live.client); close(done) }()
	// finish stops the load, drains the queues and checks the history; a
	// stalled load calls it too, to tell a lost message from a slow one.
	var finished bool
	finish := func() {
		if finished {
			return
		}
		finished = true
		if t.Failed() {
			c.dumpSessions()
		}
		stop()
		<-done
		dead := l.drain(t, ctx, newJSONClient(ps[2].URL), 90*time.Second)
		t.Logf("drain took %d messages from the dead-letter queue", dead)
		l.report(t, "PostgreSQL failover")
	}

	// failovers kills, then a switchover: the killed node rejoins as the
	// synchronous standby before each but the first, and the switchover
	// demotes a primary the brokers are connected to.
	primary, standby := c.nodes[0], c.nodes[1]
	for round := 1; round <= failovers+1; round++ {
		if round > 1 {
			c.startNode(standby)
			testutil.Eventually(t, 120*time.Second, standby.name+" synchronous standby again", func() bool { return standby.is("sync") })
		}
		at := int64(messages * round / (failovers + 2))
		l.waitSends(t, ps[0].URL, at, fmt.Sprintf("before change %d", round), finish)
		if !primary.is("primary") || !standby.is("sync") {
			t.Fatalf("change %d: %s is not the primary or %s not its synchronous standby", round, primary.name, standby.name)
		}
		what, change := fmt.Sprintf("failover %d (kill -9 of %s)", round, primary.name), func() { c.kill9(primary) }
		if round > failovers {
			what, change = "switchover from "+primary.name, func() { c.switchover(primary, standby) }
		}
		c.outage(t, ctx, what, change, standby, urls, probeQ, l.sends.Load())
		if round > failovers {
			break
		}
		primary, standby = standby, primary
	}

	l.waitSends(t, ps[0].URL, int64(messages), "after the failovers", finish)
	finish()
}

// outage makes the change (a kill, a switchover) and probes every broker
// until all serve again: meanwhile each answer is 200 or 503, within the
// answer deadline (5 s) and a margin. It logs when next was promoted and
// when the brokers served.
func (c *haCluster) outage(t *testing.T, ctx context.Context, what string, change func(), next *haNode, urls []string, probeQ string, sends int64) {
	t.Helper()
	changedAt := time.Now()
	changed := make(chan struct{})
	go func() { defer close(changed); change() }() // a switchover answers once done: probe meanwhile
	defer func() { <-changed }()
	const bound = 8 * time.Second
	var promoted time.Duration
	serving := make([]time.Duration, len(urls))
	probes, unavailable, slow := 0, 0, time.Duration(0)
	for deadline := time.Now().Add(90 * time.Second); ; {
		if promoted == 0 && next.is("primary") {
			promoted = time.Since(changedAt)
		}
		codes, took := outageProbe(ctx, urls, probeQ)
		all := true
		for i, code := range codes {
			probes++
			slow = max(slow, took[i])
			switch code {
			case 200:
				if serving[i] == 0 {
					serving[i] = time.Since(changedAt)
				}
			case 503:
				unavailable++
				serving[i] = 0 // not yet for good
				all = false
			default:
				all = false
				t.Errorf("%s: broker %d answered %d (want 503 ServiceUnavailable or 200) after %v", what, i, code, took[i].Round(time.Millisecond))
			}
			if took[i] > bound {
				t.Errorf("%s: broker %d answered %d only after %v (want within %v)", what, i, code, took[i].Round(time.Millisecond), bound)
			}
		}
		if all && promoted > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the brokers do not all serve 90 s after it (promoted after %v)", what, promoted)
		}
		time.Sleep(100 * time.Millisecond) // pacing of the probes
	}
	var back time.Duration
	for _, s := range serving {
		back = max(back, s)
	}
	t.Logf("%s at %d acked sends: %s promoted %v after it; every broker serving %v after it; %d probes, %d answered 503, slowest %v",
		what, sends, next.name, promoted.Round(100*time.Millisecond), back.Round(100*time.Millisecond), probes, unavailable, slow.Round(time.Millisecond))
}

// waitSends waits until the load has n acknowledged sends; if it stalls,
// it logs the load's counts and the queues (native API, through base) and
// runs stalled (the drain and check) before failing.
func (l *faultLoad) waitSends(t *testing.T, base string, n int64, what string, stalled func()) {
	t.Helper()
	deadline := time.Now().Add(180 * time.Second)
	for l.sends.Load() < n {
		if time.Now().After(deadline) {
			t.Logf("load: %d acked sends, %d received, %d failed requests", l.sends.Load(), l.receives.Load(), l.errs.Load())
			l.dumpQueues(t, base)
			t.Fail()
			stalled()
			t.Fatalf("%d sends %s: not within 180 s", n, what)
		}
		time.Sleep(50 * time.Millisecond) // polling the load's count
	}
}
