package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sluicemq/sluice/loadgen"
)

// target is one of the goals (issue 24's over streams, then issue 11's over
// SQS) as measured in this run.
type target struct{ what, measured, verdict string }

func verdict(ok bool) string {
	if ok {
		return "**met**"
	}
	return "**missed**"
}

const notMeasured = "not measured in this run"

// ratio compares a figure of system a to one of system b under load.
func (r *report) ratio(what, load, a, b string, fig func(*loadgen.Summary) float64, unit string, ok func(float64) bool) target {
	sa, sb := r.get(load, a), r.get(load, b)
	if sa == nil || sb == nil || fig(sb) == 0 || fig(sa) == 0 {
		return target{what, notMeasured, "–"}
	}
	x := fig(sa) / fig(sb)
	return target{what, fmt.Sprintf("%.2f× (%.1f vs %.1f %s)", x, fig(sa), fig(sb), unit), verdict(ok(x))}
}

// medianP99 is the median end-to-end p99 of the runs keys under load
// against limit (ms).
func (r *report) medianP99(what, load string, keys []string, limit float64) target {
	var p99s []float64
	for _, k := range keys {
		if s := r.get(load, k); s != nil && s.EndToEnd.Count > 0 {
			p99s = append(p99s, s.EndToEnd.P99)
		}
	}
	if len(p99s) == 0 {
		return target{what, notMeasured, "–"}
	}
	slices.Sort(p99s)
	m := p99s[len(p99s)/2]
	parts := make([]string, len(p99s))
	for i, p := range p99s {
		parts[i] = fmt.Sprintf("%.2f", p)
	}
	return target{what, fmt.Sprintf("%.2f ms (runs: %s ms)", m, strings.Join(parts, ", ")), verdict(m <= limit)}
}

func targets(r *report) []target {
	tput := func(s *loadgen.Summary) float64 { return s.Throughput }
	cpu := func(s *loadgen.Summary) float64 { return s.BrokerCPUPerMsg }
	atLeast := func(n float64) func(float64) bool { return func(x float64) bool { return x >= n } }
	atMost := func(n float64) func(float64) bool { return func(x float64) bool { return x <= n } }
	ts := []target{
		r.ratio("streams, steady 32×32: ≥ 2× RabbitMQ classic's throughput", "steady", "sluice-stream", "rabbitmq", tput, "msgs/s", atLeast(2)),
		r.ratio("streams, steady 32×32: ≥ NATS JetStream's (lazy fsync) throughput", "steady", "sluice-stream", "nats-lazy", tput, "msgs/s", atLeast(1)),
		r.ratio("streams, steady 32×32: broker CPU per message ≤ 0.3× RabbitMQ's", "steady", "sluice-stream", "rabbitmq", cpu, "µs", atMost(0.3)),
		r.medianP99("streams at 5,000 msgs/s offered: end-to-end p99 ≤ 5 ms (median of three runs)", "rate", []string{"sluice-stream", "sluice-stream-2", "sluice-stream-3"}, 5),
		r.ratio("PostgreSQL backend over streams: ≥ 1.2× River's throughput", "postgres", "sluice-pg-stream", "river", tput, "msgs/s", atLeast(1.2)),
		r.ratio("SQS JSON, steady 32×32: ≥ 2× RabbitMQ classic's throughput", "steady", "sluice", "rabbitmq", tput, "msgs/s", atLeast(2)),
		r.ratio("SQS JSON, steady 32×32: ≥ NATS JetStream's (lazy fsync) throughput", "steady", "sluice", "nats-lazy", tput, "msgs/s", atLeast(1)),
	}
	if s := r.get("rate", "sluice"); s != nil && s.EndToEnd.Count > 0 {
		ts = append(ts, target{"SQS JSON: end-to-end p99 ≤ 5 ms at 5,000 msgs/s offered",
			fmt.Sprintf("%.2f ms (%.0f msgs/s delivered)", s.EndToEnd.P99, s.Throughput), verdict(s.EndToEnd.P99 <= 5)})
	} else {
		ts = append(ts, target{"SQS JSON: end-to-end p99 ≤ 5 ms at 5,000 msgs/s offered", notMeasured, "–"})
	}
	ts = append(ts,
		r.ratio("SQS JSON: broker CPU per message ≤ 0.5× RabbitMQ's (steady 32×32)", "steady", "sluice", "rabbitmq", cpu, "µs", atMost(0.5)),
		r.ratio("SQS JSON: broker CPU per message ≤ 0.3× RabbitMQ's with batches of 10", "steady-batch", "sluice", "rabbitmq", cpu, "µs", atMost(0.3)),
		r.ratio("through the AWS SDK: ≥ 90 % of the null server's throughput", "sdk", "sluice-sdk", "null-sdk", tput, "msgs/s", atLeast(0.9)),
		r.ratio("durable sends in batches of 10: ≥ 4× RabbitMQ's batched confirms", "produce-batch", "sluice", "rabbitmq", tput, "msgs/s", atLeast(4)),
	)
	if s := r.get("single", "sluice"); s != nil && s.SendLatency.Count > 0 {
		ts = append(ts, target{"one SendMessage at concurrency 1: p50 ≤ 1 ms, p99 ≤ 3 ms",
			fmt.Sprintf("p50 %.2f ms, p99 %.2f ms", s.SendLatency.P50, s.SendLatency.P99), verdict(s.SendLatency.P50 <= 1 && s.SendLatency.P99 <= 3)})
	} else {
		ts = append(ts, target{"one SendMessage at concurrency 1: p50 ≤ 1 ms, p99 ≤ 3 ms", notMeasured, "–"})
	}
	ts = append(ts, r.ratio("PostgreSQL backend: ≥ River's throughput on the same PostgreSQL", "postgres", "sluice-pg", "river", tput, "msgs/s", atLeast(1)))
	return ts
}
