package embedded

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// SalvageReport is what Salvage copied and what it could not.
type SalvageReport struct {
	// Queues and Messages count what was copied.
	Queues   int `json:"queues"`
	Messages int `json:"messages"`
	// Lost lists the messages that were not copied (their ids known):
	// unreadable, or set aside earlier (SetAside; their damage records are
	// copied).
	Lost []DamagedMessage `json:"lost"`
	// Unknown lists the parts of the store that could not be read at all:
	// how many messages they held is unknown (see VerifyReport).
	Unknown []UnreadablePart `json:"unknown"`
	// Problems lists other records that could not be read (see VerifyReport).
	Problems []string `json:"problems"`
}

// Complete reports whether everything was copied: nothing lost, nothing
// unknown, no other problem.
func (r *SalvageReport) Complete() bool {
	return len(r.Lost) == 0 && len(r.Unknown) == 0 && len(r.Problems) == 0
}

// Salvage copies every readable record of the data directory from (of a
// stopped broker) into the new directory to, which must not exist or be
// empty, and reports what it could not copy. A store that Pebble cannot read
// as a whole is read table by table (openSource), in a scratch directory
// inside to that Salvage removes at the end. A broker then serves to; from is
// left as it was.
func Salvage(ctx context.Context, from, to string, fs vfs.FS, log *slog.Logger) (*SalvageReport, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if fs == nil {
		fs = vfs.Default
	}
	if names, err := fs.List(to); err == nil && len(names) > 0 {
		return nil, fmt.Errorf("embedded: salvage into %s: the directory is not empty", to)
	}
	logs, _ := scanLogs(fs, from) // damaged logs are read up to the damage (logcheck.go)
	src, err := openSource(ctx, from, fs, logs, func() (vfs.FS, string, error) {
		d := fs.PathJoin(to, ".salvage-scratch")
		return fs, d, fs.MkdirAll(d, 0o755)
	}, log)
	if err != nil {
		return nil, err
	}
	defer src.close()
	rep := &SalvageReport{Lost: []DamagedMessage{}, Unknown: src.unknown, Problems: []string{}}
	if rep.Unknown == nil {
		rep.Unknown = []UnreadablePart{}
	}
	for _, d := range logs {
		rep.Problems = append(rep.Problems, damageProblem(d))
	}
	rep.Problems = append(rep.Problems, src.problems...)
	if err := fs.MkdirAll(to, 0o755); err != nil {
		return nil, openError("create", to, err)
	}
	dst, err := pebble.Open(to, &pebble.Options{FS: fs, Logger: newPebbleLogger(log), FormatMajorVersion: pebble.FormatNewest})
	if err != nil {
		return nil, openError("create store in", to, err)
	}
	batch := dst.NewBatch()
	set := func(k, v []byte) error {
		if err := batch.Set(k, v, nil); err != nil {
			return err
		}
		if batch.Len() < 4<<20 {
			return nil
		}
		err := batch.Commit(pebble.NoSync)
		_ = batch.Close()
		batch = dst.NewBatch()
		return err
	}
	err = walk(ctx, src.db, walker{
		format: func(uint64) {},
		queue: func(q *queueRecord) {
			rep.Queues++
			if err := set(queueKey(q.ref()), q.encode()); err != nil {
				rep.Problems = append(rep.Problems, "write: "+err.Error())
			}
		},
		message: func(q *queueRecord, key uint64, meta, body []byte) error {
			rep.Messages++
			if err := set(msgKey(q.ID, kindMeta, key), meta); err != nil {
				return err
			}
			return set(msgKey(q.ID, kindBody, key), body)
		},
		other:      func(_ *queueRecord, k, v []byte) error { return set(k, v) },
		damaged:    func(d DamagedMessage) { rep.Lost = append(rep.Lost, d) },
		problem:    func(p string) { rep.Problems = append(rep.Problems, p) },
		scanBodies: len(src.unknown) > 0,
	})
	if err == nil {
		err = set(keyFormat, u64Bytes(formatCurrent))
	}
	if err == nil {
		err = batch.Commit(pebble.Sync)
	}
	_ = batch.Close()
	if err == nil {
		err = dst.Flush()
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return rep, fmt.Errorf("embedded: salvage into %s: %w", to, err)
	}
	return rep, nil
}
