package server_test

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/internal/testbroker"
	"github.com/sluicemq/sluice/internal/testutil"
)

// TestAuditDeleteMessagesNamesIDs: the audit line of a delete by id says
// which messages were deleted, not only how many: "what" of who, what,
// when.
func TestAuditDeleteMessagesNamesIDs(t *testing.T) {
	t.Parallel()
	logs := &testutil.Buffer{}
	b := testbroker.Start(t, testbroker.Config{Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	ctx := t.Context()
	if _, err := b.Front.CreateQueue(ctx, "jobs", nil, nil); err != nil {
		t.Fatal(err)
	}
	res, err := b.Front.Send(ctx, "jobs", []model.SendEntry{{ID: "a", Body: "one"}, {ID: "b", Body: "two"}})
	if err != nil {
		t.Fatal(err)
	}
	id := res[0].MessageID
	if _, err := b.Front.DeleteMessages(ctx, "jobs", []string{id, "00000000-0000-0000-0000-000000000000"}); err != nil {
		t.Fatal(err)
	}
	var line string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, `"audit":"delete_messages"`) {
			line = l
		}
	}
	if !strings.Contains(line, id) {
		t.Errorf("audit line %q does not name the deleted message %s", line, id)
	}
	if strings.Contains(line, "00000000-0000-0000-0000-000000000000") {
		t.Errorf("audit line %q names an id that was not deleted", line)
	}
}
