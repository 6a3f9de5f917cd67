package client

import (
	"context"
	"net/http"

	"github.com/sluicemq/sluice/api/native/wire"
)

// Backup is a backup the broker wrote (POST /v1/backups): its Name, the
// backup's directory under the broker's --backup-dir, and its Path, that
// directory on the broker's machine. Its JSON form is the native API's
// (wire.Backup).
type Backup wire.Backup

// Backup asks the broker for an online, consistent copy of its embedded
// store in the new directory name under its --backup-dir. It holds every
// change acknowledged before the call. Not retried after an ambiguous
// failure: a repeat of a backup that was written answers conflict.
func (c *Client) Backup(ctx context.Context, name string) (Backup, error) {
	var out wire.Backup
	err := c.do(ctx, request{method: http.MethodPost, path: "/backups", body: wire.BackupRequest{Name: name}}, &out)
	return Backup(out), err
}
