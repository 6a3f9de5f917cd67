package embedded

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sluicemq/sluice/broker/model"
)

// Damaged messages.
//
// Pebble checks every block it reads against its checksum. A receive whose
// message body sits in a damaged block gets a corruption error from the
// read (the event listener installed by Open logs the file instead of
// Pebble's default, which kills the process from inside the request and
// leaks the table's reference so that Close panics). Such a message can
// never be delivered, and left in the queue it would be leased again and
// again, failing each receive that meets it. So it is set aside: in one
// batch its metadata record is replaced by a damage record
//
//	0x03 <qid:8> 0x05 <key:8>   damage record (JSON damageRecord)
//
// which keeps the message id, the file and the old metadata; recover never
// indexes it (the metadata record is gone), `sluice store verify` lists it,
// and a purge or a deletion of the queue removes it with the rest. The
// unreadable body record stays where it is: nothing acknowledged is deleted.
// The log names the file and the message id, and the Observer counts it
// (CountDamaged, sluice_messages_damaged_total).
//
// A receive that claimed readable messages beside a damaged one answers the
// readable ones; it fails (errDamagedOnly, an internal error whose text the
// APIs do not show) only when it has nothing readable to give. Failing the
// whole receive would strand the readable ones until their lease expired.
const kindDamage byte = 0x05

// damageRecord is the stored form of a message set aside as unreadable.
type damageRecord struct {
	MessageID string    `json:"id"`
	File      string    `json:"file,omitempty"`
	Error     string    `json:"error"`
	At        time.Time `json:"at"`
	// Meta is the message's last metadata record (encodeMeta).
	Meta []byte `json:"meta,omitempty"`
}

// errDamagedOnly: every message a receive claimed was unreadable.
var errDamagedOnly = errors.New("embedded: every message claimed by this receive has an unreadable body (set aside; see the log)")

// damagedBody is a claimed message whose body could not be read.
type damagedBody struct {
	key, lease uint64
	file       string
	err        error
}

// corruptFile is the file that a corruption error names, "" if none.
func corruptFile(err error) string {
	if info := pebble.ExtractDataCorruptionInfo(err); info != nil {
		return info.Path
	}
	return ""
}

// firstLine is err's text up to its first line break (Pebble's corruption
// errors carry a detail list after it).
func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

// setAside replaces the metadata of each damaged message of queue qid (if it
// still holds the lease that the receive took) by a damage record, durably,
// and forgets it in the index. Errors are logged: the receive goes on.
func (b *Backend) setAside(qid uint64, damaged []damagedBody) {
	if len(damaged) == 0 {
		return
	}
	batch := b.db.NewBatch()
	b.mu.Lock()
	q := b.byID[qid]
	if q == nil || q.deleted {
		b.mu.Unlock()
		_ = batch.Close()
		return
	}
	now := b.clock.Now()
	n := 0
	for _, d := range damaged {
		m := q.msgs[d.key]
		if m == nil || m.lease != d.lease {
			b.log.Error("a message's stored body is unreadable (it was deleted or leased again meanwhile)",
				"queue", q.Name, "key", d.key, "file", d.file, "err", firstLine(d.err))
			continue
		}
		b.log.Error("a message's stored body is unreadable: set aside, never delivered again (sluice store verify lists it)",
			"queue", q.Name, "message_id", m.id(), "key", d.key, "file", d.file, "err", firstLine(d.err))
		rec := damageRecord{MessageID: m.id(), File: d.file, Error: firstLine(d.err), At: now.UTC(), Meta: encodeMeta(m)}
		v, _ := json.Marshal(rec)
		_ = batch.Set(msgKey(q.ID, kindDamage, m.key), v, nil)
		_ = batch.Delete(msgKey(q.ID, kindMeta, m.key), nil)
		q.invalidateAttemptLocked(m, batch)
		q.remove(m)
		n++
	}
	name := q.ref().String() // <account>/<queue> for another account's queue, as the front counts
	err := b.applyLocked(batch)
	b.mu.Unlock()
	if err := b.wait(batch, err); err != nil {
		b.log.Error("set aside damaged messages", "queue", name, "err", err)
		return
	}
	if o := b.opts.Observer; o != nil && n > 0 {
		o.Count(name, model.CountDamaged, n)
	}
}

// pebbleEvents is the event listener Open installs: a data corruption is
// logged with its file (Pebble's default would call Logger.Fatalf, killing
// the request's goroutine in the middle of a read); a background error of a
// full disk (ENOSPC) sets noSpace, which the next successful flush or
// compaction clears
// (spaceGuard refuses sends meanwhile); the rest keep Pebble's defaults.
// noSpace may be nil (the offline tools). stalled (nil with noSpace) is set
// while Pebble holds writes back (a write stall: the memtables or level 0
// are full, which on a full disk lasts until a flush succeeds).
func pebbleEvents(l pebbleLogger, noSpace, stalled *atomic.Bool) *pebble.EventListener {
	el := &pebble.EventListener{
		DataCorruption: func(info pebble.DataCorruptionInfo) {
			l.l.Error("the store met a damaged file: the affected request fails, the rest go on; run `sluice store verify` with the broker stopped",
				"component", "pebble", "file", info.Path, "details", fmt.Sprint(info.Details))
		},
	}
	if noSpace != nil {
		el.BackgroundError = func(err error) {
			if errors.Is(err, syscall.ENOSPC) && !noSpace.Swap(true) {
				l.l.Error("the store's disk is full: refusing sends until a flush succeeds", "component", "pebble", "err", err)
			}
			l.Errorf("background error: %s", err)
		}
		// A flush or a compaction that succeeds again clears it (with
		// sends refused, a flush may be long in coming: the guard asks for
		// one, spaceGuard.admit).
		cleared := func(what string) {
			if noSpace.Swap(false) {
				l.l.Info("the store "+what+" again: accepting sends", "component", "pebble")
			}
		}
		el.FlushEnd = func(info pebble.FlushInfo) {
			if info.Err == nil {
				cleared("flushed")
			}
		}
		el.CompactionEnd = func(info pebble.CompactionInfo) {
			if info.Err == nil {
				cleared("compacted")
			}
		}
		el.WriteStallBegin = func(info pebble.WriteStallBeginInfo) {
			stalled.Store(true)
			if noSpace.Load() {
				l.l.Error("the store's writes are stalled on a full disk: refusing every request until a flush succeeds", "component", "pebble", "reason", info.Reason)
			}
		}
		el.WriteStallEnd = func() {
			if stalled.Swap(false) && noSpace.Load() {
				l.l.Info("the store's writes go on again", "component", "pebble")
			}
		}
	}
	el.EnsureDefaults(l)
	return el
}
