package loadgen

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"time"
)

// Summary is a run's result; its JSON form is what scripts read (the same
// for Sluice and the peers).
type Summary struct {
	System     string  `json:"system"`
	Mode       Mode    `json:"mode"`
	Producers  int     `json:"producers"`
	Consumers  int     `json:"consumers"`
	Batch      int     `json:"batch"`
	ReceiveMax int     `json:"receive_max"`
	BodySize   int     `json:"body_size"`
	Rate       float64 `json:"rate"`
	// Seconds is the measured window (drain: the time to receive and
	// delete every message).
	Seconds float64 `json:"seconds"`
	// Throughput is the run's figure in messages per second: sends
	// (produce) or deletes (drain, steady) in the window.
	Throughput float64 `json:"throughput"`
	SendRate   float64 `json:"send_rate"`
	DeleteRate float64 `json:"delete_rate"`
	// Sent counts confirmed messages; Deleted received-and-deleted ones,
	// over the whole run.
	Sent    int64 `json:"sent"`
	Deleted int64 `json:"deleted"`
	// Missing are confirmed messages never received (produce: not
	// counted); Duplicates are receives of a message already received;
	// Foreign are received bodies this run did not write.
	Missing    int64 `json:"missing"`
	Duplicates int64 `json:"duplicates"`
	Foreign    int64 `json:"foreign"`
	// TailTimedOut is set when steady's final drain ended at TailTimeout
	// with messages still unreceived, or when drain saw no delete for
	// TailTimeout before every message came back: Missing then counts
	// messages that may still arrive later.
	TailTimedOut bool   `json:"tail_timed_out,omitempty"`
	SendErrors   int64  `json:"send_errors"`
	RecvErrors   int64  `json:"receive_errors"`
	DelErrors    int64  `json:"delete_errors"`
	FirstError   string `json:"first_error,omitempty"`
	// SendLatency is per send request, from its scheduled time under a
	// fixed rate; EndToEnd from the send time in the body to its receive.
	SendLatency Latency `json:"send_latency"`
	EndToEnd    Latency `json:"end_to_end"`
	// BrokerCPUPerMsg is the broker processes' CPU time per measured
	// message in microseconds (0: not measured); BrokerPeakRSS their peak
	// resident memory in bytes; GeneratorCPUPerMsg this process's.
	BrokerCPUPerMsg    float64 `json:"broker_cpu_us_per_msg"`
	BrokerPeakRSS      int64   `json:"broker_peak_rss_bytes"`
	BrokerError        string  `json:"broker_error,omitempty"`
	GeneratorCPUPerMsg float64 `json:"generator_cpu_us_per_msg"`
}

func round(v float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(v*p) / p
}

func (r *run) summary(m *meter, elapsed time.Duration) *Summary {
	c := r.cfg
	s := &Summary{System: r.d.Describe(), Mode: c.Mode, Producers: c.Producers, Consumers: c.Consumers, Batch: c.Batch,
		ReceiveMax: c.ReceiveMax, BodySize: c.BodySize, Rate: c.Rate, Seconds: round(elapsed.Seconds(), 3),
		Sent: r.confirmed.Load(), Deleted: r.deleted.Load(), SendErrors: r.sendErrs.Load(),
		RecvErrors: r.recvErrs.Load(), DelErrors: r.delErrs.Load()}
	if c.Mode == ModeProduce {
		s.Consumers = 0
	}
	if v, ok := r.firstErr.Load().(string); ok {
		s.FirstError = v
	}
	secs := elapsed.Seconds()
	var measured int64
	switch c.Mode {
	case ModeProduce:
		measured = r.winSent.Load()
		s.SendRate = float64(measured) / secs
		s.Throughput = s.SendRate
	case ModeSteady:
		measured = r.winDeleted.Load()
		s.SendRate = float64(r.winSent.Load()) / secs
		s.DeleteRate = float64(measured) / secs
		s.Throughput = s.DeleteRate
	case ModeDrain:
		measured = r.deleted.Load()
		s.DeleteRate = float64(measured) / secs
		s.Throughput = s.DeleteRate
	}
	s.Throughput, s.SendRate, s.DeleteRate = round(s.Throughput, 1), round(s.SendRate, 1), round(s.DeleteRate, 1)
	s.TailTimedOut = r.tailTimedOut
	r.tr.mu.Lock()
	s.Duplicates, s.Foreign = r.tr.dups, r.tr.foreign
	r.tr.mu.Unlock()
	if c.Mode != ModeProduce && s.Foreign == 0 {
		s.Missing = r.tr.missing()
	}
	r.histMu.Lock()
	s.SendLatency, s.EndToEnd = r.sendHist.Latency(), r.e2eHist.Latency()
	r.histMu.Unlock()
	if measured > 0 {
		per := func(d time.Duration) float64 { return round(float64(d.Microseconds())/float64(measured), 2) }
		s.GeneratorCPUPerMsg = per(m.selfEnd - m.selfStart)
		if len(c.PIDs) > 0 && m.brokerErr == nil {
			s.BrokerCPUPerMsg = per(m.brokerEnd - m.brokerStart)
		}
	}
	if len(c.PIDs) > 0 {
		if m.brokerErr != nil {
			s.BrokerError = m.brokerErr.Error()
		} else if rss, err := peakRSS(c.PIDs); err == nil {
			s.BrokerPeakRSS = rss
		} else {
			s.BrokerError = err.Error()
		}
	}
	return s
}

// WriteJSON writes s as one indented JSON object.
func (s *Summary) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(s)
}

// WriteText writes s for a person.
func (s *Summary) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "system:      %s\n", s.System)
	rate := "as fast as confirmed"
	if s.Rate > 0 {
		rate = fmt.Sprintf("%.0f msgs/s offered", s.Rate)
	}
	fmt.Fprintf(&b, "load:        %s, %d producers x %d consumers, batch %d, receive up to %d, %d-byte bodies, %s\n",
		s.Mode, s.Producers, s.Consumers, s.Batch, s.ReceiveMax, s.BodySize, rate)
	fmt.Fprintf(&b, "throughput:  %.0f msgs/s over %.1f s (sent %d, deleted %d)\n", s.Throughput, s.Seconds, s.Sent, s.Deleted)
	lat := func(name string, l Latency) {
		if l.Count > 0 {
			fmt.Fprintf(&b, "%-12s p50 %.3f ms  p90 %.3f ms  p99 %.3f ms  max %.3f ms  (%d samples)\n", name, l.P50, l.P90, l.P99, l.Max, l.Count)
		}
	}
	lat("send:", s.SendLatency)
	lat("end-to-end:", s.EndToEnd)
	if s.Mode != ModeProduce {
		fmt.Fprintf(&b, "delivery:    %d missing, %d duplicates, %d foreign\n", s.Missing, s.Duplicates, s.Foreign)
		if s.TailTimedOut {
			fmt.Fprintf(&b, "             (the final drain timed out: missing includes messages not yet received)\n")
		}
	}
	if s.SendErrors+s.RecvErrors+s.DelErrors > 0 {
		fmt.Fprintf(&b, "errors:      %d send, %d receive, %d delete; first: %s\n", s.SendErrors, s.RecvErrors, s.DelErrors, s.FirstError)
	}
	if s.BrokerCPUPerMsg > 0 || s.BrokerPeakRSS > 0 {
		fmt.Fprintf(&b, "broker:      %.1f µs CPU per message, peak RSS %.1f MiB\n", s.BrokerCPUPerMsg, float64(s.BrokerPeakRSS)/(1<<20))
	}
	if s.BrokerError != "" {
		fmt.Fprintf(&b, "broker:      not measured: %s\n", s.BrokerError)
	}
	fmt.Fprintf(&b, "generator:   %.1f µs CPU per message\n", s.GeneratorCPUPerMsg)
	_, err := io.WriteString(w, b.String())
	return err
}

// progress prints a line each ProgressEvery until the returned stop is
// called (idempotent).
func (r *run) progress(ctx context.Context) (stop func()) {
	if r.cfg.Progress == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(r.cfg.ProgressEvery)
		defer t.Stop()
		start := r.now()
		var lastSent, lastDel int64
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			sent, del := r.confirmed.Load(), r.deleted.Load()
			per := r.cfg.ProgressEvery.Seconds()
			errs := r.sendErrs.Load() + r.recvErrs.Load() + r.delErrs.Load()
			fmt.Fprintf(r.cfg.Progress, "%5.0fs  sent %d (%.0f/s)  deleted %d (%.0f/s)  errors %d\n",
				r.now().Sub(start).Seconds(), sent, float64(sent-lastSent)/per, del, float64(del-lastDel)/per, errs)
			lastSent, lastDel = sent, del
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done); wg.Wait() }) }
}
