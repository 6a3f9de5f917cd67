package embedded

import (
	"context"
	"testing"

	"github.com/sluicemq/sluice/broker/model"
)

// TestDeleteQueueForgetsItsMoveTasks: the move tasks of a deleted source
// queue are unreachable (ListMoveTasks needs the source); they must not stay
// in memory or in the store for ever.
func TestDeleteQueueForgetsItsMoveTasks(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	e.createQueue("dlq", nil)
	e.createQueue("src", map[string]string{
		model.AttrRedrivePolicy: `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:dlq","maxReceiveCount":"1"}`,
	})
	if _, err := e.b.StartMoveTask(ctx, model.MoveTaskRequest{Source: "dlq", Destination: "src"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the task to complete", func() bool {
		ts, err := e.b.ListMoveTasks(ctx, "dlq", 1)
		return err == nil && len(ts) == 1 && ts[0].Status == model.MoveTaskCompleted
	})
	if err := e.b.DeleteQueue(ctx, "dlq"); err != nil {
		t.Fatal(err)
	}
	count := func() int {
		e.be.mu.Lock()
		defer e.be.mu.Unlock()
		n := 0
		for _, ts := range e.be.moves.bySource {
			n += len(ts)
		}
		return n
	}
	if n := count(); n != 0 {
		t.Fatalf("%d move tasks of the deleted queue kept in memory", n)
	}
	e.restart()
	if n := count(); n != 0 {
		t.Fatalf("%d move tasks of the deleted queue kept in the store", n)
	}
}
