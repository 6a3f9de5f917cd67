package server_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/embedded"
	"github.com/sluicemq/sluice/server"
)

// Start a broker in-process, create a queue over the query protocol, and shut
// down in order: the server first (drain), then the backend.
func Example() {
	dir, _ := os.MkdirTemp("", "sluice-example")
	defer os.RemoveAll(dir)
	backend, err := embedded.Open(embedded.Config{Dir: dir})
	if err != nil {
		fmt.Println(err)
		return
	}
	cfg := server.DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	front, err := broker.New(backend, broker.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	srv, err := server.New(cfg, front)
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := srv.Start(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	base := "http://" + srv.Addr().String()
	resp, err := http.PostForm(base+"/", url.Values{"Action": {"CreateQueue"}, "QueueName": {"emails"}})
	if err == nil {
		fmt.Println(resp.Status)
		resp.Body.Close()
	}
	client := &http.Client{}
	req, _ := http.NewRequest(http.MethodPost, base+"/", strings.NewReader(`{"QueueName":"emails"}`))
	req.Header.Set("X-Amz-Target", "AmazonSQS.GetQueueUrl")
	if resp, err := client.Do(req); err == nil {
		fmt.Println(resp.Header.Get("Content-Type"))
		resp.Body.Close()
	}
	client.CloseIdleConnections()
	http.DefaultClient.CloseIdleConnections()

	_ = srv.Stop(context.Background()) // stop accepting, drain receives, finish requests
	_ = backend.Close()                // then sync and close the store
	// Output:
	// 200 OK
	// application/x-amz-json-1.0
}
