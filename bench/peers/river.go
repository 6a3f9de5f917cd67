package peers

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/sluicemq/sluice/loadgen"
)

// River drives River (a PostgreSQL job queue) for the same work: a send
// inserts jobs (Insert, or InsertMany for a batch), and River's own workers
// fetch them. River pushes jobs to workers rather than being polled, so a
// consumer's Receive takes jobs that a worker has handed over, and Delete
// lets those workers return: River then marks the jobs completed (in its
// batched completer). The client's MaxWorkers is consumers x receive-max,
// so every consumer can take a full batch.
type River struct {
	// URL is the PostgreSQL URL; River's tables are migrated into it.
	URL string
	// Queue is River's queue name; its jobs are deleted at Close.
	Queue string
	// Workers is the client's MaxWorkers. Default 100.
	Workers int

	pool    *pgxpool.Pool
	client  *river.Client[pgx.Tx]
	jobs    chan riverJob
	version string
}

type riverArgs struct {
	Body string `json:"b"`
}

func (riverArgs) Kind() string { return "sluice_bench" }

// riverJob is a job a worker holds until a consumer deletes it.
type riverJob struct {
	body string
	done chan struct{}
}

type riverWorker struct {
	river.WorkerDefaults[riverArgs]
	jobs chan<- riverJob
}

func (w *riverWorker) Work(ctx context.Context, j *river.Job[riverArgs]) error {
	rj := riverJob{body: j.Args.Body, done: make(chan struct{})}
	select {
	case w.jobs <- rj:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-rj.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Describe implements loadgen.Driver.
func (d *River) Describe() string {
	return "River v0.51.2 (riverpgxv5) on " + d.version + ": Insert/InsertMany, MaxWorkers " + itoa(d.workers()) + ", default fetch settings"
}

func (d *River) workers() int {
	if d.Workers <= 0 {
		return 100
	}
	return d.Workers
}

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// Setup implements loadgen.Driver: it migrates River's schema, clears the
// queue's old jobs and starts a client with workers.
func (d *River) Setup(ctx context.Context) error {
	pc, err := pgxpool.ParseConfig(d.URL)
	if err != nil {
		return err
	}
	pc.MaxConns = 64
	if d.pool, err = pgxpool.NewWithConfig(ctx, pc); err != nil {
		return err
	}
	if err := d.pool.QueryRow(ctx, "show server_version").Scan(&d.version); err != nil {
		return err
	}
	d.version = "PostgreSQL " + d.version
	m, err := rivermigrate.New(riverpgxv5.New(d.pool), &rivermigrate.Config{Logger: quietLog})
	if err != nil {
		return err
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return err
	}
	if _, err := d.pool.Exec(ctx, "delete from river_job where queue = $1", d.Queue); err != nil {
		return err
	}
	d.jobs = make(chan riverJob)
	ws := river.NewWorkers()
	river.AddWorker(ws, &riverWorker{jobs: d.jobs})
	d.client, err = river.NewClient(riverpgxv5.New(d.pool), &river.Config{Logger: quietLog, Workers: ws,
		Queues: map[string]river.QueueConfig{d.Queue: {MaxWorkers: d.workers()}}})
	if err != nil {
		return err
	}
	return d.client.Start(ctx)
}

// Close implements loadgen.Driver: it stops the client and deletes the
// queue's jobs.
func (d *River) Close() error {
	if d.pool == nil {
		return nil
	}
	defer d.pool.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if d.client != nil {
		_ = d.client.StopAndCancel(ctx)
	}
	_, err := d.pool.Exec(ctx, "delete from river_job where queue = $1", d.Queue)
	return err
}

type riverProducer struct{ d *River }

// NewProducer implements loadgen.Driver.
func (d *River) NewProducer(ctx context.Context, id int) (loadgen.Producer, error) {
	return riverProducer{d}, nil
}

func (p riverProducer) Send(ctx context.Context, bodies [][]byte) ([]bool, error) {
	opts := &river.InsertOpts{Queue: p.d.Queue}
	if len(bodies) == 1 {
		if _, err := p.d.client.Insert(ctx, riverArgs{Body: string(bodies[0])}, opts); err != nil {
			return nil, err
		}
		return []bool{true}, nil
	}
	ps := make([]river.InsertManyParams, len(bodies))
	for i, b := range bodies {
		ps[i] = river.InsertManyParams{Args: riverArgs{Body: string(b)}, InsertOpts: opts}
	}
	if _, err := p.d.client.InsertMany(ctx, ps); err != nil {
		return nil, err
	}
	acc := make([]bool, len(bodies))
	for i := range acc {
		acc[i] = true
	}
	return acc, nil
}

func (p riverProducer) Close() error { return nil }

type riverConsumer struct{ d *River }

// NewConsumer implements loadgen.Driver.
func (d *River) NewConsumer(ctx context.Context, id int) (loadgen.Consumer, error) {
	return riverConsumer{d}, nil
}

func (c riverConsumer) Receive(ctx context.Context, max int, wait time.Duration) ([]loadgen.Received, error) {
	return gather(ctx, max, wait, c.d.jobs, func(j riverJob) loadgen.Received {
		return loadgen.Received{Body: j.body, Handle: j.done}
	})
}

// Delete lets the workers holding the jobs return, completing them.
func (c riverConsumer) Delete(ctx context.Context, msgs []loadgen.Received) error {
	for _, m := range msgs {
		close(m.Handle.(chan struct{}))
	}
	return nil
}

func (c riverConsumer) Close() error { return nil }
