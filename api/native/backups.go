package native

import (
	"net/http"

	"github.com/sluicemq/sluice/broker/model"
)

// backupRequest is the body of POST /v1/backups.
type backupRequest struct {
	// Name is the backup's directory under the broker's --backup-dir.
	Name string `json:"name"`
}

// backupView is the answer of POST /v1/backups.
type backupView struct {
	Name string `json:"name"`
	// Path is the backup's directory on the broker's machine.
	Path string `json:"path"`
}

// createBackup writes an online backup of the store (broker.Broker.Backup).
func (h *Handler) createBackup(c *call) (any, error) {
	if _, err := queryOf(c.r); err != nil {
		return nil, err
	}
	var in backupRequest
	if err := h.decode(c, &in, false); err != nil {
		return nil, err
	}
	if in.Name == "" {
		return nil, errorf(model.ErrMissingParameter, "Field name is required.")
	}
	path, err := h.broker.Backup(c.ctx, in.Name)
	if err != nil {
		return nil, err
	}
	c.status = http.StatusCreated
	return backupView{Name: in.Name, Path: path}, nil
}
