package main

// sluice bench: drives an SQS endpoint or Sluice's native or stream API with the
// loadgen package and prints the summary; --null-server serves an SQS
// endpoint that stores nothing (the client's ceiling).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/sluicemq/sluice/loadgen"
)

func init() {
	register("bench", command{"measure a broker: producers and consumers, throughput and latency", benchCmd})
}

var benchSpec = cmdSpec{
	name: "bench",
	summary: "Drives an SQS endpoint (Sluice or another) or Sluice's native API with producers and consumers\n" +
		"and prints throughput, send and end-to-end latency percentiles, and lost or duplicated messages.\n" +
		"Modes: produce (send only), drain (load --messages, then receive and delete them all) and\n" +
		"steady (send, receive and delete at once). With --pid it reports the broker's CPU time per\n" +
		"message and peak memory (Linux). A progress line goes to stderr each second.",
	examples: []string{
		"sluice bench --mode steady --producers 32 --consumers 32 --duration 30s",
		"sluice bench --mode produce --batch 10 --producers 8 --pid $(pgrep -f 'sluice serve')",
		"sluice bench --rate 5000 --duration 20s --json",
		"sluice bench --mode drain --messages 50000 --consumers 8 --protocol native",
		"sluice bench --protocol stream --producers 32 --consumers 32 --credit 32 --pid $(pgrep -f 'sluice serve')",
		"sluice bench --null-server 127.0.0.1:9400   # then: sluice bench --url http://127.0.0.1:9400 --protocol sdk",
	},
}

func benchCmd(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	c := newCLI(ctx, benchSpec, env, stdout, stderr)
	cfg := loadgen.DefaultConfig()
	var mode, proto, pids, queue, nullAddr, endpoint string
	var keep, quiet bool
	var credit int
	c.fs.StringVar(&endpoint, "endpoint", "", "the endpoint's base URL (default: --url)")
	c.fs.StringVar(&mode, "mode", string(cfg.Mode), "produce, drain or steady")
	c.fs.StringVar(&proto, "protocol", loadgen.ProtocolJSON, "json (SQS AWS JSON, lean client), query (SQS query/XML, lean client), sdk (aws-sdk-go-v2), native (/v1/) or stream (the gRPC stream API on the same port)")
	c.fs.StringVar(&queue, "queue", "", "queue to use; created if missing and deleted after unless --keep (default: a new bench-<time> queue)")
	c.fs.BoolVar(&keep, "keep", false, "keep the queue after the run")
	c.fs.IntVar(&cfg.Producers, "producers", cfg.Producers, "sending goroutines, one connection each")
	c.fs.IntVar(&cfg.Consumers, "consumers", cfg.Consumers, "receiving goroutines, one connection each")
	c.fs.IntVar(&cfg.Batch, "batch", cfg.Batch, "messages per send (1..10; above 1 uses the batch call)")
	c.fs.IntVar(&cfg.ReceiveMax, "receive-max", cfg.ReceiveMax, "most messages per receive (1..10); deletes are batched per receive")
	c.fs.IntVar(&credit, "credit", loadgen.DefaultStreamCredit, "each consumer stream's credit: how many unsettled messages it may hold (--protocol stream)")
	c.fs.IntVar(&cfg.BodySize, "body-size", cfg.BodySize, "body size in bytes")
	c.fs.Float64Var(&cfg.Rate, "rate", 0, "offered rate in messages/s over all producers (0: as fast as confirmed); latency counts from each scheduled send")
	c.fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "measured time (produce, steady)")
	c.fs.DurationVar(&cfg.Warmup, "warmup", cfg.Warmup, "unmeasured time before it")
	c.fs.IntVar(&cfg.Messages, "messages", cfg.Messages, "messages drain loads and then receives")
	c.fs.StringVar(&pids, "pid", "", "the broker's process ids, comma-separated: its CPU per message and peak memory (descendants included)")
	c.fs.BoolVar(&quiet, "quiet", false, "no progress line")
	c.fs.StringVar(&nullAddr, "null-server", "", "serve a null SQS JSON endpoint at this address until interrupted, instead of a run")
	if _, code, ok := c.parse(args, 0, 0); !ok {
		return code
	}
	if nullAddr != "" {
		return c.serveNull(nullAddr, cfg.BodySize)
	}
	cfg.Mode = loadgen.Mode(mode)
	if credit < 1 || credit > 10000 {
		return c.usageErr("--credit %d: want 1..10000 (how many unsettled messages each consumer stream may hold)", credit)
	}
	var err error
	if cfg.PIDs, err = loadgen.ParsePIDs(pids); err != nil {
		return c.usageErr("%v", err)
	}
	if err := cfg.Validate(); err != nil {
		return c.usageErr("%v", err)
	}
	if endpoint == "" {
		endpoint = c.url
	}
	if queue == "" {
		queue = fmt.Sprintf("bench-%d", time.Now().UnixNano())
	}
	// The key of every client command (--access-key, SLUICE_TOKEN, the AWS
	// variables): SigV4 for the SQS protocols, a bearer token for native.
	id, secret, err := c.key.resolve(env)
	if err != nil {
		return c.usageErr("%v", err)
	}
	d, err := loadgen.NewSQS(loadgen.SQSConfig{Endpoint: endpoint, Protocol: proto, Queue: queue, Keep: keep,
		Conns: cfg.Producers + cfg.Consumers, Credit: credit, AccessKey: id, SecretKey: secret, Region: env("AWS_REGION")})
	if err != nil {
		return c.usageErr("%v", err)
	}
	if !quiet {
		cfg.Progress = c.stderr
	}
	s, err := loadgen.Run(c.ctx, d, cfg)
	if err != nil {
		return c.fail(err)
	}
	if c.json {
		c.printJSON(s)
	} else if err := s.WriteText(c.stdout); err != nil {
		return c.fail(err)
	}
	if s.Throughput == 0 {
		fmt.Fprintf(c.stderr, "sluice bench: no message got through: %s\n", s.FirstError)
		return 1
	}
	return 0
}

// serveNull serves the null SQS endpoint until the command is interrupted.
func (c *cli) serveNull(addr string, bodySize int) int {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return c.fail(err)
	}
	srv := &http.Server{Handler: &loadgen.NullServer{BodySize: bodySize}, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(c.stderr, "sluice bench: null SQS server at http://%s (stores nothing); Ctrl-C stops it\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return c.fail(err)
	case <-c.ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return c.fail(err)
	}
	return 0
}
