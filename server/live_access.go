package server

import (
	"net/http"

	"github.com/sluicemq/sluice/api/native"
	"github.com/sluicemq/sluice/live"
)

// registerLive mounts the dashboard's live routes (Config.Live: GET
// /v1/stats, /v1/events and /v1/queues/{queue}/history) on mux. The sampler
// reads the broker's own account's queues, so only a caller of that
// account may read them (broker.OwnAccountOnly): a key of another account
// gets 403 access_denied rather than another account's queues.
func (s *Server) registerLive(mux *http.ServeMux) {
	lm := http.NewServeMux()
	s.cfg.Live.Register(lm, s.drain.Done())
	own := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.broker.OwnAccountOnly(r.Context(), "read the broker's live statistics"); err != nil {
			native.WriteError(w, err)
			return
		}
		lm.ServeHTTP(w, r)
	})
	for _, p := range []string{live.StatsPath, live.EventsPath, live.HistoryPath} {
		mux.Handle(p, own)
	}
}
