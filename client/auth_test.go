package client_test

import (
	"context"
	"errors"
	"testing"

	"github.com/sluicemq/sluice/auth"
	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/server"
)

func TestWithToken(t *testing.T) {
	t.Parallel()
	keys, err := auth.NewKeys([]auth.Key{
		{AccessKeyID: "app", SecretAccessKey: "app-secret", Account: "123456789012", Allow: []string{"*"}},
		{AccessKeyID: "viewer", SecretAccessKey: "viewer-secret", Account: "123456789012", Allow: []string{"read-only"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	e := setup(t, func(c *server.Config) { c.Keys = keys }, client.WithToken("app", "app-secret"))
	ctx := context.Background()
	if _, err := e.c.CreateQueue(ctx, "jobs", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client().ListQueues(ctx); !errors.Is(err, client.ErrUnauthenticated) {
		t.Fatalf("no token: %v", err)
	}
	if _, err := e.client(client.WithToken("app", "wrong-secret")).ListQueues(ctx); !errors.Is(err, client.ErrUnauthenticated) {
		t.Fatalf("wrong secret: %v", err)
	}
	viewer := e.client(client.WithToken("viewer", "viewer-secret"))
	if _, err := viewer.ListQueues(ctx); err != nil {
		t.Fatalf("viewer list: %v", err)
	}
	if _, err := viewer.CreateQueue(ctx, "other", nil); !errors.Is(err, client.ErrAccessDenied) {
		t.Fatalf("viewer create: %v", err)
	}
	if w := e.waits.all(); len(w) != 0 {
		t.Fatalf("authentication errors were retried: %v", w)
	}
}
