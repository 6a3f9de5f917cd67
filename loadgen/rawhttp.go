package loadgen

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"
)

// rawTransport carries the lean SQS clients' requests to a plain http://
// endpoint over keep-alive HTTP/1.1 connections, on the caller's goroutine:
// the request is written with one write and the answer parsed by
// http.ReadResponse from the connection's buffered reader. net/http's client
// hands every request to two goroutines of its own (a connection's read and
// write loops) and keeps a pool's bookkeeping; here a producer or consumer
// takes an idle connection, uses it, and puts it back. That is the
// generator's largest cost after the system calls, and the generator shares
// the machine with the broker it measures.
//
// Only requests to the endpoint's own host come here (a queue URL naming
// another host goes through net/http); an answer that asks to close the
// connection, or any error, closes it, and the next request dials anew.
type rawTransport struct {
	host   string // host:port, dialled and sent as Host
	idle   chan *rawConn
	dialer net.Dialer
}

// rawConn is one connection with its reader and a reused request buffer.
type rawConn struct {
	c   net.Conn
	br  *bufio.Reader
	buf []byte
}

// rawTimeout bounds a request without an earlier deadline of its own, as
// the pooled net/http client's Timeout does.
const rawTimeout = 60 * time.Second

func newRawTransport(host string, conns int) *rawTransport {
	return &rawTransport{host: host, idle: make(chan *rawConn, conns),
		dialer: net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}}
}

// do sends req, whose body is body, and reads the whole answer.
func (t *rawTransport) do(ctx context.Context, req *http.Request, body []byte) (status int, b []byte, err error) {
	var rc *rawConn
	select {
	case rc = <-t.idle:
	default:
		c, err := t.dialer.DialContext(ctx, "tcp", t.host)
		if err != nil {
			return 0, nil, err
		}
		rc = &rawConn{c: c, br: bufio.NewReaderSize(c, 16<<10)}
	}
	status, b, keep, err := rc.roundTrip(ctx, req, body, t.host)
	if err != nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	if err != nil || !keep {
		_ = rc.c.Close()
		return status, b, err
	}
	select {
	case t.idle <- rc:
	default:
		_ = rc.c.Close()
	}
	return status, b, nil
}

// close closes the idle connections.
func (t *rawTransport) close() {
	for {
		select {
		case rc := <-t.idle:
			_ = rc.c.Close()
		default:
			return
		}
	}
}

// roundTrip writes the request and reads its answer; keep says whether the
// connection may carry another request.
func (rc *rawConn) roundTrip(ctx context.Context, req *http.Request, body []byte, host string) (status int, b []byte, keep bool, err error) {
	deadline := time.Now().Add(rawTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := rc.c.SetDeadline(deadline); err != nil {
		return 0, nil, false, err
	}
	// A cancelled context ends a request in flight (a long poll at the end
	// of a run) as net/http's client does. If it fired at all, the
	// connection is not reused: the deadline it sets could land on the
	// connection's next request.
	stop := context.AfterFunc(ctx, func() { _ = rc.c.SetDeadline(time.Unix(1, 0)) })
	defer func() {
		if !stop() {
			keep = false
		}
	}()

	w := append(rc.buf[:0], req.Method...)
	w = append(w, ' ')
	w = append(w, req.URL.RequestURI()...)
	w = append(w, " HTTP/1.1\r\nHost: "...)
	w = append(w, host...)
	w = append(w, "\r\n"...)
	for k, vs := range req.Header {
		for _, v := range vs {
			w = append(w, k...)
			w = append(w, ": "...)
			w = append(w, v...)
			w = append(w, "\r\n"...)
		}
	}
	w = append(w, "Content-Length: "...)
	w = strconv.AppendInt(w, int64(len(body)), 10)
	w = append(w, "\r\n\r\n"...)
	w = append(w, body...)
	rc.buf = w
	if _, err := rc.c.Write(w); err != nil {
		return 0, nil, false, err
	}
	resp, err := http.ReadResponse(rc.br, req)
	if err != nil {
		return 0, nil, false, err
	}
	b, err = io.ReadAll(resp.Body) // Content-Length or chunked, as the answer says
	_ = resp.Body.Close()
	if err != nil {
		return 0, nil, false, err
	}
	return resp.StatusCode, b, !resp.Close, nil
}
