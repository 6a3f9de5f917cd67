package client

import (
	"context"
	"net/http"
)

// Backup is a backup the broker wrote (POST /v1/backups).
type Backup struct {
	// Name is the backup's directory under the broker's --backup-dir.
	Name string `json:"name"`
	// Path is the backup's directory on the broker's machine.
	Path string `json:"path"`
}

// Backup asks the broker for an online, consistent copy of its embedded
// store in the new directory name under its --backup-dir. It holds every
// change acknowledged before the call. Not retried after an ambiguous
// failure: a repeat of a backup that was written answers conflict.
func (c *Client) Backup(ctx context.Context, name string) (Backup, error) {
	var out Backup
	err := c.do(ctx, request{method: http.MethodPost, path: "/backups", body: map[string]string{"name": name}}, &out)
	return out, err
}
