package embedded

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sluicemq/sluice/broker/internal/archive"
	"github.com/sluicemq/sluice/broker/model"
)

// The archive (package archive has the files and the exactly-once rule):
// the retention sweeper writes the messages of ArchiveExpired queues whose
// retention ended to the archive, syncs it, and removes them in one synced
// batch that also sets keyArchiveCursor to the archive's new cursor. A
// crash between the archive's sync and the batch leaves the messages and
// the old cursor in the store; the next Open cuts the archive back to that
// cursor, and the sweep archives the messages again, once.
//
// While the archive cannot be written (a full disk: archive.Writer.Available
// is false for a minute after a failed write), or when the broker has no
// archive directory, the messages are removed all the same and counted
// (model.CountArchiveFailed): the archive never holds the queue or the
// store back.

// keyArchiveCursor holds the archive's cursor (archive.Cursor.String).
var keyArchiveCursor = []byte{pfxCounter, 'a', 'r', 'c', 'h'}

// archiveBatchBytes bounds the bytes of bodies and attributes one sweep
// archives, as sweepBudget bounds its messages: the lines are held in
// memory until the archive's sync, and the sweep encodes, compresses and
// syncs them holding Backend.mu, which every call waits for. 1 MiB is some
// 20 ms of gzip on a core for bodies that compress badly, plus the sync;
// 16 MiB held every call for a third of a second or more, at once again
// while a backlog expired. (PostgreSQL's step holds no such lock.)
const archiveBatchBytes = 1 << 20

// openArchive opens the archive of cfg at the cursor the store holds, and
// stores the cursor it starts at. It runs in Open before any other
// goroutine exists.
func (b *Backend) openArchive(cfg archive.Config) error {
	var cur archive.Cursor
	v, c, err := b.db.Get(keyArchiveCursor)
	switch {
	case err == nil:
		cur, err = archive.ParseCursor(string(bytes.Clone(v)))
		_ = c.Close()
		if err != nil {
			return fmt.Errorf("embedded: %w: %w", errCorrupt, err)
		}
	case !errors.Is(err, pebble.ErrNotFound):
		return err
	}
	w, start, err := archive.Open(cfg, b.clock, b.log, cur)
	if err != nil {
		return fmt.Errorf("embedded: %w", err)
	}
	if start != cur {
		if err := b.db.Set(keyArchiveCursor, []byte(start.String()), pebble.Sync); err != nil {
			w.Close()
			return err
		}
	}
	b.archive, b.archiveCur = w, start
	return nil
}

// archiveSweep is one sweep's archive work, built under b.mu by
// sweepOnce: the lines of the messages it removes and, per queue, how many
// were archived and how many were removed without.
type archiveSweep struct {
	lines  []model.ExportLine
	bytes  int
	counts map[*queue][2]int // [archived, failed]
	// on: the archive is writable in this sweep.
	on bool
}

// take notes m, which the sweep removes from q (ArchiveExpired) at now, and
// reads its body; full reports that the sweep's archive bytes are spent
// (m is not taken then).
func (b *Backend) takeArchiveLocked(s *archiveSweep, q *queue, m *msg, now int64) (full bool) {
	if s.counts == nil {
		s.counts = map[*queue][2]int{}
	}
	c := s.counts[q]
	if !s.on {
		c[1]++
		s.counts[q] = c
		return false
	}
	if len(s.lines) > 0 && s.bytes+int(m.size) > archiveBatchBytes {
		return true
	}
	msg := messageOf(m)
	v, closer, err := b.db.Get(msgKey(q.ID, kindBody, m.key))
	if err == nil {
		err = decodeBody(v, &msg)
		_ = closer.Close()
	}
	if err != nil {
		b.log.Error("archive: cannot read a message's body: removed without archive", "queue", q.ref().String(), "key", m.key, "err", err)
		c[1]++
		s.counts[q] = c
		return false
	}
	s.lines = append(s.lines, model.ArchiveLine(&msg, q.ref().String(), fromNanos(now)))
	s.bytes += int(m.size)
	c[0]++
	s.counts[q] = c
	return false
}

// writeArchiveLocked appends the sweep's lines to the archive and sets the
// new cursor in batch. On failure the lines are counted as removed without
// archive; the messages are removed all the same. fault is the test seam's
// failure between the archive's sync and the batch (archiveFault): the
// sweep then fails the store, as a crash at that moment would stop it.
func (b *Backend) writeArchiveLocked(s *archiveSweep, batch *pebble.Batch) (cur archive.Cursor, fault error) {
	if len(s.lines) == 0 {
		return archive.Cursor{}, nil
	}
	cur, err := b.archive.Append(s.lines)
	if err == nil && b.archiveFault != nil {
		if fault = b.archiveFault(); fault != nil {
			return archive.Cursor{}, fault
		}
	}
	if err != nil {
		for q, c := range s.counts {
			s.counts[q] = [2]int{0, c[0] + c[1]}
		}
		return archive.Cursor{}, nil
	}
	_ = batch.Set(keyArchiveCursor, []byte(cur.String()), nil)
	return cur, nil
}

// archiveDone reports the sweep's outcome once its batch is durable (err
// nil) or failed. A failed batch leaves the archive as it is: the write or
// sync error made the store fail-stop (no sweep runs again), and the batch
// may be in the log all the same (a sync that reported an error after the
// write), so whether its lines were committed is known only at the next
// Open, which reconciles the archive with the cursor the store then holds.
// Cutting them now lost them when the restart replayed the batch.
func (b *Backend) archiveDone(s *archiveSweep, cur archive.Cursor, err error) {
	if err != nil {
		return
	}
	if cur.File != "" {
		b.archiveCur = cur
		b.archive.Committed(cur)
	}
	if o := b.opts.Observer; o != nil {
		for q, c := range s.counts {
			if c[0] > 0 {
				o.Count(q.ref().String(), model.CountArchived, c[0])
			}
			if c[1] > 0 {
				o.Count(q.ref().String(), model.CountArchiveFailed, c[1])
			}
		}
	}
}
