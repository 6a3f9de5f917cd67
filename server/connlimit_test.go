package server_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/testutil"
	"github.com/sluicemq/sluice/metrics"
	"github.com/sluicemq/sluice/server"
)

// TestMaxConnections: with MaxConnections open, a new connection is closed
// as it is accepted (its first read ends at once, with no answer) and
// counted in /metrics; once one of them closes, a new connection is
// served again.
func TestMaxConnections(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	e := setup(t, func(c *server.Config) { c.MaxConnections, c.Metrics = 3, m })
	addr := e.srv.Addr().String()
	// get asks for /healthz on conn and answers the status line ("" when
	// the connection ends without an answer).
	get := func(conn net.Conn) string {
		_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
		if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
			return ""
		}
		line, _ := bufio.NewReader(conn).ReadString('\n')
		return strings.TrimSpace(line)
	}
	dial := func() net.Conn {
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	var held []net.Conn
	for range 3 {
		c := dial()
		if got := get(c); got != "HTTP/1.1 200 OK" {
			t.Fatalf("connection %d: %q, want 200", len(held)+1, got)
		}
		held = append(held, c) // kept alive, still counted
	}
	if got := get(dial()); got != "" {
		t.Fatalf("a fourth connection was answered %q, want it closed unanswered", got)
	}
	_ = held[0].Close()
	testutil.Eventually(t, 20*time.Second, "a connection served again after one closed", func() bool {
		c := dial()
		defer c.Close()
		return get(c) == "HTTP/1.1 200 OK"
	})
	_ = held[1].Close()
	var body []byte
	testutil.Eventually(t, 20*time.Second, "/metrics answered", func() bool {
		hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := hc.Get("http://" + addr + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, err = io.ReadAll(resp.Body)
		return err == nil && resp.StatusCode == 200
	})
	if lines := grepLines(string(body), "sluice_connections"); !strings.Contains(lines, "sluice_connections_refused_total ") ||
		strings.Contains(lines, "sluice_connections_refused_total 0") || !strings.Contains(lines, "sluice_connections_open ") {
		t.Errorf("/metrics does not count the refused connection:\n%s", lines)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
