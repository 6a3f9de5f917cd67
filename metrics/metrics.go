// Package metrics is Sluice's Prometheus metrics: a model.Observer (what
// the front and the store did), an apicommon.RequestObserver (every
// request's action, status and duration), and a collector that reads every
// queue's counts from the front at each scrape. It decides nothing about
// queue semantics; docs/metrics.md lists every series and maps it to the
// vocabulary of the producer-consumer pattern.
//
// Wiring (cmd/sluice does this):
//
//	m := metrics.New()
//	backend, _ := embedded.Open(embedded.Config{Options: storage.Options{Observer: m}, ...}) // what the store sees
//	front, _ := broker.New(backend, broker.Config{Observer: m, ...})                        // what the front sees
//	m.Attach(front)
//	cfg.Metrics = m // server: GET /metrics, and m as the request observer
package metrics

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/health"
)

// ScrapeTimeout bounds the read of the queues' counts during one scrape.
const ScrapeTimeout = 5 * time.Second

// Metrics holds the broker's metrics and serves them. Safe for concurrent
// use; the zero value is not usable: call New.
type Metrics struct {
	reg *prometheus.Registry
	// front is the broker the queue gauges are read from (Attach).
	front atomic.Pointer[broker.Broker]
	// thresholds judge the queues' health (SetThresholds).
	thresholds atomic.Pointer[health.Thresholds]

	mu sync.Mutex
	// counts are the per-queue counters of this broker since it started.
	counts map[string]*queueCounts
	// gen numbers the prunes (see prune); pruneAt is the size of counts
	// that starts the next one; pruning is true while one runs.
	gen     uint64
	pruneAt int
	pruning atomic.Bool
	// refused counts refused sends per queue and reason.
	refused map[string]map[string]*atomic.Uint64

	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	syncs    prometheus.Histogram
	commits  prometheus.Histogram
	// connsOnce: the connection series are registered (Connections).
	connsOnce atomic.Bool
}

// queueCounts are one queue's counters; missed counts the scrapes in a row
// that did not find the queue (its series go after two: see Collect).
type queueCounts struct {
	n      [model.NumCounters]atomic.Uint64
	missed int
	gen    uint64 // Metrics.gen at the last Count
}

// pruneMin is the least size of the per-queue maps that starts a prune
// without a scrape.
const pruneMin = 1024

// New returns Metrics with the Go runtime's and the process's collectors.
func New() *Metrics {
	m := &Metrics{
		reg:     prometheus.NewRegistry(),
		counts:  map[string]*queueCounts{},
		pruneAt: pruneMin,
		refused: map[string]map[string]*atomic.Uint64{},
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_requests_total",
			Help: "API requests answered, by API (sqs, native), action (SQS action or native route) and HTTP status code.",
		}, []string{"api", "action", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sluice_request_duration_seconds",
			Help:    "Time to answer an API request, by API and action (long polls included: a receive's time is mostly its wait).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 20},
		}, []string{"api", "action"}),
		syncs: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "sluice_store_sync_duration_seconds",
			Help:    "Time of one durable sync (fsync) of the embedded store's log.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1},
		}),
		commits: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "sluice_store_group_commit_size",
			Help:    "Writes made durable by one sync of the embedded store's log (group commit: the changes of many requests share one sync).",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256},
		}),
	}
	th := health.DefaultThresholds()
	m.thresholds.Store(&th)
	m.reg.MustRegister(m.requests, m.duration, m.syncs, m.commits, (*queueCollector)(m),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Connections registers the server's connection counts (the server calls
// it at Start): sluice_connections_open and
// sluice_connections_refused_total, the connections closed as they were
// accepted because MaxConnections were open. A second call (a server
// started again) is ignored.
func (m *Metrics) Connections(open, refused func() int64) {
	if !m.connsOnce.CompareAndSwap(false, true) {
		return
	}
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sluice_connections_open",
			Help: "Client connections open (the SQS, native and stream APIs share the port)."},
			func() float64 { return float64(open()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sluice_connections_refused_total",
			Help: "Connections closed as they were accepted because --max-connections were open."},
			func() float64 { return float64(refused()) }))
}

// Attach sets the broker whose queues the gauges read. Until it is called,
// a scrape has no per-queue gauges.
func (m *Metrics) Attach(b *broker.Broker) { m.front.Store(b) }

// SetThresholds sets the thresholds of sluice_queue_health (default
// health.DefaultThresholds): give the ones the dashboard's sampler uses
// (live.Config.Thresholds), so that /metrics and /v1/stats agree.
func (m *Metrics) SetThresholds(t health.Thresholds) { m.thresholds.Store(&t) }

// Registry is the registry the metrics are in (to add an application's own,
// or to gather them in a test).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics in Prometheus's text format (or OpenMetrics,
// when the scraper asks for it). A failed read of the queues leaves their
// gauges out of that scrape and answers the rest.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError, EnableOpenMetrics: true})
}

// Count implements model.Observer.
func (m *Metrics) Count(queue string, c model.Counter, n int) {
	if c >= model.NumCounters || n <= 0 {
		return
	}
	m.mu.Lock()
	q := m.counts[queue]
	grown := false
	if q == nil {
		q = &queueCounts{}
		m.counts[queue] = q
		grown = len(m.counts) >= m.pruneAt
	}
	q.missed, q.gen = 0, m.gen
	m.mu.Unlock()
	q.n[c].Add(uint64(n))
	if grown && m.pruning.CompareAndSwap(false, true) {
		go m.prune()
	}
}

// prune drops the counters of the queues that no longer exist. A scrape
// does that too (Collect), but nothing else does: without it, a broker
// nobody scrapes would keep the counters of every queue it ever served
// (an application that makes a queue per job or per reply). It runs when
// the map has doubled since the last prune (and holds pruneMin queues), in
// its own goroutine (Count must not block). A queue counted after the
// prune's read began keeps its counters.
func (m *Metrics) prune() {
	defer m.pruning.Store(false)
	b := m.front.Load()
	m.mu.Lock()
	g := m.gen
	m.gen++
	m.mu.Unlock()
	var live map[string]bool
	if b != nil {
		ctx, cancel := context.WithTimeout(context.Background(), ScrapeTimeout)
		all, err := b.AllStats(ctx)
		cancel()
		if err == nil {
			live = make(map[string]bool, len(all))
			for _, q := range all {
				live[q.Name] = true
			}
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if live != nil {
		for name, qc := range m.counts {
			if !live[name] && qc.gen <= g {
				delete(m.counts, name)
			}
		}
		for name := range m.refused {
			if _, counted := m.counts[name]; !counted && !live[name] {
				delete(m.refused, name)
			}
		}
	}
	m.pruneAt = max(pruneMin, 2*len(m.counts))
}

// Refused implements model.Observer.
func (m *Metrics) Refused(queue, reason string) {
	m.mu.Lock()
	r := m.refused[queue]
	if r == nil {
		r = map[string]*atomic.Uint64{}
		m.refused[queue] = r
	}
	n := r[reason]
	if n == nil {
		n = &atomic.Uint64{}
		r[reason] = n
	}
	m.mu.Unlock()
	n.Add(1)
}

// Synced implements model.Observer.
func (m *Metrics) Synced(d time.Duration, commits int) {
	m.syncs.Observe(d.Seconds())
	m.commits.Observe(float64(commits))
}

// Request implements apicommon.RequestObserver.
func (m *Metrics) Request(api, action string, status int, d time.Duration) {
	m.requests.WithLabelValues(api, action, strconv.Itoa(status)).Inc()
	m.duration.WithLabelValues(api, action).Observe(d.Seconds())
}

// The per-queue series.
var (
	descVisible = prometheus.NewDesc("sluice_queue_visible_messages",
		"Messages ready to be received (the seed's visible gauge).", []string{"queue"}, nil)
	descInFlight = prometheus.NewDesc("sluice_queue_inflight_messages",
		"Messages leased by a consumer, not yet deleted or back (in flight).", []string{"queue"}, nil)
	descDelayed = prometheus.NewDesc("sluice_queue_delayed_messages",
		"Messages not yet visible: delayed, backing off after a failure, or snoozed.", []string{"queue"}, nil)
	descOldest = prometheus.NewDesc("sluice_queue_oldest_message_age_seconds",
		"Age of the queue's oldest message, whatever its state (0 when empty): the seed's message age.", []string{"queue"}, nil)
	descVisibleAge = prometheus.NewDesc("sluice_queue_oldest_visible_age_seconds",
		"How long the queue's longest-visible message has waited for a consumer since it became visible (0 when none is visible; delayed, backing-off and in-flight messages do not count): what the health's age check judges.", []string{"queue"}, nil)
	descHealth = prometheus.NewDesc("sluice_queue_health",
		"The queue's health state, as GET /v1/stats and the dashboard give it: 0 ok, 1 warning, 2 critical.", []string{"queue"}, nil)
	descHealthCheck = prometheus.NewDesc("sluice_queue_health_check",
		"The state of one check of the queue's health (0 ok, 1 warning, 2 critical), by check: depth and age (a queue that is not a dead-letter queue), dead_letters (a dead-letter queue's count), dead_letter_queue (a queue whose dead-letter queue holds messages).", []string{"queue", "check"}, nil)
	descStreams = prometheus.NewDesc("sluice_queue_streams",
		"Consumer streams (the stream API's Consume) open on the queue on this broker.", []string{"queue"}, nil)
	descLag = prometheus.NewDesc("sluice_queue_consumer_lag_messages",
		"Messages ready to be received while at least one consumer stream is open on the queue on this broker, else 0: what its connected consumers have not taken yet (the seed's consumer lag).", []string{"queue"}, nil)
	descDeadLetters = prometheus.NewDesc("sluice_queue_dead_letters",
		"Messages in the queue's dead-letter queue (only for queues with a RedrivePolicy whose dead-letter queue exists).", []string{"queue"}, nil)
	descMaxDepth = prometheus.NewDesc("sluice_queue_max_depth",
		"The queue's MaxDepth (backpressure), when it has one.", []string{"queue"}, nil)
	descPaused = prometheus.NewDesc("sluice_queue_paused",
		"1 when the queue is paused (it delivers nothing), else 0.", []string{"queue"}, nil)
	descQueues = prometheus.NewDesc("sluice_queues",
		"Number of queues.", nil, nil)
	descRefused = prometheus.NewDesc("sluice_sends_refused_total",
		"Sends this broker refused by backpressure, by queue and reason (max_depth, or low_priority_max_depth when low-priority messages are shed first).", []string{"queue", "reason"}, nil)
	descPoolConns = prometheus.NewDesc("sluice_pg_pool_connections",
		"PostgreSQL pool connections by state (acquired: in use; idle).", []string{"state"}, nil)
	descPoolMax = prometheus.NewDesc("sluice_pg_pool_max_connections",
		"PostgreSQL pool size (--store's pool, beside the listener's and notifier's connections).", nil, nil)
	descPoolAcquires = prometheus.NewDesc("sluice_pg_pool_acquires_total",
		"Connections taken from the PostgreSQL pool.", nil, nil)
	descPoolEmpty = prometheus.NewDesc("sluice_pg_pool_empty_acquires_total",
		"Connections taken from the PostgreSQL pool that had to wait for one (the pool was exhausted).", nil, nil)
	descPoolWait = prometheus.NewDesc("sluice_pg_pool_acquire_wait_seconds_total",
		"Time spent waiting for PostgreSQL pool connections.", nil, nil)
	descCounters = [model.NumCounters]*prometheus.Desc{
		model.CountSent: prometheus.NewDesc("sluice_messages_sent_total",
			"Messages stored by sends through this broker.", []string{"queue"}, nil),
		model.CountReceived: prometheus.NewDesc("sluice_messages_received_total",
			"Messages delivered by receives through this broker.", []string{"queue"}, nil),
		model.CountDeleted: prometheus.NewDesc("sluice_messages_deleted_total",
			"Messages deleted (acknowledged) by their consumer through this broker.", []string{"queue"}, nil),
		model.CountNacked: prometheus.NewDesc("sluice_messages_nacked_total",
			"Leases handed back as failures (native nack, or ChangeMessageVisibility to 0) through this broker.", []string{"queue"}, nil),
		model.CountDeadLettered: prometheus.NewDesc("sluice_messages_dead_lettered_total",
			"Messages of the queue this broker moved to its dead-letter queue (the seed's DLQ total).", []string{"queue"}, nil),
		model.CountDamaged: prometheus.NewDesc("sluice_messages_damaged_total",
			"Messages set aside because their stored body could not be read (on-disk corruption; the log names the file and message id).", []string{"queue"}, nil),
		model.CountExpired: prometheus.NewDesc("sluice_messages_expired_total",
			"Messages of the queue whose time to live passed, dropped or moved to its dead-letter queue by this broker.", []string{"queue"}, nil),
		model.CountArchived: prometheus.NewDesc("sluice_messages_archived_total",
			"Messages of an ArchiveExpired queue whose retention ended, written to this broker's archive before their removal.", []string{"queue"}, nil),
		model.CountArchiveFailed: prometheus.NewDesc("sluice_messages_archive_failed_total",
			"Messages of an ArchiveExpired queue whose retention ended and that this broker removed without archiving them (the archive could not be written).", []string{"queue"}, nil),
	}
)

// queueCollector is Metrics' per-queue part, read at each scrape.
type queueCollector Metrics

// Describe implements prometheus.Collector.
func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descVisible, descInFlight, descDelayed, descOldest, descVisibleAge, descHealth, descHealthCheck, descStreams, descLag, descDeadLetters, descMaxDepth, descPaused, descQueues, descRefused,
		descPoolConns, descPoolMax, descPoolAcquires, descPoolEmpty, descPoolWait} {
		ch <- d
	}
	for _, d := range descCounters {
		ch <- d
	}
}

// Collect implements prometheus.Collector: the gauges of every queue (one
// AllStats read), then the counters. A queue that is gone (deleted, here or
// on another broker sharing the store) loses its series: its counters are
// dropped after two scrapes in a row without it, so that a counter of a
// queue created just after the read is not lost.
func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	m := (*Metrics)(c)
	b := m.front.Load()
	if b == nil {
		return
	}
	if s, ok := b.PoolStats(); ok {
		ch <- prometheus.MustNewConstMetric(descPoolConns, prometheus.GaugeValue, float64(s.Acquired), "acquired")
		ch <- prometheus.MustNewConstMetric(descPoolConns, prometheus.GaugeValue, float64(s.Idle), "idle")
		ch <- prometheus.MustNewConstMetric(descPoolMax, prometheus.GaugeValue, float64(s.Max))
		ch <- prometheus.MustNewConstMetric(descPoolAcquires, prometheus.CounterValue, float64(s.Acquires))
		ch <- prometheus.MustNewConstMetric(descPoolEmpty, prometheus.CounterValue, float64(s.EmptyAcquires))
		ch <- prometheus.MustNewConstMetric(descPoolWait, prometheus.CounterValue, s.AcquireWait.Seconds())
	}
	ctx, cancel := context.WithTimeout(context.Background(), ScrapeTimeout)
	defer cancel()
	all, err := b.AllStats(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descQueues, err)
		return
	}
	now := b.Clock().Now()
	// The streams are this broker's own, of the broker's own account's
	// queues (those AllStats lists: their refs carry no account).
	streams := b.OpenStreams()
	depth := make(map[string]int64, len(all))
	for _, q := range all {
		depth[q.Name] = q.Stats.Depth()
	}
	// The same assessment as /v1/stats (package health), on this read.
	assessed := m.thresholds.Load().Assess(all, now)
	ch <- prometheus.MustNewConstMetric(descQueues, prometheus.GaugeValue, float64(len(all)))
	for i, q := range all {
		st, a := q.Stats, assessed[i]
		ch <- prometheus.MustNewConstMetric(descVisible, prometheus.GaugeValue, float64(st.Visible), q.Name)
		ch <- prometheus.MustNewConstMetric(descInFlight, prometheus.GaugeValue, float64(st.InFlight), q.Name)
		ch <- prometheus.MustNewConstMetric(descDelayed, prometheus.GaugeValue, float64(st.Delayed), q.Name)
		ch <- prometheus.MustNewConstMetric(descOldest, prometheus.GaugeValue, a.OldestAge.Seconds(), q.Name)
		ch <- prometheus.MustNewConstMetric(descVisibleAge, prometheus.GaugeValue, a.VisibleAge.Seconds(), q.Name)
		ch <- prometheus.MustNewConstMetric(descHealth, prometheus.GaugeValue, float64(a.Health.Level()), q.Name)
		for _, c := range a.SortedChecks() {
			ch <- prometheus.MustNewConstMetric(descHealthCheck, prometheus.GaugeValue, float64(a.Checks[c].Level()), q.Name, string(c))
		}
		n := streams[model.QueueRef{Name: q.Name}]
		lag := 0.0
		if n > 0 {
			lag = float64(st.Visible)
		}
		ch <- prometheus.MustNewConstMetric(descStreams, prometheus.GaugeValue, float64(n), q.Name)
		ch <- prometheus.MustNewConstMetric(descLag, prometheus.GaugeValue, lag, q.Name)
		if a.DeadLetters != nil {
			ch <- prometheus.MustNewConstMetric(descDeadLetters, prometheus.GaugeValue, float64(*a.DeadLetters), q.Name)
		}
		if q.Config.MaxDepth > 0 {
			ch <- prometheus.MustNewConstMetric(descMaxDepth, prometheus.GaugeValue, float64(q.Config.MaxDepth), q.Name)
		}
		paused := 0.0
		if q.Config.Paused {
			paused = 1
		}
		ch <- prometheus.MustNewConstMetric(descPaused, prometheus.GaugeValue, paused, q.Name)
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	for name, qc := range m.counts {
		if _, live := depth[name]; !live {
			if qc.missed++; qc.missed >= 2 {
				delete(m.counts, name)
				continue
			}
		} else {
			qc.missed = 0
		}
		for i, d := range descCounters {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(qc.n[i].Load()), name)
		}
	}
	for name, reasons := range m.refused {
		if _, live := depth[name]; !live {
			if _, counted := m.counts[name]; !counted {
				delete(m.refused, name) // the queue's counters went: so do these
				continue
			}
		}
		for reason, n := range reasons {
			ch <- prometheus.MustNewConstMetric(descRefused, prometheus.CounterValue, float64(n.Load()), name, reason)
		}
	}
}
