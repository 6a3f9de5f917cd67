package native

import (
	"time"

	"github.com/sluicemq/sluice/api/native/wire"
	"github.com/sluicemq/sluice/internal/buildinfo"
)

// overview answers GET /v1/overview: the build, the uptime, the queues'
// counts in all (one read of the store, as GET /v1/stats's sampler makes)
// and the store's room. Only a caller of the broker's own account may read
// it: the store and the build are the broker's, not an account's.
func (h *Handler) overview(c *call) (any, error) {
	if _, err := queryOf(c.r); err != nil {
		return nil, err
	}
	if err := h.broker.OwnAccountOnly(c.ctx, "read the broker's overview"); err != nil {
		return nil, err
	}
	qs, err := h.broker.AllStats(c.ctx)
	if err != nil {
		return nil, err
	}
	now := h.broker.Clock().Now().UTC()
	started := buildinfo.Started().UTC()
	out := &wire.Overview{Version: buildinfo.Version(), StartedAt: started, Time: now,
		UptimeSeconds: int64(max(0, now.Sub(started)) / time.Second), Queues: len(qs)}
	for _, q := range qs {
		out.Visible += q.Stats.Visible
		out.InFlight += q.Stats.InFlight
		out.Delayed += q.Stats.Delayed
	}
	s, ok, err := h.broker.StoreSize(c.ctx)
	if err != nil {
		return nil, err
	}
	if ok {
		out.Store = &wire.StoreFigures{Kind: s.Kind, SizeBytes: s.SizeBytes, FreeBytes: s.FreeBytes, ReserveBytes: s.ReserveBytes}
	}
	if p, ok := h.broker.PoolStats(); ok {
		out.Pool = &wire.PoolFigures{Max: p.Max, Total: p.Total, Acquired: p.Acquired, Idle: p.Idle,
			Acquires: p.Acquires, EmptyAcquires: p.EmptyAcquires, AcquireWaitSeconds: p.AcquireWait.Seconds()}
	}
	return out, nil
}
